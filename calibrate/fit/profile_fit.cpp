#include "calibrate/fit/profile_fit.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <iomanip>
#include <limits>
#include <map>
#include <numeric>
#include <set>
#include <sstream>
#include <stdexcept>
#include <tuple>

#include "base/errors.hpp"
#include "kernels/attention_tiles.hpp"
#include "kernels/lm_head.hpp"
#include "kernels/ulysses_copies.hpp"
#include "model/cost_model.hpp"
#include "model/fitting.hpp"

namespace lcsim {
namespace {

std::string fixed(double v, int digits) {
  std::ostringstream out;
  out << std::fixed << std::setprecision(digits) << v;
  return out.str();
}

std::string percent(const std::optional<double>& mape) {
  return mape ? fixed(*mape * 100, 1) + " %" : "n/a";
}

int count_held(std::size_t n, int every_k) {
  const auto mask = held_out_mask(n, every_k);
  return static_cast<int>(std::count(mask.begin(), mask.end(), true));
}

double median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  const std::size_t n = values.size();
  return n % 2 ? values[n / 2] : (values[n / 2 - 1] + values[n / 2]) / 2;
}

/// Indices of `values` in increasing order.
std::vector<std::size_t> order_of(const std::vector<double>& values) {
  std::vector<std::size_t> order(values.size());
  std::iota(order.begin(), order.end(), std::size_t{0});
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return values[a] < values[b]; });
  return order;
}

std::vector<SequenceShare> shares_of(const std::vector<int>& seqlens) {
  std::vector<SequenceShare> work;
  for (int s : seqlens) work.push_back({s, 1});
  return work;
}

struct Fitter {
  const Measurements& m;
  const ModelConfig& model;
  const std::string& file;  ///< the measurements file: every error names it
  Profile p;
  std::vector<FitReportLine> report;
  std::vector<std::string> measured, kept;

  CostModel cost_model() const { return CostModel(model, one_gpu_cluster(p, m.device.memory_bytes), p); }
  double peak() const { return p.compute.peak_tflops * 1e12; }

  void check_efficiency(double e, const std::string& path, const std::string& what) const {
    if (!(e > 0) || !std::isfinite(e)) throw InputError(file + ": " + path + ": " + what + ": non-positive time");
    if (e > 1) {
      throw InputError(file + ": " + path + ": " + what + " ran at " + fixed(e * 100, 1) + " % of peak_tflops " +
                       fixed(p.compute.peak_tflops, 0) + ": the peak is wrong for this GPU (pass --peak-tflops)");
    }
  }

  void gemm() {
    if (m.gemm.empty()) throw InputError(file + ": gemm: no GEMM sweep (an empty array)");
    const CostModel cm = cost_model();
    // Published GEMMs of several shapes may share a token count: their efficiencies combine by the median. Two
    // sweeps of the model's own GEMMs at one token count stay an error.
    std::map<double, std::vector<double>> by_tokens;
    std::vector<double> x, e, fwd, bwd;
    for (std::size_t i = 0; i < m.gemm.size(); ++i) {
      const auto& g = m.gemm[i];
      const double tokens = static_cast<double>(g.tokens);
      const double flops = g.n > 0 ? 2 * tokens * g.n * g.k : tokens * cm.gemm_flops_per_token();
      const double eff = flops / (g.forward.kernel_seconds * peak());
      check_efficiency(eff, "gemm[" + std::to_string(i) + "]", "GEMMs at " + std::to_string(g.tokens) + " tokens");
      if (g.n > 0) {
        by_tokens[tokens].push_back(eff);
      } else {
        x.push_back(tokens);
        e.push_back(eff);
      }
      if (g.backward) {
        fwd.push_back(g.forward.kernel_seconds);
        bwd.push_back(g.backward->kernel_seconds);
      }
    }
    for (auto& [tokens, effs] : by_tokens) {
      x.push_back(tokens);
      e.push_back(median(effs));
    }
    p.compute.gemm_efficiency = efficiency_curve(x, e, kMeasuredHoldOutEvery, file + ": gemm: GEMM");
    const auto& c = p.compute.gemm_efficiency;
    report.push_back({"GEMM efficiency vs tokens", static_cast<int>(x.size()),
                      count_held(x.size(), kMeasuredHoldOutEvery), c.fit_mape,
                      fixed(c.y.front(), 3) + " at " + fixed(c.x.front(), 0) + " .. " + fixed(c.y.back(), 3) + " at " +
                          fixed(c.x.back(), 0) + " tokens"});
    if (!fwd.empty()) {
      const auto ratio = proportional_held_out(fwd, bwd, kMeasuredHoldOutEvery);
      report.push_back({"GEMM backward / forward (model: 2)", static_cast<int>(fwd.size()),
                        count_held(fwd.size(), kMeasuredHoldOutEvery), ratio.held_out_mape, fixed(ratio.slope, 3)});
    }
    measured.push_back(m.published.empty()
                           ? "GEMM efficiency curve (the layer's QKV, O, gate+up and down GEMMs, CUPTI kernel time)"
                           : "GEMM efficiency curve (" + std::to_string(m.gemm.size()) + " published GEMMs, " +
                                 std::to_string(x.size()) + " token counts)");
  }

