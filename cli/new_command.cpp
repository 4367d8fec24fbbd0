// `lcsim new`: a valid scenario for your own case from a few options (issue #53, "your own case in three
// commands"): the scaffold, then `lcsim tune --write-scenario`, then `lcsim simulate`.
#include <algorithm>
#include <cctype>
#include <filesystem>
#include <sstream>

#include <boost/program_options.hpp>
#include <nlohmann/json.hpp>

#include "base/errors.hpp"
#include "base/files.hpp"
#include "cli/cli.hpp"
#include "cli/command_options.hpp"
#include "formats/scenario_loader.hpp"
#include "model/model.hpp"

namespace lcsim {
namespace {

namespace fs = std::filesystem;
namespace po = boost::program_options;
using Json = nlohmann::ordered_json;

constexpr const char* kDefaultPolicies = "deepspeed,skrull,hbp,hydraulis,wlb-llm,flexsp";

po::options_description new_options() {
  po::options_description options("Options");
  options.add_options()                                                                                            //
      ("model", po::value<std::string>()->default_value("LLaMA3.1-8B"), "model name (lcsim list models)")          //
      ("gpu", po::value<std::string>()->default_value("H100-SXM"), "GPU kind (lcsim list gpus)")                   //
      ("nodes", po::value<int>()->default_value(1), "nodes")                                                       //
      ("gpus-per-node", po::value<int>()->default_value(8), "GPUs per node")                                       //
      ("topology", po::value<std::string>()->default_value("fat-tree"), "cluster wiring (lcsim list topologies)")  //
      ("trace", po::value<std::string>()->value_name("FILE"),
       "a length trace (one token count per line, or CSV with a tokens column) instead of a distribution")  //
      ("distribution", po::value<std::string>()->default_value("chatqa2-long-sft"),
       "a named length distribution (lcsim list distributions)")                                                    //
      ("context", po::value<int>()->default_value(131072), "context length in tokens (longer samples are cut)")     //
      ("cp", po::value<int>()->value_name("N"), "context-parallel degree (default: the GPUs per node, at most 8)")  //
      ("batch", po::value<int>()->value_name("N"), "sequences per global batch (default: 64 per DP replica)")       //
      ("iterations", po::value<int>()->default_value(10), "global batches")                                         //
      ("policies", po::value<std::string>()->default_value(kDefaultPolicies),
       "comma-separated policy kinds; the first is the baseline (lcsim list policies)")  //
      ("profile", po::value<std::string>()->value_name("FILE"),
       "calibration profile (default: the GPU kind's shipped default; lcsim list profiles)")  //
      ("force", "replace FILE when it exists")                                                //
      ("help,h", "print this help");
  return options;
}

std::string new_help() {
  std::ostringstream text;
  text << "Usage: lcsim new FILE [options]\n\n"
          "Writes a scenario for your own case to FILE, checked as plan would load it. Then\n"
          "  lcsim tune FILE --write-scenario tuned.json   each policy on its best layout and settings\n"
          "  lcsim simulate tuned.json                     who wins, on the simulated cluster\n"
          "Paths in FILE are relative to FILE's folder. Edit it for anything the options do not set "
          "(scenarios/README.md).\n\n"
       << new_options();
  return text.str();
}

/// `path` (as the user gave it, relative to the working folder) relative to `folder`, as a scenario names files.
std::string relative_to(const fs::path& path, const fs::path& folder) {
  return fs::absolute(path).lexically_normal().lexically_relative(folder).generic_string();
}

std::vector<std::string> split_policies(const std::string& list) {
  std::vector<std::string> kinds;
  std::stringstream in(list);
  for (std::string kind; std::getline(in, kind, ',');)
    if (!kind.empty()) kinds.push_back(kind);
  if (kinds.empty()) throw InputError("--policies: names no policy kind");
  return kinds;
}

/// The shipped default profile of a GPU kind: calibrate/profiles/<kind, lower case>-default.json.
fs::path default_profile(const std::string& gpu) {
  std::string name = gpu;
  std::transform(name.begin(), name.end(), name.begin(), [](unsigned char c) { return std::tolower(c); });
  return fs::path(LCSIM_SOURCE_DIR) / "calibrate" / "profiles" / (name + "-default.json");
}

Json scenario_document(const po::variables_map& vm, const fs::path& file) {
  const fs::path folder = fs::absolute(file).lexically_normal().parent_path();
  const std::string gpu = named_gpu(vm["gpu"].as<std::string>()).name;
  const int nodes = vm["nodes"].as<int>(), per_node = vm["gpus-per-node"].as<int>();
  if (nodes < 1 || per_node < 1) throw InputError("--nodes and --gpus-per-node must be at least 1");
  const int gpus = nodes * per_node;
  const int cp = vm.count("cp") ? vm["cp"].as<int>() : std::min(8, per_node);
  if (cp < 1 || gpus % cp != 0)
    throw InputError("--cp: " + std::to_string(cp) + " does not divide the " + std::to_string(gpus) + " GPUs");
  const int dp = gpus / cp;
  const std::vector<std::string> kinds = split_policies(vm["policies"].as<std::string>());

  Json doc;
  doc["name"] = file.stem().string();
  doc["description"] =
      "Written by lcsim new; synthetic lengths unless dataset.trace names your own, and the "
      "uncalibrated default profile unless profile names your own.";
  doc["seed"] = 0;
  doc["model"] = named_model(vm["model"].as<std::string>()).name;
  doc["cluster"] = {
      {"gpu", gpu}, {"nodes", nodes}, {"gpus_per_node", per_node}, {"topology", vm["topology"].as<std::string>()}};
  doc["profile"] =
      relative_to(vm.count("profile") ? fs::path(vm["profile"].as<std::string>()) : default_profile(gpu), folder);
  if (vm.count("trace"))
    doc["dataset"] = {{"trace", relative_to(vm["trace"].as<std::string>(), folder)}, {"truncate_to_context", true}};
  else
    doc["dataset"] = {{"distribution", vm["distribution"].as<std::string>()}, {"truncate_to_context", true}};
  doc["training"] = {{"global_batch_sequences", vm.count("batch") ? vm["batch"].as<int>() : 64 * dp},
                     {"iterations", vm["iterations"].as<int>()},
                     {"zero_stage", 2},
                     {"recompute", "selective"},
                     {"context_length_tokens", vm["context"].as<int>()}};
  doc["parallel"] = {{"dp", dp}, {"cp", cp}, {"tp", 1}, {"pp", 1}};
  doc["policies"] = Json::array();
  for (const auto& kind : kinds) doc["policies"].push_back({{"kind", kind}});
  doc["baseline"] = kinds.front();
  return doc;
}

}  // namespace

void run_new_command(const std::vector<std::string>& args, std::ostream& out) {
  const auto parsed = parse_file_command("new", "FILE", args, new_options(), new_help(), out);
  if (!parsed) return;
  const po::variables_map& vm = parsed->options;
  const fs::path file = parsed->file;
  if (fs::exists(file) && !vm.count("force")) throw InputError(parsed->file + ": exists (--force replaces it)");
  if (vm.count("trace") && !vm["distribution"].defaulted())
    throw InputError("--trace and --distribution: give one of them");
  for (const char* input : {"trace", "profile"})
    if (vm.count(input) && fs::weakly_canonical(vm[input].as<std::string>()) == fs::weakly_canonical(file))
      throw InputError(parsed->file + ": is the input --" + std::string(input) + " file; name another output");
  const Json doc = scenario_document(vm, file);
  // Checked as `lcsim plan` would load it, so the file written is one that runs.
  (void)load_and_prepare(nlohmann::json::parse(doc.dump()), fs::absolute(file).string());
  write_file_atomically(parsed->file, doc.dump(2) + "\n");
  out << "wrote " << parsed->file << ": " << doc["model"].get<std::string>() << " on "
      << doc["cluster"]["nodes"].get<int>() * doc["cluster"]["gpus_per_node"].get<int>() << " "
      << doc["cluster"]["gpu"].get<std::string>() << " (DP " << doc["parallel"]["dp"].get<int>() << " x CP "
      << doc["parallel"]["cp"].get<int>() << "), " << doc["policies"].size() << " policies, baseline "
      << doc["baseline"].get<std::string>() << "\n"
      << "next: lcsim tune " << parsed->file << " --write-scenario tuned.json && lcsim simulate tuned.json\n";
}

}  // namespace lcsim
