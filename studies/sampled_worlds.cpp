#include "studies/sampled_worlds.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <exception>
#include <filesystem>
#include <mutex>
#include <numbers>
#include <stdexcept>
#include <thread>

#include "base/errors.hpp"
#include "base/fnv1a.hpp"
#include "base/json_reader.hpp"
#include "studies/evaluation.hpp"
#include "studies/interrupts.hpp"

namespace lcsim {
namespace {

constexpr std::uint64_t kWorldSalt = 0x776F726C64ULL;  // "world"
constexpr std::uint64_t kDataStream = 1;
constexpr std::uint64_t kProfileStream = 2;

std::string percent(double share) {
  char text[32];
  std::snprintf(text, sizeof text, "%.1f%%", share * 100);
  return text;
}

/// The model-form draw of one policy in one world: its own stream, so that --policy leaves other policies' draws
/// as they were.
double model_form_z(std::uint64_t scenario_seed, int world, const std::string& label) {
  Rng rng(world_seed(scenario_seed, world) ^ fnv1a(label));
  return standard_normal(rng);
}

double scale_of(Rng& rng, double mape) {
  return std::exp(sigma_from_mape(mape) * standard_normal(rng));
}

void scale_coefficients(ActivationCoefficients& c, double factor) {
  c.per_hidden *= factor;
  c.per_kv_hidden *= factor;
  c.per_ffn *= factor;
}

}  // namespace

double sigma_from_mape(double mape) {
  return mape * std::sqrt(std::numbers::pi / 2);
}

double quantile(std::vector<double> values, double q) {
  if (values.empty()) throw std::invalid_argument("quantile of an empty list");
  std::sort(values.begin(), values.end());
  const double position = std::clamp(q, 0.0, 1.0) * static_cast<double>(values.size() - 1);
  const auto low = static_cast<std::size_t>(std::floor(position));
  const std::size_t high = std::min(low + 1, values.size() - 1);
  const double t = position - static_cast<double>(low);
  return values[low] + t * (values[high] - values[low]);
}

Quantiles quantiles_of(const std::vector<double>& values) {
  return {quantile(values, 0.1), quantile(values, 0.5), quantile(values, 0.9)};
}

double standard_normal(Rng& rng) {
  // 1 - uniform() lies in (0, 1]: the logarithm stays finite.
  const double u1 = 1.0 - rng.uniform();
  const double u2 = rng.uniform();
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * std::numbers::pi * u2);
}

std::uint64_t world_seed(std::uint64_t scenario_seed, int world) {
  return Rng(scenario_seed ^ kWorldSalt).split(static_cast<std::uint64_t>(world)).next();
}

std::vector<std::string> profile_sampled_fields(const Profile& profile) {
  std::vector<std::string> out;
  const auto add = [&](const std::string& name, const std::optional<double>& mape) {
    if (mape) out.push_back(name + " (fit_mape " + percent(*mape) + ")");
  };
  add("compute.gemm_efficiency", profile.compute.gemm_efficiency.fit_mape);
  add("compute.attention_efficiency", profile.compute.attention_efficiency.fit_mape);
  add("compute.layer_overhead", profile.compute.layer_overhead_fit_mape);
  add("memory.activations", profile.memory.fit_mape);
  for (const CollectiveFit& fit : profile.collectives)
    add(collective_parameter(fit.op, fit.link) + " n=" + std::to_string(fit.group_size), fit.fit_mape);
  return out;
}