  void attention() {
    if (m.attention.empty()) throw InputError(file + ": attention: no attention sweep (an empty array)");
    const CostModel cm = cost_model();
    std::vector<double> x, e, fwd, bwd;
    for (std::size_t i = 0; i < m.attention.size(); ++i) {
      const auto& a = m.attention[i];
      // attention_flops scales with q_hidden: a published shape rescales the model's.
      const double shape = a.q_hidden > 0 ? a.q_hidden / static_cast<double>(model.q_hidden()) : 1.0;
      const double flops = a.sequences * cm.attention_flops(a.seq_len) * shape;
      const double eff = flops / (a.forward.kernel_seconds * peak());
      check_efficiency(eff, "attention[" + std::to_string(i) + "]",
                       "attention at sequence length " + std::to_string(a.seq_len));
      x.push_back(a.seq_len);
      e.push_back(eff);
      if (a.backward) {
        fwd.push_back(a.forward.kernel_seconds);
        bwd.push_back(a.backward->kernel_seconds);
      }
    }
    p.compute.attention_efficiency = efficiency_curve(x, e, kMeasuredHoldOutEvery, file + ": attention: attention");
    const auto& c = p.compute.attention_efficiency;
    report.push_back({"attention efficiency vs length", static_cast<int>(x.size()),
                      count_held(x.size(), kMeasuredHoldOutEvery), c.fit_mape,
                      fixed(c.y.front(), 3) + " at " + fixed(c.x.front(), 0) + " .. " + fixed(c.y.back(), 3) + " at " +
                          fixed(c.x.back(), 0)});
    if (fwd.empty()) {
      kept.push_back("attention_backward_ratio (no attention backward measured)");
      report.push_back({"attention backward / forward", 0, 0, std::nullopt, "not measured: prior kept"});
    } else {
      const auto ratio = proportional_held_out(fwd, bwd, kMeasuredHoldOutEvery);
      p.compute.attention_backward_ratio = ratio.slope;
      report.push_back({"attention backward / forward", static_cast<int>(fwd.size()),
                        count_held(fwd.size(), kMeasuredHoldOutEvery), ratio.held_out_mape, fixed(ratio.slope, 3)});
    }
    measured.push_back(m.published.empty()
                           ? "attention efficiency curve and backward ratio (lcsim's varlen kernels, CUPTI kernel time)"
                           : "attention efficiency curve" + std::string(fwd.empty() ? "" : " and backward ratio") +
                                 " (" + std::to_string(m.attention.size()) + " published points)");
  }

