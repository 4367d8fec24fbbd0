#pragma once
// `lcsim-gpu live`: plan (host), predict (host), check for GPUs, execute (rank-serial or parallel), report.
#include <ostream>
#include <string>
#include <vector>

namespace lcsim::gpu {

/// Runs the command on the arguments after `live`. Bad input (options, scenario, --predicted that does not match)
/// throws InputError before any GPU is touched; no GPU throws NoGpuError; a policy that cannot plan, PlanningError.
void run_live(const std::vector<std::string>& args, std::ostream& out);

}  // namespace lcsim::gpu
