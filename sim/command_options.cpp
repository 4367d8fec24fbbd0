#include "sim/command_options.hpp"

#include "sim/cli.hpp"

namespace lcsim {

namespace po = boost::program_options;

std::vector<OutputOption> output_options(const po::variables_map& vm, const std::vector<std::string>& names) {
  std::vector<OutputOption> outputs;
  for (const auto& name : names)
    if (vm.count(name)) outputs.push_back({"--" + name, vm[name].as<std::string>()});
  return outputs;
}

std::vector<std::string> scenario_inputs(const LoadedScenario& loaded) {
  return scenario_input_files(loaded);
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

}  // namespace lcsim
