// `lcsim report`: the report page (formats/html_report.hpp) from a results file or by simulating a scenario.
#include <iostream>
#include <sstream>

#include <boost/program_options.hpp>

#include "base/files.hpp"
#include "base/json_reader.hpp"
#include "cli/cli.hpp"
#include "cli/command_options.hpp"
#include "cli/simulate_command.hpp"
#include "formats/html_report.hpp"
#include "studies/report_data.hpp"

namespace lcsim {
namespace {

namespace po = boost::program_options;

po::options_description report_options() {
  po::options_description options("Options", 110, 60);
  options.add_options()  //
      ("out,o", po::value<std::string>()->value_name("FILE"), "the page to write (required), e.g. report.html");
  options.add(simulate_options(false));  // for a SCENARIO, which is simulated as `lcsim simulate` does
  return options;
}

std::string report_help() {
  std::ostringstream text;
  text << "Usage: lcsim report RESULTS.json --out FILE.html\n"
          "       lcsim report SCENARIO --out FILE.html [simulate's options]\n"
          "\nOne self-contained HTML page (nothing loaded from the network; open it in any browser): the comparison\n"
          "table with 80% intervals and OOM marks, the speedup chart, the scaling chart of a sweep, each policy's\n"
          "per-GPU busy / exposed-communication / idle time, and a zoomable timeline of the winner beside the\n"
          "baseline. RESULTS.json is the --json file of `lcsim plan`, `lcsim simulate` or `lcsim sweep` (a sweep's\n"
          "table is of its last point); it holds no spans, so its page has no timeline nor exposed communication.\n"
          "A SCENARIO is simulated first, exactly as `lcsim simulate` with its --report option does, and the\n"
          "simulate options below apply to it.\n\n"
       << report_options();
  return text.str();
}

/// A results document (`schema` lcsim-results/... or lcsim-sweep/...) rather than a scenario.
bool is_results_document(const nlohmann::json& document) {
  if (!document.is_object() || !document.contains("schema") || !document["schema"].is_string()) return false;
  const std::string schema = document["schema"].get<std::string>();
  return schema.rfind("lcsim-results/", 0) == 0 || schema.rfind("lcsim-sweep/", 0) == 0;
}

}  // namespace

void run_report_command(const std::vector<std::string>& args, std::ostream& out) {
  const auto parsed = parse_file_command("report", "INPUT", args, report_options(), report_help(), out);
  if (!parsed) return;
  const po::variables_map& vm = parsed->options;
  if (!vm.count("out")) throw UsageError("report: --out FILE is required (the page to write)", report_help());
  const std::string page_file = vm["out"].as<std::string>();
  const nlohmann::json document = parse_json_file(parsed->file, kMaxResultsFileBytes);
  if (!is_results_document(document)) {
    simulate_from_options(vm, parsed->file, page_file, out);
    return;
  }
  for (const char* option : {"policy", "iterations", "layers", "json", "csv", "trace", "all-flows"})
    if (vm.count(option))
      throw UsageError(
          "report: --" + std::string(option) + " applies to a scenario, and " + parsed->file + " is a results file",
          report_help());
  check_output_files({{"--out", page_file}}, {parsed->file});
  const nlohmann::ordered_json data = report_data_from_results(document, parsed->file);
  std::vector<std::string> written;
  write_output(page_file, report_page(data), written);
  if (!vm.count("quiet")) out << "report: " << page_file << "\n";
}

}  // namespace lcsim
