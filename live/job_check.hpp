#pragma once
// `lcsim-gpu check-jobs` (host-only, no GPU): every micro-batch a GPU run measured -- the "jobs" of an
// `lcsim-gpu live --json` file, the points of an `lcsim-gpu bench-mix --json` file -- re-predicted by today's cost
// model and compared with its measured time, by kind of micro-batch. Beside today's error it prints the error the
// file recorded (the model of the day of the run), so a model change is judged per micro-batch shape on real
// hardware without a GPU (docs/validation.md, "Measured runs").
//
//   lcsim-gpu check-jobs SCENARIO FILE... [--per-job]
//   lcsim-gpu check-jobs --catalogue CATALOGUE [--per-job]   (every measured run, each with its own scenario)
#include <ostream>
#include <span>
#include <string>
#include <vector>

#include "formats/scenario_loader.hpp"

namespace lcsim {

/// One measured micro-batch.
struct MeasuredMicroBatch {
  std::string file;
  std::vector<int> local;    ///< whole sequences: tokens
  std::vector<int> sharded;  ///< Ulysses-sharded sequences: full lengths
  int cp = 1;
  int shard_heads = 0;  ///< a live job's TP shard's heads (tp = model heads / these); 0: the whole model (tp 1)
  int tp = 1;           ///< check_jobs fills it
  int layers = 0;
  int checkpointed_layers = 0;
  Recompute recompute = Recompute::Selective;
  bool lm_head = false;
  int steps = 1;                   ///< how many steps of the run's iterations ran it (bench-mix points: 1)
  double measured_s = 0;           ///< forward + backward, median
  double measured_forward_s = 0;   ///< the forward alone, median (0: the file has none)
  double recorded_s = 0;           ///< the prediction the file recorded
  double predicted_s = 0;          ///< today's cost model (check_jobs fills it)
  double predicted_forward_s = 0;  ///< its forward part (check_jobs fills it)
  std::string kind() const;        ///< "whole", "sharded <bucket>", "whole + sharded"
};

/// Reads the measured micro-batches of a live or bench-mix results file (by its schema). InputError naming the file
/// and the JSON path for anything else, a job without a measured time being skipped (out of memory, memory probe).
std::vector<MeasuredMicroBatch> read_measured_micro_batches(const std::string& file);

struct JobCheckRow {
  std::string kind;
  int jobs = 0;
  int steps = 0;
  double recorded_mape = 0, recorded_bias = 0;  ///< bias: steps-weighted sum predicted / sum measured - 1
  double mape = 0, bias = 0;
};

/// Fills predicted_s with the loaded scenario's cost model (model and profile; each job's own cp, tp, layers,
/// recomputation and LM head). InputError for a job the model cannot shape (its heads do not divide the scenario
/// model's).
void predict_jobs(const LoadedScenario& loaded, std::span<MeasuredMicroBatch> jobs);

/// The jobs' errors by kind of micro-batch, then over all ("all", last).
std::vector<JobCheckRow> summarize_jobs(std::span<const MeasuredMicroBatch> jobs);

/// predict_jobs, then summarize_jobs.
std::vector<JobCheckRow> check_jobs(const LoadedScenario& loaded, std::vector<MeasuredMicroBatch>& jobs);

/// One measured run of a validation catalogue, its jobs predicted with its own scenario.
struct MeasuredRunJobs {
  std::string file;
  std::string model;
  std::vector<MeasuredMicroBatch> jobs;
};

/// Every measured file of the catalogue's `measured` entries, in catalogue order, each once, its jobs predicted with
/// the scenario of its first entry. Files without per-job times (the first H200 runs, a PyTorch job) go to `skipped`.
std::vector<MeasuredRunJobs> catalogue_measured_jobs(const std::string& catalogue_file,
                                                     std::vector<std::string>* skipped = nullptr);

void run_check_jobs_command(const std::vector<std::string>& args, std::ostream& out);
const char* check_jobs_usage();

}  // namespace lcsim
