#pragma once
// Parsing shared by the sub-commands that take one file and options (`lcsim plan|simulate|sweep FILE ...`).
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include <boost/program_options.hpp>

#include "policies/core/files.hpp"
#include "traces/scenario_loader.hpp"

namespace lcsim {

struct FileCommand {
  boost::program_options::variables_map options;
  std::string file;
};

/// The output options among `names` ("json", "csv", "trace") that the command line gives, as "--name FILE".
std::vector<OutputOption> output_options(const boost::program_options::variables_map& vm,
                                         const std::vector<std::string>& names);

/// The files a loaded scenario was read from (the scenario, its profile, its trace): no output may replace them.
std::vector<std::string> scenario_inputs(const LoadedScenario& loaded);

/// Parses `args` against `options` plus one positional FILE (`what` names it in messages, e.g. "SCENARIO").
/// Bad options, a missing or extra FILE are UsageError carrying `help`; --help prints `help` to `out` and
/// returns nullopt.
std::optional<FileCommand> parse_file_command(const std::string& command, const std::string& what,
                                              const std::vector<std::string>& args,
                                              const boost::program_options::options_description& options,
                                              const std::string& help, std::ostream& out);

}  // namespace lcsim