Profile perturb_profile(const Profile& profile, Rng& rng) {
  Profile out = profile;
  ComputeProfile& c = out.compute;
  // An efficiency above the peak is not a machine: clamp at 1.
  const auto scale_curve = [](Curve& curve, double factor) {
    for (double& y : curve.y) y = std::min(1.0, y / factor);
  };
  // The curves draw in the same order either way, so a world's other draws do not depend on which rule applies.
  double curve_factor[2] = {1, 1};
  Curve* curves[2] = {&c.gemm_efficiency, &c.attention_efficiency};
  for (int i = 0; i < 2; ++i)
    if (curves[i]->fit_mape) curve_factor[i] = scale_of(rng, *curves[i]->fit_mape);
  if (c.layer_overhead_fit_mape) {
    // The layer fit's residual is on whole layer times, (1 + k) GEMM passes + attention + fixed, priced with these
    // very curves: it already holds what the curves get wrong inside a layer. One draw scales the whole layer
    // (both curves and the fixed cost); drawing the curves on top of it would count their errors twice.
    const double factor = scale_of(rng, *c.layer_overhead_fit_mape);
    scale_curve(c.gemm_efficiency, factor);
    scale_curve(c.attention_efficiency, factor);
    c.layer_overhead_us *= factor;
  } else {
    for (int i = 0; i < 2; ++i)
      if (curves[i]->fit_mape) scale_curve(*curves[i], curve_factor[i]);
  }
  if (out.memory.fit_mape) {
    const double factor = scale_of(rng, *out.memory.fit_mape);
    scale_coefficients(out.memory.activations_none, factor);
    scale_coefficients(out.memory.activations_selective, factor);
    scale_coefficients(out.memory.activations_full, factor);
  }
  for (CollectiveFit& fit : out.collectives) {
    if (!fit.fit_mape) continue;
    const double factor = scale_of(rng, *fit.fit_mape);
    for (CollectiveSegment& segment : fit.segments) {
      segment.latency_us *= factor;
      segment.bus_GBps /= factor;
    }
  }
  return out;
}

Profile world_profile(const Profile& nominal, std::uint64_t scenario_seed, int world) {
  Rng rng = Rng(world_seed(scenario_seed, world)).split(kProfileStream);
  return perturb_profile(nominal, rng);
}

LoadedScenario load_world(const LoadedScenario& nominal, int world, bool draw_data) {
  const std::uint64_t seed = world_seed(nominal.scenario.seed, world);
  LoadedScenario out;
  out.scenario = nominal.scenario;
  out.profile = world_profile(nominal.profile, nominal.scenario.seed, world);
  const Scenario& s = out.scenario;
  out.cost = std::make_unique<CostModel>(s.model, s.cluster, out.profile, cost_model_options(s));
  if (draw_data) {
    out.batches = prepare_batches(s, out.dataset_label, Rng(seed).split(kDataStream).next());
  } else {
    out.batches = nominal.batches;
    out.dataset_label = nominal.dataset_label;
  }
  out.dataset_lengths = nominal.dataset_lengths;  // another draw of the window, from the same dataset
  // What a policy settles offline (Hydraulis' proposal) it settles from the nominal world: PlanningContext::nominal.
  out.nominal_world = &nominal;
  return out;
}

ModelForm load_model_form(const std::string& file, const std::string& shown) {
  const nlohmann::json document = parse_json_file(file);
  const auto fail = [&](const std::string& what) { throw InputError(file + ": " + what); };
  const auto schema = document.is_object() ? document.find("schema") : document.end();
  if (!document.is_object() || schema == document.end() || !schema->is_string() ||
      schema->get<std::string>() != kModelFormSchema)
    fail(std::string("schema: expected \"") + kModelFormSchema + "\"");
  const auto families = document.find("families");
  if (families == document.end() || !families->is_object() || !families->contains("time"))
    fail("families.time: missing");
  const auto sigma_of = [&](const std::string& name) {
    const nlohmann::json& family = families->at(name);
    if (!family.is_object() || !family.contains("log_sigma") || !family.at("log_sigma").is_number())
      fail("families." + name + ".log_sigma: expected a number");
    const double sigma = family.at("log_sigma").get<double>();
    if (!std::isfinite(sigma) || sigma < 0 || sigma > 10) fail("families." + name + ".log_sigma: must be in [0, 10]");
    return sigma;
  };
  ModelForm form{shown, sigma_of("time")};
  if (families->contains("time_calibrated")) form.calibrated_speedup_log_sigma = sigma_of("time_calibrated");
  return form;
}

ModelForm ModelForm::for_profile(const Profile& profile) const {
  if (!profile.provenance.calibrated || !calibrated_speedup_log_sigma) return *this;
  ModelForm form = *this;
  form.speedup_log_sigma = *calibrated_speedup_log_sigma;
  form.family = "time_calibrated";
  return form;
}

