#pragma once
// `lcsim tune`: the search space of each policy's settings and parallel layout, the candidates it expands to,
// which of them pruning skips, and what the search concludes from their results (best, runner-up, sensitivity,
// winner). Estimating one candidate is studies/tune_candidate.hpp's; running the search (candidates on threads,
// then lcsim simulate for the most promising) is cli/tune_command.cpp's.
//
// A scenario may say which keys are free, in an optional "tune" object (scenarios/README.md); what it leaves out
// takes the default space (docs/tune.md):
//   "tune": {
//     "layout": {"cp": [1, 2, 4, 8], "tp": [1, 2], "pp": [1]},     dp = GPUs / (cp tp pp); TP inside a node
//     "keys": {"training.zero_stage": [1, 2, 3]},                   scenario keys free for every policy
//     "policies": {"skrull": {"training.bucket_size_tokens": [16384, 32768]},
//                  "packing": {"options.packing_length_tokens": [65536, 131072]}},   by label; "options.X" is
//                                                                                      the policy's option X
//     "simulate_top": 3                                             candidates per policy simulated after the
//   }                                                               estimate has ranked them
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "formats/scenario.hpp"
#include "formats/tune_spec.hpp"
#include "policies/core/policy.hpp"

namespace lcsim {

/// The most candidates a search may have (as a sweep's points): each is a scenario file of its own.
inline constexpr std::size_t kMaxTuneCandidates = 100000;

/// One point of the search: a policy under one layout and one value of each of its knobs.
struct TuneCandidate {
  int index = 0;       ///< position in expand order (deterministic)
  std::string policy;  ///< label
  ParallelLayout layout;
  std::vector<std::pair<std::string, nlohmann::json>> settings;  ///< knob path -> value, in knob order
  nlohmann::json scenario;   ///< the scenario document to run (paths absolute), only this policy and the baseline
  bool own_process = false;  ///< the policy plans only in a process of its own (its descriptor's needs_own_process)
};

/// The knobs a policy of `kind` is tuned over when the scenario's tune spec names none for it (docs/tune.md):
/// Skrull and RR the BucketSize, packing its packing length, sorted batching its micro-batch token budget; none
/// for the others (HBP and Hydraulis choose their own lengths and strategies from the cost model).
std::vector<TuneKnob> default_policy_knobs(const Scenario& scenario, const PolicySpec& policy);

/// The layouts the search covers: every (cp, tp, pp) of the spec's (or the default) degrees with
/// cp tp pp dividing the cluster's GPUs, tp dividing a node's GPUs and pp the model's layers. Default degrees: cp
/// and tp powers of two (tp up to a node), pp 1, 2 and 4.
std::vector<ParallelLayout> tune_layouts(const Scenario& scenario, const TuneSpec& spec);

/// Every candidate of every policy (or of `labels` only), in order: policy, layout, then knob values (the last
/// knob fastest). `document` is the scenario with absolute paths. Candidates the scenario parser refuses (a knob
/// value out of range, a layout the scenario cannot take) are left out and counted in `refused`.
struct TuneSpace {
  std::vector<TuneCandidate> candidates;
  std::map<std::string, std::vector<std::string>> knob_names;  ///< by policy: "cp", "tp", "pp", then knob paths
  std::map<std::string, int> refused;                          ///< by policy
};
TuneSpace expand_tune_space(const Scenario& scenario, const nlohmann::json& document, const TuneSpec& spec,
                            const std::vector<std::string>& labels);

/// What a candidate's runs gave. `estimated`: its estimate ran (`lcsim plan`'s); `simulated`: lcsim simulate too.
struct TuneOutcome {
  bool estimated = false;
  bool simulated = false;
  std::string failed;  ///< why a run gave no result (what `lcsim plan` or `lcsim simulate` said last)
  double estimate_tokens_per_s = 0;
  double simulated_tokens_per_s = 0;
  double p99_iteration_s = 0;  ///< of the simulation when simulated, else of the estimate
  double peak_gib = 0;         ///< the largest per-GPU peak over the iterations
  double capacity_gib = 0;     ///< usable GPU memory
  int oom_iterations = 0;      ///< of a candidate pruned for memory, those its memory bound proves
  /// Bounds from the candidate's plans (program/bound.hpp), computed before its estimate: upper bounds of the
  /// estimate's tokens/s from the busiest GPU's compute and, when that one does not prune the candidate, from its
  /// heaviest replica replayed alone (never looser); the largest per-GPU memory bound and the iterations where it
  /// exceeds the capacity. Empty or 0 when not computed (`--no-prune`, a candidate planned in its own process).
  std::optional<double> compute_bound_tokens_per_s;
  std::optional<double> replica_bound_tokens_per_s;
  std::optional<double> memory_bound_gib;
  int memory_oom_iterations = 0;
  bool pruned = false;  ///< skipped by prune_candidates: its bounds rule it out
  bool accepted() const { return estimated && failed.empty() && oom_iterations == 0; }
  /// The figure candidates are ranked by: simulated throughput when simulated, else the estimate.
  double tokens_per_s() const { return simulated ? simulated_tokens_per_s : estimate_tokens_per_s; }
};

// ---- Pruning: a candidate whose bounds already lose is never estimated (docs/tune.md, "How the search runs") ----

/// The estimates of a policy the verdict reads, which pruning keeps exact: its `simulate_top` best (the
/// finalists) and two more (the best and the runner-up among the estimated when simulations fail or none runs).
int exact_estimates(int simulate_top);

/// The tokens/s a bound must fall below for a candidate to be pruned: the `keep`-th best of `accepted` (the
/// accepted estimates of its policy so far, as results files round them); 0, nothing pruned, with fewer.
double prune_threshold(std::vector<double> accepted, int keep);

/// Whether `bound` (tokens/s) rules a candidate out against `threshold`. The bound must be below the threshold by a
/// relative 1e-6, far more than the floating-point error of summing iteration times and the 9-digit rounding of
/// results files, far less than any difference a search ranks: a candidate that could tie the threshold is never
/// pruned.
bool bound_loses(const std::optional<double>& bound, double threshold);

/// Prunes, once every candidate that needs it is estimated: per policy the threshold over all its accepted
/// estimates, then a candidate is pruned when its memory bound exceeds the capacity in some iteration (its
/// oom_iterations become those), or its compute bound, else its replica bound, loses to the threshold. A pruned
/// candidate keeps the bound that pruned it and loses any estimate made before the threshold was known, so the
/// results depend neither on the order candidates ran in nor on --jobs, and merged slices (every candidate
/// estimated) prune to the one-machine search.
void prune_candidates(const TuneSpace& space, std::vector<TuneOutcome>& outcomes, int keep);

/// The `top` accepted candidates of `policy` by estimated throughput (ties: lower index), best first.
std::vector<int> most_promising(const std::vector<TuneCandidate>& candidates, const std::vector<TuneOutcome>& outcomes,
                                const std::string& policy, int top);

/// One knob's effect around a policy's best candidate: throughput relative to the best when only that knob
/// moves ("OOM", "failed", "pruned" or "-" for a value without an accepted run).
struct KnobSensitivity {
  std::string knob;
  std::vector<std::pair<std::string, std::string>> values;    ///< value -> "0.85x" | "OOM" | "failed" | "pruned" | "-"
  std::vector<std::pair<std::string, std::string>> failures;  ///< value -> why its run failed (not in files)
};

struct PolicyVerdict {
  std::string policy;
  std::optional<int> best, runner_up;  ///< candidate indices (the best among the simulated ones)
  std::vector<KnobSensitivity> sensitivity;
  int estimated = 0, simulated = 0, rejected_oom = 0, failed = 0, refused = 0, pruned = 0;
};

struct TuneVerdict {
  std::vector<PolicyVerdict> policies;  ///< in scenario order
  std::optional<std::string> winner;    ///< label of the best policy
  std::optional<std::string> second;    ///< the next best policy
  double margin = 0;                    ///< winner's tokens/s over the second's
};

TuneVerdict judge_tune(const TuneSpace& space, const std::vector<TuneOutcome>& outcomes,
                       const std::vector<std::string>& policies);

/// The scenario document `document` (its own paths) with each tuned policy's best candidate applied: its layout as
/// the policy's `parallel` (none when it is the scenario's, or when the policy chooses its own strategies), its
/// "options.X" settings in its options, and any other setting (e.g. "training.bucket_size_tokens") in the scenario.
/// The scenario's `tune` object stays, so that tuning the scenario written finds the same bests. InputError, naming the
/// key, when two tuned policies' bests set one scenario key to different values, or when a policy that was not tuned
/// has that key among its own knobs (it would change under it): those cannot be written as one scenario.
nlohmann::json tuned_scenario(const nlohmann::json& document, const Scenario& scenario, const TuneSpace& space,
                              const TuneVerdict& verdict);

/// "dp=4 cp=8 tp=1 pp=1 bucket_size_tokens=32768": the layout, then each knob by its last path component.
std::string describe_settings(const TuneCandidate& candidate);

/// Results file (schema lcsim-tune/1): every candidate with its settings and outcome, and the verdict.
/// `profile_label` and `dataset_label` say whether the figures are calibrated and the lengths synthetic; `keep`
/// is the exact estimates per policy when the search pruned (exact_estimates), else empty.
nlohmann::ordered_json tune_to_json(const Scenario& scenario, const std::string& profile_label,
                                    const std::string& dataset_label, const TuneSpace& space,
                                    const std::vector<TuneOutcome>& outcomes, const TuneVerdict& verdict,
                                    std::optional<int> keep);
/// One CSV row per candidate.
std::string tune_to_csv(const TuneSpace& space, const std::vector<TuneOutcome>& outcomes);

// ---- Slices: the estimates of one search on many machines (`lcsim tune --shard K/N --slice FILE`, then
// `lcsim tune --merge FILE...`), candidate i in slice (i mod N) + 1 as for sweeps (studies/sweep_shard.hpp) ----

/// A slice file (schema lcsim-tune-slice/2): the search's digest (scenario document after --iterations, the
/// --policy labels and whether it prunes), K, N, the number of candidates of the whole search, and the estimates
/// of the slice's own with their bounds (a slice estimates all of them: the merge prunes).
struct TuneSlice {
  std::string search_digest;
  int shard = 1, shards = 1;
  int candidates_total = 0;
  std::vector<std::pair<int, TuneOutcome>> estimates;  ///< candidate index -> its estimate
};
nlohmann::ordered_json tune_slice_to_json(const TuneSlice& slice);
TuneSlice tune_slice_from_json(const nlohmann::json& document, const std::string& file);
/// The estimates of the whole search from its slices, in candidate order. InputError naming the files unless they
/// are slices 1..N of this search (`digest`, `candidates`), each once, each holding exactly its own candidates.
std::vector<TuneOutcome> merge_tune_slices(const std::vector<std::pair<std::string, TuneSlice>>& slices,
                                           const std::string& digest, std::size_t candidates);

}  // namespace lcsim
