#include "formats/scenario_loader.hpp"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <stdexcept>

#include "base/errors.hpp"
#include "base/json_reader.hpp"
#include "base/random.hpp"
#include "formats/length_trace.hpp"
#include "model/workload.hpp"

namespace lcsim {
namespace {

/// Sequences drawn per round when the batches are cut by a token budget (the count they need is not known).
constexpr std::size_t kChunkSequences = 4096;

std::string format_weight(double weight) {
  char text[32];
  std::snprintf(text, sizeof text, "%g", weight);
  return text;
}

std::string synthetic_label(const Scenario& s) {
  const auto& components = s.dataset.components;
  std::string what;
  if (components.size() == 1) {
    what = components.front().distribution;
  } else {
    what = "mix";
    for (std::size_t i = 0; i < components.size(); ++i)
      what +=
          std::string(i == 0 ? " " : " + ") + format_weight(components[i].weight) + " " + components[i].distribution;
  }
  return "synthetic " + what + " (sampled, seed " + std::to_string(s.seed) + ")";
}

std::string batch_shape(const TrainingConfig& t) {
  return t.global_batch_sequences > 0 ? std::to_string(t.global_batch_sequences) + " sequences"
                                      : std::to_string(t.tokens_per_iteration) + " tokens";
}

/// Token budgets: a window of more than kMaxWindowSequences sequences is refused, naming the budget.
/// `sequences` is the window's size, or 0 when the draw stopped as soon as it passed the limit.
[[noreturn]] void window_too_large(const Scenario& s, std::size_t sequences) {
  const std::string limit = std::to_string(kMaxWindowSequences);
  throw InputError(s.file + ": training.tokens_per_iteration: " + std::to_string(s.training.iterations) +
                   " iterations of " + std::to_string(s.training.tokens_per_iteration) + " tokens take " +
                   (sequences == 0 ? "more than " + limit + " sequences, the most"
                                   : std::to_string(sequences) + " sequences, more than the " + limit) +
                   " lcsim plans in one run (docs/robustness.md)");
}

std::size_t window_sequences(const std::vector<GlobalBatch>& batches) {
  std::size_t n = 0;
  for (const auto& batch : batches) n += batch.size();
  return n;
}

/// dataset.truncate_to_context: a data loader cuts a document to the window as it reads it, before any batch is
/// formed, so a token budget counts the tokens that train (a 200K document is 32K of a 32K-window batch, not 200K).
class Truncation {
 public:
  explicit Truncation(const Scenario& s) : limit_(s.dataset.truncate_to_context ? s.training.context_length : 0) {}

  /// A length as the loader reads it.
  Tokens cut(Tokens tokens) const { return limit_ > 0 ? std::min(tokens, limit_) : tokens; }
  /// Cuts sequences[first...] to the window, remembering which positions were cut.
  void apply(std::vector<Sequence>& sequences, std::size_t first) {
    for (std::size_t i = first; i < sequences.size(); ++i)
      if (cut(sequences[i].tokens) < sequences[i].tokens) {
        sequences[i].tokens = limit_;
        cut_.push_back(i);
      }
  }
  /// Sequences cut among the first `prefix` (the window the batches kept).
  std::size_t cut_within(std::size_t prefix) const {
    return static_cast<std::size_t>(std::count_if(cut_.begin(), cut_.end(), [&](std::size_t i) { return i < prefix; }));
  }