  /// The layer fit (LayerOverheadFit) on the points not held out, with the profile's attention blocks.
  struct LayerFitResult {
    LayerOverheadFit fit;
    std::vector<double> base, gemm;
  };
  LayerFitResult fit_layer_terms(const std::vector<std::size_t>& order, const std::vector<bool>& mask) {
    const CostModel cm = cost_model();
    LayerFitResult t;
    for (const auto& l : m.layers) {
      double g = 0;
      t.base.push_back(cm.layer_work_seconds(shares_of(l.seqlens), 1, l.recompute, l.recompute == Recompute::Full,
                                             LayerGrad::Full, &g));
      t.gemm.push_back(g);
    }
    std::vector<double> fit_base, fit_gemm, fit_y;
    for (std::size_t i = 0; i < order.size(); ++i) {
      if (mask[i]) continue;
      fit_base.push_back(t.base[order[i]]);
      fit_gemm.push_back(t.gemm[order[i]]);
      fit_y.push_back(m.layers[order[i]].seconds);
    }
    t.fit = fit_layer_overhead(fit_base, fit_gemm, fit_y);
    return t;
  }

  /// lcsim's own kernels on the measured GPU: their tile, the device's SMs, the blocks their registers let an SM
  /// hold (kernels/attention_tiles.hpp). Nothing fitted; none for published figures (not lcsim's kernels) or a
  /// device whose SM count was not recorded.
  void attention_blocks() {
    p.compute.attention_blocks = {};
    if (!m.published.empty() || m.device.multiprocessors <= 0) {
      kept.push_back(
          "attention_blocks (" +
          std::string(m.published.empty() ? "the device's SM count was not recorded" : "not lcsim's kernels") +
          "): no busiest-SM bound");
      return;
    }
    p.compute.attention_blocks = {
        kernels::kAttentionTileRows, m.device.multiprocessors, kernels::attention_forward_blocks_per_sm(model.head_dim),
        kernels::attention_backward_blocks_per_sm(model.head_dim), AttentionBlocks::BackwardWalk::KvGroup};
    const AttentionBlocks& b = p.compute.attention_blocks;
    measured.push_back("attention_blocks (lcsim's kernels: tiles of " + std::to_string(b.tile_tokens) + ", " +
                       std::to_string(b.sm_count) + " SMs, " + std::to_string(b.forward_blocks_per_sm) +
                       " forward and " + std::to_string(b.backward_blocks_per_sm) +
                       " backward blocks per SM by their registers)");
  }

  void layer_overhead() {
    if (m.layers.empty()) {
      kept.push_back("layer_overhead_us and gemm_work_overhead (no layer measurements)");
      report.push_back({"layer overhead", 0, 0, std::nullopt, "not measured: prior kept"});
      return;
    }
    p.compute.layer_overhead_us = 0;
    p.compute.gemm_work_overhead = 0;
    std::vector<double> measured_s;
    for (const auto& l : m.layers) measured_s.push_back(l.seconds);
    // y = base + k gemm + c: c the fixed cost a lone short sequence pays, k the element-wise work that grows with
    // the rows (the GEMM passes' part of base). Both by relative least squares on the points not held out (ordered
    // by time).
    const auto order = order_of(measured_s);
    const auto mask = held_out_mask(order.size(), kMeasuredHoldOutEvery);
    const LayerFitResult layer = fit_layer_terms(order, mask);
    const LayerOverheadFit& fit = layer.fit;
    std::vector<double> predicted, actual;
    for (std::size_t i = 0; i < order.size(); ++i) {
      if (!mask[i]) continue;
      predicted.push_back(layer.base[order[i]] + fit.gemm_share * layer.gemm[order[i]] + fit.fixed_seconds);
      actual.push_back(measured_s[order[i]]);
    }
    p.compute.layer_overhead_us = fit.fixed_seconds * 1e6;
    p.compute.gemm_work_overhead = fit.gemm_share;
    p.compute.layer_overhead_fit_mape =
        actual.empty() ? std::nullopt : std::optional<double>(mean_absolute_percentage_error(predicted, actual));
    std::string result = fixed(fit.fixed_seconds * 1e6, 1) + " us + " + fixed(fit.gemm_share, 3) + " x GEMM";
    for (const auto& clamp : fit.clamped) {
      result += "; " + clamp + " fitted negative, stored as 0";
      kept.push_back(clamp + " fitted negative, stored as 0");
    }
    report.push_back({"layer time = work + k GEMM + fixed", static_cast<int>(order.size()),
                      count_held(order.size(), kMeasuredHoldOutEvery), p.compute.layer_overhead_fit_mape, result});
    measured.push_back("layer_overhead_us and gemm_work_overhead (layer proxy forward+backward, CUDA events, " +
                       std::to_string(m.layers.size()) + " timings: micro-batches x recomputation modes)");
  }

