#pragma once
// Slices of a sweep, for running one sweep on many machines (a Slurm job array: tools/slurm/): `lcsim sweep
// --shard K/N` runs slice K of N and records it in DIR/shard.json; `lcsim sweep merge` checks that the slices
// given are exactly 1..N of one sweep and assembles the one-machine run's outputs from them.
//
// Point i belongs to slice (i mod N) + 1 (K is 1-based, as SLURM_ARRAY_TASK_ID with --array=1-N): round robin,
// because a sweep's cost usually grows along an axis, and contiguous blocks would give one slice all the large
// points. A slice is empty when N exceeds the number of points.
//
// DIR/shard.json, schema "lcsim-sweep-shard/1" (keys in this order):
//   { "schema", "sweep_file": path as given to `lcsim sweep`, "sweep_digest": digest of the sweep file's document
//     and every point's expanded scenario, "shard": K, "shards": N, "points_total": points of the whole sweep,
//     "sweep": the sweep file's document,
//     "points": [ { "index", "exit_status": of the point's process, "scenario_digest" } ] }
// Digests are "fnv1a64:" and 16 hex digits: they catch mistakes (slices of different sweeps, or of one sweep file
// whose base scenario changed between slices), not tampering.
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "studies/sweep.hpp"

namespace lcsim {

inline constexpr const char* kSweepShardSchema = "lcsim-sweep-shard/1";
inline constexpr const char* kSweepShardFile = "shard.json";

struct SweepShard {
  int index = 1;  ///< K, 1-based
  int count = 1;  ///< N
};

/// "K/N" with 1 <= K <= N, both decimal without sign; nullopt otherwise.
std::optional<SweepShard> parse_sweep_shard(const std::string& text);
bool in_sweep_shard(std::size_t point_index, const SweepShard& shard);

struct SweepShardPoint {
  int index = 0;
  int exit_status = 0;
  std::string scenario_digest;
};

struct SweepShardManifest {
  std::string sweep_file;
  std::string sweep_digest;
  SweepShard shard;
  int points_total = 0;
  nlohmann::json sweep;  ///< the sweep file's document
  std::vector<SweepShardPoint> points;
};

std::string scenario_digest(const nlohmann::json& scenario);
std::string sweep_digest(const nlohmann::json& sweep_document, const std::vector<SweepPoint>& points);

nlohmann::ordered_json shard_manifest_to_json(const SweepShardManifest& manifest);
/// Strict reading (InputError naming `file` and the JSON path), including the slice's own consistency: K in
/// [1, N], every point index in range, in its slice and listed once.
SweepShardManifest shard_manifest_from_json(const nlohmann::json& document, const std::string& file);

/// A slice's manifest and the folder it was read from.
struct SweepShardFolder {
  std::string folder;
  SweepShardManifest manifest;
};

/// InputError, naming the folders involved, unless `slices` are exactly slices 1..N of one sweep (same sweep file,
/// digest and N), each once, together holding every point exactly once.
void check_sweep_shards(const std::vector<SweepShardFolder>& slices);

}  // namespace lcsim
