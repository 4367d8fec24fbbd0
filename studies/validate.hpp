#pragma once
// `lcsim validate` as a function: every entry of a catalogue of published and measured figures, predicted by
// plan or simulate runs through a Runner (one run per distinct scenario and mode) or by the cost model directly,
// compared with its figure, and given an 80% interval from the runs' sampled worlds.
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "studies/runner.hpp"
#include "studies/validation_catalogue.hpp"
#include "studies/validation_intervals.hpp"

namespace lcsim {

struct ValidateSettings {
  std::string catalogue_file;              ///< empty: the shipped catalogue of the source tree
  std::vector<std::string> profile_files;  ///< one per GPU kind: replaces the scenarios' own profile
  std::vector<std::string> only;           ///< entry ids; empty: every entry
  int samples = 8;                         ///< sampled worlds per run; 1: no intervals
  int jobs = 1;                            ///< runs at once
};

/// A distinct run: one scenario document in one mode, with the policy labels the entries read from it.
struct ValidationRun {
  RunMode mode = RunMode::Plan;
  nlohmann::json scenario;
  std::vector<std::string> labels;
  std::string where;      ///< the first entry that needs it, for messages
  bool measured = false;  ///< a measured run's: its worlds keep its data, which the run measured
  int gpus = 0;           ///< the scenario's cluster GPUs
};

/// What validate will run, known before anything runs (a command checks its outputs against these inputs).
struct ValidationPlan {
  std::shared_ptr<const ValidationCatalogue> catalogue;
  std::string catalogue_file;
  bool shipped_catalogue = false;
  std::map<std::string, std::string> profiles;  ///< GPU kind -> profile file (absolute)
  std::vector<const ValidationEntry*> entries;  ///< those validated, in catalogue order
  std::vector<ValidationRun> runs;
  /// The run of each point of each entry that needs one.
  std::map<std::pair<const ValidationEntry*, std::size_t>, std::size_t> run_of_point;
  int samples = 8;
  int jobs = 1;
};

struct ValidationReport {
  std::vector<EntryOutcome> outcomes;
  ValidationSummary summary;
  std::vector<EntryInterval> intervals;
  IntervalSummary interval_summary;
  std::vector<RunOutcome> run_outcomes;  ///< parallel to ValidationPlan::runs
  std::set<std::string> profile_labels;  ///< the profiles the runs used, as their results label them
};

/// The shipped catalogue, in the source tree lcsim was built from.
std::string shipped_catalogue_file();

/// Loads the catalogue and the profiles, selects the entries and gathers their distinct runs. InputError for a
/// bad catalogue, profile or entry (named before anything runs).
ValidationPlan plan_validation(const ValidateSettings& settings);
/// Every file the plan reads (catalogue, profiles, scenarios, traces, measured files): no output may replace one.
std::vector<std::string> validation_inputs(const ValidationPlan& plan);
/// Runs the plan's runs and judges every entry. Throws Interrupted when interrupted; a failed run fails its entries.
ValidationReport run_validation(const ValidationPlan& plan, Runner& runner, const RunsProgress& progress);
/// The file of run i in a work folder ("run-0042" + suffix).
std::string validation_run_name(std::size_t i, const char* suffix);
/// Throws PlanningError when a measured entry predicts other plans than ran, or when runs failed.
void check_validation_report(const ValidationPlan& plan, const ValidationReport& report);

/// The lcsim-validation/4 document: every entry, its points, the summary and the intervals.
nlohmann::ordered_json validation_report_to_json(const ValidationPlan& plan, const ValidationReport& report);
/// The lcsim-model-form/1 document of the report's whole-catalogue sigmas.
nlohmann::ordered_json validation_model_form_to_json(const ValidationPlan& plan, const ValidationReport& report);

}  // namespace lcsim
