// The one output guard (base/files.hpp, OutputGuard): every command's every output option, tried against
// the run's inputs. The commands and their FILE and DIR options are read from the binaries' own help, so a new
// command or a new output option fails here until it has a trial that shows the guard refusing it.
#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/errors.hpp"
#include "base/files.hpp"
#include "calibrate/fit/fit_command.hpp"
#include "calibrate/fit/measurements.hpp"
#include "live/live_options.hpp"
#include "model/model.hpp"
#include "tests/calibrate_fixtures.hpp"
#include "tests/command_run_support.hpp"

namespace output_guard_test {

namespace fs = std::filesystem;
using lcsim::testing::contains;
using lcsim::testing::read_file;
using lcsim::testing::run_lcsim;
using Json = nlohmann::json;
const std::string kSourceDir = LCSIM_SOURCE_DIR;

/// The FILE and DIR options of a help text ("--json FILE", "-o [ --out ] DIR").
std::set<std::string> file_options(const std::string& help) {
  std::set<std::string> options;
  static const std::regex option(R"(--([a-z][a-z-]*)( \])? (FILE|DIR|SIM\.json)\b)");
  for (std::sregex_iterator it(help.begin(), help.end(), option), end; it != end; ++it) options.insert((*it)[1]);
  return options;
}

/// The commands `lcsim --help` lists under "Commands:" ("  plan   every policy ...").
std::set<std::string> listed_commands() {
  const std::string help = run_lcsim("--help").output;
  std::set<std::string> commands;
  std::istringstream lines(help.substr(help.find("Commands:")));
  static const std::regex command(R"(^  ([a-z]+) )");
  for (std::string line; std::getline(lines, line);) {
    std::smatch m;
    if (std::regex_search(line, m, command)) commands.insert(m[1]);
  }
  return commands;
}

class OutputGuardCli : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("lcsim-guard-" + std::to_string(::getpid()) + "-" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(dir_);
    fs::copy_file(kSourceDir + "/calibrate/profiles/h100-sxm-default.json", path("p.json"));
    Json doc = Json::parse(read_file(kSourceDir + "/scenarios/default.json"));
    doc["profile"] = "p.json";  // relative: the guard must resolve it against the scenario's folder
    doc["training"]["iterations"] = 1;
    doc["training"]["global_batch_sequences"] = 32;
    doc["policies"] = Json::array({{{"kind", "deepspeed"}}});
    doc["tune"] = {{"layout", {{"cp", {8}}, {"tp", {1}}, {"pp", {1}}}}};
    write("s.json", doc.dump(2));
    doc["profile"] = path("p.json");
    absolute_scenario_ = doc.dump(2);
    write("sw.json",
          Json{{"name", "g"}, {"base", "s.json"}, {"mode", "plan"}, {"axes", {{{"name", "gpus"}, {"values", {8}}}}}}
              .dump());
    write("cat.json", Json{{"schema", "lcsim-validation-catalogue/1"},
                           {"entries",
                            {{{"id", "e"},
                              {"source", {{"paper", "Skrull"}, {"where", "Table 3"}}},
                              {"claim", "a claim"},
                              {"quantity", "oom"},
                              {"scenario", "s.json"},
                              {"policy", "deepspeed"},
                              {"published", false}}}}}
                          .dump());
  }
  void TearDown() override {
    std::error_code ignored;
    fs::remove_all(dir_, ignored);
  }
  std::string path(const std::string& name) const { return (dir_ / name).string(); }
  void write(const std::string& name, const std::string& text) const {
    fs::create_directories((dir_ / name).parent_path());
    std::ofstream(path(name)) << text;
  }
  /// `lcsim ARGS` run in the test's folder.
  lcsim::testing::CommandRun lcsim_here(const std::string& args) const {
    return lcsim::testing::run_command("cd '" + dir_.string() + "' && '" + std::string(LCSIM_BINARY) + "' " + args);
  }
  /// Runs `args`, which name `input` as an output: exit 2, a message naming the input, and `input` unchanged.
  void expect_refused(const std::string& args, const std::string& input) const {
    SCOPED_TRACE("lcsim " + args);
    const std::string before = read_file(path(input));
    ASSERT_FALSE(before.empty()) << input;
    const auto run = lcsim_here(args);
    EXPECT_EQ(run.exit_code, 2) << run.output;
    EXPECT_TRUE(contains(run.output, "is the input"));
    EXPECT_EQ(read_file(path(input)), before) << input << " was overwritten";
  }

