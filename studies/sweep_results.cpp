#include "studies/sweep_results.hpp"

#include <sstream>

namespace lcsim {
namespace {

std::string csv_value(const nlohmann::ordered_json& value) {
  if (value.is_null()) return "";
  return axis_value_text(nlohmann::json(value));  // a cluster object by its label
}

int gpus_of(const SweepPoint& point) {
  const auto& cluster = point.scenario.at("cluster");
  return cluster.value("nodes", 1) * cluster.value("gpus_per_node", 8);
}

}  // namespace

nlohmann::ordered_json sweep_results_to_json(const Sweep& sweep, const std::vector<SweepPointResult>& points) {
  nlohmann::ordered_json doc;
  doc["schema"] = "lcsim-sweep/1";
  doc["sweep"] = sweep.name;
  doc["sweep_file"] = sweep.file;
  doc["mode"] = sweep.mode;
  doc["axes"] = nlohmann::ordered_json::array();
  for (const auto& axis : sweep.axes) doc["axes"].push_back(axis.name);
  doc["points"] = nlohmann::ordered_json::array();
  for (const auto& p : points) {
    nlohmann::ordered_json entry;
    entry["index"] = p.point->index;
    entry["coordinates"] = nlohmann::ordered_json::object();
    for (const auto& [axis, value] : p.point->coordinates) entry["coordinates"][axis] = value;
    entry["gpus"] = gpus_of(*p.point);
    entry["scenario_file"] = p.scenario_file;
    entry["results"] = p.results;
    doc["points"].push_back(std::move(entry));
  }
  return doc;
}

std::string sweep_results_to_csv(const Sweep& sweep, const std::vector<SweepPointResult>& points) {
  std::ostringstream out;
  out << "point";
  for (const auto& axis : sweep.axes) out << ',' << axis.name;
  out << ",gpus,policy,kind,mean_iteration_s,p50_iteration_s,p99_iteration_s,tokens_per_s,speedup_vs_baseline,"
         "oom_iterations,samples,speedup_p10,speedup_p50,speedup_p90,p_beats_baseline\n";
  for (const auto& p : points) {
    for (const auto& policy : p.results.at("policies")) {
      out << p.point->index;
      for (const auto& [axis, value] : p.point->coordinates) out << ',' << csv_value(value);
      out << ',' << gpus_of(*p.point);
      for (const char* key : {"name", "kind", "mean_iteration_s", "p50_iteration_s", "p99_iteration_s", "tokens_per_s",
                              "speedup_vs_baseline", "oom_iterations"})
        out << ',' << csv_value(policy.at(key));
      // lcsim-results/1 documents (merged slices of an older run) have no interval: empty cells.
      const auto interval = policy.find("interval");
      if (interval == policy.end()) {
        out << ",,,,,";
      } else {
        out << ',' << csv_value(interval->at("samples"));
        for (const char* q : {"p10", "p50", "p90"}) out << ',' << csv_value(interval->at("speedup").at(q));
        out << ',' << csv_value(interval->at("p_beats_baseline"));
      }
      out << '\n';
    }
  }
  return out.str();
}

}  // namespace lcsim