WorldFigures world_figures(const PolicyResult& result) {
  WorldFigures f;
  f.mean_iteration_s = result.mean_iteration_s;
  f.tokens_per_s = result.tokens_per_s;
  f.metrics = result.metrics;
  f.oom_iterations = result.oom_iterations;
  double peak = 0;
  for (const auto& it : result.iterations) peak += it.peak_bytes;
  constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;
  f.peak_GiB = result.iterations.empty() ? 0 : peak / static_cast<double>(result.iterations.size()) / kGiB;
  return f;
}

WorldFigures transfer_world(const WorldFigures& simulated_nominal, const WorldFigures& estimated_nominal,
                            const WorldFigures& estimated_world) {
  const auto ratio = [](double sim, double est0, double estw) { return est0 > 0 ? sim * estw / est0 : estw; };
  const auto shift = [](double sim, double est0, double estw) { return sim + (estw - est0); };
  WorldFigures f;
  f.mean_iteration_s =
      ratio(simulated_nominal.mean_iteration_s, estimated_nominal.mean_iteration_s, estimated_world.mean_iteration_s);
  f.tokens_per_s = ratio(simulated_nominal.tokens_per_s, estimated_nominal.tokens_per_s, estimated_world.tokens_per_s);
  f.peak_GiB = shift(simulated_nominal.peak_GiB, estimated_nominal.peak_GiB, estimated_world.peak_GiB);
  const BalanceMetrics& s = simulated_nominal.metrics;
  const BalanceMetrics& e0 = estimated_nominal.metrics;
  const BalanceMetrics& ew = estimated_world.metrics;
  f.metrics = s;
  f.metrics.dbr = shift(s.dbr, e0.dbr, ew.dbr);
  f.metrics.pr = shift(s.pr, e0.pr, ew.pr);
  f.metrics.abr = shift(s.abr, e0.abr, ew.abr);
  f.metrics.abr_work = shift(s.abr_work, e0.abr_work, ew.abr_work);
  f.metrics.cr = shift(s.cr, e0.cr, ew.cr);
  f.metrics.max_min_time_ratio = shift(s.max_min_time_ratio, e0.max_min_time_ratio, ew.max_min_time_ratio);
  f.metrics.pipeline_gap = shift(s.pipeline_gap, e0.pipeline_gap, ew.pipeline_gap);
  // The world's own memory verdict: the estimate's peaks are the simulator's (estimate_peak_bytes).
  f.oom_iterations = estimated_world.oom_iterations;
  return f;
}