  fs::path dir_;
  std::string absolute_scenario_;  ///< s.json with an absolute profile path, to copy into other folders
};

TEST_F(OutputGuardCli, EveryOutputOptionOfEveryCommandRefusesAnInput) {
  // One trial per command and output option; the keys must be exactly the FILE and DIR outputs the help lists.
  std::map<std::string, std::function<void()>> trials = {
      {"plan --json", [&] { expect_refused("plan s.json --json s.json", "s.json"); }},
      {"plan --csv",
       [&] {
         expect_refused("plan s.json --csv p.json", "p.json");
         // The model-form file a run reads is one of its inputs.
         write("mf.json", R"({"schema": "lcsim-model-form/1", "families": {"time": {"log_sigma": 0.1}}})");
         expect_refused("plan s.json --model-form mf.json --csv mf.json", "mf.json");
       }},
      {"simulate --json", [&] { expect_refused("simulate s.json --json p.json", "p.json"); }},
      {"simulate --csv", [&] { expect_refused("simulate s.json --csv s.json", "s.json"); }},
      {"simulate --trace", [&] { expect_refused("simulate s.json --trace ./p.json", "p.json"); }},
      {"simulate --report", [&] { expect_refused("simulate s.json --report s.json", "s.json"); }},
      {"report --out",
       [&] {
         expect_refused("report s.json --out p.json", "p.json");  // a scenario, simulated first
         ASSERT_EQ(lcsim_here("plan s.json --samples 1 --json r.json --quiet").exit_code, 0);
         expect_refused("report r.json --out r.json", "r.json");  // a results file
       }},
      {"report --json", [&] { expect_refused("report s.json --out r.html --json s.json", "s.json"); }},
      {"report --csv", [&] { expect_refused("report s.json --out r.html --csv p.json", "p.json"); }},
      {"report --trace", [&] { expect_refused("report s.json --out r.html --trace s.json", "s.json"); }},
      {"sweep --csv", [&] { expect_refused("sweep sw.json --out o --csv sw.json", "sw.json"); }},
      {"sweep --json",
       [&] {
         expect_refused("sweep sw.json --out o --json s.json", "s.json");
         expect_refused("sweep sw.json --out o --json p.json", "p.json");
       }},
      {"sweep --out",
       [&] {
         // The sweep file, then its base, named as a point's scenario inside --out.
         write("d1/point-0000.json", Json{{"name", "g"},
                                          {"base", "../s.json"},
                                          {"mode", "plan"},
                                          {"axes", {{{"name", "gpus"}, {"values", {8}}}}}}
                                         .dump());
         expect_refused("sweep d1/point-0000.json --out d1", "d1/point-0000.json");
         write("d2/point-0000.json", absolute_scenario_);
         write("sw2.json", Json{{"name", "g"},
                                {"base", "d2/point-0000.json"},
                                {"mode", "plan"},
                                {"axes", {{{"name", "gpus"}, {"values", {8}}}}}}
                               .dump());
         expect_refused("sweep sw2.json --out d2", "d2/point-0000.json");
         expect_refused("sweep sw2.json --shard 1/1 --out d2", "d2/point-0000.json");
       }},
      {"sweep merge --csv",
       [&] {
         ASSERT_EQ(lcsim_here("sweep sw.json --shard 1/1 --out sl --quiet").exit_code, 0);
         expect_refused("sweep merge sl --out m --csv sl/shard.json", "sl/shard.json");
         expect_refused("sweep merge sl --out m --csv sw.json", "sw.json");
       }},
      {"sweep merge --json",
       [&] {
         ASSERT_EQ(lcsim_here("sweep sw.json --shard 1/1 --out sl --quiet").exit_code, 0);
         expect_refused("sweep merge sl --out m --json sl/point-0000.results.json", "sl/point-0000.results.json");
         expect_refused("sweep merge sl --out m --json s.json", "s.json");
         expect_refused("sweep merge sl --out m --json p.json", "p.json");
       }},
      {"sweep merge --out",
       [&] {
         write("mb/point-0000.json", absolute_scenario_);
         write("swm.json", Json{{"name", "g"},
                                {"base", "mb/point-0000.json"},
                                {"mode", "plan"},
                                {"axes", {{{"name", "gpus"}, {"values", {8}}}}}}
                               .dump());
         ASSERT_EQ(lcsim_here("sweep swm.json --shard 1/1 --out sl --quiet").exit_code, 0);
         expect_refused("sweep merge sl --out mb", "mb/point-0000.json");
       }},
      {"validate --json",
       [&] {
         expect_refused("validate --catalogue cat.json --json p.json", "p.json");  // the profile its scenario uses
         expect_refused("validate --catalogue cat.json --json s.json", "s.json");
       }},
      {"validate --csv", [&] { expect_refused("validate --catalogue cat.json --csv cat.json", "cat.json"); }},
      {"validate --write-model-form",
       [&] { expect_refused("validate --catalogue cat.json --write-model-form s.json", "s.json"); }},
      {"validate --work",
       [&] {
         write("w/run-0000.json", read_file(path("cat.json")));
         fs::copy_file(path("s.json"), path("w/s.json"));
         fs::copy_file(path("p.json"), path("w/p.json"));
         expect_refused("validate --catalogue w/run-0000.json --work w", "w/run-0000.json");
       }},
      {"tune --json", [&] { expect_refused("tune s.json --json p.json", "p.json"); }},
      {"tune --csv", [&] { expect_refused("tune s.json --csv s.json", "s.json"); }},
      {"tune --slice", [&] { expect_refused("tune s.json --shard 1/1 --slice s.json", "s.json"); }},
      {"tune --write-scenario", [&] { expect_refused("tune s.json --write-scenario s.json", "s.json"); }},
      {"tune --work",
       [&] {
         write("w/candidate-00000.json", absolute_scenario_);
         expect_refused("tune w/candidate-00000.json --work w", "w/candidate-00000.json");
       }},
  };
  // Options that name inputs only.
  const std::set<std::string> inputs = {
      "validate --catalogue",  "validate --profile",  "tune --merge",  "plan --model-form",
      "simulate --model-form", "report --model-form", "new --profile", "new --trace"};
  // `lcsim new FILE --force` never writes over the trace or profile it names.
  write("lengths.txt", "1000\n2000\n");
  expect_refused(
      "new lengths.txt --force --trace lengths.txt --batch 2 --iterations 1 --cp 1 --nodes 1 "
      "--gpus-per-node 1",
      "lengths.txt");
  {
    // `tune --merge a --merge b --json a`: the slice a is an input.
    write("a.json", "{}");
    write("b.json", "{}");
    expect_refused("tune s.json --merge a.json --merge b.json --json a.json", "a.json");
  }

  std::set<std::string> found;
  for (const std::string& command : listed_commands()) {
    std::vector<std::string> forms = {command};
    if (command == "sweep") forms.push_back("sweep merge");
    for (const auto& form : forms)
      for (const auto& option : file_options(run_lcsim(form + " --help").output))
        if (!inputs.count(form + " --" + option)) found.insert(form + " --" + option);
  }
  EXPECT_TRUE(listed_commands().count("list"));  // the help was parsed
  std::set<std::string> tried;
  for (const auto& [key, trial] : trials) tried.insert(key);
  EXPECT_EQ(found, tried) << "every FILE or DIR option of every command needs a trial here (or, if it names an "
                             "input, an entry in `inputs`)";
  for (const auto& [key, trial] : trials) {
    SCOPED_TRACE(key);
    trial();
  }
}