 private:
  Tokens limit_;
  std::vector<std::size_t> cut_;
};

std::vector<MixComponent> mixture(const Scenario& s) {
  std::vector<MixComponent> mix;
  for (const auto& c : s.dataset.components) mix.push_back({&named_distribution(c.distribution), c.weight});
  return mix;
}

std::vector<GlobalBatch> sample_batches(const Scenario& s, std::uint64_t data_seed, Truncation& truncation) {
  const std::vector<MixComponent> mix = mixture(s);
  const std::string name = s.dataset.components.size() == 1 ? s.dataset.components.front().distribution : "mix";
  const TrainingConfig& t = s.training;
  const auto iterations = static_cast<std::size_t>(t.iterations);

  if (t.global_batch_sequences > 0) {
    const std::size_t count = iterations * static_cast<std::size_t>(t.global_batch_sequences);
    std::vector<Sequence> sequences = sample_dataset(name, mix, count, data_seed).sequences();
    truncation.apply(sequences, 0);
    std::vector<GlobalBatch> batches = cut_global_batches(sequences, t, false);
    if (batches.size() != iterations)
      throw std::logic_error("cut_global_batches made " + std::to_string(batches.size()) + " batches of " +
                             std::to_string(count) + " sequences; expected " + std::to_string(iterations));
    return batches;
  }

  // Token budget: draw chunks until the cut holds one batch more than needed, so that every batch kept is closed
  // by the sequence that did not fit. Chunk k has its own seed, so more iterations extend the same data. The
  // batches are counted as the chunks arrive (cut_global_batches' rule), so the draw stays linear in the data.
  std::vector<Sequence> sequences;
  std::size_t closed = 0;  // batches closed by a sequence that did not fit
  Tokens held = 0;         // tokens of the open batch
  const auto batches_so_far = [&] { return closed + (held >= t.tokens_per_iteration ? 1 : 0); };
  for (std::uint64_t chunk = 0; batches_so_far() <= iterations; ++chunk) {
    // Every sequence drawn so far lies in the first `iterations` batches while fewer are closed.
    if (closed < iterations && sequences.size() > static_cast<std::size_t>(kMaxWindowSequences)) window_too_large(s, 0);
    const std::uint64_t seed = chunk == 0 ? data_seed : Rng(data_seed).split(chunk).next();
    const Dataset part = sample_dataset(name, mix, kChunkSequences, seed, static_cast<std::int64_t>(sequences.size()));
    const std::size_t first = sequences.size();
    sequences.insert(sequences.end(), part.sequences().begin(), part.sequences().end());
    truncation.apply(sequences, first);
    for (std::size_t i = first; i < sequences.size(); ++i) {
      if (i > 0 && held + sequences[i].tokens > t.tokens_per_iteration) {
        ++closed;
        held = 0;
      }
      held += sequences[i].tokens;
    }
  }
  std::vector<GlobalBatch> batches = cut_global_batches(sequences, t, false);
  batches.resize(iterations);
  if (window_sequences(batches) > static_cast<std::size_t>(kMaxWindowSequences))
    window_too_large(s, window_sequences(batches));
  return batches;
}

/// `whole`, when given, receives every length of the trace as read (the whole dataset, loaded once for both).
std::vector<GlobalBatch> trace_batches(const Scenario& s, std::optional<std::uint64_t> bootstrap_seed,
                                       Truncation& truncation, std::vector<Tokens>* whole) {
  const Dataset data = load_length_trace(s.dataset.trace_path);
  std::vector<Sequence> sequences = data.sequences();
  if (whole)
    for (const auto& seq : sequences) whole->push_back(seq.tokens);
  if (bootstrap_seed) {
    // As many sequences drawn with replacement, numbered anew: a plan must hold every id exactly once.
    Rng rng(*bootstrap_seed);
    std::vector<Sequence> drawn(sequences.size());
    for (std::size_t i = 0; i < drawn.size(); ++i) {
      drawn[i] = sequences[rng.below(sequences.size())];
      drawn[i].id = static_cast<std::int64_t>(i);
    }
    sequences = std::move(drawn);
  }
  if (s.dataset.shuffle) {
    Rng rng(s.seed);
    rng.shuffle(sequences);
  }
  truncation.apply(sequences, 0);
  std::vector<GlobalBatch> batches = cut_global_batches(sequences, s.training, false);
  const auto iterations = static_cast<std::size_t>(s.training.iterations);
  if (batches.size() < iterations)
    throw InputError(s.dataset.trace_path + ": holds " + std::to_string(data.size()) + " sequences (" +
                     std::to_string(data.total_tokens()) + " tokens), enough for " + std::to_string(batches.size()) +
                     " full global batches of " + batch_shape(s.training) + ", but " + s.file + " asks for " +
                     std::to_string(iterations) + " iterations (training.iterations, or --iterations)");
  batches.resize(iterations);
  if (s.training.tokens_per_iteration > 0 && window_sequences(batches) > static_cast<std::size_t>(kMaxWindowSequences))
    window_too_large(s, window_sequences(batches));
  return batches;
}

/// The scenario's profile; a file that cannot be read is named by the key that gave it, as written and as resolved.
Profile load_scenario_profile(const Scenario& s, const nlohmann::json& document) {
  std::error_code error;
  const auto status = std::filesystem::status(s.profile_path, error);
  if (status.type() == std::filesystem::file_type::not_found || error) {
    const auto written = document.find("profile");
    const std::string as_written = written != document.end() && written->is_string() ? written->get<std::string>() : "";
    const std::string resolved = std::filesystem::absolute(s.profile_path, error).lexically_normal().string();
    // Named by the resolved path first, as every unreadable file is: the same message wherever the scenario is.
    throw InputError((resolved.empty() ? s.profile_path : resolved) +
                     ": cannot open file (no such file); it is the scenario's \"profile\": \"" + as_written +
                     "\", resolved against the scenario's folder; the shipped profiles are in calibrate/profiles/ "
                     "(e.g. h100-sxm-default.json)");
  }
  return load_profile(s.profile_path);
}

}  // namespace

PlanningContext LoadedScenario::planning_context(const PolicySpec* policy) const {
  PlanningContext context;
  context.cost = cost.get();
  context.training = scenario.training;
  context.layout = policy && policy->layout ? *policy->layout : scenario.layout;
  context.seed = scenario.seed;
  context.dataset_lengths = dataset_lengths;
  if (nominal_world) context.nominal = PlanningContext::Nominal{nominal_world->cost.get(), nominal_world->batches};
  return context;
}

namespace {

/// Lengths a named distribution is represented by for a policy that plans from the whole dataset: a share of
/// 1e-5 still holds a length.
constexpr std::size_t kDistributionLengths = std::size_t{1} << 17;

/// Ring and zigzag attention time their transfers with the profile's send_recv fits, all-gather CP with its
/// all_gather and reduce_scatter fits: on NVLink, and on InfiniBand when a CP group can span nodes. Refused here,
/// naming both files, rather than at the first sharded micro-batch.
void check_cp_fits(const Profile& profile, const Scenario& scenario, const std::string& file) {
  std::vector<CollectiveOp> ops{CollectiveOp::SendRecv};
  if (scenario.cp_attention == CpAttention::AllGather) ops = {CollectiveOp::AllGather, CollectiveOp::ReduceScatter};
  std::vector<LinkClass> links{LinkClass::NvLink};
  if (scenario.cluster.nodes > 1) links.push_back(LinkClass::InfiniBand);
  for (CollectiveOp op : ops)
    for (LinkClass link : links) {
      const bool found = std::any_of(profile.collectives.begin(), profile.collectives.end(),
                                     [&](const CollectiveFit& f) { return f.op == op && f.link == link; });
      if (!found)
        throw InputError(file + ": parallel.cp_attention: \"" + std::string(to_string(scenario.cp_attention)) +
                         "\" needs a " + std::string(to_string(op)) + " fit on " + std::string(to_string(link)) +
                         ", which the profile " + scenario.profile_path + " lacks");
    }
}

/// prepare_batches, and when `whole` is given the whole dataset's lengths (LoadedScenario::dataset_lengths): every
/// length of the trace, or the named distribution without sampling noise, cut to the window as the batches are.
std::vector<GlobalBatch> prepare_window(const Scenario& scenario, std::string& dataset_label,
                                        std::optional<std::uint64_t> world_data_seed, std::vector<Tokens>* whole) {
  std::vector<GlobalBatch> batches;
  Truncation truncation(scenario);
  if (!scenario.dataset.trace_path.empty()) {
    dataset_label =
        "trace " + scenario.dataset.trace_path +
        (scenario.dataset.shuffle ? " (shuffled, seed " + std::to_string(scenario.seed) + ")" : " (file order)");
    batches = trace_batches(scenario, world_data_seed, truncation, whole);
  } else {
    dataset_label = synthetic_label(scenario);
    batches = sample_batches(scenario, world_data_seed.value_or(scenario.seed), truncation);
    if (whole) *whole = distribution_lengths(mixture(scenario), kDistributionLengths);
  }
  if (whole)
    for (auto& t : *whole) t = truncation.cut(t);
  if (scenario.dataset.truncate_to_context)
    dataset_label += ", " + std::to_string(truncation.cut_within(window_sequences(batches))) +
                     " sequences truncated to the context length of " +
                     std::to_string(scenario.training.context_length) + " tokens";
  return batches;
}

}  // namespace

std::vector<GlobalBatch> prepare_batches(const Scenario& scenario, std::string& dataset_label,
                                         std::optional<std::uint64_t> world_data_seed) {
  return prepare_window(scenario, dataset_label, world_data_seed, nullptr);
}

std::vector<std::string> scenario_input_files(const LoadedScenario& loaded) {
  std::vector<std::string> inputs{loaded.scenario.file, loaded.scenario.profile_path};
  if (!loaded.scenario.dataset.trace_path.empty()) inputs.push_back(loaded.scenario.dataset.trace_path);
  return inputs;
}

LoadedScenario load_and_prepare(const std::string& file, std::optional<int> iterations_override) {
  return load_and_prepare(parse_json_file(file), file, iterations_override);
}

LoadedScenario load_and_prepare(const nlohmann::json& document, const std::string& file,
                                std::optional<int> iterations_override) {
  LoadedScenario loaded;
  loaded.scenario = scenario_from_json(document, file);
  Scenario& s = loaded.scenario;
  if (iterations_override) {
    if (*iterations_override < 1 || *iterations_override > kMaxIterations)
      throw InputError("--iterations: must be in [1, " + std::to_string(kMaxIterations) + "], got " +
                       std::to_string(*iterations_override) + " (docs/robustness.md)");
    s.training.iterations = *iterations_override;
    check_run_size(s, "--iterations");
  }
  // Build every policy once, so that bad options are reported now, even for policies --policy leaves out.
  bool plans_from_dataset = false;
  for (const auto& spec : s.policies) {
    (void)make_policy(spec);
    plans_from_dataset = plans_from_dataset || lcsim::plans_from_dataset(spec);
    if (!spec.layout) continue;
    const std::string where = file + ": " + spec.path + ".parallel: ";
    if (!policy_descriptor(spec).plans_under_layout)
      throw InputError(where + spec.kind + " chooses its own parallel strategies, so a layout would not be used");
    if (const std::string refusal = layout_refusal(spec, *spec.layout); !refusal.empty())
      throw InputError(where + refusal);
  }
  loaded.profile =
      with_attention(load_scenario_profile(s, document), s.training.attention, file + ": training.attention");
  if (loaded.profile.gpu != s.cluster.gpu.name)
    throw InputError(s.profile_path + ": profile is for GPU \"" + loaded.profile.gpu + "\", but " + file +
                     ": cluster.gpu is \"" + s.cluster.gpu.name + "\"");
  if (s.layout.gpus() != s.cluster.world_size())
    throw InputError(file + ": parallel: layout has " + std::to_string(s.layout.gpus()) + " GPUs, the cluster " +
                     std::to_string(s.cluster.world_size()));
  if (shards_tokens(s.cp_attention)) check_cp_fits(loaded.profile, s, file);
  loaded.cost = std::make_unique<CostModel>(s.model, s.cluster, loaded.profile, cost_model_options(s));
  std::vector<Tokens> whole;
  loaded.batches = prepare_window(s, loaded.dataset_label, std::nullopt, plans_from_dataset ? &whole : nullptr);
  if (plans_from_dataset) loaded.dataset_lengths = std::make_shared<const std::vector<Tokens>>(std::move(whole));
  return loaded;
}

}  // namespace lcsim
