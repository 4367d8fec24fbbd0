#pragma once
// Results files and the comparison table.
//
// Results JSON, schema "lcsim-results/1" (keys always in this order; numbers rounded to 9 significant digits, so
// identical runs give byte-identical files; wall times such as planning time are never written):
//   { "schema": "lcsim-results/1",
//     "mode": "plan" | "simulate",
//     "scenario": name, "scenario_file": path as given, "seed": integer,
//     "profile": { "label": string, "calibrated": bool },
//     "dataset": string (says "synthetic" for sampled distributions),
//     "baseline": policy label,
//     "paper_figures": [{"policy", "speedup", "source"}] -- the scenario's declared paper figures, for plots,
//     "policies": [ { "name": label, "kind": registry name,
//                     "mean_iteration_s", "p50_iteration_s", "p99_iteration_s", "total_s": seconds,
//                     "tokens": integer, "tokens_per_s", "speedup_vs_baseline": tokens/s over the baseline's,
//                     "oom_iterations": integer,
//                     "metrics": { "dbr", "pr", "abr", "abr_work", "cr", "max_min_time_ratio", "pipeline_gap" }
//                                  (mean over iterations; abr_work: ABR over the run, sum of idle over sum of
//                                  capacity; pipeline_gap: policies/core/metrics.hpp),
//                     "iterations": [ { "index", "label", "seconds", "tokens", "sequences", "oom": bool,
//                                       "peak_GiB": largest per-GPU peak (GiB = 2^30 bytes),
//                                       "metrics": {...}, "busy_s": [ per GPU seconds ] } ] } ] }
// A number that is not finite (e.g. max_min_time_ratio with an idle GPU) is written as null.
//
// Results CSV: one row per policy and iteration, header
//   policy,kind,iteration,label,seconds,tokens,sequences,oom,peak_GiB,dbr,pr,abr,cr,max_min_time_ratio,pipeline_gap
#include <ostream>
#include <string>

#include <nlohmann/json.hpp>

#include "policies/core/results.hpp"

namespace lcsim {

inline constexpr const char* kResultsSchema = "lcsim-results/1";

nlohmann::ordered_json results_to_json(const RunResults& results);
/// Writes results_to_json, indented, with a final newline. Throws InputError when the file cannot be written.
void write_results_json(const RunResults& results, const std::string& file);

std::string results_to_csv(const RunResults& results);
void write_results_csv(const RunResults& results, const std::string& file);

/// The comparison table: header lines (scenario, mode, dataset, baseline, then the profile label right above the
/// table), one row per policy with mean/p50/p99 iteration seconds, tokens/s, speedup, DBR, PR, ABR, CR, OOM
/// iterations and planning milliseconds.
void print_results_table(const RunResults& results, std::ostream& out);

/// A figure as results files write it: 9 significant digits (enough for any figure lcsim reports, and the
/// last-bit noise of floating-point summation order never reaches the file), null when not finite. Every writer of
/// an lcsim results file uses it, so identical runs give byte-identical files.
nlohmann::ordered_json results_number(double value);

/// Rows as aligned text columns (two spaces apart): the first column, the row names, left-aligned; the others,
/// numbers, right-aligned. Every table lcsim and lcsim-gpu print goes through it.
void print_aligned_rows(const std::vector<std::vector<std::string>>& rows, std::ostream& out);

}  // namespace lcsim
