#pragma once
// Scenario JSON: everything one comparison needs (format documented in scenarios/README.md). Parsing is strict:
// unknown keys, wrong types and missing fields are InputError naming the file and JSON path.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "formats/tune_spec.hpp"
#include "model/cluster.hpp"
#include "model/model.hpp"
#include "policies/core/policy.hpp"

namespace lcsim {

struct DatasetSpec {
  struct Component {
    std::string distribution;
    double weight = 1.0;
  };
  std::vector<Component> components;  ///< named distributions (one, or a weighted mix)
  std::string trace_path;             ///< or a length trace file (resolved against the scenario's folder)
  bool shuffle = true;                ///< trace datasets: seeded shuffle into epoch order
  /// Sequences longer than training.context_length_tokens are cut to it (as an SFT data loader does); the
  /// dataset label reports how many. Off by default: a distribution longer than the context is an error.
  bool truncate_to_context = false;
};

/// A figure the paper reports for this setting, drawn beside the simulated one by the plots.
struct PaperFigure {
  std::string policy;  ///< label of a policy of this scenario
  double speedup = 0;  ///< vs the scenario's baseline
  std::string source;  ///< e.g. "Skrull Fig. 3"
};

struct Scenario {
  std::string file;  ///< the scenario file, for messages
  std::string name;
  std::string description;
  std::uint64_t seed = 0;
  ModelConfig model;
  ClusterSpec cluster;
  std::string profile_path;  ///< resolved against the scenario's folder
  DatasetSpec dataset;
  TrainingConfig training;
  ParallelLayout layout;
  CpAttention cp_attention = CpAttention::Ulysses;  ///< parallel.cp_attention: how CP groups run attention
  TpOverlap tp_overlap = TpOverlap::None;           ///< parallel.tp_overlap: whether TP collectives overlap GEMMs
  std::vector<PolicySpec> policies;
  std::string baseline;  ///< label of one of `policies`
  std::vector<PaperFigure> paper_figures;
  TuneSpec tune;  ///< what `lcsim tune` may change (formats/tune_spec.hpp); plan and simulate run the scenario as set
};

/// Limits on the size of one run (docs/robustness.md). Every policy's plans for the whole data window are held
/// in memory (about 300 bytes per sequence over six policies), so a larger run is refused up front, naming the key
/// or option, rather than running for hours and dying of bad_alloc.
inline constexpr int kMaxIterations = 10000;
inline constexpr std::int64_t kMaxWindowSequences = 2000000;

/// InputError naming the file and training.global_batch_sequences when iterations x global_batch_sequences
/// exceeds kMaxWindowSequences; `iterations_source` says where the iteration count came from.
void check_run_size(const Scenario& s, const std::string& iterations_source);

Scenario load_scenario(const std::string& file);
/// Paths in a scenario are relative to the scenario's folder, so a scenario can be run from anywhere.
std::string resolve_scenario_path(const std::string& scenario_file, const std::string& relative);
Scenario scenario_from_json(const nlohmann::json& document, const std::string& file);
/// The cost model's options as the scenario sets them (training and parallel keys).
CostModelOptions cost_model_options(const Scenario& s);
/// "dp=4 cp=8 tp=1 pp=1": a layout as tables print it.
std::string describe_layout(const ParallelLayout& layout);
/// "own layouts: skrull dp=1 cp=32 tp=1 pp=1; ... (policies[].parallel; the others: parallel dp=4 ...)" and a
/// newline when some policy has its own layout, "" otherwise: the tables print it, since the layout is not a column.
std::string own_layouts_line(const Scenario& scenario);

}  // namespace lcsim