void attach_intervals(RunResults& results, const std::vector<std::vector<WorldFigures>>& worlds,
                      std::vector<std::string> sources, const ModelForm& model_form) {
  if (worlds.size() != results.policies.size())
    throw std::logic_error("attach_intervals: world figures for another number of policies");
  const std::size_t samples = worlds.empty() ? 1 : worlds.front().size();
  for (const auto& w : worlds)
    if (w.size() != samples || samples == 0) throw std::logic_error("attach_intervals: uneven world counts");
  // Speedups are over the reference: the baseline, or the fastest policy that fits when the baseline does not.
  const std::string& reference = speedup_reference(results);
  const auto base = std::find_if(results.policies.begin(), results.policies.end(),
                                 [&](const PolicyResult& p) { return p.label == reference; });
  if (base == results.policies.end()) throw std::logic_error("attach_intervals: no baseline");
  const auto base_index = static_cast<std::size_t>(base - results.policies.begin());
  const double time_sigma = model_form.speedup_log_sigma / std::numbers::sqrt2;

  // factor[p][w]: the model form's time factor; world 0 is the nominal run and has none.
  std::vector<std::vector<double>> factor(worlds.size(), std::vector<double>(samples, 1.0));
  for (std::size_t p = 0; p < worlds.size(); ++p)
    for (std::size_t w = 1; w < samples; ++w)
      factor[p][w] = std::exp(time_sigma * model_form_z(results.seed, static_cast<int>(w), results.policies[p].label));

  std::vector<std::vector<double>> rate(worlds.size(), std::vector<double>(samples));
  for (std::size_t p = 0; p < worlds.size(); ++p)
    for (std::size_t w = 0; w < samples; ++w) rate[p][w] = worlds[p][w].tokens_per_s / factor[p][w];

  for (std::size_t p = 0; p < worlds.size(); ++p) {
    PolicyInterval& in = results.policies[p].interval;
    in = PolicyInterval{};
    in.samples = static_cast<int>(samples);
    std::vector<double> times, speedups, rates;
    int beats = 0;
    for (std::size_t w = 0; w < samples; ++w) {
      const WorldFigures& f = worlds[p][w];
      const double base_rate = worlds[base_index][w].tokens_per_s;
      in.world_iteration_s.push_back(f.mean_iteration_s);
      in.world_speedup.push_back(base_rate > 0 ? f.tokens_per_s / base_rate : 0);
      in.world_peak_GiB.push_back(f.peak_GiB);
      in.world_metrics.push_back(f.metrics);
      times.push_back(f.mean_iteration_s * factor[p][w]);
      rates.push_back(rate[p][w]);
      const double speedup = rate[base_index][w] > 0 ? rate[p][w] / rate[base_index][w] : 0;
      speedups.push_back(speedup);
      if (speedup > 1 && f.oom_iterations == 0) ++beats;  // a plan that does not fit beats nothing
    }
    in.iteration_s = quantiles_of(times);
    in.speedup = quantiles_of(speedups);
    in.tokens_per_s = quantiles_of(rates);
    in.p_beats_baseline = static_cast<double>(beats) / static_cast<double>(samples);
  }

  RunUncertainty& u = results.uncertainty;
  u.samples = static_cast<int>(samples);
  if (model_form.file.empty()) {
    sources.push_back("model form: not applied (no model-form file)");
  } else {
    char text[160];
    std::snprintf(text, sizeof text, "model form (%s): log sigma %.3f of a speedup (%.3f of a time)",
                  model_form.family.c_str(), model_form.speedup_log_sigma, time_sigma);
    sources.push_back(std::string(text) + ", from " + model_form.file);
  }
  u.sources = samples > 1 ? std::move(sources) : std::vector<std::string>{};
  u.model_form_log_sigma = model_form.file.empty() ? 0 : model_form.speedup_log_sigma;
  u.model_form_file = model_form.file;
  // The nominal winner, and how often it stays the winner; ties go to the earlier policy, as in the table. Only
  // the policies that fit in memory in a world can win it.
  constexpr std::size_t kNone = static_cast<std::size_t>(-1);
  const auto best_in = [&](std::size_t w) {
    std::size_t best = kNone;
    for (std::size_t p = 0; p < worlds.size(); ++p)
      if (worlds[p][w].oom_iterations == 0 && (best == kNone || rate[p][w] > rate[best][w])) best = p;
    return best;
  };
  const std::size_t winner = best_in(0);
  u.winner = winner == kNone ? std::string() : results.policies[winner].label;
  int wins = 0;
  for (std::size_t w = 0; w < samples; ++w)
    if (winner != kNone && best_in(w) == winner) ++wins;
  u.p_winner = static_cast<double>(wins) / static_cast<double>(samples);
}

std::vector<std::string> sampled_sources(const LoadedScenario& loaded, bool draw_data) {
  std::vector<std::string> sources;
  if (!draw_data)
    sources.push_back("dataset: the scenario's own in every world (--fixed-data)");
  else
    sources.push_back(loaded.scenario.dataset.trace_path.empty()
                          ? "dataset: the named distributions sampled with another seed per world"
                          : "dataset: a bootstrap resample of the length trace per world (same count)");
  for (std::string& field : profile_sampled_fields(loaded.profile)) sources.push_back("profile: " + field);
  return sources;
}

