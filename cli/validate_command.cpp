// `lcsim validate`: every entry of a catalogue of published figures, predicted by `lcsim plan|simulate` runs (one
// process per distinct run, --jobs at a time) or by the cost model directly, and compared with the paper.
#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <map>
#include <set>
#include <sstream>

#include <boost/program_options.hpp>

#include "base/files.hpp"
#include "base/json_reader.hpp"
#include "base/terminal.hpp"
#include "cli/cli.hpp"
#include "cli/command_options.hpp"
#include "cli/progress.hpp"
#include "formats/results_io.hpp"
#include "formats/scenario_loader.hpp"
#include "studies/interrupts.hpp"
#include "studies/sampled_worlds.hpp"
#include "studies/sweep.hpp"
#include "studies/validate.hpp"
#include "studies/validation_catalogue.hpp"
#include "studies/validation_intervals.hpp"

namespace lcsim {
namespace {

namespace po = boost::program_options;
namespace fs = std::filesystem;
using Json = nlohmann::json;

constexpr const char* kValidateUsage = "Usage: lcsim validate [options]\n";

po::options_description validate_options() {
  po::options_description options("Options", 110, 60);
  options.add_options()              //
      ("help,h", "print this help")  //
      ("catalogue,c", po::value<std::string>()->value_name("FILE"),
       "catalogue of published figures (default: scenarios/validation/catalogue.json of the source tree)")  //
      ("json", po::value<std::string>()->value_name("FILE"),
       "write every entry, its points and the summary (schema lcsim-validation/4) to FILE")         //
      ("csv", po::value<std::string>()->value_name("FILE"), "write one CSV row per entry to FILE")  //
      ("jobs,j", po::value<int>()->default_value(default_jobs())->value_name("N"),
       "runs at once (plans on threads, simulations in child processes); results do not depend on it")  //
      ("profile", po::value<std::vector<std::string>>()->composing()->value_name("FILE"),
       "run every scenario whose cluster has this profile's GPU kind with FILE instead of its own profile "
       "(repeatable, one per GPU kind; a framework benchmark keeps its stack preset); an entry is fitted when the "
       "profile it runs with lists it in "
       "provenance.fitted_on")  //
      ("only", po::value<std::vector<std::string>>()->composing()->value_name("ID"),
       "validate only the entry with this id (repeatable)")  //
      ("work", po::value<std::string>()->value_name("DIR"),
       "write every run's scenario, results and log into DIR (default: none; a failed run's error is in the "
       "message)")  //
      ("samples", po::value<int>()->default_value(8)->value_name("N"),
       "sampled worlds per run (lcsim plan|simulate --samples): each held-out entry gets an 80% interval, and "
       "the summary its coverage and median width (docs/uncertainty.md); 1: no intervals")  //
      ("write-model-form", po::value<std::string>()->value_name("FILE"),
       "write each quantity family's model-form log sigma over the whole catalogue to FILE (schema "
       "lcsim-model-form/1; the shipped one is scenarios/validation/model-form.json)")  //
      ("quiet,q", "do not print the table")                                             //
      ("wide",
       "print one row per entry with every column (default: the summary and one row per source, within "
       "the terminal's width or 120 columns; the files always hold every entry)");
  return options;
}

std::string validate_help() {
  std::ostringstream text;
  text << kValidateUsage
       << "\nChecks lcsim's predictions against the figures the papers publish (Skrull, Hydraulis, HBP, WLB-LLM,\n"
          "FlexSP), against public framework benchmarks (torchtitan, NeMo) and against lcsim's own runs on real GPUs\n"
          "(measured entries: a committed lcsim-gpu live --json file); each family is summarized on a line of its\n"
          "own. Each entry of the catalogue names its source, the scenarios (and changes to them)\n"
          "it needs, the quantity (a speedup, a balance metric, OOM or not, a collective's time), and the figure.\n"
          "Every distinct run is one plan (in this process) or simulation (in a child process). Prints, per entry:\n"
          "status (held out, "
          "fitted -- the profile it runs with set a parameter from it -- or not expressible, with the reason),\n"
          "published and predicted figures, signed error, whether the ordering holds (the same policy wins, the\n"
          "trend runs the same way; a trend with published values also its factor, first to last point, against\n"
          "the published one) and whether it is within tolerance; then the held-out MAPE. Exit 0 when every\n"
          "run ran, however large the errors: accuracy is a reported number. A measured entry whose policy now\n"
          "plans other iterations than the hardware ran (its file's plan labels) fails the command: re-measure it\n"
          "or pin the policy's options. Catalogue format: docs/validation.md.\n\n"
       << validate_options();
  return text.str();
}

std::string fixed(double value, int precision) {
  std::ostringstream s;
  s << std::fixed << std::setprecision(precision) << value;
  return s.str();
}

/// Three significant digits; seconds below 0.1 s in microseconds (collective latencies).
std::string figure(double value, ValidationQuantity quantity) {
  std::ostringstream s;
  if (quantity == ValidationQuantity::CollectiveSeconds) {
    s << std::setprecision(4) << value * 1e6 << "us";
  } else {
    s << std::fixed << std::setprecision(value < 0.1 ? 4 : value < 10 ? 3 : 2) << value;
  }
  return s.str();
}

std::string shown(const EntryOutcome& o, bool predicted) {
  const ValidationEntry& e = *o.entry;
  if (!predicted) {
    std::ostringstream s;
    s << std::setprecision(4);
    const auto& f = e.published;
    if (!e.published_text.empty()) return e.published_text;
    if (e.combine == ValidationCombine::Each || (f.trend && e.points.front().published)) {
      if (f.trend) s << (*f.trend == Trend::Increasing ? "rising " : "falling ");
      for (std::size_t i = 0; i < e.points.size(); ++i)
        s << (i ? " " : "") << figure(*e.points[i].published, e.quantity);
      return s.str();
    }
    if (f.value) s << *f.value;
    if (f.low) s << *f.low << "-" << *f.high;
    if (f.yes) s << (*f.yes ? "OOM" : "fits");
    if (f.trend) s << (*f.trend == Trend::Increasing ? "rising" : "falling");
    return s.str();
  }
  if (!o.failed.empty()) return "failed";
  if (o.predicted_yes) return *o.predicted_yes ? "OOM" : "fits";
  if (o.predicted) return figure(*o.predicted, e.quantity);
  std::string series;
  for (const auto& p : o.points)
    if (p.value) series += (series.empty() ? "" : " ") + figure(*p.value, e.quantity);
  return series;
}

/// A signed relative error as the table prints it: "+43.5%".
std::string percent(double fraction) {
  return (fraction >= 0 ? "+" : "") + fixed(100 * fraction, 1) + "%";
}

/// How far a series goes, published and predicted, and the predicted factor's error: "x7.10 / x5.26 (-25.9%)"; "-"
/// for other entries.
std::string factor_cell(const EntryOutcome& o) {
  if (!o.series_factor) return "-";
  const SeriesFactor& f = *o.series_factor;
  return "x" + fixed(f.published, 2) + " / x" + fixed(f.predicted, 2) + " (" + percent(f.error) + ")";
}

/// The line under a family's (`kind`, entry_kind's word): of its `checked` trend factors, `within` are within
/// kTrendFactorTolerance of the published ones.
std::string factor_line(const std::string& kind, int within, int checked) {
  return "  " + kind + " trend factors within " + fixed(100 * kTrendFactorTolerance, 0) +
         "%: " + std::to_string(within) + "/" + std::to_string(checked) +
         " (how far each trend with published values goes: its end points' ratio)\n";
}

/// An entry's 80% interval as the table shows it: p10-p90 of its one figure, or how many of its per-point figures
/// fall inside theirs; "-" without one (one world, or an entry that is not held out and numeric).
std::string interval_cell(const EntryInterval* interval, ValidationQuantity quantity) {
  if (interval == nullptr || interval->quantiles.empty()) return "-";
  const std::string inside = interval->covered >= 1 ? " in" : interval->covered <= 0 ? " OUT" : "";
  if (interval->quantiles.size() == 1)
    return figure(interval->quantiles.front().p10, quantity) + "-" + figure(interval->quantiles.front().p90, quantity) +
           inside;
  return fixed(100 * interval->covered, 0) + "% of points in";
}

/// The compact table: one row per source (a paper, or a measured run's folder) -- its entries, how many are held
/// out, within tolerance, their MAPE and the orderings kept.
void print_source_table(const std::vector<EntryOutcome>& outcomes, std::size_t columns, std::ostream& out) {
  struct Tally {
    int entries = 0, held_out = 0, judged = 0, within = 0, numeric = 0, ordering_held = 0, ordering_checked = 0;
    int factor_within = 0, factor_checked = 0;
    double abs_error = 0;
  };
  std::vector<std::string> order;
  std::map<std::string, Tally> tally;
  for (const auto& o : outcomes) {
    const ValidationEntry& e = *o.entry;
    const std::string source = e.source.paper;
    if (!tally.contains(source)) order.push_back(source);
    Tally& t = tally[source];
    ++t.entries;
    if (entry_status(o) == "held out") ++t.held_out;
    if (!e.not_expressible.empty() || !o.failed.empty()) continue;
    ++t.judged;
    t.within += o.within_tolerance ? 1 : 0;
    if (o.abs_error || o.error) {
      ++t.numeric;
      t.abs_error += o.abs_error ? *o.abs_error : std::abs(*o.error);
    }
    if (o.ordering != OrderingVerdict::NotApplicable) {
      ++t.ordering_checked;
      t.ordering_held += o.ordering == OrderingVerdict::Held ? 1 : 0;
    }
    if (o.series_factor) {
      ++t.factor_checked;
      t.factor_within += o.series_factor->within() ? 1 : 0;
    }
  }
  std::vector<std::vector<std::string>> rows = {
      {"source", "entries", "held out", "within tolerance", "MAPE", "ordering kept", "trend factors"}};
  const auto of = [](int k, int n) { return n > 0 ? std::to_string(k) + "/" + std::to_string(n) : std::string("-"); };
  for (const std::string& source : order) {
    const Tally& t = tally[source];
    rows.push_back({source, std::to_string(t.entries), std::to_string(t.held_out),
                    std::to_string(t.within) + "/" + std::to_string(t.judged),
                    t.numeric > 0 ? fixed(100 * t.abs_error / t.numeric, 1) + "%" : "-",
                    of(t.ordering_held, t.ordering_checked), of(t.factor_within, t.factor_checked)});
  }
  print_aligned_rows(rows, out);
  const std::string factors = "trend factors: the trends whose end points' ratio is within " +
                              fixed(100 * kTrendFactorTolerance, 0) + "% of the published one; ";
  out << wrap_lines(
      "MAPE: mean absolute error of the entries with a numeric figure (held out, fitted and measured alike); " +
          factors +
          "--wide: one row per entry with its published and predicted figures, error, trend factor and interval "
          "(also in --json and --csv)\n",
      columns);
}

void print_entry_table(const std::vector<EntryOutcome>& outcomes, const std::vector<EntryInterval>& intervals,
                       std::ostream& out) {
  std::map<std::string, const EntryInterval*> interval_of;
  for (const auto& interval : intervals) interval_of[interval.id] = &interval;
  std::vector<std::vector<std::string>> rows = {{"entry", "source", "status", "published", "predicted", "80% interval",
                                                 "error", "trend factor", "ordering", "ok"}};
  for (const auto& o : outcomes) {
    const ValidationEntry& e = *o.entry;
    const std::string status = entry_status(o) + (e.measured.empty() ? "" : ", measured");
    const auto found = interval_of.find(e.id);
    rows.push_back({e.id, e.source.paper + " " + e.source.where, status, shown(o, false), shown(o, true),
                    interval_cell(found == interval_of.end() ? nullptr : found->second, e.quantity),
                    o.error ? percent(*o.error) : "-", factor_cell(o),
                    e.not_expressible.empty() && o.failed.empty() ? (o.ordering == OrderingVerdict::Held     ? "held"
                                                                     : o.ordering == OrderingVerdict::Broken ? "BROKEN"
                                                                                                             : "-")
                                                                  : "-",
                    e.not_expressible.empty() && o.failed.empty() ? (o.within_tolerance ? "yes" : "no") : "-"});
  }
  print_aligned_rows(rows, out);
}

void print_summary_lines(const std::vector<EntryOutcome>& outcomes, const ValidationSummary& summary,
                         std::ostream& out) {
  out << "\nheld out: " << summary.held_out << " published entries; over the " << summary.held_out_numeric
      << " with a numeric error, MAPE " << fixed(100 * summary.held_out_mape, 1) << "%, median "
      << fixed(100 * summary.held_out_median_ape, 1) << "%; " << summary.held_out_within_tolerance << "/"
      << summary.held_out << " within tolerance (and ordering)\n";
  const HeldOutErrors& m = summary.measured;
  if (m.entries > 0)
    out << "measured: " << m.entries << " entries (real hardware); over the " << m.numeric
        << " with a numeric error, MAPE " << fixed(100 * m.mape, 1) << "%, median " << fixed(100 * m.median_ape, 1)
        << "%; " << m.within_tolerance << "/" << m.entries << " within tolerance (and ordering); ordering "
        << m.ordering_held << "/" << m.ordering_checked << "\n";
  if (m.entries > 0 && m.factor_checked > 0) out << factor_line("measured", m.factor_within, m.factor_checked);
  const HeldOutErrors& f = summary.framework;
  if (f.entries > 0)
    out << "framework: " << f.entries << " framework-benchmark entries; over the " << f.numeric
        << " with a numeric error, MAPE " << fixed(100 * f.mape, 1) << "%, median " << fixed(100 * f.median_ape, 1)
        << "%; " << f.within_tolerance << "/" << f.entries << " within tolerance; orderings and trends "
        << f.ordering_held << "/" << f.ordering_checked << "\n";
  if (f.entries > 0 && f.factor_checked > 0) out << factor_line("framework", f.factor_within, f.factor_checked);
  const MeasuredRanking& r = summary.measured_ranking;
  if (r.pairs + r.ties > 0) {
    out << "ranking:  " << r.kept << "/" << r.pairs
        << " pairs of policies of one measured run ranked as the hardware ranked them (" << r.ties
        << " pairs measured within " << fixed(100 * kMeasuredRankingTie, 0) << "% of each other not judged)\n";
    for (const BrokenRanking& b : r.broken)
      out << "  BROKEN " << b.faster << " over " << b.slower << " in " << folder_and_name(b.run) << ": measured "
          << fixed(b.measured_faster, 3) << "x against " << fixed(b.measured_slower, 3) << "x, predicted "
          << fixed(b.predicted_faster, 3) << "x against " << fixed(b.predicted_slower, 3) << "x\n";
  }
  out << "ordering: " << summary.ordering_held << "/" << summary.ordering_checked
      << " published entries keep the published ordering (who wins, which way a trend runs)\n";
  if (summary.factor_checked > 0) out << factor_line("published", summary.factor_within, summary.factor_checked);
  out << "fitted:   " << summary.fitted << " entries (a free parameter was set from them; not in the MAPE)\n";
  out << "not expressible: " << summary.not_expressible << "; failed: " << summary.failed << "\n";
  for (const auto& o : outcomes)
    if (!o.entry->not_expressible.empty()) out << "  " << o.entry->id << ": " << o.entry->not_expressible << "\n";
  for (const auto& o : outcomes)
    if (!o.failed.empty()) out << "  " << o.entry->id << " failed: " << o.failed << "\n";
}

/// A summary line as printed: cut into lines of `columns` (0: as it comes).
std::string summary_text(const std::string& text, std::size_t columns) {
  return wrap_lines(text, columns);
}

void print_table(const ValidationCatalogue& catalogue, const std::vector<EntryOutcome>& outcomes,
                 const ValidationSummary& summary, const std::vector<EntryInterval>& intervals,
                 const std::string& profile_note, std::size_t columns, std::ostream& out) {
  out << summary_text("catalogue " + catalogue.file + " (" + std::to_string(outcomes.size()) + " entries)\n", columns);
  if (!profile_note.empty()) out << summary_text("profiles  " + profile_note + "\n", columns);
  if (columns > 0) {
    print_source_table(outcomes, columns, out);
  } else {
    print_entry_table(outcomes, intervals, out);
  }
  std::ostringstream lines;
  print_summary_lines(outcomes, summary, lines);
  out << summary_text(lines.str(), columns);
}

// ---- 80% intervals (studies/validation_intervals.hpp) ----

void print_interval_summary(const IntervalSummary& s, std::ostream& out) {
  if (s.samples <= 1) return;
  out << "intervals: 80% (p10-p90) over " << s.samples
      << " sampled worlds, model form leave-one-source-out per quantity family (docs/uncertainty.md)\n";
  out << "coverage: " << fixed(100 * s.coverage, 1) << "% (" << fixed(s.covered, 1) << " of " << s.entries
      << " held-out numeric entries inside their interval, " << fixed(s.measured_covered, 1) << " of the "
      << s.measured_entries << " measured ones; target 80%)\n";
  out << "width:    median relative width (p90 - p10) / p50 " << fixed(s.median_relative_width, 3) << "\n";
  for (const auto& [kind, k] : s.kinds)
    out << "  " << kind << ": coverage " << fixed(100 * k.coverage, 1) << "% of " << k.entries
        << " entries, median width " << fixed(k.median_relative_width, 3) << "\n";
  out << "model form (whole catalogue, log sigma):";
  for (const auto& [family, sigma] : s.families)
    out << " " << to_string(family) << " " << fixed(sigma.log_sigma, 3) << " (" << sigma.entries << ")";
  out << "\n";
}

/// --work DIR: each run's scenario, its results and its error, for a reader; nothing reads them back.
void write_work_folder(const std::string& dir, const ValidationPlan& plan, const ValidationReport& report) {
  std::error_code made;
  fs::create_directories(dir, made);
  if (made) throw InputError(dir + ": cannot create the work folder: " + made.message());
  for (std::size_t i = 0; i < plan.runs.size(); ++i) {
    const RunOutcome& o = report.run_outcomes[i];
    write_file_atomically((fs::path(dir) / validation_run_name(i, ".json")).string(),
                          plan.runs[i].scenario.dump(2) + "\n");
    if (o.status == kExitOk)
      write_file_atomically((fs::path(dir) / validation_run_name(i, ".results.json")).string(),
                            o.results.dump(2) + "\n");
    write_file_atomically((fs::path(dir) / validation_run_name(i, ".log")).string(), run_log_text(o));
  }
}

}  // namespace

void run_validate_command(const std::vector<std::string>& args, std::ostream& out) {
  const InterruptScope interrupts;  // Ctrl-C and SIGTERM reach the children, then the command stops
  po::variables_map vm;
  const po::options_description options = validate_options();
  try {
    // No positional argument: an empty description makes a stray one an error instead of being ignored.
    po::store(po::command_line_parser(args).options(options).positional({}).run(), vm);
    po::notify(vm);
  } catch (const po::error& e) {
    throw UsageError(std::string("validate: ") + e.what(), validate_help());
  }
  reject_empty_values("validate", vm, options, validate_help());
  if (vm.count("help")) {
    out << validate_help();
    return;
  }
  ValidateSettings settings;
  settings.jobs = vm["jobs"].as<int>();
  if (settings.jobs < 1)
    throw UsageError("validate: --jobs must be at least 1, got " + std::to_string(settings.jobs), validate_help());
  settings.samples = vm["samples"].as<int>();
  if (vm.count("catalogue")) settings.catalogue_file = vm["catalogue"].as<std::string>();
  if (vm.count("profile")) settings.profile_files = vm["profile"].as<std::vector<std::string>>();
  if (vm.count("only")) settings.only = vm["only"].as<std::vector<std::string>>();
  const ValidationPlan plan = plan_validation(settings);

  OutputGuard guard;
  guard.add_inputs(validation_inputs(plan));
  for (const auto& output : output_options(vm, {"json", "csv", "write-model-form"}))
    guard.add_output(output.option, output.file);
  if (vm.count("work")) {
    std::vector<std::string> names;
    for (std::size_t i = 0; i < plan.runs.size(); ++i)
      for (const char* suffix : {".json", ".results.json", ".log"}) names.push_back(validation_run_name(i, suffix));
    guard.add_folder("--work " + vm["work"].as<std::string>(), vm["work"].as<std::string>(), names);
  }
  guard.check();

  LocalRunner runner;
  const ValidationReport report =
      run_validation(plan, runner, [](std::size_t done, std::size_t total) { print_progress(done, total, "runs"); });
  if (vm.count("work")) write_work_folder(vm["work"].as<std::string>(), plan, report);

  std::vector<std::string> written;
  if (vm.count("json"))
    write_output(vm["json"].as<std::string>(), validation_report_to_json(plan, report).dump(2) + "\n", written);
  if (vm.count("write-model-form"))
    write_output(vm["write-model-form"].as<std::string>(), validation_model_form_to_json(plan, report).dump(2) + "\n",
                 written);
  if (vm.count("csv")) write_output(vm["csv"].as<std::string>(), validation_to_csv(report.outcomes), written);
  std::string profile_note;
  for (const auto& p : report.profile_labels) profile_note += (profile_note.empty() ? "" : "; ") + p;
  if (!vm.count("quiet")) {
    const std::size_t columns = output_columns(vm.count("wide") > 0);
    print_table(*plan.catalogue, report.outcomes, report.summary, report.intervals, profile_note, columns, out);
    std::ostringstream intervals;
    print_interval_summary(report.interval_summary, intervals);
    out << wrap_lines(intervals.str(), columns);
  }
  check_validation_report(plan, report);
}

}  // namespace lcsim
