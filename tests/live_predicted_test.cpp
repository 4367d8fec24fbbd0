// The predicted side of `lcsim-gpu live` (live/live_predicted.hpp): `lcsim simulate --json` results of
// the same scenario are accepted and anything that differs is refused naming the file and JSON path; --layers
// scaling (studies/model_scaling.hpp).
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>

#include <unistd.h>

#include "base/errors.hpp"
#include "base/json_reader.hpp"
#include "live/live_predicted.hpp"
#include "studies/model_scaling.hpp"

namespace lcsim {
namespace live_predicted_test {

const std::string kScenario = LCSIM_SOURCE_DIR "/scenarios/live/qwen2.5-0.5b-wikipedia-dp1-cp8.json";

LivePlans plans(int iterations, std::optional<int> layers = std::nullopt) {
  LoadedScenario loaded = load_and_prepare(kScenario, iterations);
  if (layers) scale_model_layers(loaded, *layers);
  return plan_live(std::move(loaded), {});
}

/// `lcsim simulate` of the live scenario, its results JSON parsed.
nlohmann::json simulate(int iterations, const std::string& extra = "") {
  const std::string file =
      (std::filesystem::temp_directory_path() / ("live-predicted-" + std::to_string(::getpid()) + ".json")).string();
  const std::string command = std::string("'") + LCSIM_BINARY + "' simulate '" + kScenario + "' --iterations " +
                              std::to_string(iterations) + " --quiet --json '" + file + "' " + extra;
  EXPECT_EQ(std::system(command.c_str()), 0) << command;
  nlohmann::json j = parse_json_file(file);
  std::filesystem::remove(file);
  return j;
}

std::string refusal(const LivePlans& live, const nlohmann::json& results) {
  try {
    predict_from_results(live, results, "sim.json");
  } catch (const InputError& e) {
    return e.what();
  }
  return "accepted";
}

TEST(LivePredicted, TakesTheSimulatorsTimesForTheSamePlans) {
  const LivePlans live = plans(2);
  const nlohmann::json results = simulate(2);
  const Prediction p = predict_from_results(live, results, "sim.json");
  EXPECT_EQ(p.source, Prediction::Source::Simulation);
  EXPECT_NE(p.label.find("sim.json"), std::string::npos);
  ASSERT_EQ(p.seconds.size(), 2u);
  for (std::size_t k = 0; k < 2; ++k) {
    ASSERT_EQ(p.seconds[k].size(), 2u);
    for (std::size_t i = 0; i < 2; ++i) {
      EXPECT_EQ(p.seconds[k][i], results["policies"][k]["iterations"][i]["seconds"].get<double>());
      // One node, nothing shares a link: the simulator's time is the replay's (to the file's 9 digits).
      EXPECT_NEAR(p.seconds[k][i], live.policies[k].model_replay[i].seconds, 1e-6 * p.seconds[k][i]);
    }
  }
  const Prediction replay = predict_by_replay(live);
  EXPECT_EQ(replay.source, Prediction::Source::ProgramReplay);
  EXPECT_NE(replay.label.find("no contention"), std::string::npos);
  EXPECT_EQ(replay.seconds[1][0], live.policies[1].model_replay[0].seconds);
}

TEST(LivePredicted, RefusesResultsOfAnythingElse) {
  const LivePlans live = plans(2);
  const nlohmann::json good = simulate(2);
  const auto changed = [&](const std::function<void(nlohmann::json&)>& change) {
    nlohmann::json j = good;
    change(j);
    return refusal(live, j);
  };
  EXPECT_EQ(changed([](nlohmann::json&) {}), "accepted");
  EXPECT_EQ(changed([](nlohmann::json& j) { j["mode"] = "plan"; }),
            "sim.json: mode: expected results of `lcsim simulate --json` (mode simulate)");
  EXPECT_NE(changed([](nlohmann::json& j) { j["scenario"] = "other"; }).find("sim.json: scenario: this run is"),
            std::string::npos);
  EXPECT_NE(changed([](nlohmann::json& j) { j["seed"] = 7; }).find("sim.json: seed:"), std::string::npos);
  EXPECT_NE(changed([](nlohmann::json& j) { j["policies"].erase(1); }).find("no policy 'skrull'"), std::string::npos);
  EXPECT_NE(changed([](nlohmann::json& j) {
              j["policies"][0]["iterations"].erase(1);
            }).find("policies[0].iterations: holds 1 iterations, this run plans 2"),
            std::string::npos);
  EXPECT_NE(changed([](nlohmann::json& j) {
              j["policies"][1]["iterations"][1]["tokens"] = 5;
            }).find("policies[1].iterations[1].tokens: this run's plan holds"),
            std::string::npos);
  EXPECT_NE(changed([](nlohmann::json& j) {
              j["policies"][0]["iterations"][0]["peak_GiB"] = 1.5;
            }).find("policies[0].iterations[0].peak_GiB"),
            std::string::npos);
  EXPECT_NE(changed([](nlohmann::json& j) {
              j["policies"][0]["iterations"][0]["seconds"] = nullptr;
            }).find("policies[0].iterations[0].seconds: expected a number"),
            std::string::npos);
  EXPECT_NE(changed([](nlohmann::json& j) { j["policies"][0]["iterations"][0]["extra"] = 1; }).find("extra"),
            std::string::npos);
  EXPECT_NE(changed([](nlohmann::json& j) { j["surprise"] = true; }).find("surprise"), std::string::npos);
}

TEST(LivePredicted, LayersMustMatchOnBothSides) {
  const LivePlans full = plans(1);
  const LivePlans scaled = plans(1, 6);
  const nlohmann::json scaled_results = simulate(1, "--layers 6");
  EXPECT_EQ(refusal(scaled, scaled_results), "accepted");
  EXPECT_NE(refusal(full, scaled_results).find("another model, profile or --layers"), std::string::npos);
  EXPECT_NE(refusal(scaled, simulate(1)).find("peak_GiB"), std::string::npos);
}

TEST(LivePredicted, ScalingTheModelRenamesItAndRebuildsTheCostModel) {
  LoadedScenario loaded = load_and_prepare(kScenario, 1);
  const double full_params = loaded.cost->parameters_per_gpu(ParallelScheme{});
  scale_model_layers(loaded, 6);
  EXPECT_EQ(loaded.scenario.model.layers, 6);
  EXPECT_EQ(loaded.cost->model().layers, 6);
  EXPECT_EQ(loaded.scenario.model.name, "Qwen2.5-0.5B (6 of 24 layers)");
  const ModelConfig& m = named_model("Qwen2.5-0.5B");
  EXPECT_NEAR(full_params - loaded.cost->parameters_per_gpu(ParallelScheme{}), 18 * m.layer_parameters(), 1.0);
  scale_model_layers(loaded, 6);  // its own count: nothing changes
  EXPECT_EQ(loaded.scenario.model.name, "Qwen2.5-0.5B (6 of 24 layers)");
  EXPECT_THROW(scale_model_layers(loaded, 7), InputError);  // above the (now) 6 layers
  EXPECT_THROW(scale_model_layers(loaded, 0), InputError);
}

}  // namespace live_predicted_test
}  // namespace lcsim