namespace {

RunResults world_results(const LoadedScenario& loaded, const std::vector<std::string>& only_labels, int world,
                         bool draw_data) {
  if (world == 0) return evaluate_plans(loaded, only_labels);
  // A sampled world can fail where the nominal one did not (a longer sequence, a larger window): say which.
  const std::string where =
      "sampled world " + std::to_string(world) + " (--samples; --samples 1 runs the nominal " + "world only): ";
  try {
    return evaluate_plans(load_world(loaded, world, draw_data), only_labels);
  } catch (const PlanningError& e) {
    throw PlanningError(where + e.what());
  } catch (const InputError& e) {
    throw InputError(where + e.what());
  }
}

/// The figures of worlds [first, samples), `jobs` at a time: out[w - first][p]. Helpers take worlds in index order
/// and stop taking them after a failure, so every world below a failed one has run: the error rethrown, the
/// lowest world's, is the one a serial run meets first.
std::vector<std::vector<WorldFigures>> run_worlds(const LoadedScenario& loaded,
                                                  const std::vector<std::string>& only_labels, int first, int samples,
                                                  const WorldProgress& world_progress, bool draw_data, int jobs) {
  if (jobs < 1) throw std::invalid_argument("run_worlds: jobs must be at least 1");
  const int count = std::max(0, samples - first);
  std::vector<std::vector<WorldFigures>> out(static_cast<std::size_t>(count));
  std::vector<std::exception_ptr> errors(static_cast<std::size_t>(count));
  std::mutex mutex;  // guards next, done, failed, reporting and the progress calls
  int next = 0, done = 0;
  bool failed = false;
  std::exception_ptr reporting;  // a progress callback's exception (a Python callable may raise): it ends the run
  if (world_progress) world_progress(0, count);
  const auto worker = [&] {
    for (;;) {
      int i = 0;
      {
        const std::lock_guard lock(mutex);
        if (failed || next == count) return;
        i = next++;
      }
      const auto at = static_cast<std::size_t>(i);
      try {
        check_host_signals();  // between sampled worlds: a host's Ctrl-C (Python's KeyboardInterrupt) ends the run
        const RunResults r = world_results(loaded, only_labels, first + i, draw_data);
        for (const auto& policy : r.policies) out[at].push_back(world_figures(policy));
      } catch (...) {
        errors[at] = std::current_exception();
      }
      const std::lock_guard lock(mutex);
      failed = failed || errors[at] != nullptr;
      ++done;
      try {
        if (world_progress && !reporting) world_progress(done, count);
      } catch (...) {
        reporting = std::current_exception();
        failed = true;
      }
    }
  };
  {
    std::vector<std::jthread> helpers;
    for (int j = 1; j < jobs && j < count; ++j) helpers.emplace_back(worker);
    worker();
  }
  for (const auto& error : errors)
    if (error) std::rethrow_exception(error);
  if (reporting) std::rethrow_exception(reporting);
  return out;
}

}  // namespace

std::vector<std::vector<WorldFigures>> estimate_worlds(const LoadedScenario& loaded,
                                                       const std::vector<std::string>& only_labels, int samples,
                                                       const WorldProgress& world_progress, bool draw_data, int jobs) {
  const auto by_world = run_worlds(loaded, only_labels, 0, samples, world_progress, draw_data, jobs);
  std::vector<std::vector<WorldFigures>> out(by_world.empty() ? 0 : by_world.front().size());
  for (const auto& world : by_world)
    for (std::size_t p = 0; p < out.size(); ++p) out[p].push_back(world[p]);
  return out;
}

RunResults evaluate_with_samples(const LoadedScenario& loaded, const std::vector<std::string>& only_labels, int samples,
                                 const ModelForm& model_form, const PolicyProgress& progress,
                                 const WorldProgress& world_progress, bool draw_data, int jobs) {
  RunResults results = evaluate_plans(loaded, only_labels, progress);
  std::vector<std::vector<WorldFigures>> worlds(results.policies.size());
  for (std::size_t p = 0; p < results.policies.size(); ++p) worlds[p].push_back(world_figures(results.policies[p]));
  if (samples > 1)
    for (const auto& world : run_worlds(loaded, only_labels, 1, samples, world_progress, draw_data, jobs))
      for (std::size_t p = 0; p < worlds.size(); ++p) worlds[p].push_back(world[p]);
  attach_intervals(results, worlds, sampled_sources(loaded, draw_data), model_form.for_profile(loaded.profile));
  return results;
}

int checked_samples(int samples) {
  if (samples < 1 || samples > kMaxSamples)
    throw InputError("--samples: must be in [1, " + std::to_string(kMaxSamples) + "], got " + std::to_string(samples));
  return samples;
}

int checked_world_jobs(int jobs) {
  if (jobs < 1) throw InputError("--jobs: must be at least 1, got " + std::to_string(jobs));
  return jobs;
}

std::string shipped_model_form_file() {
  return LCSIM_SOURCE_DIR "/scenarios/validation/model-form.json";
}

ModelForm shipped_model_form() {
  const std::string shipped = shipped_model_form_file();
  if (!std::filesystem::exists(shipped)) return {};
  return load_model_form(shipped, kShippedModelFormName);
}

}  // namespace lcsim
