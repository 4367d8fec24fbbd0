#pragma once
// Helpers for the simulator tests. SimGrid allows one engine per process: ctest already runs every test in its own
// process (gtest_discover_tests), and tests that start an engine also fork a child for it, so the test binary
// stays correct when run as a whole.
#include <gtest/gtest.h>

#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <functional>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/executor.hpp"
#include "engine/simgrid_compat.hpp"
#include "model/profile.hpp"
#include "tests/policy_test_fixtures.hpp"

namespace lcsim::testing {

/// The toy cost model of policy_test_fixtures.hpp on a cluster with link bandwidths (the platform needs them).
inline CostModel sim_tiny_cost(int nodes, int gpus_per_node, Profile profile = tiny_profile(),
                               double memory_bytes = 500, int layers = 2) {
  ClusterSpec cluster = tiny_cluster(nodes, gpus_per_node, memory_bytes);
  cluster.nvlink_GBps = 450;
  cluster.ib_GBps = 50;
  return CostModel(tiny_model(layers), cluster, std::move(profile));
}

/// A SimGrid engine with lcsim's network model, for a test running in its own child process.
inline std::unique_ptr<simgrid::s4u::Engine> make_sim_engine() {
  sim::quiet_simgrid_logs();
  // Static: the engine outlives this function and SimGrid may keep pointers into argv.
  static std::string name = "test";
  static int argc = 1;
  static char* argv[] = {name.data(), nullptr};
  auto engine = std::make_unique<simgrid::s4u::Engine>(&argc, argv);
  sim::set_network_model();
  return engine;
}

/// Runs `body` in a child process and returns what it returned; a crash, an exception or a non-zero exit fails
/// the calling test (and returns "").
/// Qwen2.5-0.5B on `nodes` nodes of 8 H100-SXM with the shipped default profile: realistic sizes.
inline CostModel h100_qwen_cost(int nodes, CostModelOptions options = {}) {
  ClusterSpec cluster;
  cluster.gpu = named_gpu("H100-SXM");
  cluster.nodes = nodes;
  cluster.gpus_per_node = 8;
  cluster.nvlink_GBps = 450;
  cluster.ib_GBps = 50;
  return CostModel(named_model("Qwen2.5-0.5B"), cluster,
                   load_profile(std::string(LCSIM_SOURCE_DIR) + "/calibrate/profiles/h100-sxm-default.json"), options);
}

inline std::string in_child_process(const std::function<std::string()>& body) {
  std::cout.flush();
  std::fflush(nullptr);
  int fds[2];
  if (::pipe(fds) != 0) {
    ADD_FAILURE() << "pipe() failed";
    return "";
  }
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::close(fds[0]);
    std::string out;
    int code = 0;
    try {
      out = body();
    } catch (const std::exception& e) {
      out = std::string("exception: ") + e.what();
      code = 3;
    }
    for (std::size_t done = 0; done < out.size();) {
      const ssize_t n = ::write(fds[1], out.data() + done, out.size() - done);
      if (n <= 0) break;
      done += static_cast<std::size_t>(n);
    }
    ::close(fds[1]);
    ::_exit(code);
  }
  ::close(fds[1]);
  std::string out;
  char buffer[65536];
  ssize_t n = 0;
  while ((n = ::read(fds[0], buffer, sizeof buffer)) > 0) out.append(buffer, static_cast<std::size_t>(n));
  ::close(fds[0]);
  int status = 0;
  ::waitpid(pid, &status, 0);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    ADD_FAILURE() << "child process failed (status " << status << "): " << out;
    return "";
  }
  return out;
}

/// simulate() in a child process; the outcomes come back through JSON (spans included).
inline std::vector<program::IterationOutcome> simulate_in_child(const std::vector<IterationPlan>& plans,
                                                                const CostModel& cost,
                                                                const sim::SimulationOptions& options = {}) {
  const std::string text = in_child_process([&] {
    std::vector<const IterationPlan*> pointers;
    for (const auto& p : plans) pointers.push_back(&p);
    nlohmann::json out = nlohmann::json::array();
    sim::simulate(pointers, cost, options, [&](program::IterationOutcome&& o) {
      nlohmann::json spans = nlohmann::json::array();
      for (const auto& s : o.spans)
        spans.push_back({s.gpu, s.start_s, s.end_s, static_cast<int>(s.kind), s.replica, s.micro_batch});
      out.push_back({{"index", o.index},
                     {"start", o.start_s},
                     {"seconds", o.seconds},
                     {"busy", o.busy_seconds},
                     {"peak", o.peak_bytes},
                     {"propagation", o.propagation_end_s},
                     {"spans", spans}});
    });
    return out.dump();
  });
  std::vector<program::IterationOutcome> outcomes;
  if (text.empty()) return outcomes;
  for (const auto& j : nlohmann::json::parse(text)) {
    program::IterationOutcome o;
    o.index = j["index"].get<std::size_t>();
    o.start_s = j["start"].get<double>();
    o.seconds = j["seconds"].get<double>();
    o.busy_seconds = j["busy"].get<std::vector<double>>();
    o.peak_bytes = j["peak"].get<std::vector<double>>();
    o.propagation_end_s = j["propagation"].get<std::vector<double>>();
    for (const auto& s : j["spans"])
      o.spans.push_back({s[0].get<int>(), s[1].get<double>(), s[2].get<double>(),
                         static_cast<program::WorkKind>(s[3].get<int>()), s[4].get<int>(), s[5].get<int>()});
    outcomes.push_back(std::move(o));
  }
  return outcomes;
}

}  // namespace lcsim::testing
