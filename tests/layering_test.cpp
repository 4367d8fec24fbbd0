// The layering the README draws: every #include "..." in lcsim's sources points down, never up or sideways.
//   base <- model <- policies/core <- policies/{baselines, skrull, hydraulis, hbp, flexsp, wlbllm} <- policies/
//   policies <- program <- formats <- studies <- cli, python ;  program <- engine <- studies
//   model <- kernels <- calibrate <- cli ;  studies, kernels <- live <- cli
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <string>
#include <vector>

namespace lcsim {
namespace layering_test {

namespace fs = std::filesystem;

const fs::path kSource = LCSIM_SOURCE_DIR;

// The folders whose sources are checked; tests/ may include anything.
const std::vector<std::string> kLayerRoots{"base",    "model",   "policies", "program",   "formats", "engine",
                                           "studies", "kernels", "live",     "calibrate", "cli",     "python"};

const std::set<std::string> kAllPolicies{
    "base",         "model",           "policies/core",  "policies/baselines", "policies/skrull", "policies/hydraulis",
    "policies/hbp", "policies/flexsp", "policies/wlbllm"};

/// The layers each layer may include besides itself.
const std::map<std::string, std::set<std::string>> kMayInclude{
    // The ground floor: errors, files, JSON reading, checks.
    {"base", {}},
    // What a run is and costs: models, clusters, topologies, workloads, plans, profiles, the cost model.
    {"model", {"base"}},
    // The policy interface and the cost views' shared helpers.
    {"policies/core", {"base", "model"}},
    // Baselines never depend on a research policy.
    {"policies/baselines", {"base", "model", "policies/core"}},
    // Research policies may reuse the baselines' building blocks (HBP packs with their packing algorithms), but
    // never each other.
    {"policies/skrull", {"base", "model", "policies/core", "policies/baselines"}},
    {"policies/hydraulis", {"base", "model", "policies/core", "policies/baselines"}},
    {"policies/hbp", {"base", "model", "policies/core", "policies/baselines"}},
    {"policies/flexsp", {"base", "model", "policies/core", "policies/baselines"}},
    {"policies/wlbllm", {"base", "model", "policies/core", "policies/baselines"}},
    {"policies", kAllPolicies},  // registry.cpp
    // Above policies/, only the interface: a policy is reached through the registry (make_policy).
    // The iteration program: what each GPU does, for the estimate, the simulator and live replay alike.
    {"program", {"base", "model", "policies/core"}},
    // Reading and writing files: scenarios, traces, results, timelines.
    {"formats", {"base", "model", "policies/core", "program"}},
    // The SimGrid engine executes programs; it knows no file format, experiment or command line.
    {"engine", {"base", "model", "policies/core", "program"}},
    // Experiments as functions: the evaluation loop, sampled worlds, simulation, validate, tune, sweep.
    {"studies", {"base", "model", "policies/core", "program", "formats", "engine"}},
    {"kernels", {"base", "model"}},
    // Measuring on GPUs, fitting profiles, importing PyTorch traces.
    {"calibrate", {"base", "model", "kernels"}},
    // Live replay runs the iteration program on GPUs, reads scenarios and writes results and timelines.
    {"live", {"base", "model", "policies/core", "program", "formats", "studies", "kernels"}},
    // The front ends: parse options, call the layers below, print; nothing includes them.
    {"cli",
     {"base", "model", "policies/core", "program", "formats", "engine", "studies", "kernels", "calibrate", "live"}},
    // The Python package's module binds studies/; nothing includes it.
    {"python", {"base", "model", "policies/core", "program", "formats", "engine", "studies"}},
};

/// The layer of a path relative to the source root: policies/<folder> for a policy folder, "policies" for the
/// files directly in policies/ (the registry), the top-level folder elsewhere.
std::string layer_of(const std::string& path) {
  const auto slash = path.find('/');
  if (slash == std::string::npos) return "";
  const std::string top = path.substr(0, slash);
  if (top != "policies") return top;
  const auto second = path.find('/', slash + 1);
  return second == std::string::npos ? top : path.substr(0, second);
}

/// Why `file` may not include `header` (both relative to the source root), or "" when it may. Headers outside
/// lcsim's folders (third-party headers included with quotes) are not lcsim's to check.
std::string violation(const std::string& file, const std::string& header) {
  const std::string from = layer_of(file);
  const std::string to = layer_of(header);
  if (to.empty() || !fs::is_directory(kSource / header.substr(0, header.find('/')))) return "";
  if (from == to) return "";
  const auto allowed = kMayInclude.find(from);
  if (allowed == kMayInclude.end()) return file + ": layer '" + from + "' is not in the layering map";
  if (!kMayInclude.contains(to) && to != "tests") return header + ": layer '" + to + "' is not in the layering map";
  if (allowed->second.contains(to)) return "";
  return file + " includes " + header + ": " + from + " may not include " + to;
}

struct Include {
  std::string file;    ///< the including file, relative to the source root
  std::string header;  ///< as written between the quotes
};

std::vector<Include> scan_includes() {
  static const std::regex kInclude(R"re(^\s*#\s*include\s*"([^"]+)")re");
  static const std::set<std::string> kExtensions{".cpp", ".hpp", ".h", ".cu", ".cuh"};
  std::vector<Include> includes;
  for (const auto& root : kLayerRoots) {
    for (const auto& entry : fs::recursive_directory_iterator(kSource / root)) {
      if (!entry.is_regular_file() || !kExtensions.contains(entry.path().extension().string())) continue;
      const std::string file = entry.path().lexically_relative(kSource).generic_string();
      std::ifstream in(entry.path());
      std::smatch match;
      for (std::string line; std::getline(in, line);)
        if (std::regex_search(line, match, kInclude)) includes.push_back({file, match[1].str()});
    }
  }
  return includes;
}

TEST(Layering, EveryIncludePointsDown) {
  const auto includes = scan_includes();
  ASSERT_GT(includes.size(), 300u) << "the scan found too few includes under " << kSource;
  for (const auto& [file, header] : includes) {
    const std::string why = violation(file, header);
    EXPECT_TRUE(why.empty()) << why;
  }
}

// The SimGrid engine executes programs for whoever calls it: option parsing belongs to the front ends.
TEST(Layering, TheEngineParsesNoCommandLine) {
  std::size_t files = 0;
  for (const auto& entry : fs::directory_iterator(kSource / "engine")) {
    if (!entry.is_regular_file() || entry.path().extension() == ".txt") continue;
    ++files;
    std::ifstream in(entry.path());
    for (std::string line; std::getline(in, line);) {
      EXPECT_EQ(line.find("boost/program_options"), std::string::npos) << entry.path() << ": " << line;
      EXPECT_EQ(line.find("cli/"), std::string::npos) << entry.path() << ": " << line;
    }
  }
  EXPECT_GE(files, 4u);
}

TEST(Layering, TheMapRefusesUpwardAndSidewaysIncludes) {
  EXPECT_EQ(violation("policies/hbp/hbp_policy.cpp", "policies/core/policy.hpp"), "");
  EXPECT_EQ(violation("policies/registry.cpp", "policies/skrull/skrull_policy.hpp"), "");
  EXPECT_EQ(violation("cli/cli.cpp", "formats/scenario.hpp"), "");
  EXPECT_EQ(violation("policies/hydraulis/packing_milp.cpp", "CbcModel.hpp"), "");  // not lcsim's
  EXPECT_NE(violation("model/plan_demand.cpp", "policies/skrull/skrull_view.hpp"), "");
  EXPECT_NE(violation("policies/baselines/megatron.cpp", "policies/hydraulis/hydraulis_policy.hpp"), "");
  EXPECT_NE(violation("policies/skrull/skrull_policy.cpp", "policies/hbp/hbp_view.hpp"), "");
  EXPECT_NE(violation("policies/wlbllm/wlbllm_policy.cpp", "policies/hbp/hbp_view.hpp"), "");
  EXPECT_NE(violation("policies/baselines/four_d.cpp", "policies/wlbllm/wlbllm_view.hpp"), "");
  EXPECT_EQ(violation("policies/wlbllm/wlbllm_policy.cpp", "policies/baselines/four_d.hpp"), "");
  EXPECT_NE(violation("formats/scenario.cpp", "cli/cli.hpp"), "");
  EXPECT_NE(violation("formats/scenario.cpp", "policies/hbp/hbp_policy.hpp"), "");
  EXPECT_NE(violation("kernels/gemm.cpp", "calibrate/fit/fit.hpp"), "");
  EXPECT_EQ(violation("live/live_plan.hpp", "program/replay.hpp"), "");
  EXPECT_NE(violation("live/live_plan.hpp", "engine/executor.hpp"), "");
  EXPECT_NE(violation("model/plan_demand.cpp", "program/replay.hpp"), "");
  EXPECT_NE(violation("program/estimate.cpp", "formats/timeline.hpp"), "");
  EXPECT_NE(violation("program/replay.cpp", "engine/executor.hpp"), "");
  EXPECT_NE(violation("cli/cli.cpp", "tests/sim_test_support.hpp"), "");
  // The ground layers: model sits on base only, base on nothing of lcsim's.
  EXPECT_EQ(violation("model/cost_model.cpp", "base/errors.hpp"), "");
  EXPECT_NE(violation("model/validator.hpp", "policies/core/policy.hpp"), "");
  EXPECT_NE(violation("base/json_reader.cpp", "model/profile.hpp"), "");
  EXPECT_NE(violation("kernels/gemm.cpp", "policies/core/policy.hpp"), "");
  EXPECT_EQ(violation("python/lcsim_module.cpp", "studies/simulate_scenario.hpp"), "");
  EXPECT_NE(violation("cli/cli.cpp", "python/lcsim_module.hpp"), "");
  EXPECT_NE(violation("python/lcsim_module.cpp", "live/live_plan.hpp"), "");
}

}  // namespace layering_test
}  // namespace lcsim