  void memory() {
    if (m.memory.empty()) {
      kept.push_back("activation bytes (no memory probes)");
      report.push_back({"activation bytes", 0, 0, std::nullopt, "not measured: prior kept"});
      return;
    }
    std::map<Recompute, std::vector<ActivationSample>> by_mode;
    for (std::size_t i = 0; i < m.memory.size(); ++i) {
      const auto& probe = m.memory[i];
      std::vector<double> depth(probe.layers.begin(), probe.layers.end());
      if (std::set<double>(depth.begin(), depth.end()).size() < 2) {
        throw InputError(file + ": memory[" + std::to_string(i) + "].layers: memory probe of " + probe.model +
                         " needs two or more stack depths");
      }
      // Slope of the high-water mark over stacked layers: what one more layer keeps.
      const LinearFit fit = fit_linear(depth, probe.peak_bytes);
      by_mode[probe.recompute].push_back({static_cast<double>(probe.hidden), static_cast<double>(probe.kv_hidden),
                                          static_cast<double>(probe.ffn), fit.slope / probe.tokens});
    }
    std::optional<double> worst;
    for (auto mode : {Recompute::None, Recompute::Selective, Recompute::Full}) {
      auto it = by_mode.find(mode);
      const std::string name = "activation bytes, recompute " + std::string(to_string(mode));
      if (it == by_mode.end()) {
        kept.push_back(name + " (not probed)");
        report.push_back({name, 0, 0, std::nullopt, "not measured: prior kept"});
        continue;
      }
      ActivationFit fit;
      try {
        fit = fit_activation_coefficients(it->second, kMeasuredHoldOutEvery);
      } catch (const InputError& e) {
        throw InputError(file + ": memory: " + e.what());
      }
      auto& target = mode == Recompute::None        ? p.memory.activations_none
                     : mode == Recompute::Selective ? p.memory.activations_selective
                                                    : p.memory.activations_full;
      target = fit.coefficients;
      if (fit.held_out_mape) worst = std::max(worst.value_or(0.0), *fit.held_out_mape);
      report.push_back({name, fit.points, fit.held_out, fit.held_out_mape,
                        fixed(fit.coefficients.per_hidden, 2) + " h + " + fixed(fit.coefficients.per_kv_hidden, 2) +
                            " kv + " + fixed(fit.coefficients.per_ffn, 2) + " f"});
    }
    p.memory.fit_mape = worst;
    // The proxy's LM head keeps one bf16 logits buffer (kernels/lm_head.hpp): a property of the kernels, as the
    // attention blocks are, not a fit. The prior's figure describes an unfused fp32 loss.
    if (m.published.empty()) {
      p.memory.logits_bytes_per_token_per_vocab = kernels::kLmHeadLogitsBytesPerVocab;
      measured.push_back(
          "logits bytes per token per vocabulary entry (lcsim's LM head: one bf16 buffer, its "
          "gradient written in place)");
      p.memory.sharded_attention = {kernels::kShardCopyBytesPerQElement, kernels::kShardCopyBytesPerKvElement,
                                    kernels::kShardCopyBytesPerHead};
      measured.push_back(
          "sharded attention bytes (lcsim's layer proxy keeps the post-all-to-all Q, K, V, output and "
          "log-sum-exp of a Ulysses shard until backward)");
    }
    measured.push_back("activation bytes per token per layer (arena high-water mark of the layer proxy over " +
                       std::to_string(by_mode.begin()->second.size()) + " model shapes)");
  }

