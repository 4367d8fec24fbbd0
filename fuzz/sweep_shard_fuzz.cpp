// Fuzz target: a sweep slice's manifest (DIR/shard.json, studies/sweep_shard.hpp) as `lcsim sweep merge` reads it:
// strict parsing, the slice set's checks, and its copy of the sweep file. Seeds: fuzz/seeds/sweep_shard.
#include "base/json_reader.hpp"
#include "fuzz/fuzz_input.hpp"
#include "studies/sweep_shard.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  return lcsim::fuzz::run_on_file(data, size, ".json", [](const std::string& file) {
    const lcsim::SweepShardManifest manifest = lcsim::shard_manifest_from_json(lcsim::parse_json_file(file), file);
    lcsim::check_sweep_shards({{"slice", manifest}});
    lcsim::sweep_point_count(lcsim::sweep_from_json(manifest.sweep, manifest.sweep_file));
  });
}
