#include "policies/hbp/auto_select.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>

namespace lcsim::hbp {

std::vector<Tokens> hierarchical_lengths(Tokens l_best, int sp_best, Tokens l_max, int sp_max) {
  if (sp_best < 1 || sp_max < 1) throw std::invalid_argument("hierarchical_lengths: SP degrees must be >= 1");
  const Tokens l1 = l_best / sp_best;
  const Tokens l2 = l_max / sp_max;
  std::vector<Tokens> lengths = {l1, l_best};
  if (l2 > l_best) lengths.push_back(l2);
  lengths.push_back(l_max);
  std::erase_if(lengths, [](Tokens l) { return l < 1; });
  std::sort(lengths.begin(), lengths.end());
  lengths.erase(std::unique(lengths.begin(), lengths.end()), lengths.end());
  return lengths;
}

AutoSelector::AutoSelector(const CostModel& cost, int world) : cost_(&cost), world_(world), view_(cost, world) {}

Strategy AutoSelector::evaluate(Tokens length, int sp, int gc_layers) const {
  if (length < 1) throw std::invalid_argument("AutoSelector: packing length must be >= 1");
  if (sp < 1 || world_ % sp != 0) throw std::invalid_argument("AutoSelector: sp must divide the world size");
  Strategy s;
  s.length = length;
  s.sp = sp;
  s.gc_layers = gc_layers;
  s.step_seconds = view_.step_seconds(length, sp, gc_layers);
  const double tokens_per_step = static_cast<double>(length) * (world_ / sp);
  s.seconds_per_token = s.step_seconds / tokens_per_step;
  s.peak_bytes = view_.peak_bytes(length, sp, gc_layers);
  s.fits = s.peak_bytes <= cost_->capacity_bytes();
  return s;
}

std::optional<int> AutoSelector::greedy_profile_ckpt(Tokens length, int sp) const {
  const int c_min = 0;
  const int c_max = cost_->model().layers;
  const double capacity = cost_->capacity_bytes();
  const double m1 = capacity - view_.peak_bytes(length, sp, c_min);  // remaining memory, nothing checkpointed
  const double m2 = capacity - view_.peak_bytes(length, sp, c_max);  // remaining memory, everything checkpointed
  if (m2 < 0) return std::nullopt;
  if (m1 >= 0) return c_min;
  const double m_ave = (m2 - m1) / (c_max - c_min);  // memory freed per checkpointed layer, > 0 here
  int c = std::clamp(static_cast<int>(std::ceil(c_max - m2 / m_ave)), c_min, c_max);
  while (c < c_max && !view_.fits(length, sp, c)) ++c;
  while (c > c_min && view_.fits(length, sp, c - 1)) --c;
  return c;
}

std::optional<Strategy> AutoSelector::find_best_sp_ckpt(Tokens length, std::span<const int> sp_degrees) const {
  std::optional<Strategy> best;
  for (int sp : sp_degrees) {
    const std::optional<int> ckpt = greedy_profile_ckpt(length, sp);
    if (!ckpt) continue;
    const Strategy s = evaluate(length, sp, *ckpt);
    if (!best || s.seconds_per_token < best->seconds_per_token) best = s;
  }
  return best;
}

Strategy AutoSelector::least_memory(Tokens length, std::span<const int> sp_degrees) const {
  if (sp_degrees.empty()) throw std::invalid_argument("AutoSelector: no SP degrees");
  return evaluate(length, *std::max_element(sp_degrees.begin(), sp_degrees.end()), cost_->model().layers);
}

Selection AutoSelector::select(std::span<const Tokens> candidates, std::span<const int> sp_degrees) const {
  if (candidates.empty()) throw std::invalid_argument("AutoSelector: no candidate packing lengths");
  if (!std::is_sorted(candidates.begin(), candidates.end()))
    throw std::invalid_argument("AutoSelector: candidate packing lengths must be ascending");

  // Stage 1: the best strategy of every candidate length, then the fastest one overall.
  Selection out;
  std::optional<Strategy> best;
  for (Tokens l : candidates) {
    out.stage1.push_back(find_best_sp_ckpt(l, sp_degrees));
    const auto& s = out.stage1.back();
    if (s && (!best || s->seconds_per_token < best->seconds_per_token)) best = s;
  }
  out.longest = out.stage1.back().value_or(least_memory(candidates.back(), sp_degrees));
  out.best = best.value_or(out.longest);

  // Stage 2: split off what needs no SP communication.
  const auto without_sp = [&](Tokens l) {
    if (const auto ckpt = greedy_profile_ckpt(l, 1)) return evaluate(l, 1, *ckpt);
    return find_best_sp_ckpt(l, sp_degrees).value_or(least_memory(l, sp_degrees));
  };
  std::vector<Strategy> groups;
  for (Tokens l : hierarchical_lengths(out.best.length, out.best.sp, out.longest.length, out.longest.sp)) {
    if (l == out.best.length)
      groups.push_back(out.best);
    else if (l == out.longest.length)
      groups.push_back(out.longest);
    else
      groups.push_back(without_sp(l));
  }
  out.groups = std::move(groups);
  return out;
}

}  // namespace lcsim::hbp
