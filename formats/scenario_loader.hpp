#pragma once
// A scenario made ready to evaluate: its profile and cost model, and the data window cut into the global batches
// every policy of the scenario plans.
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "formats/scenario.hpp"
#include "model/cost_model.hpp"
#include "model/profile.hpp"
#include "policies/core/policy.hpp"

namespace lcsim {

struct LoadedScenario {
  Scenario scenario;
  Profile profile;
  std::unique_ptr<CostModel> cost;
  /// Exactly `scenario.training.iterations` full global batches, in epoch order.
  std::vector<GlobalBatch> batches;
  /// "synthetic <name> (sampled, seed N)" or "trace <file> (...)": says where the lengths come from.
  std::string dataset_label;
  /// The dataset's lengths (PlanningContext::dataset_lengths) when a policy of the scenario plans from them.
  std::shared_ptr<const std::vector<Tokens>> dataset_lengths;
  /// A sampled world's nominal world (load_world sets it, and the nominal world must outlive this one); null in the
  /// nominal world. Its cost model and batches reach the policies as PlanningContext::nominal.
  const LoadedScenario* nominal_world = nullptr;

  /// What `policy` plans under: the cost model, training, seed, and the policy's own layout when its entry sets
  /// "parallel", else the scenario's.
  PlanningContext planning_context(const PolicySpec* policy = nullptr) const;
};

/// Loads the scenario and its profile, builds the cost model and the data window. `iterations_override` replaces
/// training.iterations (the command line's --iterations). Throws InputError for bad files, bad policy options (every
/// policy is built once to check them), a profile for another GPU than the cluster's, or a trace too short for the
/// requested iterations.
LoadedScenario load_and_prepare(const std::string& file, std::optional<int> iterations_override = std::nullopt);
/// The same from a scenario document already read (`file` names it in messages and anchors its relative paths).
LoadedScenario load_and_prepare(const nlohmann::json& document, const std::string& file,
                                std::optional<int> iterations_override = std::nullopt);

/// The files a loaded scenario was read from (the scenario, its profile, its trace): no output may replace them.
std::vector<std::string> scenario_input_files(const LoadedScenario& loaded);

/// The data window of a loaded scenario (already applied by load_and_prepare); exposed for tests.
/// `world_data_seed` draws another data set of the same kind (a sampled world, studies/sampled_worlds.hpp): a named
/// distribution sampled with that seed, or a bootstrap resample of the trace's sequences (same count).
std::vector<GlobalBatch> prepare_batches(const Scenario& scenario, std::string& dataset_label,
                                         std::optional<std::uint64_t> world_data_seed = std::nullopt);

}  // namespace lcsim