  void collectives() {
    if (m.collectives.empty()) {
      kept.push_back("every collective (" + std::to_string(m.device.count) +
                     " GPU visible: nothing to measure between GPUs; measured: false)");
      report.push_back({"collectives", 0, 0, std::nullopt, "not measured (one GPU): prior kept, measured: false"});
      return;
    }
    // A measured group size stands for its neighbours better than a derived prior: the prior's entries of a
    // measured (op, link) go, so lookups fall to the nearest measured group (PROFILE.md, "Measured profiles").
    std::set<std::pair<CollectiveOp, LinkClass>> measured_kinds;
    for (const auto& c : m.collectives) measured_kinds.insert({c.op, c.link});
    std::erase_if(p.collectives, [&](const CollectiveFit& e) { return measured_kinds.count({e.op, e.link}) > 0; });
    // What the prior fitted on a published figure and is now measured no longer rests on that figure.
    std::erase_if(p.provenance.fitted_on, [&](const FittedOn& f) {
      return std::any_of(measured_kinds.begin(), measured_kinds.end(), [&](const auto& kind) {
        return f.parameter == collective_parameter(kind.first, kind.second);
      });
    });
    std::map<LinkClass, std::string> groups;
    for (const auto& c : m.collectives) {
      const auto fit = fit_collective_segments(c.samples, c.op, c.group_size, kMeasuredHoldOutEvery);
      const CollectiveFit entry = fit.to_profile_entry(c.link, true);
      auto same = [&](const CollectiveFit& e) {
        return e.op == c.op && e.link == c.link && e.group_size == c.group_size;
      };
      if (std::any_of(p.collectives.begin(), p.collectives.end(), same)) {
        throw InputError(file + ": collectives: two measurements of " + std::string(to_string(c.op)) + " on " +
                         std::string(to_string(c.link)) + " with " + std::to_string(c.group_size) + " GPUs");
      }
      p.collectives.push_back(entry);
      std::string result;
      for (const auto& s : entry.segments) {
        if (!result.empty()) result += "; ";
        result += fixed(s.latency_us, 1) + " us + " + fixed(s.bus_GBps, 1) + " GB/s";
        if (std::isfinite(s.max_bytes)) result += " up to " + fixed(s.max_bytes / 1024, 0) + " KiB";
      }
      report.push_back(
          {std::string(to_string(c.op)) + " " + std::string(to_string(c.link)) + " n=" + std::to_string(c.group_size),
           static_cast<int>(c.samples.size()), count_held(c.samples.size(), kMeasuredHoldOutEvery), entry.fit_mape,
           result});
      if (c.op == CollectiveOp::SendRecv && c.link == LinkClass::NvLink) {
        // A strategy switch moves 4 bytes per parameter point to point at the large-message rate.
        p.compute.hot_switch_us_per_mparam = 4.0 * 1e6 / (entry.segments.back().bus_GBps * 1e9) * 1e6;
        measured.push_back("hot_switch_us_per_mparam (from the send_recv bandwidth)");
      }
      std::string& g = groups[c.link];
      const std::string n = "n=" + std::to_string(c.group_size) + " ";
      if (g.find(n) == std::string::npos) g += n;
    }
    // The default profiles' order (link, op, group size), whatever order the sweep ran in.
    std::stable_sort(p.collectives.begin(), p.collectives.end(), [](const CollectiveFit& a, const CollectiveFit& b) {
      return std::tie(a.link, a.op, a.group_size) < std::tie(b.link, b.op, b.group_size);
    });
    for (const auto& [link, g] : groups) {
      measured.push_back(std::string(link == LinkClass::NvLink ? "NVLink" : "InfiniBand") +
                         " collectives (nccl-tests sizes, " + g + "GPUs)");
    }
    if (!groups.count(LinkClass::InfiniBand)) kept.push_back("InfiniBand collectives (not measured: measured: false)");
    kept.push_back("ops not measured on a link keep the prior's entries (measured: false)");
  }

