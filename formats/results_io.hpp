#pragma once
// Results files and the comparison table.
//
// Results JSON, schema "lcsim-results/2" (keys always in this order; numbers rounded to 9 significant digits, so
// identical runs give byte-identical files; wall times such as planning time are never written):
//   { "schema": "lcsim-results/2",
//     "mode": "plan" | "simulate" | "live",
//     "scenario": name, "scenario_file": path as given, "seed": integer,
//     "profile": { "label": string, "calibrated": bool },
//     "dataset": string (says "synthetic" for sampled distributions),
//     "baseline": policy label,
//     "speedup_reference": policy label -- only when the baseline runs out of GPU memory in some iteration: the
//                          fastest policy that fits, which every speedup of the file is over instead,
//     "paper_figures": [{"policy", "speedup", "source"}] -- the scenario's declared paper figures, for plots,
//     "policies": [ { "name": label, "kind": registry name,
//                     "mean_iteration_s", "p50_iteration_s", "p99_iteration_s", "total_s": seconds,
//                     "tokens": integer, "tokens_per_s", "speedup_vs_baseline": tokens/s over the baseline's,
//                     "oom_iterations": integer,
//                     "metrics": { "dbr", "pr", "abr", "abr_work", "cr", "max_min_time_ratio", "pipeline_gap" }
//                                  (mean over iterations; abr_work: ABR over the run, sum of idle over sum of
//                                  capacity; pipeline_gap: model/metrics.hpp),
//                     "iterations": [ { "index", "label", "seconds", "tokens", "sequences", "oom": bool,
//                                       "peak_GiB": largest per-GPU peak (GiB = 2^30 bytes),
//                                       "metrics": {...}, "busy_s": [ per GPU seconds ] } ],
//                     "interval": { "samples": worlds (world 0 is the run above; docs/uncertainty.md),
//                                   "iteration_s", "speedup", "tokens_per_s": { "p10", "p50", "p90" } over the
//                                        worlds, with the model-form term,
//                                   "p_beats_baseline": share of worlds with speedup > 1,
//                                   "world_iteration_s", "world_speedup", "world_peak_GiB": [ per world, before
//                                        the model-form term ],
//                                   "world_metrics": { "dbr", "pr", "abr", "abr_work", "cr",
//                                                      "max_min_time_ratio", "pipeline_gap": [ per world ] } } } ],
//     "uncertainty": { "samples", "sources": [ what the worlds drew ], "model_form_log_sigma": of a speedup,
//                      "model_form_file": "" when none, "winner": the highest tokens/s in world 0 among the
//                      policies that fit in GPU memory there (null when none fits), "p_winner": share of worlds
//                      where it fits and is the highest of those that fit } }
// A policy with oom_iterations above 0 does not fit in GPU memory: it is never the winner nor the speedups'
// reference, and a world where it runs out of memory does not count towards its p_beats_baseline.
// Mode "live" (measured once, live/live_report) has neither "interval" nor "uncertainty".
// lcsim-results/1 is the same without them; readers take it as a run of one world.
// A number that is not finite (e.g. max_min_time_ratio with an idle GPU) is written as null.
//
// Results CSV: one row per policy and iteration, header
//   policy,kind,iteration,label,seconds,tokens,sequences,oom,peak_GiB,dbr,pr,abr,cr,max_min_time_ratio,pipeline_gap,
//   samples,iteration_s_p10,iteration_s_p50,iteration_s_p90,speedup_p10,speedup_p50,speedup_p90,p_beats_baseline
// (the interval columns repeat the policy's interval on each of its rows; speedups are over the JSON's
// speedup_reference where it has one).
#include <ostream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/terminal.hpp"  // wrap_lines
#include "model/results.hpp"

namespace lcsim {

inline constexpr const char* kResultsSchema = "lcsim-results/2";
/// The schema before sampled worlds; readers take it as a run of one world (no "interval", no "uncertainty").
inline constexpr const char* kResultsSchemaV1 = "lcsim-results/1";
/// A results document's schema is one lcsim reads (kResultsSchema or kResultsSchemaV1).
bool known_results_schema(const std::string& schema);

nlohmann::ordered_json results_to_json(const RunResults& results);
/// Writes results_to_json, indented, with a final newline. Throws InputError when the file cannot be written.
void write_results_json(const RunResults& results, const std::string& file);

std::string results_to_csv(const RunResults& results);
void write_results_csv(const RunResults& results, const std::string& file);

/// The comparison table: header lines (scenario, mode, dataset, baseline, then the profile label right above the
/// table), one row per policy with mean/p50/p99 iteration seconds, tokens/s, speedup, DBR, PR, ABR, CR, OOM
/// iterations and planning milliseconds. `max_columns` above 0: lines of at most that many columns, leaving out
/// planning time, then the balance metrics, then p50/p99 as needed (a line says which, and that --wide shows
/// them); 0 prints every column.
void print_results_table(const RunResults& results, std::ostream& out, std::size_t max_columns = 0);

/// The header lines of a results table: scenario, mode (`mode_line`), dataset, baseline (saying which policy the
/// speedups are over when the baseline does not fit in memory), profile.
void print_results_header(const RunResults& results, const std::string& mode_line, std::ostream& out);

/// The table's interval columns (with --samples above 1): headers, and a policy's cells ("-" for the speedup
/// reference's P(>base)).
const std::vector<std::string>& interval_headers();
std::vector<std::string> interval_cells(const PolicyResult& policy, const std::string& reference);
/// The OOM column's cell: "OOM k/n" for a policy that runs out of memory in k of its n iterations, "0/n" otherwise.
std::string oom_cell(const PolicyResult& policy);
/// "speedup: tokens/s over X's" -- X the reference, with why when it is not the baseline.
std::string speedup_line(const RunResults& results);
/// Under a table with policies that do not fit in GPU memory: which, and that they cannot win ("" otherwise).
std::string out_of_memory_lines(const RunResults& results);
/// Below a table, with --samples above 1: the winner and P(winner), what the interval columns mean, the sources.
void print_uncertainty_lines(const RunResults& results, std::ostream& out);

/// A figure as results files write it: 9 significant digits (enough for any figure lcsim reports, and the
/// last-bit noise of floating-point summation order never reaches the file), null when not finite. Every writer of
/// an lcsim results file uses it, so identical runs give byte-identical files.
nlohmann::ordered_json results_number(double value);

/// Rows as aligned text columns (two spaces apart): the first column, the row names, left-aligned; the others,
/// numbers, right-aligned. Every table lcsim and lcsim-gpu print goes through it.
void print_aligned_rows(const std::vector<std::vector<std::string>>& rows, std::ostream& out);
/// The width of the widest line print_aligned_rows prints for `rows`.
std::size_t aligned_width(const std::vector<std::vector<std::string>>& rows);

/// print_aligned_rows within `max_columns` (0: no limit): while the widest line is longer, the columns of the
/// highest `drop` rank left (drop[c] for column c; 0: always kept) are left out together. Returns the header
/// cells (row 0) of the columns left out, in table order.
std::vector<std::string> print_fitting_rows(const std::vector<std::vector<std::string>>& rows,
                                            const std::vector<int>& drop, std::size_t max_columns, std::ostream& out);
/// The line under a table that left columns out: "not shown: A, B (--wide shows every column)"; "" when none.
std::string left_out_line(const std::vector<std::string>& left_out);

}  // namespace lcsim
