// Issue #53, "honest winners": a policy that runs out of GPU memory in any iteration is never the winner, its
// worlds never count towards P(winner), its row is marked and a warning says why; when the baseline is one of them
// the speedups are over the fastest policy that fits. The regression case is the first hour: LLaMA3.1-8B
// on 64 H100s (DP 8 x CP 8) at a 128K context with a 2K-128K length trace, every policy.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <fstream>
#include <stdexcept>
#include <string>

#include <nlohmann/json.hpp>

#include "tests/command_run_support.hpp"

namespace honest_winners_test {

using lcsim::testing::contains;
using lcsim::testing::read_file;
using lcsim::testing::run_lcsim;
using Json = nlohmann::json;

/// splitmix64: the same lengths on every platform (std's distributions are not specified bit for bit).
std::uint64_t next(std::uint64_t& state) {
  state += 0x9E3779B97F4A7C15ULL;
  std::uint64_t z = state;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

class HonestWinnersTest : public lcsim::testing::FolderTest {
 protected:
  HonestWinnersTest() : FolderTest("lcsim-honest-winners-") {}

  /// A length trace of `count` sequences, log-uniform between 2K and 128K tokens.
  void write_trace(const std::string& name, int count) const {
    std::ofstream trace(path(name));
    std::uint64_t state = 53;
    for (int i = 0; i < count; ++i) {
      const double u = static_cast<double>(next(state) >> 11) / static_cast<double>(std::uint64_t{1} << 53);
      trace << static_cast<long>(2048.0 * std::pow(64.0, u)) << '\n';
    }
  }

  /// The scenario: LLaMA3.1-8B, 8 nodes x 8 H100-SXM, DP 8 x CP 8, 128K context, the trace, every policy.
  std::string write_scenario() const {
    write_trace("lengths.txt", 2000);
    const Json policies = Json::array({{{"kind", "deepspeed"}},
                                       {{"kind", "sorted"}},
                                       {{"kind", "packing"}},
                                       {{"kind", "skrull-dacp"}},
                                       {{"kind", "rr"}},
                                       {{"kind", "skrull"}},
                                       {{"kind", "hbp"}},
                                       {{"kind", "hydraulis"}},
                                       {{"kind", "wlb-llm"}},
                                       {{"kind", "flexsp"}}});
    const Json scenario = {
        {"name", "llama3.1-8b-64gpu-128k-trace"},
        {"seed", 1},
        {"model", "LLaMA3.1-8B"},
        {"cluster", {{"gpu", "H100-SXM"}, {"nodes", 8}, {"gpus_per_node", 8}}},
        {"profile", std::string(LCSIM_SOURCE_DIR) + "/calibrate/profiles/h100-sxm-default.json"},
        {"dataset", {{"trace", "lengths.txt"}}},
        {"training", {{"global_batch_sequences", 64}, {"iterations", 10}, {"context_length_tokens", 131072}}},
        {"parallel", {{"dp", 8}, {"cp", 8}}},
        {"policies", policies},
        {"baseline", "deepspeed"}};
    std::ofstream(path("scenario.json")) << scenario.dump(2) << '\n';
    return path("scenario.json");
  }
};

/// The checks every results file of the scenario must pass.
void expect_honest(const Json& results, const std::string& output) {
  const Json& policies = results.at("policies");
  const auto policy = [&](const std::string& name) -> const Json& {
    for (const Json& p : policies)
      if (p.at("name") == name) return p;
    throw std::runtime_error("no policy " + name);
  };
  int out_of_memory = 0;
  for (const Json& p : policies) {
    if (p.at("oom_iterations").get<int>() == 0) continue;
    ++out_of_memory;
    // Its row is marked and the warning names it.
    EXPECT_TRUE(contains(output, "lcsim: warning: " + p.at("name").get<std::string>() + " does not fit in GPU memory"));
  }
  ASSERT_GT(out_of_memory, 0) << "the scenario no longer reproduces the OOMs of issue #53:\n" << output;
  EXPECT_TRUE(contains(output, "OOM "));
  // The winner fits, and P(winner) counts only worlds where it fits.
  const Json& winner = results.at("uncertainty").at("winner");
  ASSERT_TRUE(winner.is_string()) << output;
  EXPECT_EQ(policy(winner.get<std::string>()).at("oom_iterations"), 0) << output;
  // The baseline (deepspeed) runs out of memory: speedups are over the fastest policy that fits, named.
  ASSERT_GT(policy("deepspeed").at("oom_iterations").get<int>(), 0) << output;
  ASSERT_TRUE(results.contains("speedup_reference")) << output;
  const std::string reference = results.at("speedup_reference");
  EXPECT_EQ(policy(reference).at("oom_iterations"), 0);
  EXPECT_DOUBLE_EQ(policy(reference).at("speedup_vs_baseline").get<double>(), 1.0);
  EXPECT_TRUE(contains(output, "speedups are over " + reference));
  double fastest = 0;
  for (const Json& p : policies)
    if (p.at("oom_iterations").get<int>() == 0) fastest = std::max(fastest, p.at("tokens_per_s").get<double>());
  EXPECT_EQ(policy(reference).at("tokens_per_s").get<double>(), fastest);
  EXPECT_EQ(winner, reference);  // the nominal winner is the fastest policy that fits
}

TEST_F(HonestWinnersTest, PlanNeverNamesAnOutOfMemoryPolicyTheWinner) {
  const std::string scenario = write_scenario();
  const auto run = run_lcsim("plan '" + scenario + "' --samples 4 --jobs 2 --json '" + path("plan.json") + "' --csv '" +
                             path("plan.csv") + "'");
  ASSERT_EQ(run.exit_code, 0) << run.output;
  const Json results = Json::parse(read_file(path("plan.json")));
  expect_honest(results, run.output);
  EXPECT_TRUE(contains(run.output, "winner: " + results.at("uncertainty").at("winner").get<std::string>()));
}

TEST_F(HonestWinnersTest, SimulateNeverNamesAnOutOfMemoryPolicyTheWinner) {
  const std::string scenario = write_scenario();
  const auto run = run_lcsim("simulate '" + scenario + "' -n 3 --samples 2 --jobs 2 --json '" + path("sim.json") + "'");
  ASSERT_EQ(run.exit_code, 0) << run.output;
  expect_honest(Json::parse(read_file(path("sim.json"))), run.output);
}

}  // namespace honest_winners_test
