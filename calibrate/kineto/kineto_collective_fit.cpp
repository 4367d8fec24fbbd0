// The collectives' latency and bandwidth from a trace's NCCL kernels, per op, link and group size, through the
// calibration's fit (fit_collective_segments). Data only: the report text is kineto_fit_report.cpp's.
#include <algorithm>
#include <set>
#include <tuple>

#include "base/errors.hpp"
#include "calibrate/kineto/kineto_field_fits.hpp"

namespace lcsim {

std::optional<CollectiveSize> collective_size(const KinetoCollective& c, std::string& why) {
  static const std::map<std::string, CollectiveOp> kOps{
      {"allreduce", CollectiveOp::AllReduce},
      {"all_reduce", CollectiveOp::AllReduce},
      {"allreduce_coalesced", CollectiveOp::AllReduce},
      {"allgather", CollectiveOp::AllGather},
      {"all_gather", CollectiveOp::AllGather},
      {"_allgather_base", CollectiveOp::AllGather},
      {"allgather_into_tensor_coalesced", CollectiveOp::AllGather},
      {"all_gather_into_tensor_coalesced", CollectiveOp::AllGather},
      {"reduce_scatter", CollectiveOp::ReduceScatter},
      {"_reduce_scatter_base", CollectiveOp::ReduceScatter},
      {"reduce_scatter_tensor_coalesced", CollectiveOp::ReduceScatter},
      {"all_to_all", CollectiveOp::AllToAll},
      {"alltoall", CollectiveOp::AllToAll},
      {"alltoall_base", CollectiveOp::AllToAll},
      {"all_to_allv", CollectiveOp::AllToAll},
      {"send", CollectiveOp::SendRecv},
      {"recv", CollectiveOp::SendRecv},
  };
  static const std::map<std::string, double> kBytes{
      {"Float", 4},         {"Double", 8},      {"Half", 2},         {"BFloat16", 2}, {"Int", 4},
      {"Long", 8},          {"Short", 2},       {"Char", 1},         {"Byte", 1},     {"Bool", 1},
      {"Float8_e4m3fn", 1}, {"Float8_e5m2", 1}, {"ComplexFloat", 8}, {"UInt32", 4},   {"UInt64", 8}};
  const auto op = kOps.find(c.name);
  if (op == kOps.end()) {
    why = "\"" + c.name + "\" (no profile entry for it)";
    return std::nullopt;
  }
  const auto bytes = kBytes.find(c.dtype);
  if (bytes == kBytes.end()) {
    why = "dtype \"" + c.dtype + "\" unknown";
    return std::nullopt;
  }
  // nccl-tests' size: all_gather the gathered output; reduce_scatter, all_reduce, all_to_all the input buffer.
  const auto& n = op->second == CollectiveOp::AllGather ? c.out_nelems : c.in_nelems;
  const auto& other = op->second == CollectiveOp::AllGather ? c.in_nelems : c.out_nelems;
  std::optional<std::uint64_t> elements = n;
  if (op->second == CollectiveOp::SendRecv && (!n || *n == 0)) elements = other;  // a recv records its output
  if (!elements || *elements == 0) {
    why = "no message size (In/Out msg nelems)";
    return std::nullopt;
  }
  return CollectiveSize{op->second, static_cast<double>(*elements) * bytes->second};
}

namespace trace_fit {
namespace {

std::optional<LinkClass> link_of(const KinetoCollective& c, const KinetoTrace& t, int gpus_per_node, std::string& why) {
  const int g = gpus_per_node;
  if (!c.ranks.empty()) {
    const int node = c.ranks.front() / g;
    const bool one = std::all_of(c.ranks.begin(), c.ranks.end(), [&](int r) { return r / g == node; });
    return one ? LinkClass::NvLink : LinkClass::InfiniBand;
  }
  if (t.world_size && *t.world_size <= g) return LinkClass::NvLink;
  why = "group ranks not recorded and the job spans more than one node";
  return std::nullopt;
}

/// The c10d metadata of an NCCL kernel: its own (recent PyTorch), else its CPU op's; null when neither has any.
const KinetoCollective* collective_of(const KinetoKernel& k, const KinetoTrace& t) {
  const KinetoCollective* c = k.collective ? &*k.collective : nullptr;
  if (!c && k.op >= 0) {
    const auto& op = t.ops[static_cast<std::size_t>(k.op)];
    if (op.collective) c = &*op.collective;
  }
  return c;
}

using GroupKey = std::tuple<CollectiveOp, LinkClass, int>;
/// Kernel seconds per (op, link, group size) and message size.
using CollectiveSamples = std::map<GroupKey, std::map<double, std::vector<double>>>;

CollectiveSamples collective_samples(const std::vector<KinetoTrace>& traces, int gpus_per_node, CollectivesFit& fit) {
  CollectiveSamples samples;
  for (const auto& t : traces) {
    for (const auto& k : t.kernels) {
      if (k.family != "collective") continue;
      if (!t.steps.empty() && k.step < 0) continue;
      ++fit.kernels;
      const KinetoCollective* c = collective_of(k, t);
      if (!c) {
        ++fit.skipped["no c10d metadata (recent PyTorch records it)"];
        continue;
      }
      std::string why;
      const auto size = collective_size(*c, why);
      if (!size) {
        ++fit.skipped[why];
        continue;
      }
      if (c->group_size < 2) {
        ++fit.skipped["group of " + std::to_string(c->group_size) + " GPU"];
        continue;
      }
      const auto link = link_of(*c, t, gpus_per_node, why);
      if (!link) {
        ++fit.skipped[why];
        continue;
      }
      const int group = size->op == CollectiveOp::SendRecv ? 2 : c->group_size;
      samples[{size->op, *link, group}][size->bytes].push_back(k.dur_us * 1e-6);
    }
  }
  return samples;
}

}  // namespace

CollectivesFit fit_collectives(const std::vector<KinetoTrace>& traces, int gpus_per_node) {
  CollectivesFit fit;
  for (const auto& [key, by_size] : collective_samples(traces, gpus_per_node, fit)) {
    CollectiveGroupFit group;
    std::tie(group.op, group.link, group.group) = key;
    for (const auto& [bytes, seconds] : by_size) {
      group.points.push_back({bytes, median(seconds)});
      group.calls += static_cast<int>(seconds.size());
    }
    // One size cannot tell latency from bandwidth: reported, not fitted.
    if (group.points.size() >= 2) {
      try {
        const auto segments = fit_collective_segments(group.points, group.op, group.group, kMeasuredHoldOutEvery);
        group.entry = segments.to_profile_entry(group.link, true);
      } catch (const InputError& e) {
        group.error = e.what();
      }
    }
    fit.groups.push_back(std::move(group));
  }
  return fit;
}

void apply_collectives(const CollectivesFit& fit, Profile& p) {
  if (fit.groups.empty()) return;
  std::set<std::pair<CollectiveOp, LinkClass>> replaced;
  for (const CollectiveGroupFit& group : fit.groups) {
    if (!group.entry) continue;
    if (!replaced.count({group.op, group.link})) {
      // As a calibration does: a measured group size stands for its neighbours better than a derived prior.
      std::erase_if(p.collectives, [&](const CollectiveFit& e) { return e.op == group.op && e.link == group.link; });
      const std::string parameter = collective_parameter(group.op, group.link);
      std::erase_if(p.provenance.fitted_on, [&](const FittedOn& f) { return f.parameter == parameter; });
      replaced.insert({group.op, group.link});
    }
    p.collectives.push_back(*group.entry);
  }
  std::stable_sort(p.collectives.begin(), p.collectives.end(), [](const CollectiveFit& a, const CollectiveFit& b) {
    return std::tie(a.link, a.op, a.group_size) < std::tie(b.link, b.op, b.group_size);
  });
}

}  // namespace trace_fit
}  // namespace lcsim
