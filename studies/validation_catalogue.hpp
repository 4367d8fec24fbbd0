#pragma once
// The validation catalogue: published figures lcsim's predictions are checked against (`lcsim validate`).
// Format and semantics: docs/validation.md. This header holds the catalogue types, the strict reader, the runs an
// entry needs, and the maths (combined prediction, signed error, ordering) -- everything but running lcsim.
#include <cmath>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "model/profile.hpp"

namespace lcsim {

/// What an entry compares.
enum class ValidationQuantity {
  Speedup,             ///< tokens/s of `policy` over the reference's (the best of several references)
  Abr,                 ///< HBP's ABR of `policy`, mean over iterations
  AbrWork,             ///< ABR over the run (idle over capacity, iterations weighted by their time)
  Cr,                  ///< HBP's communication ratio of `policy`, mean over iterations
  Dbr,                 ///< HBP's DBR of `policy`, mean over iterations
  Pr,                  ///< HBP's padding ratio of `policy`, mean over iterations
  RankGap,             ///< (slowest - fastest) / fastest pipeline propagation latency, mean over iterations
                       ///< (Hydraulis Fig. 12b; BalanceMetrics::pipeline_gap)
  IterationSeconds,    ///< mean iteration time of `policy`
  PeakGB,              ///< the largest per-GPU peak memory, mean over iterations, GB (1e9 bytes)
  Oom,                 ///< whether `policy` runs out of memory in any iteration (a yes/no figure)
  CollectiveSeconds,   ///< the cost model's time of one collective (no policy runs)
  TokensPerGpuSecond,  ///< tokens/s of `policy` over the cluster's GPUs (a framework benchmark's TPS/GPU)
};

/// How an entry's points make one prediction.
enum class ValidationCombine {
  One,     ///< exactly one point
  Mean,    ///< the mean over the points (e.g. a paper's average over datasets)
  Max,     ///< the largest (a paper's peak)
  Min,     ///< the smallest
  Each,    ///< every point has its own published value; the error is their MAPE
  Series,  ///< a trend over the points, in order (published: a direction, optionally values)
};

enum class Trend { Increasing, Decreasing };

/// One collective to time with a scenario's cost model (Skrull Table 5's rows).
struct CollectiveQuery {
  CollectiveOp op = CollectiveOp::AllGather;
  int group_size = 0;
  double bytes = 0;  ///< nccl-tests size
};

/// One run an entry reads: a scenario file, optionally changed by `set` (dotted JSON paths), in plan or simulate
/// mode, and the policy/reference read from it (entry defaults unless the point overrides them).
struct ValidationPoint {
  std::string scenario;                           ///< resolved against the catalogue's folder
  nlohmann::json set = nlohmann::json::object();  ///< {"training.bucket_size_tokens": 16384, ...}
  std::string policy;
  std::vector<std::string> reference;  ///< Speedup: one label, or several (the best of them)
  std::optional<CollectiveQuery> collective;
  std::optional<double> published;  ///< Each and Series: this point's published value
  std::string label;                ///< what distinguishes the point in tables ("BucketSize 16K")
};

/// The published figure: a number, a range, a yes/no, or (Series) a trend.
struct PublishedFigure {
  std::optional<double> value;
  std::optional<double> low, high;  ///< a range, e.g. Hydraulis' "1.32-2.66x"
  std::optional<bool> yes;          ///< Oom
  std::optional<Trend> trend;       ///< Series
};

struct ValidationSource {
  std::string paper;      ///< "Skrull", "Hydraulis", "HBP"
  std::string where;      ///< "Fig. 3, text below", "Table 3"
  std::string section;    ///< "Sec. 5.2", "App. C.3"
  std::string framework;  ///< framework-benchmark entries: the stack class ("megatron", "pytorch-fsdp", "deepspeed")
  std::string precision;  ///< framework-benchmark entries: the GEMMs' number format as run ("bf16", "fp8")
};

struct ValidationEntry {
  std::string id;
  ValidationSource source;
  std::string claim;  ///< one line: what the paper reports
  ValidationQuantity quantity = ValidationQuantity::Speedup;
  ValidationCombine combine = ValidationCombine::One;
  std::string mode = "simulate";  ///< "plan" or "simulate"
  std::vector<ValidationPoint> points;
  PublishedFigure published;
  double tolerance = 0.25;  ///< relative: within tolerance when |error| <= tolerance
  /// Non-empty: a measured entry. The figure is a committed measured results file (mode "live", this path resolved
  /// against the catalogue's folder) rather than a paper; `published` holds the figure read from it.
  std::string measured;
  /// Measured entries: the iteration labels (each plan's strategy) of the point's policies as the run measured
  /// them, where the file records them. A prediction of other plans would not test the model on what ran.
  std::map<std::string, std::vector<std::string>> measured_plans;
  /// A framework-benchmark entry ("family": "framework"): a training-throughput or kernel figure from a source that is
  /// none of the policy papers. Summarized apart from the papers and the measured runs.
  bool framework = false;
  /// Non-empty: lcsim cannot express the figure yet (says why); nothing is run.
  std::string not_expressible;
  std::string published_text;  ///< not expressible entries: the published figure as the catalogue gives it
};

struct ValidationCatalogue {
  std::string file;
  std::string description;
  std::vector<ValidationEntry> entries;
};

/// Strict reading (InputError naming the file and the JSON path): unknown keys, an unknown quantity, a published
/// figure of the wrong shape for the quantity, duplicate ids, a `set` path that is not a dotted key path.
ValidationCatalogue catalogue_from_json(const nlohmann::json& document, const std::string& file);
ValidationCatalogue load_catalogue(const std::string& file);

std::string to_string(ValidationQuantity quantity);

// ---- Runs ----

/// The scenario document of a point: its file with paths made absolute and `set` applied. A `set` path must name
/// an existing object down to its last key (InputError naming the catalogue, the entry and the path otherwise).
nlohmann::json point_scenario(const ValidationPoint& point, const std::string& where);

/// The policy labels a point reads (policy and references).
std::vector<std::string> point_labels(const ValidationPoint& point);

// ---- Evaluation ----

/// What one point predicted: a number (Speedup, metrics, seconds) or a yes/no (Oom). `failed` names why the point
/// has no prediction (its run failed).
struct PointPrediction {
  std::optional<double> value;
  std::optional<bool> yes;
  std::string failed;
};

/// How PointPrediction::failed begins when a measured entry's run planned other iterations than the hardware ran.
inline constexpr const char* kPlanDrift = "the plan changed since ";

/// Why a measured entry's nominal run does not predict the plans that ran (empty when it does, and for other
/// entries): the first iteration whose plan label differs from the one the measured file records, or another
/// iteration count. Begins with kPlanDrift.
std::string plan_drift(const ValidationEntry& entry, const nlohmann::json& results);

/// The prediction of one policy quantity read from a results document (lcsim-results/1) of the point's run, on a
/// cluster of `gpus` GPUs (tokens_per_gpu_s divides by it).
PointPrediction predict_from_results(const ValidationEntry& entry, const ValidationPoint& point,
                                     const nlohmann::json& results, int gpus);

enum class OrderingVerdict { Held, Broken, NotApplicable };

/// A trend factor within this (relative) of the published one counts as within: the acceptance criterion set for
/// lcsim's context-length trends ("within 25% of the published decline").
inline constexpr double kTrendFactorTolerance = 0.25;

/// How far a series with published values goes: the ratio of its end points the way the trend runs (first over
/// last for a decreasing trend, last over first for an increasing one), published and predicted. Its error tells a
/// shallow trend from a level error, which the series' mean error over points cannot.
struct SeriesFactor {
  double published = 0;
  double predicted = 0;
  double error = 0;  ///< signed relative error: predicted / published - 1
  bool within() const { return std::abs(error) <= kTrendFactorTolerance; }
};

/// The factor of a series whose points are `published` and `predicted`, in order; none with fewer than two points,
/// unequal counts, or an end point that is not positive (no ratio to take).
std::optional<SeriesFactor> series_factor(const std::vector<double>& published, const std::vector<double>& predicted,
                                          Trend trend);

struct EntryOutcome {
  const ValidationEntry* entry = nullptr;
  std::vector<PointPrediction> points;
  std::optional<double> predicted;  ///< the combined number (One/Mean/Max/Min)
  std::optional<bool> predicted_yes;
  /// Signed relative error: (predicted - published) / published; for a range, against its nearest bound (0
  /// inside); for Each and Series with values, the mean over points (`abs_error` is their MAPE).
  std::optional<double> error;
  std::optional<double> abs_error;
  OrderingVerdict ordering = OrderingVerdict::NotApplicable;
  std::optional<SeriesFactor> series_factor;  ///< Series with published values: how far the trend goes
  bool within_tolerance = false;  ///< the error and the ordering; the series factor is reported, not judged here
  std::string failed;             ///< non-empty when a point failed: the entry has no outcome
  /// Non-empty: a profile the entry was predicted with set a parameter from this figure (its provenance.fitted_on
  /// says which); the entry does not count in the held-out error. Set by the caller, see fitted_parameters().
  std::string fitted;
};

/// What `profile` fitted on catalogue entry `id` (its provenance.fitted_on), "; "-joined; empty when nothing.
std::string fitted_parameters(const Profile& profile, const std::string& id);

/// Combines the points' predictions and compares them with the published figure.
/// Ordering: Speedup -- predicted and published on the same side of 1 (the same policy wins); a range, both
/// bounds on one side. Oom -- the same yes/no. Series -- every step of the predicted series runs the published
/// way (a change under 0.5% counts as flat, which breaks a trend). Each -- every pair of points whose published
/// values differ by more than 5% is ranked the same way. Otherwise not applicable.
EntryOutcome evaluate_entry(const ValidationEntry& entry, std::vector<PointPrediction> points);

/// Held-out errors of one kind of entry: published figures, or measured runs.
struct HeldOutErrors {
  int entries = 0;        ///< evaluated entries that fit nothing
  int numeric = 0;        ///< ... with a numeric error
  double mape = 0;        ///< mean of abs_error over those
  double median_ape = 0;  ///< their median (a few gross misses dominate the mean)
  int within_tolerance = 0;
  int ordering_checked = 0;  ///< evaluated entries, fitted ones too, with an ordering verdict (the papers' are
  int ordering_held = 0;     ///< ValidationSummary's own fields)
  int factor_checked = 0;    ///< evaluated series with a factor, fitted ones too
  int factor_within = 0;     ///< ... within kTrendFactorTolerance of the published factor
};

/// Two policies of one measured run that lcsim ranks otherwise than the hardware did.
struct BrokenRanking {
  std::string run;             ///< the measured results file
  std::string faster, slower;  ///< as measured
  double measured_faster = 0;  ///< speedups over the run's baseline (1 for the baseline itself)
  double measured_slower = 0;
  double predicted_faster = 0;
  double predicted_slower = 0;
};

/// Measured speedups of one run closer than this (relative) are a tie and not judged: two live replays of one
/// scenario moved a pair's ratio by up to 1.8% (docs/measurements/h200-2026-11-27b.md).
inline constexpr double kMeasuredRankingTie = 0.02;

/// Predicted speedups closer than this (relative) rank nothing: Hydraulis' proposal, for one, resolves latencies to
/// 1e-3.
inline constexpr double kPredictedRankingTie = 1e-3;

/// The pairwise ranking of every measured run: each pair of its policies (the baseline included) whose measured
/// speedups differ by more than kMeasuredRankingTie, predicted in the same order by more than kPredictedRankingTie
/// (a predicted tie keeps nothing). Only held-out speedup entries take part.
struct MeasuredRanking {
  int pairs = 0;  ///< judged pairs
  int kept = 0;
  int ties = 0;  ///< pairs measured within kMeasuredRankingTie, not judged
  std::vector<BrokenRanking> broken;
};

MeasuredRanking measured_ranking(const std::vector<EntryOutcome>& outcomes);

struct ValidationSummary {
  int entries = 0;
  int not_expressible = 0;
  int failed = 0;
  int fitted = 0;
  int held_out = 0;                ///< evaluated published-figure entries that fit nothing
  int held_out_numeric = 0;        ///< ... with a numeric error
  double held_out_mape = 0;        ///< mean of abs_error over those
  double held_out_median_ape = 0;  ///< their median (a few gross misses dominate the mean)
  int held_out_within_tolerance = 0;
  HeldOutErrors measured;   ///< held-out measured entries (real hardware), summarized apart from the papers
  HeldOutErrors framework;  ///< held-out framework-benchmark entries, with their orderings and trends
  MeasuredRanking measured_ranking;
  int ordering_checked = 0;  ///< evaluated published-figure entries with an ordering verdict
  int ordering_held = 0;
  int factor_checked = 0;  ///< evaluated published-figure series with a factor (fitted ones too, as orderings)
  int factor_within = 0;   ///< ... within kTrendFactorTolerance of the published factor
};

ValidationSummary summarize_validation(const std::vector<EntryOutcome>& outcomes);

/// The entry's family: "published" (the policy papers), "measured" (lcsim's own runs on real GPUs) or "framework"
/// (framework benchmarks).
std::string entry_kind(const ValidationEntry& entry);

/// "held out", "fitted" (a free parameter was set from it), "not expressible" or "failed".
std::string entry_status(const EntryOutcome& outcome);

/// Results file of `lcsim validate` (schema lcsim-validation/4) and its CSV (one row per entry).
nlohmann::ordered_json validation_to_json(const ValidationCatalogue& catalogue,
                                          const std::vector<EntryOutcome>& outcomes, const ValidationSummary& summary);
std::string validation_to_csv(const std::vector<EntryOutcome>& outcomes);

}  // namespace lcsim
