#include "formats/scenario.hpp"

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <limits>
#include <set>

#include "base/errors.hpp"
#include "base/json_reader.hpp"
#include "base/suggest.hpp"
#include "model/profile.hpp"
#include "model/topology_error.hpp"
#include "model/workload.hpp"

namespace lcsim {

std::string resolve_scenario_path(const std::string& scenario_file, const std::string& relative) {
  const std::filesystem::path p(relative);
  if (p.is_absolute()) return p.lexically_normal().string();
  const std::filesystem::path resolved = (std::filesystem::path(scenario_file).parent_path() / p).lexically_normal();
  return resolved.empty() ? std::string(".") : resolved.string();
}

namespace {

constexpr std::int64_t kMaxInt = std::numeric_limits<int>::max();

std::string join(const std::vector<std::string>& items) {
  std::string out;
  for (const auto& item : items) out += (out.empty() ? "" : ", ") + item;
  return out;
}

int int_in(JsonObjectReader& reader, std::string_view key, std::int64_t lo, std::int64_t hi) {
  return static_cast<int>(reader.integer_in(key, lo, hi));
}

ModelConfig parse_custom_model(JsonObjectReader r) {
  ModelConfig m;
  m.name = r.required<std::string>("name");
  m.hidden = int_in(r, "hidden", 1, kMaxInt);
  m.layers = int_in(r, "layers", 1, kMaxInt);
  m.heads = int_in(r, "heads", 1, kMaxInt);
  m.kv_heads = int_in(r, "kv_heads", 1, kMaxInt);
  if (m.heads % m.kv_heads != 0)
    r.fail("kv_heads", "must divide heads (" + std::to_string(m.heads) + "), got " + std::to_string(m.kv_heads));
  if (r.has("head_dim")) {
    m.head_dim = int_in(r, "head_dim", 1, kMaxInt);
  } else {
    if (m.hidden % m.heads != 0)
      r.fail("head_dim", "missing, and hidden (" + std::to_string(m.hidden) + ") is not a multiple of heads (" +
                             std::to_string(m.heads) + ") to derive it from");
    m.head_dim = m.hidden / m.heads;
  }
  m.ffn = int_in(r, "ffn", 1, kMaxInt);
  m.vocab = r.integer_in("vocab", 1, std::numeric_limits<std::int64_t>::max());
  m.tied_embeddings = r.optional<bool>("tied_embeddings", false);
  r.finish();
  return m;
}

ModelConfig parse_model(JsonObjectReader& root) {
  const auto& node = root.value("model");
  if (node.is_string()) {
    try {
      return named_model(node.get<std::string>());
    } catch (const InputError& e) {
      root.fail("model", e.what());
    }
  }
  if (!node.is_object()) root.fail("model", "expected a model name or an object, got " + json_type_name(node));
  return parse_custom_model(root.object("model"));
}

ClusterSpec parse_cluster(JsonObjectReader r) {
  ClusterSpec c;
  const std::string gpu = r.required<std::string>("gpu");
  try {
    c.gpu = named_gpu(gpu);
  } catch (const InputError& e) {
    r.fail("gpu", e.what());
  }
  c.nodes = int_in(r, "nodes", 1, 1 << 20);
  c.gpus_per_node = r.has("gpus_per_node") ? int_in(r, "gpus_per_node", 1, 1024) : 8;
  // Positive, then bounded: the range keeps every collective's time finite (SimGrid aborts on an infinite one).
  const auto physical = [&](std::string_view key, PhysicalRange range, double fallback) {
    if (!r.has(key)) return fallback;
    r.positive(key);
    return r.number_in(key, range.low, range.high);
  };
  c.nvlink_GBps = physical("nvlink_GBps", kBandwidthGBpsRange, c.gpu.nvlink_GBps);
  // A part whose memory differs from its kind's datasheet (torchtitan's 96 GB HBM2e H100s, say).
  if (r.has("gpu_memory_GiB")) c.gpu.memory_bytes = physical("gpu_memory_GiB", kMemoryGiBRange, 0) * 1073741824.0;
  c.gpu.hbm_TBps = physical("hbm_TBps", kBandwidthGBpsRange, c.gpu.hbm_TBps);
  // A part whose tensor cores run below the kind's datasheet peak: torchtitan's H100s under a 500 W limit.
  if (r.has("peak_tflops")) c.tensor_peak_share = physical("peak_tflops", kPeakTflopsRange, 0) / c.gpu.peak_bf16_tflops;
  c.nvlink_latency_us = physical("nvlink_latency_us", kLatencyUsRange, 2.0);
  c.ib_GBps = physical("ib_GBps", kBandwidthGBpsRange, 50.0);
  c.ib_latency_us = physical("ib_latency_us", kLatencyUsRange, 5.0);
  // The kind reads its own keys; finish() then refuses another kind's keys as unknown.
  const std::string topology = r.optional<std::string>("topology", "fat-tree");
  const TopologyEntry* entry = find_topology(topology);
  if (entry == nullptr) {
    std::string known;
    for (const TopologyEntry& e : topology_kinds()) known += (known.empty() ? "" : ", ") + std::string(e.name);
    std::vector<std::string> names;
    for (const TopologyEntry& e : topology_kinds()) names.emplace_back(e.name);
    r.fail("topology",
           "unknown topology \"" + topology + "\"" + did_you_mean(topology, names) + " (known: " + known + ")");
  }
  c.topology_kind = entry->read(r);
  try {
    c.topology_kind->check(c.shape());
  } catch (const TopologyKeyError& e) {
    r.fail(e.key(), e.what());  // the kind's own key that does not fit the shape (domain_gpus)
  } catch (const std::invalid_argument& e) {
    r.fail("topology", e.what());
  }
  r.finish();
  return c;
}

void check_distribution(JsonObjectReader& r, std::string_view key, const std::string& name) {
  try {
    named_distribution(name);
  } catch (const InputError& e) {
    r.fail(key, e.what());
  }
}

DatasetSpec parse_dataset(JsonObjectReader r, const std::string& file) {
  DatasetSpec d;
  const int forms = int{r.has("distribution")} + int{r.has("mix")} + int{r.has("trace")};
  if (forms != 1) r.fail_here("needs exactly one of \"distribution\", \"mix\" or \"trace\"");
  if (r.has("shuffle") && !r.has("trace")) r.fail("shuffle", "only applies to a \"trace\" dataset");
  if (r.has("distribution")) {
    const std::string name = r.required<std::string>("distribution");
    check_distribution(r, "distribution", name);
    d.components.push_back({name, 1.0});
  } else if (r.has("mix")) {
    const auto& mix = r.value("mix");
    if (!mix.is_array() || mix.empty()) r.fail("mix", "expected a non-empty array of {distribution, weight}");
    for (std::size_t i = 0; i < mix.size(); ++i) {
      JsonObjectReader item = r.child(mix[i], r.path("mix") + "[" + std::to_string(i) + "]");
      DatasetSpec::Component component;
      component.distribution = item.required<std::string>("distribution");
      check_distribution(item, "distribution", component.distribution);
      component.weight = item.has("weight") ? item.positive("weight") : 1.0;
      item.finish();
      d.components.push_back(component);
    }
  } else {
    d.trace_path = resolve_scenario_path(file, r.required<std::string>("trace"));
    if (r.required<std::string>("trace").empty()) r.fail("trace", "is empty; give the path of a length trace");
    d.shuffle = r.optional<bool>("shuffle", true);
  }
  d.truncate_to_context = r.optional<bool>("truncate_to_context", false);
  r.finish();
  return d;
}

Precision parse_precision(JsonObjectReader& r) {
  const std::string value = r.optional<std::string>("precision", "bf16");
  if (value == "bf16") return Precision::Bf16;
  if (value == "fp8") return Precision::Fp8;
  r.fail("precision", "expected \"bf16\" or \"fp8\", got \"" + value + "\"");
}

Elementwise parse_elementwise(JsonObjectReader& r) {
  const std::string value = r.optional<std::string>("elementwise", "fused");
  if (value == "fused") return Elementwise::Fused;
  if (value == "eager") return Elementwise::Eager;
  r.fail("elementwise", "expected \"fused\" or \"eager\", got \"" + value + "\"");
}

Recompute parse_recompute(JsonObjectReader& r) {
  const std::string value = r.optional<std::string>("recompute", "selective");
  if (value == "none") return Recompute::None;
  if (value == "selective") return Recompute::Selective;
  if (value == "full") return Recompute::Full;
  r.fail("recompute", "expected \"none\", \"selective\" or \"full\", got \"" + value + "\"");
}

/// training.finetuning, method "frozen": {"embeddings": bool, "lm_head": bool, "first_layers": N}, the frozen
/// parts of `model`; something must stay frozen and something trained.
Finetuning parse_frozen(JsonObjectReader& r, const ModelConfig& model) {
  Finetuning f;
  f.method = FinetuningMethod::Frozen;
  f.frozen_embeddings = r.optional<bool>("embeddings", false);
  f.frozen_lm_head = r.optional<bool>("lm_head", false);
  f.frozen_layers = r.has("first_layers") ? int_in(r, "first_layers", 0, model.layers) : 0;
  r.finish();
  if (!f.frozen_embeddings && !f.frozen_lm_head && f.frozen_layers == 0)
    r.fail("method", "\"frozen\" freezes nothing (embeddings, lm_head and first_layers left out); use \"full\"");
  if (f.frozen_embeddings && f.frozen_lm_head && f.frozen_layers == model.layers)
    r.fail("first_layers", "embeddings, lm_head and all " + std::to_string(model.layers) + " layers of " + model.name +
                               " frozen: nothing to train");
  if (model.tied_embeddings && f.frozen_embeddings != f.frozen_lm_head)
    r.fail(f.frozen_embeddings ? "embeddings" : "lm_head",
           model.name + " ties its embeddings to its LM head (one matrix): freeze both or neither");
  return f;
}

/// LoRA's alpha scales the adapters' output (alpha / r) and changes no time or memory, but it is still a number a
/// result reports: [0.001, 1e6] holds every published setting (alpha up to a few times r, and r <= 65536) and
/// refuses 1e308, 2^63 and denormals (docs/robustness.md).
constexpr double kLoraAlphaLow = 1e-3;
constexpr double kLoraAlphaHigh = 1e6;

double lora_alpha(JsonObjectReader& r) {
  const double alpha = r.required<double>("alpha");
  if (!(alpha >= kLoraAlphaLow && alpha <= kLoraAlphaHigh))
    r.fail("alpha", "must be in [0.001, 1e+06], got " + excerpt(r.value("alpha").dump()) +
                        " (LoRA scales its adapters by alpha / rank)");
  return alpha;
}

/// training.finetuning: {"method": "full"} (the default), {"method": "lora", "rank": r, "alpha": a, "targets":
/// [...]} (targets default to every one: q, k, v, o, gate, up, down), or {"method": "frozen", ...} (parse_frozen).
Finetuning parse_finetuning(JsonObjectReader r, const ModelConfig& model) {
  Finetuning f;
  const std::string method = r.required<std::string>("method");
  if (method == "full") {
    r.finish();
    return f;
  }
  if (method == "frozen") return parse_frozen(r, model);
  if (method != "lora") r.fail("method", "expected \"full\", \"lora\" or \"frozen\", got \"" + method + "\"");
  f.method = FinetuningMethod::Lora;
  f.lora_rank = int_in(r, "rank", 1, 65536);
  f.lora_alpha = r.has("alpha") ? lora_alpha(r) : 2.0 * f.lora_rank;
  if (!r.has("targets")) {
    f.lora_targets = all_lora_targets();
  } else {
    const nlohmann::json& targets = r.value("targets");
    if (!targets.is_array() || targets.empty())
      r.fail("targets", "expected a non-empty array of \"q\", \"k\", \"v\", \"o\", \"gate\", \"up\", \"down\"");
    for (std::size_t i = 0; i < targets.size(); ++i) {
      const std::string key = "targets[" + std::to_string(i) + "]";
      const auto& name = targets[i];
      const auto& all = all_lora_targets();
      const auto found = std::find_if(all.begin(), all.end(), [&](LoraTarget t) {
        return name.is_string() && name.get<std::string>() == to_string(t);
      });
      if (found == all.end())
        r.fail(key, "unknown LoRA target " + name.dump() + " (known: q, k, v, o, gate, up, down)");
      if (std::find(f.lora_targets.begin(), f.lora_targets.end(), *found) != f.lora_targets.end())
        r.fail(key, "duplicate LoRA target " + name.dump());
      f.lora_targets.push_back(*found);
    }
  }
  r.finish();
  return f;
}

TrainingConfig parse_training(JsonObjectReader r, const ModelConfig& model) {
  TrainingConfig t;
  constexpr std::int64_t kMaxTokens = std::int64_t{1} << 40;
  if (r.has("global_batch_sequences") == r.has("tokens_per_iteration"))
    r.fail_here("needs exactly one of \"global_batch_sequences\" or \"tokens_per_iteration\"");
  if (r.has("global_batch_sequences")) t.global_batch_sequences = int_in(r, "global_batch_sequences", 1, kMaxInt);
  if (r.has("tokens_per_iteration")) t.tokens_per_iteration = r.integer_in("tokens_per_iteration", 1, kMaxTokens);
  t.iterations = r.has("iterations") ? int_in(r, "iterations", 1, kMaxIterations) : 10;
  t.zero_stage = r.has("zero_stage") ? int_in(r, "zero_stage", 0, 3) : 2;
  t.recompute = parse_recompute(r);
  t.precision = parse_precision(r);
  t.elementwise = parse_elementwise(r);
  t.attention = r.optional<std::string>("attention", "");
  if (r.has("attention") && t.attention.empty())
    r.fail("attention", "is empty; name one of the profile's compute.attention_implementations, or leave it out");
  t.overlap_gradient_sync = r.optional<bool>("overlap_gradient_sync", false);
  t.context_length = r.integer_in("context_length_tokens", 1, kMaxTokens);
  if (r.has("bucket_size_tokens")) t.bucket_size_tokens = r.integer_in("bucket_size_tokens", 1, kMaxTokens);
  if (r.has("finetuning")) t.finetuning = parse_finetuning(r.object("finetuning"), model);
  r.finish();
  return t;
}

CpAttention parse_cp_attention(JsonObjectReader& r) {
  const std::string value = r.optional<std::string>("cp_attention", "ulysses");
  std::string expected;
  for (CpAttention mode : kCpAttentionModes) {
    if (value == to_string(mode)) return mode;
    expected += (expected.empty() ? "\"" : ", \"") + std::string(to_string(mode)) + "\"";
  }
  r.fail("cp_attention", "expected one of " + expected + ", got \"" + value + "\"");
}

TpOverlap parse_tp_overlap(JsonObjectReader& r) {
  const std::string value = r.optional<std::string>("tp_overlap", "none");
  if (value == "none") return TpOverlap::None;
  if (value == "async") return TpOverlap::Async;
  r.fail("tp_overlap", "expected \"none\" or \"async\", got \"" + value + "\"");
}

/// The scenario's parallel object fills `scenario` (cp_attention, tp_overlap) too; a policy's (`scenario` null) may
/// not set them: one cost model serves every policy, and it fixes how CP groups run attention and TP overlaps.
ParallelLayout parse_layout(JsonObjectReader r, const ModelConfig& model, const ClusterSpec& cluster,
                            Scenario* scenario) {
  ParallelLayout p;
  if (scenario) {
    scenario->cp_attention = parse_cp_attention(r);
    scenario->tp_overlap = parse_tp_overlap(r);
  } else {
    for (const char* key : {"cp_attention", "tp_overlap"})
      if (r.has(key))
        r.fail(key, std::string("is the scenario's (parallel.") + key + "): every policy shares one cost model");
  }
  p.cp = r.has("cp") ? int_in(r, "cp", 1, kMaxInt) : 1;
  p.tp = r.has("tp") ? int_in(r, "tp", 1, kMaxInt) : 1;
  p.pp = r.has("pp") ? int_in(r, "pp", 1, kMaxInt) : 1;
  // What every homogeneous plan needs, checked here so that the message names the key rather than surfacing as a
  // policy's invalid plan. Heads are not checked: the cost model splits them fractionally, and the shipped
  // Hydraulis scenarios run the 52-head LLaMA-32B at TP 8 as the paper does.
  if (const int domain = cluster.topology().domain_size(); domain % p.tp != 0)
    r.fail("tp", "a TP group must lie within one NVLink domain, but " + std::to_string(p.tp) + " does not divide its " +
                     std::to_string(domain) + " GPUs (cluster.gpus_per_node, or the " + "topology's domain_gpus)");
  if (model.layers % p.pp != 0)
    r.fail("pp", "every pipeline stage holds the same number of layers, but " + std::to_string(p.pp) +
                     " does not divide the " + std::to_string(model.layers) + " layers of " + model.name);
  p.virtual_pp = r.has("virtual_pp") ? int_in(r, "virtual_pp", 1, kMaxInt) : 1;
  if (p.virtual_pp > 1 && p.pp < 2)
    r.fail("virtual_pp", "interleaved 1F1B splits each pipeline stage into model chunks, so it needs pp >= 2 (pp is " +
                             std::to_string(p.pp) + ")");
  if ((model.layers / p.pp) % p.virtual_pp != 0)
    r.fail("virtual_pp", "every model chunk holds the same number of layers, but " + std::to_string(p.virtual_pp) +
                             " does not divide the " + std::to_string(model.layers / p.pp) + " layers of a stage (" +
                             std::to_string(model.layers) + " layers of " + model.name + " over pp " +
                             std::to_string(p.pp) + ")");
  const int world = cluster.world_size();
  const int per_replica = p.cp * p.tp * p.pp;
  if (r.has("dp")) {
    p.dp = int_in(r, "dp", 1, kMaxInt);
  } else {
    // dp fills the cluster when it is left out; it must do so exactly.
    if (world % per_replica != 0)
      r.fail("dp", "missing, and cp x tp x pp = " + std::to_string(per_replica) + " does not divide the cluster's " +
                       std::to_string(world) + " GPUs");
    p.dp = world / per_replica;
  }
  r.finish();
  if (static_cast<std::int64_t>(p.dp) * per_replica != world)
    r.fail_here("dp x cp x tp x pp = " + std::to_string(p.dp) + " x " + std::to_string(p.cp) + " x " +
                std::to_string(p.tp) + " x " + std::to_string(p.pp) + " = " +
                std::to_string(static_cast<std::int64_t>(p.dp) * per_replica) + " GPUs, but the cluster has " +
                std::to_string(cluster.nodes) + " x " + std::to_string(cluster.gpus_per_node) + " = " +
                std::to_string(world));
  return p;
}

std::vector<PolicySpec> parse_policies(JsonObjectReader& root, const std::string& file, const ModelConfig& model,
                                       const ClusterSpec& cluster) {
  const auto& list = root.value("policies");
  if (!list.is_array() || list.empty()) root.fail("policies", "expected a non-empty array of policy objects");
  const std::vector<std::string> kinds = policy_kinds();
  std::vector<PolicySpec> specs;
  std::set<std::string> labels;
  for (std::size_t i = 0; i < list.size(); ++i) {
    PolicySpec spec;
    spec.file = file;
    spec.path = "policies[" + std::to_string(i) + "]";
    JsonObjectReader item = root.child(list[i], spec.path);
    spec.kind = item.required<std::string>("kind");
    if (std::find(kinds.begin(), kinds.end(), spec.kind) == kinds.end())
      item.fail("kind", "unknown policy kind \"" + spec.kind + "\"" + did_you_mean(spec.kind, kinds) +
                            " (known: " + join(kinds) + ")");
    spec.label = item.optional<std::string>("label", spec.kind);
    if (spec.label.empty()) item.fail("label", "must not be empty");
    if (!labels.insert(spec.label).second)
      item.fail(item.has("label") ? "label" : "kind",
                "label \"" + spec.label + "\" is used by an earlier policy; give each policy a unique \"label\"");
    if (item.has("options")) {
      const auto& options = item.value("options");
      if (!options.is_object()) item.fail("options", "expected an object, got " + json_type_name(options));
      spec.options = options;
    }
    if (item.has("parallel")) {
      spec.layout = parse_layout(item.object("parallel"), model, cluster, nullptr);
    }
    item.finish();
    specs.push_back(std::move(spec));
  }
  return specs;
}

bool has_label(const std::vector<PolicySpec>& policies, const std::string& label) {
  return std::any_of(policies.begin(), policies.end(), [&](const PolicySpec& p) { return p.label == label; });
}

std::vector<std::string> labels_of(const std::vector<PolicySpec>& policies) {
  std::vector<std::string> labels;
  for (const auto& p : policies) labels.push_back(p.label);
  return labels;
}

std::vector<PaperFigure> parse_paper_figures(JsonObjectReader& root, const std::vector<PolicySpec>& policies) {
  std::vector<PaperFigure> figures;
  if (!root.has("paper_figures")) return figures;
  const auto& list = root.value("paper_figures");
  if (!list.is_array()) root.fail("paper_figures", "expected an array, got " + json_type_name(list));
  for (std::size_t i = 0; i < list.size(); ++i) {
    JsonObjectReader item = root.child(list[i], "paper_figures[" + std::to_string(i) + "]");
    PaperFigure figure;
    figure.policy = item.required<std::string>("policy");
    if (!has_label(policies, figure.policy))
      item.fail("policy", "no policy labelled \"" + figure.policy + "\" (labels: " + join(labels_of(policies)) + ")");
    figure.speedup = item.positive("speedup");
    figure.source = item.required<std::string>("source");
    item.finish();
    figures.push_back(std::move(figure));
  }
  return figures;
}

/// Sampling a distribution whose longest sequence exceeds the context would make every baseline fail on data the
/// scenario itself generated; the user must raise the context or pick other data.
void check_context(const Scenario& s, JsonObjectReader& root) {
  if (s.dataset.truncate_to_context) return;
  for (const auto& component : s.dataset.components) {
    const LengthDistribution& d = named_distribution(component.distribution);
    const Tokens longest = d.upper.empty() ? d.shortest : d.upper.back();
    if (longest > s.training.context_length)
      root.fail("training.context_length_tokens",
                std::to_string(s.training.context_length) + " tokens is shorter than the longest sequence (" +
                    std::to_string(longest) + " tokens) of distribution \"" + d.name +
                    "\"; raise the context length, choose another dataset or set dataset.truncate_to_context");
  }
}

}  // namespace

Scenario scenario_from_json(const nlohmann::json& document, const std::string& file) {
  JsonObjectReader root(document, file);
  Scenario s;
  s.file = file;
  s.name = root.required<std::string>("name");
  s.description = root.optional<std::string>("description", "");
  s.seed = static_cast<std::uint64_t>(
      root.has("seed") ? root.integer_in("seed", 0, std::numeric_limits<std::int64_t>::max()) : 0);
  s.model = parse_model(root);
  s.cluster = parse_cluster(root.object("cluster"));
  s.profile_path = resolve_scenario_path(file, root.required<std::string>("profile"));
  if (root.required<std::string>("profile").empty()) root.fail("profile", "is empty; give the path of a profile file");
  s.dataset = parse_dataset(root.object("dataset"), file);
  s.training = parse_training(root.object("training"), s.model);
  s.layout = parse_layout(
      root.has("parallel") ? root.object("parallel") : JsonObjectReader(nlohmann::json::object(), file, "parallel"),
      s.model, s.cluster, &s);
  s.policies = parse_policies(root, file, s.model, s.cluster);
  s.baseline = root.optional<std::string>("baseline", s.policies.front().label);
  if (!has_label(s.policies, s.baseline))
    root.fail("baseline", "no policy labelled \"" + s.baseline + "\" (labels: " + join(labels_of(s.policies)) + ")");
  s.paper_figures = parse_paper_figures(root, s.policies);
  if (root.has("tune")) {
    s.tune = tune_spec_from_json(root.value("tune"), file);
    for (const auto& [label, knobs] : s.tune.policies)
      if (!has_label(s.policies, label))
        root.fail("tune.policies." + label,
                  "no policy labelled \"" + label + "\" (labels: " + join(labels_of(s.policies)) + ")");
  }
  root.finish();
  check_context(s, root);
  check_run_size(s, "training.iterations");
  return s;
}

void check_run_size(const Scenario& s, const std::string& iterations_source) {
  const TrainingConfig& t = s.training;
  if (t.global_batch_sequences <= 0) return;  // a token budget: checked while the batches are cut
  const std::int64_t window = std::int64_t{t.iterations} * t.global_batch_sequences;
  if (window > kMaxWindowSequences)
    throw InputError(s.file + ": training.global_batch_sequences: " + std::to_string(t.global_batch_sequences) +
                     " sequences x " + std::to_string(t.iterations) + " iterations (" + iterations_source +
                     ") = " + std::to_string(window) + " sequences, more than the " +
                     std::to_string(kMaxWindowSequences) + " lcsim plans in one run (docs/robustness.md)");
}

CostModelOptions cost_model_options(const Scenario& s) {
  return CostModelOptions{.zero_stage = s.training.zero_stage,
                          .cp_attention = s.cp_attention,
                          .finetuning = s.training.finetuning,
                          .precision = s.training.precision,
                          .elementwise = s.training.elementwise,
                          .tp_overlap = s.tp_overlap,
                          .overlap_gradient_sync = s.training.overlap_gradient_sync};
}

std::string describe_layout(const ParallelLayout& l) {
  return "dp=" + std::to_string(l.dp) + " cp=" + std::to_string(l.cp) + " tp=" + std::to_string(l.tp) +
         " pp=" + std::to_string(l.pp) + (l.virtual_pp > 1 ? " vpp=" + std::to_string(l.virtual_pp) : "");
}

std::string own_layouts_line(const Scenario& scenario) {
  std::string own;
  for (const auto& p : scenario.policies)
    if (p.layout) own += (own.empty() ? "" : "; ") + p.label + " " + describe_layout(*p.layout);
  if (own.empty()) return own;
  return "own layouts: " + own + " (policies[].parallel; the others: parallel " + describe_layout(scenario.layout) +
         ")\n";
}

Scenario load_scenario(const std::string& file) {
  return scenario_from_json(parse_json_file(file), file);
}

}  // namespace lcsim