  void ulysses() {
    if (m.ulysses.empty()) return;
    std::vector<double> predicted, actual;
    for (const auto& u : m.ulysses) {
      const double q_bytes = 2.0 * u.tokens_per_gpu * model.q_hidden();
      const double kv_bytes = 2.0 * u.tokens_per_gpu * model.kv_hidden();
      predicted.push_back(2 * p.collective_seconds(CollectiveOp::AllToAll, LinkClass::NvLink, u.cp, q_bytes) +
                          2 * p.collective_seconds(CollectiveOp::AllToAll, LinkClass::NvLink, u.cp, kv_bytes));
      actual.push_back(u.seconds);
    }
    const double mape = mean_absolute_percentage_error(predicted, actual);
    report.push_back({"Ulysses all-to-all vs the all_to_all fit", static_cast<int>(actual.size()),
                      static_cast<int>(actual.size()), mape, "prediction check, not fitted"});
  }

  void optimizer() {
    if (m.optimizer.size() < 2) {
      kept.push_back("optimizer_us_per_mparam (fewer than two optimizer measurements)");
      report.push_back({"optimizer step", static_cast<int>(m.optimizer.size()), 0, std::nullopt, "prior kept"});
      return;
    }
    std::vector<double> x, y;
    for (const auto& o : m.optimizer) x.push_back(o.parameters);
    const auto order = order_of(x);
    x.clear();
    for (auto i : order) {
      x.push_back(m.optimizer[i].parameters);
      y.push_back(m.optimizer[i].seconds);
    }
    const auto fit = fit_linear_held_out(x, y, kMeasuredHoldOutEvery);
    if (!(fit.fit.slope > 0)) throw InputError(file + ": optimizer: optimizer time does not grow with parameters");
    p.compute.optimizer_us_per_mparam = fit.fit.slope * 1e12;
    report.push_back(
        {"optimizer step (AdamW)", static_cast<int>(x.size()), count_held(x.size(), kMeasuredHoldOutEvery),
         fit.held_out_mape,
         fixed(p.compute.optimizer_us_per_mparam, 2) + " us/Mparam + " + fixed(fit.fit.intercept * 1e6, 1) + " us"});
    measured.push_back("optimizer_us_per_mparam (fused AdamW step)");
  }

  void provenance(const Profile& prior) {
    const auto& d = m.device;
    auto& pv = p.provenance;
    // Published figures were measured by others on other systems: the profile is fitted, not calibrated here.
    pv.calibrated = m.published.empty();
    pv.source = m.published.empty() ? "lcsim-gpu calibrate" : "published measurements";
    pv.device = d.name + " x" + std::to_string(d.count) + " (compute capability " + d.compute_capability + ", " +
                std::to_string(d.multiprocessors) + " SMs" + (d.host.empty() ? "" : ", host " + d.host) + ")";
    pv.date = d.date;
    pv.tool_version = LCSIM_VERSION;
    pv.driver = d.driver;
    pv.cuda = d.cuda;
    pv.nccl = d.nccl;
    pv.model = m.model;
    std::string notes = m.published.empty()
                            ? "Measured by lcsim-gpu calibrate --model " + m.model + "; kernel timing: " + m.timing +
                                  "; medians of " + std::to_string(m.repetitions) + " repetitions after " +
                                  std::to_string(m.warmup) + " warm-up runs. Measured: "
                            : "Fitted by lcsim-gpu fit from published figures, not measured by lcsim (" + m.published +
                                  "; " + m.timing + "). From them: ";
    for (std::size_t i = 0; i < measured.size(); ++i) notes += (i ? "; " : "") + measured[i];
    notes += ". Kept from the prior (" + prior.label() + "): peak_tflops " + fixed(p.compute.peak_tflops, 0) +
             " (efficiencies refer to it), logits bytes, static bytes per parameter, reserve";
    for (const auto& k : kept) notes += "; " + k;
    notes += ". Held-out MAPE:";
    for (const auto& line : report) {
      if (line.held_out_mape) notes += " " + line.what + " " + percent(line.held_out_mape) + ";";
    }
    if (!m.warnings.empty()) {
      notes += " " + std::to_string(m.warnings.size()) + " measurement warning(s), listed in the measurements file.";
    }
    pv.notes = notes;
    p.gpu = d.gpu_kind.empty() ? d.name : d.gpu_kind;
  }
};

}  // namespace

