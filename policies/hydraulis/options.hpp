#pragma once
// Option readers shared by Hydraulis and its baselines (megatron, deepspeed-ulysses, hotspa).
#include <optional>
#include <string_view>

#include "policies/core/cost_model.hpp"
#include "policies/core/json_reader.hpp"

namespace lcsim::hydraulis {

/// `key` as "none" | "selective" | "full", if present.
std::optional<Recompute> read_recompute(JsonObjectReader& reader, std::string_view key);

}  // namespace lcsim::hydraulis
