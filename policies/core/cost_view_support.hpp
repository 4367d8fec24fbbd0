#pragma once
// What the policies' cost views (skrull/skrull_view.hpp, hydraulis/hydraulis_view.hpp, hbp/hbp_view.hpp) share:
// the lengths a view fits its paper's formula over, and the link a group of contiguous GPUs talks over.
#include <vector>

#include "model/cost_model.hpp"

namespace lcsim::views {

/// The shortest length every view samples: below it fixed overheads dominate and no paper fits there.
inline constexpr Tokens kShortestSampled = 128;

/// Distinct token counts, log-spaced from lo to hi (`count` points before duplicates are dropped).
std::vector<Tokens> sampled_lengths(Tokens lo, Tokens hi, int count);

inline Tokens ceil_div(Tokens a, Tokens b) {
  return (a + b - 1) / b;
}

/// The link a group of `gpus` contiguous GPUs, aligned to an NVLink domain, communicates over.
inline LinkClass group_link(const CostModel& cost, int gpus) {
  return gpus <= cost.cluster().topology().domain_size() ? LinkClass::NvLink : LinkClass::InfiniBand;
}

}  // namespace lcsim::views
