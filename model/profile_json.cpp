// Profile JSON (format_version 2), documented field by field in calibrate/PROFILE.md. Reading is strict: every
// field is required (compute.attention_blocks is optional: absent, no busiest-SM bound), unknown keys are errors, and
// every error names the file and the JSON path.
#include <cmath>
#include <set>
#include <tuple>

#include <nlohmann/json.hpp>

#include "base/errors.hpp"
#include "base/files.hpp"
#include "base/json_reader.hpp"
#include "model/profile.hpp"

namespace lcsim {
namespace {

constexpr double kBytesPerGiB = 1024.0 * 1024.0 * 1024.0;
constexpr int kFormatVersion = 2;

std::string indexed(std::string_view key, std::size_t i) {
  return std::string(key) + "[" + std::to_string(i) + "]";
}

double non_negative(JsonObjectReader& r, std::string_view key) {
  const double v = r.required<double>(key);
  if (!(v >= 0) || !std::isfinite(v)) r.fail(key, "must be a finite number >= 0, got " + r.value(key).dump());
  return v;
}

/// A physical quantity in `range`; a positive one is refused first as "must be positive" when it is not.
double bounded(JsonObjectReader& r, std::string_view key, PhysicalRange range, bool positive = false) {
  if (positive) r.positive(key);
  return r.number_in(key, range.low, range.high);
}

/// null (not measured) or a MAPE fraction >= 0.
std::optional<double> read_mape(JsonObjectReader& r, std::string_view key) {
  if (r.value(key).is_null()) return std::nullopt;
  return non_negative(r, key);
}

std::vector<double> read_numbers(JsonObjectReader& r, std::string_view key) {
  const auto& v = r.value(key);
  if (!v.is_array()) r.fail(key, "expected an array of numbers, got " + json_type_name(v));
  std::vector<double> out;
  for (std::size_t i = 0; i < v.size(); ++i) {
    if (!v[i].is_number()) r.fail(indexed(key, i), "expected a number, got " + json_type_name(v[i]));
    out.push_back(v[i].get<double>());
  }
  return out;
}

/// x strictly increasing and positive; y positive (and <= 1 for efficiencies); same length; not empty.
Curve read_curve(JsonObjectReader r, std::string_view x_key, std::string_view y_key) {
  Curve curve;
  curve.x = read_numbers(r, x_key);
  curve.y = read_numbers(r, y_key);
  curve.fit_mape = read_mape(r, "fit_mape");
  r.finish();
  if (curve.x.empty()) r.fail(x_key, "needs at least one point");
  if (curve.x.size() != curve.y.size()) {
    r.fail(y_key, "has " + std::to_string(curve.y.size()) + " values for " + std::to_string(curve.x.size()) + " " +
                      std::string(x_key));
  }
  for (std::size_t i = 0; i < curve.x.size(); ++i) {
    if (!(curve.x[i] > 0)) r.fail(indexed(x_key, i), "must be positive");
    if (!(curve.x[i] >= kCurveTokensRange.low && curve.x[i] <= kCurveTokensRange.high))
      r.fail(indexed(x_key, i), "must be in [1e-3, 1e15] (a range that keeps every time derived from it finite)");
    if (i > 0 && !(curve.x[i] > curve.x[i - 1])) r.fail(indexed(x_key, i), "must be greater than the previous value");
    if (!(curve.y[i] > 0 && curve.y[i] <= 1)) r.fail(indexed(y_key, i), "an efficiency must be in (0, 1]");
    if (!(curve.y[i] >= kEfficiencyRange.low))
      r.fail(indexed(y_key, i), "an efficiency must be at least 1e-6 (a smaller one makes times infinite)");
  }
  return curve;
}

ActivationCoefficients read_coefficients(JsonObjectReader r) {
  ActivationCoefficients c;
  c.per_hidden = bounded(r, "per_hidden", kBytesPerUnitRange);
  c.per_kv_hidden = bounded(r, "per_kv_hidden", kBytesPerUnitRange);
  c.per_ffn = bounded(r, "per_ffn", kBytesPerUnitRange);
  r.finish();
  return c;
}

std::array<double, 4> read_per_stage(JsonObjectReader& r, std::string_view key) {
  const auto values = read_numbers(r, key);
  if (values.size() != 4) r.fail(key, "expected 4 values (ZeRO stages 0..3), got " + std::to_string(values.size()));
  std::array<double, 4> out{};
  for (std::size_t i = 0; i < 4; ++i) {
    if (!(values[i] >= 0)) r.fail(indexed(key, i), "must be >= 0");
    if (!(values[i] <= kBytesPerUnitRange.high)) r.fail(indexed(key, i), "must be at most 1e9 bytes per parameter");
    out[i] = values[i];
  }
  return out;
}

CollectiveOp parse_op(JsonObjectReader& r) {
  const std::string name = r.required<std::string>("op");
  for (auto op : {CollectiveOp::AllGather, CollectiveOp::ReduceScatter, CollectiveOp::AllReduce, CollectiveOp::AllToAll,
                  CollectiveOp::SendRecv}) {
    if (name == to_string(op)) return op;
  }
  r.fail("op",
         "unknown collective '" + name + "' (known: all_gather, reduce_scatter, all_reduce, all_to_all, send_recv)");
}

LinkClass parse_link(JsonObjectReader& r) {
  const std::string name = r.required<std::string>("link");
  for (auto link : {LinkClass::NvLink, LinkClass::InfiniBand}) {
    if (name == to_string(link)) return link;
  }
  r.fail("link", "unknown link '" + name + "' (known: nvlink, infiniband)");
}

CollectiveFit read_collective(JsonObjectReader r) {
  CollectiveFit fit;
  fit.op = parse_op(r);
  fit.link = parse_link(r);
  fit.group_size = static_cast<int>(r.integer_in("group_size", 2, 1 << 20));
  if (fit.op == CollectiveOp::SendRecv && fit.group_size != 2) r.fail("group_size", "send_recv is between 2 GPUs");
  fit.measured = r.required<bool>("measured");
  fit.fit_mape = read_mape(r, "fit_mape");
  const auto& segments = r.value("segments");
  if (!segments.is_array() || segments.empty()) r.fail("segments", "expected a non-empty array of segments");
  for (std::size_t i = 0; i < segments.size(); ++i) {
    auto s = r.child(segments[i], r.path(indexed("segments", i)));
    CollectiveSegment segment;
    const bool last = i + 1 == segments.size();
    if (last) {
      if (!s.value("max_bytes").is_null()) s.fail("max_bytes", "the last segment is open-ended: must be null");
      segment.max_bytes = std::numeric_limits<double>::infinity();
    } else {
      if (s.value("max_bytes").is_null()) s.fail("max_bytes", "only the last segment may be open-ended (null)");
      segment.max_bytes = bounded(s, "max_bytes", kSegmentBytesRange, true);
      if (i > 0 && !(segment.max_bytes > fit.segments.back().max_bytes))
        s.fail("max_bytes", "must be greater than the previous segment's");
    }
    segment.latency_us = bounded(s, "latency_us", kLatencyUsRange);
    segment.bus_GBps = bounded(s, "bus_GBps", kBandwidthGBpsRange, true);
    s.finish();
    fit.segments.push_back(segment);
  }
  r.finish();
  return fit;
}

NetworkReference read_network(JsonObjectReader r) {
  NetworkReference n;
  n.nvlink_GBps = bounded(r, "nvlink_GBps", kBandwidthGBpsRange, true);
  n.nvlink_latency_us = bounded(r, "nvlink_latency_us", kLatencyUsRange);
  n.ib_GBps = bounded(r, "ib_GBps", kBandwidthGBpsRange, true);
  n.ib_latency_us = bounded(r, "ib_latency_us", kLatencyUsRange);
  r.finish();
  return n;
}

Provenance read_provenance(JsonObjectReader r) {
  Provenance p;
  p.calibrated = r.required<bool>("calibrated");
  p.source = r.required<std::string>("source");
  p.device = r.required<std::string>("device");
  p.date = r.required<std::string>("date");
  p.tool_version = r.required<std::string>("tool_version");
  p.driver = r.required<std::string>("driver");
  p.cuda = r.required<std::string>("cuda");
  p.nccl = r.required<std::string>("nccl");
  p.model = r.required<std::string>("model");
  p.notes = r.required<std::string>("notes");
  p.stack = r.optional<std::string>("stack", "");
  if (r.has("stack") && p.stack != "megatron" && p.stack != "pytorch-fsdp" && p.stack != "deepspeed")
    r.fail("stack", "expected \"megatron\", \"pytorch-fsdp\" or \"deepspeed\"");
  if (r.has("fitted_on")) {
    const auto& items = r.value("fitted_on");
    if (!items.is_array()) r.fail("fitted_on", "expected an array of {\"entry\", \"parameter\"} objects");
    for (std::size_t i = 0; i < items.size(); ++i) {
      JsonObjectReader item = r.child(items[i], r.path("fitted_on[" + std::to_string(i) + "]"));
      FittedOn f{item.required<std::string>("entry"), item.required<std::string>("parameter")};
      if (f.entry.empty()) item.fail("entry", "must name a catalogue entry");
      if (f.parameter.empty()) item.fail("parameter", "must say what was fitted");
      item.finish();
      p.fitted_on.push_back(std::move(f));
    }
  }
  r.finish();
  if (p.source.empty()) r.fail("source", "must say where the numbers come from");
  if (p.calibrated && (p.device.empty() || p.date.empty()))
    r.fail("calibrated", "a calibrated profile must name its device and date");
  return p;
}

int whole_number(JsonObjectReader& r, std::string_view key, PhysicalRange range) {
  const double v = bounded(r, key, range, true);
  if (v != std::floor(v)) r.fail(key, "must be a whole number");
  return static_cast<int>(v);
}

AttentionBlocks read_attention_blocks(JsonObjectReader r) {
  AttentionBlocks b;
  b.tile_tokens = whole_number(r, "tile_tokens", kTileTokensRange);
  b.sm_count = whole_number(r, "sm_count", kSmCountRange);
  b.forward_blocks_per_sm = whole_number(r, "forward_blocks_per_sm", kBlocksPerSmRange);
  b.backward_blocks_per_sm = whole_number(r, "backward_blocks_per_sm", kBlocksPerSmRange);
  const std::string walk = r.required<std::string>("backward_walk");
  if (walk == "kv_group") {
    b.backward_walk = AttentionBlocks::BackwardWalk::KvGroup;
  } else if (walk == "head") {
    b.backward_walk = AttentionBlocks::BackwardWalk::Head;
  } else {
    r.fail("backward_walk", "expected \"kv_group\" or \"head\", got \"" + walk + "\"");
  }
  r.finish();
  return b;
}

AttentionImplementation read_attention_implementation(JsonObjectReader r) {
  AttentionImplementation a;
  a.efficiency = read_curve(r.object("efficiency"), "seq_tokens", "efficiency");
  a.backward_ratio = bounded(r, "backward_ratio", kBackwardRatioRange, true);
  a.source = r.required<std::string>("source");
  if (a.source.empty()) r.fail("source", "is empty; say where the figures come from");
  r.finish();
  return a;
}

ComputeProfile read_compute(JsonObjectReader r) {
  ComputeProfile c;
  c.peak_tflops = bounded(r, "peak_tflops", kPeakTflopsRange, true);
  c.gemm_efficiency = read_curve(r.object("gemm_efficiency"), "tokens", "efficiency");
  c.attention_efficiency = read_curve(r.object("attention_efficiency"), "seq_tokens", "efficiency");
  c.attention_backward_ratio = bounded(r, "attention_backward_ratio", kBackwardRatioRange, true);
  if (r.has("attention_blocks")) c.attention_blocks = read_attention_blocks(r.object("attention_blocks"));
  c.layer_overhead_us = bounded(r, "layer_overhead_us", kOverheadUsRange);
  // Until 2026-11-26 the element-wise share scaled attention too; live jobs on an H200 showed it does not
  // (docs/measurements/h200-2026-11-26.md). An old profile's share means something else: refit, never reinterpret.
  if (r.has("layer_work_overhead"))
    r.fail("layer_work_overhead",
           "replaced by gemm_work_overhead, a share of the GEMM passes only; refit the profile from its measurements "
           "(lcsim-gpu fit --measurements FILE --out FILE)");
  c.gemm_work_overhead = bounded(r, "gemm_work_overhead", kFactorRange);
  c.layer_overhead_fit_mape = read_mape(r, "layer_overhead_fit_mape");
  c.optimizer_us_per_mparam = bounded(r, "optimizer_us_per_mparam", kOverheadUsRange);
  c.hot_switch_us_per_mparam = bounded(r, "hot_switch_us_per_mparam", kOverheadUsRange);
  if (r.has("layer_issue_us")) c.layer_issue_us = bounded(r, "layer_issue_us", kOverheadUsRange);
  if (r.has("step_issue_us")) c.step_issue_us = bounded(r, "step_issue_us", kOverheadUsRange);
  if (r.has("fp8_gemm_speedup")) c.fp8_gemm_speedup = bounded(r, "fp8_gemm_speedup", kFp8SpeedupRange, true);
  if (r.has("selective_recompute_gemm_share"))
    c.selective_recompute_gemm_share = bounded(r, "selective_recompute_gemm_share", kShareRange);
  if (r.has("attention_implementations")) {
    JsonObjectReader implementations = r.object("attention_implementations");
    for (const auto& item : implementations.node().items())
      c.attention_implementations[item.key()] = read_attention_implementation(implementations.object(item.key()));
  }
  r.finish();
  return c;
}

MemoryProfile read_memory(JsonObjectReader r) {
  MemoryProfile m;
  auto activations = r.object("activation_bytes_per_token_per_layer");
  m.activations_none = read_coefficients(activations.object("none"));
  m.activations_selective = read_coefficients(activations.object("selective"));
  m.activations_full = read_coefficients(activations.object("full"));
  activations.finish();
  m.logits_bytes_per_token_per_vocab = bounded(r, "logits_bytes_per_token_per_vocab", kBytesPerUnitRange);
  if (r.has("sharded_attention_bytes")) {
    auto sharded = r.object("sharded_attention_bytes");
    m.sharded_attention.per_q_element = bounded(sharded, "per_q_element", kBytesPerUnitRange);
    m.sharded_attention.per_kv_element = bounded(sharded, "per_kv_element", kBytesPerUnitRange);
    m.sharded_attention.per_head = bounded(sharded, "per_head", kBytesPerUnitRange);
    sharded.finish();
  }
  auto statics = r.object("static_bytes_per_param");
  m.replicated_bytes_per_param = read_per_stage(statics, "replicated");
  m.sharded_bytes_per_param = read_per_stage(statics, "sharded");
  statics.finish();
  if (r.has("gradient_reduce_bytes_per_param"))
    m.gradient_reduce_bytes = bounded(r, "gradient_reduce_bytes_per_param", kGradientBytesRange, true);
  m.reserve_bytes = bounded(r, "reserve_GiB", kReserveGiBRange) * kBytesPerGiB;
  m.fit_mape = read_mape(r, "fit_mape");
  r.finish();
  return m;
}

template <class Json>
Json mape_json(const std::optional<double>& mape) {
  return mape ? Json(*mape) : Json(nullptr);
}

template <class Json>
Json curve_json(const Curve& curve, const char* x_key) {
  Json j;
  j[x_key] = curve.x;
  j["efficiency"] = curve.y;
  j["fit_mape"] = mape_json<Json>(curve.fit_mape);
  return j;
}

template <class Json>
Json coefficients_json(const ActivationCoefficients& c) {
  Json j;
  j["per_hidden"] = c.per_hidden;
  j["per_kv_hidden"] = c.per_kv_hidden;
  j["per_ffn"] = c.per_ffn;
  return j;
}

template <class Json>
Json to_json(const Profile& profile) {
  Json j;
  j["format_version"] = profile.format_version;
  j["gpu"] = profile.gpu;
  const auto& p = profile.provenance;
  Json provenance;
  provenance["calibrated"] = p.calibrated;
  provenance["source"] = p.source;
  provenance["device"] = p.device;
  provenance["date"] = p.date;
  provenance["tool_version"] = p.tool_version;
  provenance["driver"] = p.driver;
  provenance["cuda"] = p.cuda;
  provenance["nccl"] = p.nccl;
  provenance["model"] = p.model;
  provenance["notes"] = p.notes;
  if (!p.stack.empty()) provenance["stack"] = p.stack;
  if (!p.fitted_on.empty()) {
    Json fitted = Json::array();
    for (const auto& f : p.fitted_on) {
      Json item;
      item["entry"] = f.entry;
      item["parameter"] = f.parameter;
      fitted.push_back(item);
    }
    provenance["fitted_on"] = fitted;
  }
  j["provenance"] = provenance;
  if (profile.network) {
    Json network;
    network["nvlink_GBps"] = profile.network->nvlink_GBps;
    network["nvlink_latency_us"] = profile.network->nvlink_latency_us;
    network["ib_GBps"] = profile.network->ib_GBps;
    network["ib_latency_us"] = profile.network->ib_latency_us;
    j["network"] = network;
  }

  const auto& c = profile.compute;
  Json compute;
  compute["peak_tflops"] = c.peak_tflops;
  compute["gemm_efficiency"] = curve_json<Json>(c.gemm_efficiency, "tokens");
  compute["attention_efficiency"] = curve_json<Json>(c.attention_efficiency, "seq_tokens");
  compute["attention_backward_ratio"] = c.attention_backward_ratio;
  if (c.attention_blocks.tile_tokens > 0) {
    const auto& b = c.attention_blocks;
    compute["attention_blocks"] =
        Json{{"tile_tokens", b.tile_tokens},
             {"sm_count", b.sm_count},
             {"forward_blocks_per_sm", b.forward_blocks_per_sm},
             {"backward_blocks_per_sm", b.backward_blocks_per_sm},
             {"backward_walk", b.backward_walk == AttentionBlocks::BackwardWalk::KvGroup ? "kv_group" : "head"}};
  }
  compute["layer_overhead_us"] = c.layer_overhead_us;
  compute["gemm_work_overhead"] = c.gemm_work_overhead;
  compute["layer_overhead_fit_mape"] = mape_json<Json>(c.layer_overhead_fit_mape);
  compute["optimizer_us_per_mparam"] = c.optimizer_us_per_mparam;
  compute["hot_switch_us_per_mparam"] = c.hot_switch_us_per_mparam;
  // Optional: only a profile fitted with a job's untraced step times has the CPU floor.
  if (c.layer_issue_us > 0) compute["layer_issue_us"] = c.layer_issue_us;
  if (c.step_issue_us > 0) compute["step_issue_us"] = c.step_issue_us;
  if (c.fp8_gemm_speedup) compute["fp8_gemm_speedup"] = *c.fp8_gemm_speedup;
  if (c.selective_recompute_gemm_share > 0)
    compute["selective_recompute_gemm_share"] = c.selective_recompute_gemm_share;
  if (!c.attention_implementations.empty()) {
    Json implementations = Json::object();
    for (const auto& [name, a] : c.attention_implementations)
      implementations[name] = Json{{"efficiency", curve_json<Json>(a.efficiency, "seq_tokens")},
                                   {"backward_ratio", a.backward_ratio},
                                   {"source", a.source}};
    compute["attention_implementations"] = implementations;
  }
  j["compute"] = compute;

  const auto& m = profile.memory;
  Json memory;
  Json activations;
  activations["none"] = coefficients_json<Json>(m.activations_none);
  activations["selective"] = coefficients_json<Json>(m.activations_selective);
  activations["full"] = coefficients_json<Json>(m.activations_full);
  memory["activation_bytes_per_token_per_layer"] = activations;
  memory["logits_bytes_per_token_per_vocab"] = m.logits_bytes_per_token_per_vocab;
  if (m.sharded_attention.any()) {
    Json sharded;
    sharded["per_q_element"] = m.sharded_attention.per_q_element;
    sharded["per_kv_element"] = m.sharded_attention.per_kv_element;
    sharded["per_head"] = m.sharded_attention.per_head;
    memory["sharded_attention_bytes"] = sharded;
  }
  Json statics;
  statics["replicated"] = m.replicated_bytes_per_param;
  statics["sharded"] = m.sharded_bytes_per_param;
  memory["static_bytes_per_param"] = statics;
  if (m.gradient_reduce_bytes != MemoryProfile{}.gradient_reduce_bytes)
    memory["gradient_reduce_bytes_per_param"] = m.gradient_reduce_bytes;
  memory["reserve_GiB"] = m.reserve_bytes / kBytesPerGiB;
  memory["fit_mape"] = mape_json<Json>(m.fit_mape);
  j["memory"] = memory;

  Json collectives = Json::array();
  for (const auto& fit : profile.collectives) {
    Json entry;
    entry["op"] = to_string(fit.op);
    entry["link"] = to_string(fit.link);
    entry["group_size"] = fit.group_size;
    entry["measured"] = fit.measured;
    entry["fit_mape"] = mape_json<Json>(fit.fit_mape);
    Json segments = Json::array();
    for (std::size_t i = 0; i < fit.segments.size(); ++i) {
      const auto& s = fit.segments[i];
      Json segment;
      segment["max_bytes"] = i + 1 == fit.segments.size() ? Json(nullptr) : Json(s.max_bytes);
      segment["latency_us"] = s.latency_us;
      segment["bus_GBps"] = s.bus_GBps;
      segments.push_back(segment);
    }
    entry["segments"] = segments;
    collectives.push_back(entry);
  }
  j["collectives"] = collectives;
  return j;
}

}  // namespace

Profile profile_from_json(const nlohmann::json& document, const std::string& file) {
  JsonObjectReader r(document, file);
  Profile profile;
  profile.file = file;
  profile.format_version = r.required<int>("format_version");
  if (profile.format_version != kFormatVersion) {
    r.fail("format_version", "unsupported version " + std::to_string(profile.format_version) + " (this lcsim reads " +
                                 std::to_string(kFormatVersion) +
                                 (profile.format_version == 1
                                      ? "; version 2 adds \"network\", the links the collectives were measured on: "
                                        "calibrate/PROFILE.md)"
                                      : ")"));
  }
  profile.gpu = r.required<std::string>("gpu");
  if (profile.gpu.empty()) r.fail("gpu", "must name the GPU kind");
  profile.provenance = read_provenance(r.object("provenance"));
  profile.network = read_network(r.object("network"));
  profile.compute = read_compute(r.object("compute"));
  profile.memory = read_memory(r.object("memory"));
  const auto& collectives = r.value("collectives");
  if (!collectives.is_array()) r.fail("collectives", "expected an array, got " + json_type_name(collectives));
  std::set<std::tuple<CollectiveOp, LinkClass, int>> seen;
  for (std::size_t i = 0; i < collectives.size(); ++i) {
    const std::string path = r.path(indexed("collectives", i));
    auto fit = read_collective(r.child(collectives[i], path));
    if (!seen.emplace(fit.op, fit.link, fit.group_size).second) {
      throw InputError(file + ": " + path + ": a second " + std::string(to_string(fit.op)) + " entry on " +
                       std::string(to_string(fit.link)) + " for group size " + std::to_string(fit.group_size));
    }
    profile.collectives.push_back(std::move(fit));
  }
  r.finish();
  return profile;
}

nlohmann::json profile_to_json(const Profile& profile) {
  return to_json<nlohmann::json>(profile);
}

Profile load_profile(const std::string& file) {
  return profile_from_json(parse_json_file(file), file);
}

void save_profile(const Profile& profile, const std::string& file) {
  // Written in the documented key order (ordered_json) so the file reads like PROFILE.md.
  const std::string text = to_json<nlohmann::ordered_json>(profile).dump(2) + "\n";
  write_file_atomically(file, text);
}

}  // namespace lcsim
