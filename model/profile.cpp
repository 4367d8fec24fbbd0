#include "model/profile.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>

#include "base/errors.hpp"

namespace lcsim {

double Curve::at(double xq) const {
  if (x.empty() || x.size() != y.size()) throw std::logic_error("Curve::at on an empty or malformed curve");
  if (!(xq > x.front())) return y.front();
  if (xq >= x.back()) return y.back();
  const auto upper = std::upper_bound(x.begin(), x.end(), xq);
  const auto i = static_cast<std::size_t>(upper - x.begin());  // x[i-1] <= xq < x[i]
  const double t = std::log(xq / x[i - 1]) / std::log(x[i] / x[i - 1]);
  return y[i - 1] + t * (y[i] - y[i - 1]);
}

std::string_view to_string(CollectiveOp op) {
  switch (op) {
    case CollectiveOp::AllGather:
      return "all_gather";
    case CollectiveOp::ReduceScatter:
      return "reduce_scatter";
    case CollectiveOp::AllReduce:
      return "all_reduce";
    case CollectiveOp::AllToAll:
      return "all_to_all";
    case CollectiveOp::SendRecv:
      return "send_recv";
  }
  return "unknown";
}

double bus_factor(CollectiveOp op, int group_size) {
  if (group_size < 1) throw std::invalid_argument("bus_factor: group size must be >= 1");
  const double n = group_size;
  switch (op) {
    case CollectiveOp::AllReduce:
      return 2 * (n - 1) / n;
    case CollectiveOp::AllGather:
    case CollectiveOp::ReduceScatter:
    case CollectiveOp::AllToAll:
      return (n - 1) / n;
    case CollectiveOp::SendRecv:
      return 1;
  }
  return 1;
}

CollectiveFit single_segment(CollectiveOp op, LinkClass link, int group_size, double latency_us, double bus_GBps) {
  CollectiveFit fit;
  fit.op = op;
  fit.link = link;
  fit.group_size = group_size;
  fit.segments = {{std::numeric_limits<double>::infinity(), latency_us, bus_GBps}};
  return fit;
}

CollectiveTime CollectiveFit::time(double bytes, int members) const {
  if (segments.empty()) throw std::logic_error("CollectiveFit::time without segments");
  if (bytes < 0) throw std::invalid_argument("CollectiveFit::time: negative size");
  // The last segment is open-ended whatever its max_bytes says.
  auto segment = std::find_if(segments.begin(), segments.end() - 1,
                              [bytes](const CollectiveSegment& s) { return bytes <= s.max_bytes; });
  return {segment->latency_us * 1e-6, bytes * bus_factor(op, members) / (segment->bus_GBps * 1e9)};
}

CollectiveTime Profile::collective_time(CollectiveOp op, LinkClass link, int group_size, double bytes) const {
  if (group_size <= 1) return {};  // nothing to exchange within one GPU
  const CollectiveFit* best = nullptr;
  double best_distance = std::numeric_limits<double>::infinity();
  for (const auto& fit : collectives) {
    if (fit.op != op || fit.link != link) continue;
    const double distance = std::abs(std::log2(static_cast<double>(fit.group_size) / group_size));
    // On a tie the larger group wins: its latency is the more conservative one.
    if (distance < best_distance || (distance == best_distance && fit.group_size > best->group_size)) {
      best = &fit;
      best_distance = distance;
    }
  }
  if (best == nullptr) {
    // The cluster and layout need a collective the profile lacks: name the file and key to add it to.
    throw InputError((file.empty() ? "profile for " + gpu : file + ": collectives") + ": no " +
                     std::string(to_string(op)) + " entry on " + std::string(to_string(link)) +
                     ", which this cluster and layout need");
  }
  // Bus bandwidth is group-size normalised; the size term uses the bus factor of the group actually asked for.
  return best->time(bytes, group_size);
}

std::string collective_parameter(CollectiveOp op, LinkClass link) {
  return "collectives." + std::string(to_string(link)) + "." + std::string(to_string(op));
}

std::string Profile::label() const {
  const std::string stack = provenance.stack.empty() ? "" : ", " + provenance.stack + " stack";
  if (provenance.calibrated) return "calibrated on " + provenance.device + ", " + provenance.date + stack;
  return "uncalibrated (" + provenance.source + ")" + stack;
}

Profile with_attention(Profile profile, const std::string& name, const std::string& where) {
  if (name.empty()) return profile;
  auto& implementations = profile.compute.attention_implementations;
  const auto found = implementations.find(name);
  if (found == implementations.end()) {
    std::string known;
    for (const auto& [key, unused] : implementations) known += (known.empty() ? "" : ", ") + key;
    throw InputError(where + ": the profile prices no \"" + name + "\" attention (its compute." +
                     "attention_implementations: " + (known.empty() ? std::string("none") : known) + ")");
  }
  profile.compute.attention_efficiency = found->second.efficiency;
  profile.compute.attention_backward_ratio = found->second.backward_ratio;
  return profile;
}

}  // namespace lcsim