ClusterSpec one_gpu_cluster(const Profile& profile, double memory_bytes) {
  ClusterSpec cluster;
  for (const auto& gpu : named_gpus()) {
    if (gpu.name == profile.gpu) cluster.gpu = gpu;
  }
  if (cluster.gpu.name.empty()) cluster.gpu = GpuKind{profile.gpu, memory_bytes, profile.compute.peak_tflops, 0, 0};
  cluster.nodes = 1;
  cluster.gpus_per_node = 1;
  return cluster;
}

ProportionalFit proportional_held_out(const std::vector<double>& x, const std::vector<double>& y, int every_k) {
  const auto order = order_of(x);
  const auto mask = held_out_mask(x.size(), every_k);
  std::vector<double> fx, fy, hx, hy;
  for (std::size_t i = 0; i < order.size(); ++i) {
    (mask[i] ? hx : fx).push_back(x[order[i]]);
    (mask[i] ? hy : fy).push_back(y[order[i]]);
  }
  const LinearFit fit = fit_proportional(fx, fy);
  ProportionalFit out{fit.slope, std::nullopt};
  if (!hx.empty()) {
    std::vector<double> predicted;
    for (double v : hx) predicted.push_back(fit.slope * v);
    out.held_out_mape = mean_absolute_percentage_error(predicted, hy);
  }
  return out;
}

Curve efficiency_curve(std::vector<double> x, std::vector<double> efficiency, int every_k, const std::string& what) {
  if (x.size() != efficiency.size() || x.empty()) throw InputError(what + " curve: no points");
  const auto order = order_of(x);
  Curve curve;
  for (auto i : order) {
    if (!curve.x.empty() && x[i] == curve.x.back()) {
      throw InputError(what + " curve: two measurements at " + fixed(x[i], 0));
    }
    curve.x.push_back(x[i]);
    curve.y.push_back(efficiency[i]);
  }
  const auto mask = held_out_mask(curve.x.size(), every_k);
  Curve train;
  std::vector<std::size_t> held;
  for (std::size_t i = 0; i < curve.x.size(); ++i) {
    if (mask[i]) {
      held.push_back(i);
    } else {
      train.x.push_back(curve.x[i]);
      train.y.push_back(curve.y[i]);
    }
  }
  if (!held.empty()) {
    double sum = 0;
    for (auto i : held) sum += std::abs(curve.y[i] / train.at(curve.x[i]) - 1);
    curve.fit_mape = sum / static_cast<double>(held.size());
  }
  return curve;
}

ActivationFit fit_activation_coefficients(std::vector<ActivationSample> samples, int every_k) {
  std::sort(samples.begin(), samples.end(),
            [](const auto& a, const auto& b) { return a.bytes_per_token_per_layer < b.bytes_per_token_per_layer; });
  const auto mask = held_out_mask(samples.size(), every_k);
  std::vector<ActivationSample> train, held;
  for (std::size_t i = 0; i < samples.size(); ++i) (mask[i] ? held : train).push_back(samples[i]);
  for (const auto& s : samples) {
    if (!(s.bytes_per_token_per_layer > 0)) throw InputError("activation fit: a probe measured no activation bytes");
  }
  // Columns h, kv, f; drop any whose coefficient comes out negative and refit (non-negative least squares for
  // three columns).
  std::vector<int> active = {0, 1, 2};
  std::array<double, 3> coefficient{};
  while (!active.empty()) {
    if (train.size() < active.size()) {
      throw InputError("activation fit: " + std::to_string(train.size()) + " model shapes for " +
                       std::to_string(active.size()) + " coefficients");
    }
    std::vector<std::vector<double>> columns(active.size());
    std::vector<double> y;
    for (const auto& s : train) {
      const double values[3] = {s.hidden, s.kv_hidden, s.ffn};
      for (std::size_t c = 0; c < active.size(); ++c) columns[c].push_back(values[active[c]]);
      y.push_back(s.bytes_per_token_per_layer);
    }
    const auto c = relative_least_squares(columns, y);
    const auto worst = std::min_element(c.begin(), c.end());
    if (*worst >= 0) {
      coefficient = {};
      for (std::size_t i = 0; i < active.size(); ++i) coefficient[static_cast<std::size_t>(active[i])] = c[i];
      break;
    }
    active.erase(active.begin() + (worst - c.begin()));
  }
  if (active.empty()) throw InputError("activation fit: no non-negative coefficients fit the probes");
  ActivationFit fit;
  fit.coefficients = {coefficient[0], coefficient[1], coefficient[2]};
  fit.points = static_cast<int>(samples.size());
  fit.held_out = static_cast<int>(held.size());
  if (!held.empty()) {
    std::vector<double> predicted, actual;
    for (const auto& s : held) {
      predicted.push_back(coefficient[0] * s.hidden + coefficient[1] * s.kv_hidden + coefficient[2] * s.ffn);
      actual.push_back(s.bytes_per_token_per_layer);
    }
    fit.held_out_mape = mean_absolute_percentage_error(predicted, actual);
  }
  return fit;
}