TEST_F(OutputGuardCli, AFolderOrAnOutputThatHoldsAnotherOutputIsRefused) {
  const auto run = lcsim_here("sweep sw.json --out o --csv o/point-0000.log");
  EXPECT_EQ(run.exit_code, 2) << run.output;
  EXPECT_TRUE(contains(run.output, "--csv o/point-0000.log: is also a file that --out o holds"));
  EXPECT_FALSE(fs::exists(path("o")));  // refused before the folder was made
}

TEST(OutputGuard, ComparesResolvedPathsAndHardLinks) {
  const fs::path dir = fs::temp_directory_path() / ("lcsim-guard-unit-" + std::to_string(::getpid()));
  fs::create_directories(dir / "sub");
  std::ofstream(dir / "in.json") << "{}";
  fs::create_hard_link(dir / "in.json", dir / "link.json");
  const auto refusal = [](const std::function<void()>& check) -> std::string {
    try {
      check();
    } catch (const lcsim::InputError& e) {
      return e.what();
    }
    return "";
  };
  lcsim::OutputGuard guard;
  guard.add_input((dir / "in.json").string());
  guard.add_output("--json", (dir / "sub" / ".." / "in.json").string());
  EXPECT_TRUE(contains(refusal([&] { guard.check(); }), "is the input"));
  lcsim::OutputGuard linked;
  linked.add_input((dir / "in.json").string());
  linked.add_output("--csv", (dir / "link.json").string());
  EXPECT_TRUE(contains(refusal([&] { linked.check(); }), "--csv " + (dir / "link.json").string() + ": is the input"));
  lcsim::OutputGuard folder;
  folder.add_input((dir / "sub" / "run-0001.log").string());
  folder.add_folder("--work sub", (dir / "sub").string(), {"run-0000.json", "run-0001.log"});
  EXPECT_TRUE(contains(refusal([&] { folder.check(); }), "--work sub: this run writes"));
  lcsim::OutputGuard special;
  special.add_output("--json", "/dev/null");
  special.add_output("--csv", "/dev/null");
  EXPECT_EQ(refusal([&] { special.check(); }), "");
  lcsim::OutputGuard empty;
  empty.add_output("--json", "");
  EXPECT_EQ(refusal([&] { empty.check(); }), "--json: the file name is empty");
  fs::remove_all(dir);
}

