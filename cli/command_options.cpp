#include "cli/command_options.hpp"

#include <algorithm>
#include <filesystem>
#include <thread>

#include "cli/cli.hpp"
#include "cli/progress.hpp"

namespace lcsim {

namespace po = boost::program_options;

int default_jobs() {
  return static_cast<int>(std::max(1U, std::thread::hardware_concurrency()));
}

std::vector<OutputOption> output_options(const po::variables_map& vm, const std::vector<std::string>& names) {
  std::vector<OutputOption> outputs;
  for (const auto& name : names)
    if (vm.count(name)) outputs.push_back({"--" + name, vm[name].as<std::string>()});
  return outputs;
}

std::vector<std::string> scenario_inputs(const LoadedScenario& loaded) {
  return scenario_input_files(loaded);
}

void reject_empty_values(const std::string& command, const po::variables_map& vm,
                         const po::options_description& options, const std::string& help) {
  for (const auto& [name, value] : vm) {
    const po::option_description* described = options.find_nothrow(name, false);
    if (described == nullptr || described->semantic()->max_tokens() == 0) continue;  // a switch holds no name
    const auto* text = boost::any_cast<std::string>(&value.value());
    const auto* texts = boost::any_cast<std::vector<std::string>>(&value.value());
    const bool empty = (text && text->empty()) ||
                       (texts && std::any_of(texts->begin(), texts->end(), [](const auto& s) { return s.empty(); }));
    if (!empty) continue;
    // The positional arguments' hidden names are not options the user wrote.
    const std::string shown = name == "file" ? "the file argument" : name == "dir" ? "a folder argument" : "--" + name;
    const bool folder = name == "dir" || name == "out" || name == "work";
    throw UsageError(command + ": " + shown + (folder ? ": the folder name is empty" : ": the file name is empty"),
                     help);
  }
}

std::optional<FileCommand> parse_file_command(const std::string& command, const std::string& what,
                                              const std::vector<std::string>& args,
                                              const po::options_description& options, const std::string& help,
                                              std::ostream& out) {
  po::options_description hidden;
  hidden.add_options()("file", po::value<std::vector<std::string>>());
  po::options_description all;
  all.add(options).add(hidden);
  po::positional_options_description positional;
  positional.add("file", -1);

  FileCommand parsed;
  try {
    po::store(po::command_line_parser(args).options(all).positional(positional).run(), parsed.options);
    po::notify(parsed.options);
  } catch (const po::error& e) {
    throw UsageError(command + ": " + e.what(), help);
  }
  reject_empty_values(command, parsed.options, all, help);
  if (parsed.options.count("help")) {
    out << help;
    return std::nullopt;
  }
  const auto files =
      parsed.options.count("file") ? parsed.options["file"].as<std::vector<std::string>>() : std::vector<std::string>{};
  if (files.size() != 1)
    throw UsageError(files.empty() ? command + ": missing " + what + " file"
                                   : command + ": expected one " + what + " file, got " + std::to_string(files.size()),
                     help);
  parsed.file = files.front();
  return parsed;
}

void add_uncertainty_options(boost::program_options::options_description& options) {
  namespace po = boost::program_options;
  options.add_options()  //
      ("samples", po::value<int>()->value_name("N")->default_value(kDefaultSamples),
       "worlds to sample (at most 1000): world 0 is the nominal run, the others draw the dataset, the profile's "
       "fitted fields and the model form, and give each policy p10-p90 intervals and P(beats the baseline); 1: "
       "the nominal figures only (docs/uncertainty.md)")  //
      ("fixed-data", po::bool_switch(),
       "sampled worlds keep the scenario's own data and draw the profile and the model form only (a run whose "
       "data is known, as a measured run's; lcsim validate uses it for measured entries)")  //
      ("model-form", po::value<std::string>()->value_name("FILE"),
       "model-form file (schema lcsim-model-form/1, written by `lcsim validate --write-model-form`); default: "
       "the shipped scenarios/validation/model-form.json")  //
      ("jobs", po::value<int>()->value_name("N"),
       "sampled worlds evaluated at once, on threads (default: one per core); the results are the same for any N");
}

int world_jobs_option(const boost::program_options::variables_map& vm) {
  if (!vm.count("jobs")) return default_jobs();
  return checked_world_jobs(vm["jobs"].as<int>());
}

bool draw_data_option(const boost::program_options::variables_map& vm) {
  return !vm["fixed-data"].as<bool>();
}

int samples_option(const boost::program_options::variables_map& vm) {
  return checked_samples(vm["samples"].as<int>());
}

std::vector<std::string> command_inputs(const boost::program_options::variables_map& vm, const LoadedScenario& loaded) {
  std::vector<std::string> inputs = scenario_inputs(loaded);
  if (vm.count("model-form")) inputs.push_back(vm["model-form"].as<std::string>());
  return inputs;
}

ModelForm model_form_option(const boost::program_options::variables_map& vm) {
  if (vm.count("model-form")) {
    const std::string file = vm["model-form"].as<std::string>();
    return load_model_form(file, file);
  }
  return shipped_model_form();
}

void print_scenario_notes(const LoadedScenario& loaded) {
  if (loaded.scenario.cp_attention == CpAttention::Ring)
    print_warning(loaded.scenario.file + ": parallel.cp_attention \"ring\" is the plain ring: under a causal mask the last CP "
                  "rank sets every step; Megatron-LM's and torchtitan's load-balanced ring is \"zigzag\" "
                  "(docs/model.md)");
}

}  // namespace lcsim
