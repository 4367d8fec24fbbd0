#pragma once
// `lcsim validate`'s 80% intervals and their calibration: each held-out numeric entry's prediction in every
// sampled world of its runs (the entry's combine applied per world), widened by a model-form term estimated
// leave-one-source-out: over the held-out entries of its quantity family from every other source (paper,
// benchmark table or measurement campaign), so that no interval is fitted on the source that judges it; then coverage
// (share of entries whose published figure falls inside [p10, p90]) and median relative width. Derivation:
// docs/uncertainty.md.
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "model/results.hpp"
#include "studies/validation_catalogue.hpp"

namespace lcsim {

/// Quantities whose model errors share one spread (one model-form sigma).
enum class ModelFormFamily {
  Time,              ///< speedup, iteration_seconds (sigma in units of log(speedup)), profile not calibrated
  TimeCalibrated,    ///< the same, predicted with a profile lcsim-gpu calibrated on the device (docs/uncertainty.md)
  Balance,           ///< abr, abr_work, cr, dbr
  RankGap,           ///< rank_gap: its errors (10x) are of another kind than the balance ratios' (docs/uncertainty.md)
  PeakGB,            ///< peak_gb, profile not calibrated
  PeakGBCalibrated,  ///< peak_gb predicted with a profile calibrated on the device
  Collective,        ///< collective_seconds
  Throughput,        ///< tokens_per_gpu_s, profile not calibrated: the absolute level a speedup's ratio cancels
  None,              ///< oom: a yes/no figure, no interval
};
std::string to_string(ModelFormFamily family);
/// `calibrated_profile`: the figure is predicted with a profile calibrated on a device (provenance.calibrated);
/// its times and peaks then fall in TimeCalibrated and PeakGBCalibrated, whose errors leave out what an
/// uncalibrated profile gets wrong.
ModelFormFamily family_of(ValidationQuantity quantity, bool calibrated_profile = false);
/// The quantity's log spread per unit of its family's sigma: a speedup (ratio of two times) 1, one time 1/sqrt(2)
/// (the family's sigma is that of a ratio of two independent time errors), the others 1.
double family_scale(ValidationQuantity quantity);

/// Worlds in a results document: its policies' interval.samples (1 for lcsim-results/1 or no interval).
int results_worlds(const nlohmann::json& results);
/// The results document as world `world` saw it, for predict_from_results: every policy's tokens_per_s (its
/// world speedup, the same ratios), mean_iteration_s, metrics and a single iteration carrying the world's mean
/// peak. World 0 returns the document unchanged.
nlohmann::json results_in_world(const nlohmann::json& results, int world);

/// One published number of an entry and the entry's prediction of it in every world (world 0 nominal).
struct IntervalCheck {
  std::vector<double> worlds;
  std::optional<double> published;
  std::optional<double> low, high;  ///< a published range
};

/// A held-out numeric entry's checks: one for One/Mean/Max/Min, one per point for per-point published values.
struct EntryIntervalInput {
  std::string id;
  ValidationQuantity quantity = ValidationQuantity::Speedup;
  std::vector<IntervalCheck> checks;
  bool measured = false;            ///< a measured run's figure rather than a paper's (counted apart as well)
  std::string kind = "published";   ///< entry_kind: the family its coverage is reported in
  std::string source;               ///< the paper, benchmark table or campaign: left out together
  bool calibrated_profile = false;  ///< every run of it predicted with a calibrated profile (family_of)
};

struct EntryInterval {
  std::string id;
  std::string source;  ///< EntryIntervalInput::source
  ModelFormFamily family = ModelFormFamily::None;
  double error_log_sq = 0;           ///< mean over checks of log(nominal / published)^2 (0 inside a range)
  double sampled_log_var = 0;        ///< mean over checks of the variance over worlds of log(prediction)
  bool usable = false;               ///< every value positive: the entry informs its family's sigma
  double model_form_sigma = 0;       ///< leave-one-source-out, in the family's units
  std::vector<Quantiles> quantiles;  ///< per check, with the model form
  double covered = 0;                ///< share of checks whose published figure meets [p10, p90]
  double relative_width = 0;         ///< mean over checks of (p90 - p10) / p50
};

struct FamilySigma {
  int entries = 0;  ///< usable held-out entries
  double log_sigma = 0;
};

struct IntervalSummary {
  int samples = 1;
  int entries = 0;     ///< held-out numeric entries with an interval
  double covered = 0;  ///< sum of their covered shares
  double coverage = 0;
  double median_relative_width = 0;
  int measured_entries = 0;  ///< of `entries`, measured runs
  double measured_covered = 0;
  /// Per entry kind ("published", "measured", "framework"): entries, coverage and median relative width.
  struct KindCoverage {
    int entries = 0;
    double coverage = 0;
    double median_relative_width = 0;
  };
  std::map<std::string, KindCoverage> kinds;
  std::map<ModelFormFamily, FamilySigma> families;  ///< full-catalogue sigma (not leave-one-out)
};

/// The model-form variance one family's entries imply: max(0, mean over them of (error_log_sq - sampled_log_var)
/// / family_scale^2). Entries of source `leave_out` (none: empty) are left out.
double family_variance(const std::vector<EntryInterval>& entries, const std::vector<double>& scales,
                       ModelFormFamily family, const std::string& leave_out);

/// Whether [low_q, high_q] meets the check's published value or range.
bool interval_covers(const IntervalCheck& check, double low_q, double high_q);

/// Each entry's interval: its checks' world values times exp(scale sigma_loo z), `draws` model-form draws per
/// world (z from an Rng seeded by the entry id), then the quantiles, coverage and width; and the summary.
std::vector<EntryInterval> entry_intervals(const std::vector<EntryIntervalInput>& inputs, int draws,
                                           IntervalSummary& summary);

/// The model-form file (schema lcsim-model-form/1): per family its full-catalogue log sigma and entry count,
/// the catalogue and profiles it came from and the command that wrote it.
nlohmann::ordered_json model_form_to_json(const IntervalSummary& summary, const std::string& catalogue,
                                          const std::vector<std::string>& profiles, const std::string& command);

}  // namespace lcsim
