#pragma once
// Sweep files: a base scenario plus axes; every point of their cartesian product is a scenario of its own.
//
// {
//   "name": "skrull-batch-size",
//   "description": "...",                           (optional)
//   "base": "skrull/case-study-dp1.json",          (relative to the sweep file)
//   "mode": "simulate" | "plan",                    (default "simulate")
//   "iterations": 5,                                (optional: overrides training.iterations at every point)
//   "samples": 16,                                  (optional, default 1: every point run with --samples N,
//                                                    which gives the plots p10-p90 error bars)
//   "axes": [ {"name": "batch_size_per_dp", "values": [8, 16, 32, 64]}, ... ]
// }
//
// Axes (each changes the point's scenario JSON):
//   cluster                {"label": NAME, key: value, ...}: each key set in cluster (null removes it), applied
//                          before gpus; NAME is the point's value in the CSV and charts (docs/topology.md)
//   gpus                   cluster nodes = gpus / gpus_per_node (one smaller node when gpus < gpus_per_node);
//                          parallel.dp = gpus / (cp tp pp)
//   context_length_tokens  training.context_length_tokens
//   tokens_per_iteration   training.tokens_per_iteration (replaces global_batch_sequences)
//   global_batch_sequences training.global_batch_sequences (replaces tokens_per_iteration)
//   batch_size_per_dp      training.global_batch_sequences = dp x value (Skrull's BatchSize)
//   tokens_per_gpu         training.tokens_per_iteration = GPUs x value (weak scaling with a token budget)
//   bucket_size_tokens     training.bucket_size_tokens
//   dataset                dataset = {"distribution": value}
//   model                  model = value (a built-in model name)
#include <cstddef>
#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace lcsim {

/// Most points a sweep may have: every point is a process and files of its own, and expanding them holds every
/// point's scenario in memory (about 10 KB each), so a larger product of axes is a mistake, refused up front.
inline constexpr std::size_t kMaxSweepPoints = 100000;

struct SweepAxis {
  std::string name;
  std::vector<nlohmann::json> values;  ///< numbers or strings, as the axis takes
};

struct SweepPoint {
  int index = 0;
  std::vector<std::pair<std::string, nlohmann::json>> coordinates;  ///< axis name -> value, in axis order
  nlohmann::json scenario;  ///< the point's scenario document (paths made absolute)
};

struct Sweep {
  std::string file;
  std::string name;
  std::string description;
  std::string base_file;  ///< resolved against the sweep file
  std::string mode = "simulate";
  int iterations = 0;  ///< 0: keep each point's training.iterations
  int samples = 1;     ///< --samples of every point's run (sampled worlds: error bars in charts)
  std::vector<SweepAxis> axes;
};

/// Strict parsing (InputError naming file and JSON path).
Sweep sweep_from_json(const nlohmann::json& document, const std::string& file);
Sweep load_sweep(const std::string& file);
/// A scenario document whose paths (profile, dataset trace), relative to `scenario_file`'s folder, are made
/// absolute, so that it can be written and run elsewhere.
nlohmann::json scenario_with_absolute_paths(nlohmann::json doc, const std::string& scenario_file);
/// The reverse for a document with absolute paths that will be written as `scenario_file`: its paths relative to
/// that file's folder.
nlohmann::json scenario_with_paths_relative_to(nlohmann::json doc, const std::string& scenario_file);
/// The files a scenario document with absolute paths reads (its profile, its dataset trace): inputs that no
/// output of a run over it may replace.
std::vector<std::string> scenario_document_files(const nlohmann::json& doc);
/// Sets the dotted `path` ("training.bucket_size_tokens") of a scenario document to `value`; null removes the key
/// (the scenario's default). Every object above the last key must exist (InputError naming the path otherwise).
void set_dotted_path(nlohmann::json& doc, const std::string& path, const nlohmann::json& value);
/// An axis value as tables and CSV cells show it: a string as it is, a cluster object by its label, else JSON.
std::string axis_value_text(const nlohmann::json& value);

/// The axis names a sweep may use.
const std::vector<std::string>& sweep_axis_names();

/// How many points the sweep has (the product of its axes' sizes; past kMaxSweepPoints, some larger number).
std::size_t sweep_point_count(const Sweep& sweep);
/// Point `index`'s axis values, in axis order (row-major: the last axis varies fastest).
std::vector<std::pair<std::string, nlohmann::json>> sweep_point_coordinates(const Sweep& sweep, std::size_t index);

/// Every point, in row-major order of the axes (the last axis varies fastest). Each point's scenario is checked
/// by the scenario parser, so an impossible combination (e.g. a GPU count the layout does not divide) is an
/// InputError naming the sweep file, the point and the axis values before anything runs.
std::vector<SweepPoint> expand_sweep(const Sweep& sweep);

/// Point i's file in a sweep's folder: DIR/point-0007SUFFIX (".json" its scenario, ".results.json" its results).
std::filesystem::path sweep_point_path(const std::filesystem::path& dir, std::size_t i, const char* suffix);
/// Writes the point's scenario to sweep_point_path(dir, index, ".json"), as `lcsim sweep` hands it to its run.
void write_sweep_point_scenario(const std::filesystem::path& dir, const SweepPoint& point);

}  // namespace lcsim
