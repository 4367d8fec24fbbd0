#pragma once
// `lcsim tune`: the search space of each policy's settings and parallel layout, the candidates it expands to,
// and what the search concludes from their results (best, runner-up, sensitivity, winner). Running the
// candidates (lcsim plan, then lcsim simulate for the most promising) is sim/tune_command.cpp's.
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

#include "policies/core/policy.hpp"
#include "traces/scenario.hpp"
#include "traces/tune_spec.hpp"

namespace lcsim {

/// The most candidates a search may have (as a sweep's points): each is a process and files of its own.
inline constexpr std::size_t kMaxTuneCandidates = 100000;

/// One point of the search: a policy under one layout and one value of each of its knobs.
struct TuneCandidate {
  int index = 0;       ///< position in expand order (deterministic)
  std::string policy;  ///< label
  ParallelLayout layout;
  std::vector<std::pair<std::string, nlohmann::json>> settings;  ///< knob path -> value, in knob order
  nlohmann::json scenario;  ///< the scenario document to run (paths absolute), only this policy and the baseline
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

/// What a candidate's runs gave. `estimated`: lcsim plan ran; `simulated`: lcsim simulate too.
struct TuneOutcome {
  bool estimated = false;
  bool simulated = false;
  std::string failed;  ///< why a run gave no result (its last log line)
  double estimate_tokens_per_s = 0;
  double simulated_tokens_per_s = 0;
  double p99_iteration_s = 0;  ///< of the simulation when simulated, else of the estimate
  double peak_gib = 0;         ///< the largest per-GPU peak over the iterations
  double capacity_gib = 0;     ///< usable GPU memory
  int oom_iterations = 0;
  bool accepted() const { return estimated && failed.empty() && oom_iterations == 0; }
  /// The figure candidates are ranked by: simulated throughput when simulated, else the estimate.
  double tokens_per_s() const { return simulated ? simulated_tokens_per_s : estimate_tokens_per_s; }
};

/// The `top` accepted candidates of `policy` by estimated throughput (ties: lower index), best first.
std::vector<int> most_promising(const std::vector<TuneCandidate>& candidates, const std::vector<TuneOutcome>& outcomes,
                                const std::string& policy, int top);

/// One knob's effect around a policy's best candidate: throughput relative to the best when only that knob
/// moves ("OOM", "failed" or "-" for a value without an accepted run).
struct KnobSensitivity {
  std::string knob;
  std::vector<std::pair<std::string, std::string>> values;  ///< value as text -> "0.85x" | "OOM" | "failed" | "-"
};

struct PolicyVerdict {
  std::string policy;
  std::optional<int> best, runner_up;  ///< candidate indices (the best among the simulated ones)
  std::vector<KnobSensitivity> sensitivity;
  int estimated = 0, simulated = 0, rejected_oom = 0, failed = 0, refused = 0;
};

struct TuneVerdict {
  std::vector<PolicyVerdict> policies;  ///< in scenario order
  std::optional<std::string> winner;    ///< label of the best policy
  std::optional<std::string> second;    ///< the next best policy
  double margin = 0;                    ///< winner's tokens/s over the second's
};

TuneVerdict judge_tune(const TuneSpace& space, const std::vector<TuneOutcome>& outcomes,
                       const std::vector<std::string>& policies);

/// "dp=4 cp=8 tp=1 pp=1 bucket_size_tokens=32768": the layout, then each knob by its last path component.
std::string describe_settings(const TuneCandidate& candidate);

/// Results file (schema lcsim-tune/1): every candidate with its settings and outcome, and the verdict.
/// `profile_label` and `dataset_label` say whether the figures are calibrated and the lengths synthetic.
nlohmann::ordered_json tune_to_json(const Scenario& scenario, const std::string& profile_label,
                                    const std::string& dataset_label, const TuneSpace& space,
                                    const std::vector<TuneOutcome>& outcomes, const TuneVerdict& verdict);
/// One CSV row per candidate.
std::string tune_to_csv(const TuneSpace& space, const std::vector<TuneOutcome>& outcomes);

// ---- Slices: the estimates of one search on many machines (`lcsim tune --shard K/N --slice FILE`, then
// `lcsim tune --merge FILE...`), candidate i in slice (i mod N) + 1 as for sweeps (traces/sweep_shard.hpp) ----

/// A slice file (schema lcsim-tune-slice/1): the search's digest (scenario document after --iterations, and the
/// --policy labels), K, N, the number of candidates of the whole search, and the estimates of the slice's own.
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