TEST(OutputGuard, FitRefusesAnOutThatIsTheMeasurementsOrThePrior) {
  const fs::path dir = fs::temp_directory_path() / ("lcsim-guard-fit-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const std::string measurements = (dir / "m.json").string(), prior = (dir / "prior.json").string();
  lcsim::save_measurements(lcsim::testing::synthetic_measurements(lcsim::named_model("Qwen2.5-7B"), 8), measurements);
  fs::copy_file(kSourceDir + "/calibrate/profiles/h100-sxm-default.json", prior);
  const std::string before_m = read_file(measurements), before_p = read_file(prior);
  // Every FILE option of `lcsim-gpu fit` is classified: --out is its only output.
  EXPECT_EQ(file_options(lcsim::fit_usage()), (std::set<std::string>{"measurements", "out", "prior"}));
  const auto refusal = [](const std::vector<std::string>& args) -> std::string {
    std::ostringstream out;
    try {
      lcsim::run_fit_command(args, out);
    } catch (const lcsim::InputError& e) {
      return e.what();
    }
    return "";
  };
  EXPECT_TRUE(contains(refusal({"--measurements", measurements, "--out", measurements}), "is the input"));
  EXPECT_TRUE(contains(refusal({"--measurements", measurements, "--prior", prior, "--out", prior}), "is the input"));
  EXPECT_EQ(read_file(measurements), before_m);
  EXPECT_EQ(read_file(prior), before_p);
  fs::remove_all(dir);
}

TEST(OutputGuard, LiveRefusesJsonOrTraceThatIsAnInput) {
  // Every FILE option of `lcsim-gpu live`: --predicted is an input, --json and --trace are outputs.
  EXPECT_EQ(file_options(lcsim::live_usage()), (std::set<std::string>{"json", "predicted", "trace"}));
  const auto refusal = [](const std::vector<std::string>& args) -> std::string {
    try {
      lcsim::check_live_outputs(lcsim::parse_live_options(args), {"s.json", "p.json"});
    } catch (const lcsim::InputError& e) {
      return e.what();
    }
    return "";
  };
  EXPECT_TRUE(contains(refusal({"s.json", "--json", "p.json"}), "--json p.json: is the input p.json"));
  EXPECT_TRUE(contains(refusal({"s.json", "--trace", "s.json"}), "--trace s.json: is the input s.json"));
  EXPECT_TRUE(contains(refusal({"s.json", "--predicted", "sim.json", "--json", "sim.json"}), "is the input sim.json"));
  EXPECT_TRUE(contains(refusal({"s.json", "--json", "o.json", "--trace", "o.json"}), "is also the file of --json"));
  EXPECT_EQ(refusal({"s.json", "--json", "o.json", "--trace", "t.json"}), "");
}

}  // namespace output_guard_test
