#pragma once
// What the scenario tests share: a minimal valid scenario, the InputError a document raises, substring checks
// that print the whole text, and a scratch folder per test.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <string>
#include <system_error>
#include <vector>

#include <unistd.h>

#include <nlohmann/json.hpp>

#include "base/errors.hpp"
#include "formats/scenario.hpp"
#include "formats/scenario_loader.hpp"
#include "tests/command_run_support.hpp"

namespace lcsim::testing {

/// Every scenario shipped under scenarios/ but the sweeps and the validation catalogue, relative to that folder,
/// sorted.
inline std::vector<std::string> shipped_scenarios() {
  const std::filesystem::path root = std::filesystem::path(LCSIM_SOURCE_DIR) / "scenarios";
  std::vector<std::string> files;
  for (const auto& entry : std::filesystem::recursive_directory_iterator(root)) {
    if (!entry.is_regular_file() || entry.path().extension() != ".json") continue;
    const auto folder = entry.path().parent_path().filename();
    if (folder == "sweeps" || folder == "validation") continue;  // sweep files and the validation catalogue
    files.push_back(std::filesystem::relative(entry.path(), root).string());
  }
  std::sort(files.begin(), files.end());
  return files;
}

/// The file name parse errors are reported against (never read).
inline const std::string kScenarioFile = "/data/runs/s.json";

/// A minimal valid scenario: Qwen2.5-0.5B on two H100 nodes, CP 8, deepspeed and sorted.
inline nlohmann::json minimal_scenario() {
  return nlohmann::json::parse(R"({
    "name": "mini",
    "model": "Qwen2.5-0.5B",
    "cluster": {"gpu": "H100-SXM", "nodes": 2},
    "profile": "profile.json",
    "dataset": {"distribution": "chatqa2-long-sft"},
    "training": {"global_batch_sequences": 32, "context_length_tokens": 131072},
    "parallel": {"cp": 8},
    "policies": [{"kind": "deepspeed"}, {"kind": "sorted"}]
  })");
}

/// The InputError message scenario_from_json throws for `doc` (fails the test when it does not throw).
inline std::string scenario_error(const nlohmann::json& doc) {
  try {
    scenario_from_json(doc, kScenarioFile);
  } catch (const InputError& e) {
    return e.what();
  }
  ADD_FAILURE() << "no InputError for " << doc.dump();
  return "";
}

/// A scratch folder unique to this process and test, removed afterwards.
struct ScratchDir {
  ScratchDir() {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    path = std::filesystem::temp_directory_path() /
           ("lcsim-" + std::string(info->test_suite_name()) + "-" + std::to_string(::getpid()) + "-" + info->name());
    std::filesystem::create_directories(path);
  }
  ~ScratchDir() {
    std::error_code ignored;
    std::filesystem::remove_all(path, ignored);
  }
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;
  std::filesystem::path path;
};

/// The InputError of loading the default scenario (scenarios/default.json) with training.finetuning set to
/// `finetuning`, or "" when it loads.
inline std::string finetuning_error(const nlohmann::json& finetuning) {
  const std::string file = std::string(LCSIM_SOURCE_DIR) + "/scenarios/default.json";
  nlohmann::json doc = nlohmann::json::parse(std::ifstream(file));
  doc["training"]["finetuning"] = finetuning;
  try {
    load_and_prepare(doc, file, 1);
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

}  // namespace lcsim::testing
