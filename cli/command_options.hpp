#pragma once
// Parsing shared by the sub-commands that take one file and options (`lcsim plan|simulate|sweep FILE ...`).
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include <boost/program_options.hpp>

#include "base/files.hpp"
#include "formats/scenario_loader.hpp"
#include "studies/sampled_worlds.hpp"

namespace lcsim {

struct FileCommand {
  boost::program_options::variables_map options;
  std::string file;
};

/// The default --jobs of the commands whose results do not depend on it (validate, tune): the machine's cores.
int default_jobs();

/// The output options among `names` ("json", "csv", "trace") that the command line gives, as "--name FILE".
std::vector<OutputOption> output_options(const boost::program_options::variables_map& vm,
                                         const std::vector<std::string>& names);

/// The files a loaded scenario was read from (the scenario, its profile, its trace): no output may replace them.
std::vector<std::string> scenario_inputs(const LoadedScenario& loaded);

/// A UsageError carrying `help` when an option (or the positional file) was given an empty name: `--out ""` is a
/// typo or an unset shell variable, never a folder.
void reject_empty_values(const std::string& command, const boost::program_options::variables_map& vm,
                         const boost::program_options::options_description& options, const std::string& help);

/// Parses `args` against `options` plus one positional FILE (`what` names it in messages, e.g. "SCENARIO").
/// Bad options, a missing or extra FILE are UsageError carrying `help`; --help prints `help` to `out` and
/// returns nullopt.
std::optional<FileCommand> parse_file_command(const std::string& command, const std::string& what,
                                              const std::vector<std::string>& args,
                                              const boost::program_options::options_description& options,
                                              const std::string& help, std::ostream& out);

/// `--samples` and `--model-form` of plan and simulate (docs/uncertainty.md).
void add_uncertainty_options(boost::program_options::options_description& options);
/// --samples (checked), and the model form: --model-form FILE when given, else the shipped file when it exists,
/// else none (the results say so).
int samples_option(const boost::program_options::variables_map& vm);

/// --jobs of add_uncertainty_options: at least 1 (InputError otherwise); absent, default_jobs().
int world_jobs_option(const boost::program_options::variables_map& vm);
/// --fixed-data: false (sampled worlds keep the scenario's own data), else true.
bool draw_data_option(const boost::program_options::variables_map& vm);
/// scenario_inputs and the --model-form file: no output may replace them.
std::vector<std::string> command_inputs(const boost::program_options::variables_map& vm, const LoadedScenario& loaded);
/// The notes a loaded scenario earns before it runs, printed as warnings: `cp_attention: "ring"` names the plain
/// ring since 2026-11-29 (a file written for Megatron's or torchtitan's balanced ring means "zigzag" now).
void print_scenario_notes(const LoadedScenario& loaded);
ModelForm model_form_option(const boost::program_options::variables_map& vm);

}  // namespace lcsim
