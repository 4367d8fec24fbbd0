#pragma once
// `lcsim-gpu bench-mix`: Skrull-shaped micro-batches measured beside the cost model (live/mix_plan.hpp).
#include <ostream>
#include <string>
#include <vector>

namespace lcsim::gpu {

/// Runs the command on the arguments after `bench-mix`. Bad input throws InputError before any GPU is touched; no
/// GPU throws NoGpuError.
void run_bench_mix(const std::vector<std::string>& args, std::ostream& out);

}  // namespace lcsim::gpu
