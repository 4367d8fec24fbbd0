#pragma once
// Predictions with error bars: sampled worlds (`--samples N`) and the intervals, win probabilities and
// model-form term built from them. Derivations and the meaning of every figure: docs/uncertainty.md.
//
// World 0 is the nominal run (the scenario's seed and profile, exactly what `--samples 1` gives). Worlds 1..N-1
// each draw, from an Rng seeded by (scenario seed, world index):
//   - the dataset: a named distribution sampled with another seed, or a bootstrap resample of a length trace;
//   - the profile: every fitted field with a held-out fit error (fit_mape) scaled by exp(sigma z), one z per
//     field and world, sigma = fit_mape * sqrt(pi/2) (the standard deviation of a normal error of that MAPE);
//   - the model form: each policy's times scaled by exp(s_t z), one z per policy and world, s_t = s_speedup /
//     sqrt(2), s_speedup read from the model-form file that `lcsim validate --write-model-form` writes.
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/random.hpp"
#include "formats/scenario_loader.hpp"
#include "model/profile.hpp"
#include "model/results.hpp"
#include "studies/evaluation.hpp"

namespace lcsim {

inline constexpr int kMaxSamples = 1000;
inline constexpr int kDefaultSamples = 32;
inline constexpr const char* kModelFormSchema = "lcsim-model-form/1";

/// The standard deviation of a zero-mean normal error whose mean absolute value is `mape`: E|X| = sigma
/// sqrt(2/pi).
double sigma_from_mape(double mape);

/// Quantile q in [0, 1] of `values` by linear interpolation between order statistics (R's type 7, numpy's
/// default). Throws std::invalid_argument on an empty list.
double quantile(std::vector<double> values, double q);
Quantiles quantiles_of(const std::vector<double>& values);

/// One standard normal draw (Box-Muller from two uniforms; lcsim's Rng, so the same on every compiler).
double standard_normal(Rng& rng);

/// The seed every draw of world `world` of a scenario derives from.
std::uint64_t world_seed(std::uint64_t scenario_seed, int world);

/// The fitted fields of `profile` that carry a held-out fit error, as "name (fit_mape x%)".
std::vector<std::string> profile_sampled_fields(const Profile& profile);
/// `profile` with every field that carries fit_mape scaled by exp(sigma_from_mape(fit_mape) z), one z per field
/// drawn from `rng` in the profile's field order. Times grow with z (efficiencies and bandwidths divide).
Profile perturb_profile(const Profile& profile, Rng& rng);

/// The profile of sampled world `world` >= 1 of a scenario with seed `scenario_seed` (perturb_profile with that
/// world's profile stream; load_world uses it, and `lcsim validate` for the collectives it times directly).
Profile world_profile(const Profile& nominal, std::uint64_t scenario_seed, int world);

/// The scenario of sampled world `world` >= 1: the nominal one with that world's dataset and profile.
/// `draw_data` false: the world keeps the nominal batches (a run whose data is known, e.g. a measured one).
/// The result refers to `nominal` (LoadedScenario::nominal_world), which must outlive it.
LoadedScenario load_world(const LoadedScenario& nominal, int world, bool draw_data = true);

/// The model-form term: s_speedup, the spread of log(speedup) that the model itself adds (per quantity family,
/// estimated by `lcsim validate`). A profile calibrated on a device and one derived from public figures miss by
/// different amounts, so the file holds a sigma for each (families "time" and "time_calibrated").
struct ModelForm {
  std::string file;              ///< "" when none was read: no model-form term
  double speedup_log_sigma = 0;  ///< the family applied, in units of log(speedup)
  std::string family = "time";
  std::optional<double> calibrated_speedup_log_sigma =
      std::nullopt;  ///< family "time_calibrated", where the file has it

  /// The term for a scenario predicted with `profile`: family "time_calibrated" where the profile was calibrated
  /// on a device and the file has that family, else "time".
  ModelForm for_profile(const Profile& profile) const;
};
/// Reads families "time" and, where present, "time_calibrated" of a model-form file (schema lcsim-model-form/1);
/// `shown` is how results files name it. InputError naming the file and field otherwise.
ModelForm load_model_form(const std::string& file, const std::string& shown);
/// The model-form file lcsim ships, in the source tree it was built from, and how results files name it.
std::string shipped_model_form_file();
inline constexpr const char* kShippedModelFormName = "scenarios/validation/model-form.json";
/// The shipped model form when its file exists, else none (the results say so).
ModelForm shipped_model_form();

/// A policy's figures in one world, before the model-form term.
struct WorldFigures {
  double mean_iteration_s = 0;
  double tokens_per_s = 0;
  double peak_GiB = 0;  ///< per-iteration largest per-GPU peak, mean over iterations
  BalanceMetrics metrics;
  int oom_iterations = 0;  ///< iterations that exceed GPU memory in this world: the policy cannot win it
};
WorldFigures world_figures(const PolicyResult& result);

/// Simulate's sampled worlds from the estimate (docs/uncertainty.md): times scale by est(w) / est(0) from the
/// simulated nominal figures, balance metrics and peaks move by est(w) - est(0).
WorldFigures transfer_world(const WorldFigures& simulated_nominal, const WorldFigures& estimated_nominal,
                            const WorldFigures& estimated_world);

/// Fills every policy's interval and the run's uncertainty from `worlds[p][w]` (policy p of results.policies,
/// world w, world 0 the nominal). Speedups are over speedup_reference(results) in each world; a policy that runs
/// out of memory in a world neither beats the reference there nor wins it (winner and P(winner) count only the
/// policies that fit). `sources` names what was sampled (without the model form, which this adds).
void attach_intervals(RunResults& results, const std::vector<std::vector<WorldFigures>>& worlds,
                      std::vector<std::string> sources, const ModelForm& model_form);

/// What `--samples N` sampled in a scenario's worlds besides the model form: the dataset and the profile fields.
std::vector<std::string> sampled_sources(const LoadedScenario& loaded, bool draw_data = true);

/// Called with the worlds done so far and the worlds in total: once before the first, after each, and at the end
/// (from the calling thread or a helper, one call at a time).
using WorldProgress = std::function<void(int, int)>;

/// `lcsim plan` with sampled worlds: evaluate_plans on world 0 (reporting `progress`), then on each sampled world,
/// `jobs` of them at a time on threads (each world is independent; the results are the same for every `jobs`),
/// then attach_intervals.
RunResults evaluate_with_samples(const LoadedScenario& loaded, const std::vector<std::string>& only_labels, int samples,
                                 const ModelForm& model_form, const PolicyProgress& progress = {},
                                 const WorldProgress& world_progress = {}, bool draw_data = true, int jobs = 1);

/// The estimate's figures of worlds 0..samples-1 for the policies select_policies(only_labels) picks, in that
/// order: result[p][w]; `jobs` worlds at a time, as evaluate_with_samples.
std::vector<std::vector<WorldFigures>> estimate_worlds(const LoadedScenario& loaded,
                                                       const std::vector<std::string>& only_labels, int samples,
                                                       const WorldProgress& world_progress = {}, bool draw_data = true,
                                                       int jobs = 1);

/// --samples: in [1, kMaxSamples]; InputError naming the option otherwise.
int checked_samples(int samples);

/// --jobs of plan and simulate (sampled worlds at a time): at least 1; InputError naming the option otherwise.
int checked_world_jobs(int jobs);

}  // namespace lcsim
