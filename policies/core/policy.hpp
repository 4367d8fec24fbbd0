#pragma once
// The policy interface: lcsim's public contract for schedulers, built-in or a user's own. A policy turns the
// scenario's data into IterationPlans and knows nothing of SimGrid, CUDA or how plans are executed; the same plans
// are estimated (`lcsim plan`), simulated (`lcsim simulate`) and replayed on GPUs (`lcsim-gpu live`). A guide and a
// worked example, built out of tree: docs/custom-policy.md, examples/custom-policy/.
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/json_reader.hpp"
#include "model/cost_model.hpp"
#include "model/plan.hpp"
#include "model/training.hpp"
#include "model/workload.hpp"

namespace lcsim {

struct PlanningContext {
  const CostModel* cost = nullptr;
  TrainingConfig training;
  ParallelLayout layout;
  std::uint64_t seed = 0;
  /// The lengths of the dataset the window is drawn from (a named distribution without sampling noise, or every
  /// length of a trace; truncated as the window is), for a policy that plans from the whole dataset's distribution
  /// (its descriptor's plans_from_dataset). Null for the others, and when a caller has only the window.
  std::shared_ptr<const std::vector<Tokens>> dataset_lengths;

  /// What the nominal world plans from (its cost model and data window), seen from a sampled world
  /// (studies/sampled_worlds.hpp); empty in the nominal world. A sampled world is hardware and data that differ
  /// from what the user profiled, and a deployed planner never sees it: what a policy settles offline, once, before
  /// training -- Hydraulis' strategy proposal -- it settles from the nominal profile and data, while the plans of
  /// the world are still made from `cost` and the world's batches (docs/uncertainty.md). The pointers stay valid
  /// during plan().
  struct Nominal {
    const CostModel* cost = nullptr;
    std::span<const GlobalBatch> batches;
  };
  std::optional<Nominal> nominal;
};

/// A setting `lcsim tune` may vary for a policy: a path in the scenario ("options.X" in the policy's options,
/// "training.X") and the values to try (null: the policy's own default).
struct TuneKnobSpec {
  std::string path;
  std::vector<nlohmann::json> values;
};

/// What a policy's knobs may depend on.
struct TuneKnobContext {
  Tokens context_length = 0;
  std::optional<Tokens> bucket_size_tokens;  ///< the scenario's, when it sets one
};

/// Token budgets a policy's tuning tries: its own default (null), then a quarter, half and all of the context.
std::vector<nlohmann::json> context_budgets(Tokens context_length);

class Policy {
 public:
  virtual ~Policy() = default;
  /// The registry name ("skrull", "deepspeed", ...).
  virtual std::string kind() const = 0;
  /// Plans the iterations that process exactly the sequences of `batches` (the scenario's data window in epoch
  /// order, cut into global batches). Policies that keep the global batch return one plan per batch, built
  /// from that batch only; policies that re-batch (sorting, packing) may use the whole window and return a
  /// different number of plans. Throws PlanningError when it cannot plan.
  virtual std::vector<IterationPlan> plan(const PlanningContext& context, std::span<const GlobalBatch> batches) = 0;
  /// Whether plan i holds exactly the sequences of batches[i] (the validator checks against that batch), or
  /// the plans together hold the window.
  virtual bool keeps_global_batches() const { return true; }
};

/// A policy as the scenario names it: `kind` from the registry, a `label` unique within the scenario (defaults
/// to kind), its options object, its own layout when the entry sets "parallel" (each paper tunes its own), and
/// `where` ("file: policies[2]") for messages.
struct PolicySpec {
  std::string kind;
  std::string label;
  nlohmann::json options = nlohmann::json::object();
  std::string file;
  std::string path;                                     ///< JSON path of the entry, e.g. "policies[2]"
  std::optional<ParallelLayout> layout = std::nullopt;  ///< policies[i].parallel; none: the scenario's parallel
};

/// The layout's scheme: tp, pp, cp of the layout, the training's recomputation (what a policy that keeps the
/// scenario's layout gives every replica). PlanningError for a degree below 1.
ParallelScheme layout_scheme(const PlanningContext& context);

/// A strict reader over spec.options for a policy's factory: messages name spec.file and "<spec.path>.options";
/// call finish() after reading every option so unknown keys are errors. The reader refers to spec.options.
JsonObjectReader policy_options(const PolicySpec& spec);
/// Option `key` as "none" | "selective" | "full", if present (Hydraulis and the static-packing baselines).
std::optional<Recompute> read_recompute(JsonObjectReader& reader, std::string_view key);

/// Builds a policy from its scenario entry: reads spec.options with policy_options(spec) (then finish()), throws
/// InputError for bad options.
using PolicyFactory = std::function<std::unique_ptr<Policy>(const PolicySpec& spec)>;

/// What the runners need to know of a policy kind besides planning, registered with the kind: the tuner reads its
/// knobs and the layouts it takes, the loader whether it plans from the whole dataset, the Runner whether it needs
/// a process of its own. A function reads the policy's scenario entry (its options); an empty one gives the
/// default (no knobs, every layout, the window only, any thread).
struct PolicyDescriptor {
  PolicyFactory make;
  /// false: the policy chooses its own parallel strategies and reads only the GPU count (`lcsim tune` does not
  /// search layouts for it, and a policy entry may not set "parallel").
  bool plans_under_layout = true;
  /// Why plan() would refuse `layout` (empty: it takes it), so a search can skip it without planning.
  std::function<std::string(const PolicySpec&, const ParallelLayout&)> layout_refusal;
  /// Whether plan() reads PlanningContext::dataset_lengths (Hydraulis' strategy proposal, Sec. 7), so the loader
  /// prepares them.
  std::function<bool(const PolicySpec&)> plans_from_dataset;
  /// Whether plan() must run in a process of its own: it reads or changes process-wide state (a solver with global
  /// state, a CPU-time limit, which counts every thread of the process), so it is never planned on a thread of a
  /// busy process.
  std::function<bool(const PolicySpec&)> needs_own_process;
  /// The settings `lcsim tune` searches for this policy besides the parallel layout.
  std::function<std::vector<TuneKnobSpec>(const PolicySpec&, const TuneKnobContext&)> tune_knobs;
};

/// Builds the policy; unknown kinds and bad options are InputError naming file and path.
std::unique_ptr<Policy> make_policy(const PolicySpec& spec);
/// The built-in kinds, then the registered ones, in registration order.
std::vector<std::string> policy_kinds();

/// Makes `kind` available to scenarios ("kind": "<kind>" in their policies). Call it before running a command
/// (typically first thing in main(), then cli's run_main). Throws std::invalid_argument for an empty kind, no
/// factory, or a kind that is already taken. Not thread-safe: register before planning starts.
void register_policy(const std::string& kind, PolicyDescriptor descriptor);
/// The same with the default descriptor: a policy that plans under the scenario's layout, from the window, on any
/// thread, with no knobs of its own.
void register_policy(const std::string& kind, PolicyFactory factory);

/// The descriptor registered with spec.kind; InputError naming spec's file and path for an unknown kind.
const PolicyDescriptor& policy_descriptor(const PolicySpec& spec);
/// The descriptor's answers for the policy `spec` names (its defaults where it has no function).
std::string layout_refusal(const PolicySpec& spec, const ParallelLayout& layout);
bool plans_from_dataset(const PolicySpec& spec);
bool needs_own_process(const PolicySpec& spec);
std::vector<TuneKnobSpec> tune_knobs(const PolicySpec& spec, const TuneKnobContext& context);

}  // namespace lcsim