LayerOverheadFit fit_layer_overhead(const std::vector<double>& base, const std::vector<double>& gemm,
                                    const std::vector<double>& measured) {
  if (base.empty() || base.size() != measured.size() || gemm.size() != base.size()) {
    throw std::invalid_argument("fit_layer_overhead: needs as many base and GEMM times as measurements, at least one");
  }
  // Weighted least squares of r = y - b on [1, g], weights 1 / y^2 (relative error).
  double s1 = 0, sg = 0, sgg = 0, sr = 0, sgr = 0;
  for (std::size_t i = 0; i < base.size(); ++i) {
    const double y = measured[i];
    if (!(y > 0)) throw std::invalid_argument("fit_layer_overhead: a measurement is not positive");
    const double w = 1 / (y * y), g = gemm[i], r = y - base[i];
    s1 += w, sg += w * g, sgg += w * g * g, sr += w * r, sgr += w * g * r;
  }
  LayerOverheadFit fit;
  const double det = s1 * sgg - sg * sg;
  if (det > 1e-12 * s1 * sgg) {
    fit.fixed_seconds = (sgg * sr - sg * sgr) / det;
    fit.gemm_share = (s1 * sgr - sg * sr) / det;
  } else {  // every point has the same GEMM time: only the fixed cost can be told
    fit.fixed_seconds = sr / s1;
  }
  if (fit.gemm_share < 0) {
    fit.clamped.push_back("gemm_work_overhead (" + fixed(fit.gemm_share, 3) + ")");
    fit.gemm_share = 0;
    fit.fixed_seconds = sr / s1;
  }
  if (fit.fixed_seconds < 0) {
    fit.clamped.push_back("layer_overhead_us (" + fixed(fit.fixed_seconds * 1e6, 1) + " us)");
    fit.fixed_seconds = 0;
    fit.gemm_share = sgg > 0 ? std::max(sgr / sgg, 0.0) : 0.0;
  }
  return fit;
}

ModelConfig measured_model(const Measurements& measurements, const std::string& file) {
  try {
    return named_model(measurements.model);
  } catch (const InputError& e) {
    throw InputError(file + ": model: " + e.what());
  }
}

FittedProfile fit_profile(const Measurements& measurements, const ModelConfig& model, const Profile& prior,
                          const std::string& file) {
  if (measurements.model != model.name) {
    throw InputError(file + ": model: measurements were taken with model " + measurements.model + ", not " +
                     model.name);
  }
  Fitter f{measurements, model, file, prior, {}, {}, {}};
  f.gemm();
  f.attention();
  f.attention_blocks();
  f.layer_overhead();
  f.memory();
  f.collectives();
  f.ulysses();
  f.optimizer();
  f.provenance(prior);
  return {std::move(f.p), std::move(f.report)};
}

}  // namespace lcsim
