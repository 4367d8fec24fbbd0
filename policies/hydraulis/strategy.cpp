#include "policies/hydraulis/strategy.hpp"

#include <algorithm>
#include <list>
#include <map>
#include <mutex>
#include <stdexcept>

#include <nlohmann/json.hpp>

#include "base/errors.hpp"
#include "model/profile.hpp"
#include "policies/hydraulis/hydraulis_view.hpp"

namespace lcsim::hydraulis {

std::string describe(const ParallelScheme& scheme) {
  return "<" + std::to_string(scheme.tp) + "," + std::to_string(scheme.pp) + ">";
}

namespace {

nlohmann::json finetuning_key(const Finetuning& f) {
  nlohmann::json targets = nlohmann::json::array();
  for (LoraTarget t : f.lora_targets) targets.push_back(to_string(t));
  return {to_string(f.method), f.lora_rank,      f.lora_alpha,   targets,
          f.frozen_embeddings, f.frozen_lm_head, f.frozen_layers};
}

}  // namespace

std::shared_ptr<const SchemeSpace> shared_scheme_space(const CostModel& cost, int total_gpus,
                                                       const SpaceOptions& options) {
  static std::mutex mutex;
  static std::list<std::pair<std::string, std::shared_ptr<const SchemeSpace>>> recent;  // most recent first
  constexpr std::size_t kKept = 32;
  const auto& m = cost.model();
  const auto& c = cost.cluster();
  const nlohmann::json key_json = {
      {"model", {m.name, m.hidden, m.layers, m.heads, m.kv_heads, m.head_dim, m.ffn, m.vocab, m.tied_embeddings}},
      {"cluster",
       {c.gpu.name, c.gpu.memory_bytes, c.gpu.peak_bf16_tflops, c.gpu.hbm_TBps, c.gpu.nvlink_GBps, c.nodes,
        c.gpus_per_node, c.nvlink_GBps, c.nvlink_latency_us, c.ib_GBps, c.ib_latency_us, c.tensor_peak_share,
        c.topology_kind->name(), c.topology_kind->describe()}},
      {"profile", profile_to_json(cost.profile())},
      {"zero_stage", cost.options().zero_stage},
      // What the run trains and how CP runs attention change every scheme's time and memory: a LoRA scenario and a
      // full one of the same model, planned in one process, must not share a space.
      {"cp_attention", to_string(cost.options().cp_attention)},
      {"finetuning", finetuning_key(cost.options().finetuning)},
      {"gpus", total_gpus},
      {"recompute", to_string(options.recompute)},
      {"util_threshold", options.util_threshold},
      {"serial_optimization", options.serial_optimization}};
  const std::string key = key_json.dump();
  {
    const std::lock_guard<std::mutex> lock(mutex);
    for (auto it = recent.begin(); it != recent.end(); ++it) {
      if (it->first != key) continue;
      recent.splice(recent.begin(), recent, it);
      return recent.front().second;
    }
  }
  auto space = std::make_shared<const SchemeSpace>(cost, total_gpus, options);
  const std::lock_guard<std::mutex> lock(mutex);
  recent.emplace_front(key, space);
  if (recent.size() > kKept) recent.pop_back();
  return space;
}

std::vector<int> tp_degrees(int domain_gpus, int total_gpus) {
  std::vector<int> degrees;
  for (int tp = 1; tp <= domain_gpus && tp <= total_gpus; tp *= 2)
    if (domain_gpus % tp == 0) degrees.push_back(tp);
  return degrees;
}

std::vector<int> pp_degrees(int layers, int total_gpus) {
  std::vector<int> degrees;
  for (int pp = 1; pp <= layers && pp <= total_gpus; ++pp)
    if (layers % pp == 0) degrees.push_back(pp);
  return degrees;
}

SchemeSpace::SchemeSpace(const CostModel& cost, int total_gpus, const SpaceOptions& options)
    : total_gpus_(total_gpus), domain_gpus_(cost.cluster().topology().domain_size()) {
  if (total_gpus < 1) throw PlanningError("Hydraulis: the strategy space needs at least one GPU");
  for (int tp : tp_degrees(domain_gpus_, total_gpus))
    for (int pp : pp_degrees(cost.model().layers, total_gpus))
      if (tp * pp <= total_gpus) add(cost, tp, pp, options);
  if (schemes_.empty())
    throw PlanningError("Hydraulis: no <TP, PP> scheme of " + cost.model().name + " on " + std::to_string(total_gpus) +
                        " GPUs leaves memory for activations");
}

SchemeSpace::SchemeSpace(const CostModel& cost, int total_gpus, const SpaceOptions& options,
                         const std::vector<std::pair<int, int>>& tp_pp)
    : total_gpus_(total_gpus), domain_gpus_(cost.cluster().topology().domain_size()) {
  const auto tps = tp_degrees(domain_gpus_, total_gpus);
  const auto pps = pp_degrees(cost.model().layers, total_gpus);
  for (const auto& [tp, pp] : tp_pp) {
    const ParallelScheme shown{tp, pp};
    if (std::find(tps.begin(), tps.end(), tp) == tps.end())
      throw InputError("Hydraulis scheme " + describe(shown) + ": TP must be a power of two dividing the " +
                       std::to_string(domain_gpus_) + " GPUs per node");
    if (std::find(pps.begin(), pps.end(), pp) == pps.end() || tp * pp > total_gpus)
      throw InputError("Hydraulis scheme " + describe(shown) + ": PP must divide the " +
                       std::to_string(cost.model().layers) + " layers and TP x PP fit the " +
                       std::to_string(total_gpus) + " GPUs");
    if (find(tp, pp)) continue;
    const std::size_t before = schemes_.size();
    add(cost, tp, pp, options);
    if (schemes_.size() == before)
      throw InputError("Hydraulis scheme " + describe(shown) + ": " + cost.model().name +
                       " leaves no memory for activations on it");
  }
}

SchemeSpace::SchemeSpace(std::vector<SchemeInfo> schemes, int total_gpus, int domain_gpus)
    : schemes_(std::move(schemes)), total_gpus_(total_gpus), domain_gpus_(domain_gpus) {
  if (schemes_.empty()) throw std::invalid_argument("hydraulis::SchemeSpace: no schemes");
  for (const auto& s : schemes_)
    if (s.max_len < 1 || s.util_len < 1 || s.gpus() > total_gpus || s.scheme.cp != 1)
      throw std::invalid_argument("hydraulis::SchemeSpace: bad scheme " + describe(s.scheme));
}

void SchemeSpace::add(const CostModel& cost, int tp, int pp, const SpaceOptions& options) {
  const HydraulisView view(cost, total_gpus_);
  SchemeInfo info;
  info.scheme.tp = tp;
  info.scheme.pp = pp;
  info.scheme.recompute = options.recompute;
  info.max_len = view.max_len(info.scheme);
  if (info.max_len <= 0) return;
  info.latency = view.latency(info.scheme);
  info.util_len = view.util_len(info.scheme, options.util_threshold);
  if (options.serial_optimization) {
    // As the estimate times a replica's tail: ZeRO across the GPUs holding the same model slice, over InfiniBand
    // once the cluster spans nodes. Which GPUs hold a scheme's slices depends on the mix the proposal picks, so
    // the sync is priced where the wiring helps least (one GPU per domain), not as if the scheme filled the nodes.
    const int shards = std::max(1, total_gpus_ / (tp * pp));
    const LinkClass link = total_gpus_ > domain_gpus_ ? LinkClass::InfiniBand : LinkClass::NvLink;
    // The slowest stage's (stages differ when part of the model is frozen).
    info.sync = 0;
    for (int stage = 0; stage < pp; ++stage)
      info.sync =
          std::max(info.sync, cost.gradient_sync_seconds(info.scheme, shards, link, stage, GroupPlacement::Scattered) +
                                  cost.optimizer_seconds(info.scheme, shards, stage));
  }
  schemes_.push_back(info);
}

std::optional<std::size_t> SchemeSpace::find(int tp, int pp) const {
  for (std::size_t i = 0; i < schemes_.size(); ++i)
    if (schemes_[i].scheme.tp == tp && schemes_[i].scheme.pp == pp) return i;
  return std::nullopt;
}

std::size_t SchemeSpace::longest() const {
  std::size_t best = 0;
  for (std::size_t i = 1; i < schemes_.size(); ++i) {
    const auto& s = schemes_[i];
    const auto& b = schemes_[best];
    if (s.max_len > b.max_len || (s.max_len == b.max_len && s.gpus() < b.gpus())) best = i;
  }
  return best;
}

int Strategy::gpus(const SchemeSpace& space) const {
  int total = 0;
  for (const auto& [scheme, count] : counts) total += count * space[scheme].gpus();
  return total;
}

int Strategy::pipelines() const {
  int total = 0;
  for (const auto& entry : counts) total += entry.second;
  return total;
}

Tokens Strategy::max_len(const SchemeSpace& space) const {
  Tokens longest = 0;
  for (const auto& entry : counts) longest = std::max(longest, space[entry.first].max_len);
  return longest;
}

std::string Strategy::describe(const SchemeSpace& space) const {
  auto order = counts;
  std::stable_sort(order.begin(), order.end(),
                   [&](const auto& x, const auto& y) { return space[x.first].max_len > space[y.first].max_len; });
  std::string text;
  for (const auto& [scheme, count] : order)
    text += (text.empty() ? "" : " + ") + std::to_string(count) + "x" + hydraulis::describe(space[scheme].scheme);
  return text;
}

Strategy make_strategy(std::vector<std::pair<std::size_t, int>> counts) {
  std::map<std::size_t, int> merged;
  for (const auto& [scheme, count] : counts) merged[scheme] += count;
  Strategy strategy;
  for (const auto& [scheme, count] : merged)
    if (count > 0) strategy.counts.emplace_back(scheme, count);
  return strategy;
}

std::vector<Pipeline> lay_out(const Strategy& strategy, const SchemeSpace& space) {
  if (strategy.gpus(space) > space.total_gpus())
    throw PlanningError("Hydraulis strategy " + strategy.describe(space) + " needs " +
                        std::to_string(strategy.gpus(space)) + " GPUs, the cluster has " +
                        std::to_string(space.total_gpus()));
  std::vector<Pipeline> pipelines;
  for (const auto& [scheme, count] : strategy.counts)
    for (int i = 0; i < count; ++i) pipelines.push_back(Pipeline{scheme, {}});
  // GPUs: TP descending keeps every TP group aligned (see the header).
  std::stable_sort(pipelines.begin(), pipelines.end(), [&](const Pipeline& x, const Pipeline& y) {
    return space[x.scheme].scheme.tp > space[y.scheme].scheme.tp;
  });
  int next = 0;
  for (auto& p : pipelines) {
    const int width = space[p.scheme].gpus();
    for (int g = 0; g < width; ++g) p.gpus.push_back(next + g);
    next += width;
  }
  // Dispatch order: MaxLen descending, pipelines of one scheme together.
  std::stable_sort(pipelines.begin(), pipelines.end(), [&](const Pipeline& x, const Pipeline& y) {
    const auto& a = space[x.scheme];
    const auto& b = space[y.scheme];
    if (a.max_len != b.max_len) return a.max_len > b.max_len;
    return x.scheme < y.scheme;
  });
  return pipelines;
}

std::vector<std::size_t> pipeline_schemes(const Strategy& strategy, const SchemeSpace& space) {
  // lay_out()'s final order is MaxLen descending, then scheme index: a total order on the schemes.
  auto counts = strategy.counts;
  std::sort(counts.begin(), counts.end(), [&](const auto& x, const auto& y) {
    if (space[x.first].max_len != space[y.first].max_len) return space[x.first].max_len > space[y.first].max_len;
    return x.first < y.first;
  });
  std::vector<std::size_t> schemes;
  for (const auto& [scheme, count] : counts) schemes.insert(schemes.end(), static_cast<std::size_t>(count), scheme);
  return schemes;
}

}  // namespace lcsim::hydraulis
