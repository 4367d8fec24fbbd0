#pragma once
// Parsing shared by the sub-commands that take one file and options (`lcsim plan|simulate|sweep FILE ...`).
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include <boost/program_options.hpp>

namespace lcsim {

struct FileCommand {
  boost::program_options::variables_map options;
  std::string file;
};

/// Parses `args` against `options` plus one positional FILE (`what` names it in messages, e.g. "SCENARIO").
/// Bad options, a missing or extra FILE are UsageError carrying `help`; --help prints `help` to `out` and
/// returns nullopt.
std::optional<FileCommand> parse_file_command(const std::string& command, const std::string& what,
                                              const std::vector<std::string>& args,
                                              const boost::program_options::options_description& options,
                                              const std::string& help, std::ostream& out);

}  // namespace lcsim
