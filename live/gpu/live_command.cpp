#include "live/gpu/live_command.hpp"

#include "base/errors.hpp"
#include "kernels/device_info.hpp"
#include "kernels/nccl_library.hpp"
#include "live/gpu/live_parallel.hpp"
#include "live/gpu/live_rank_serial.hpp"
#include "live/live_options.hpp"
#include "live/live_plan.hpp"
#include "live/live_predicted.hpp"
#include "live/live_report.hpp"

namespace lcsim::gpu {

void run_live(const std::vector<std::string>& args, std::ostream& out) {
  const LiveOptions options = parse_live_options(args);
  const LivePlans live = plan_live(options);
  check_live_outputs(options, scenario_input_files(live.loaded));
  const Prediction prediction =
      options.predicted_file.empty() ? predict_by_replay(live) : predict_from_results(live, options.predicted_file);
  const int world = live.loaded.scenario.cluster.world_size();
  LiveMode mode = options.mode;
  if (mode == LiveMode::Parallel) check_parallel_plans(live);  // refuse before touching a GPU

  const int gpus = visible_gpus();
  if (mode == LiveMode::Auto) mode = world > 1 && gpus >= world ? LiveMode::Parallel : LiveMode::RankSerial;
  if (mode == LiveMode::Parallel && gpus < world)
    throw InputError("live --mode parallel: the scenario's cluster has " + std::to_string(world) + " GPUs, this node " +
                     std::to_string(gpus) + "; use --mode rank-serial");
  if (options.mode == LiveMode::Auto && mode == LiveMode::Parallel) {
    try {
      check_parallel_plans(live);
    } catch (const InputError&) {
      mode = LiveMode::RankSerial;  // pipelines or strategy switches: rank-serial measures them
    }
  }
  if (options.mode == LiveMode::Auto && mode == LiveMode::Parallel && !NcclLibrary::get().available()) {
    out << "lcsim-gpu live: NCCL unavailable (" << NcclLibrary::get().reason() << "): rank-serial instead\n";
    mode = LiveMode::RankSerial;
  }
  if (mode == LiveMode::Parallel && options.warmup == 0)
    throw InputError("live: --warmup 0 in parallel mode (chosen by --mode auto for this " + std::to_string(world) +
                     "-GPU plan): the first iteration sets up NCCL, so at least one untimed iteration is needed");
  out << "lcsim-gpu live: " << to_string(mode) << " on " << gpus << " visible GPU(s) for a " << world
      << "-GPU plan; prediction: " << prediction.label << "\n";
  const LiveExecution execution =
      mode == LiveMode::Parallel ? run_parallel(live, options, out) : run_rank_serial(live, options, out);
  out << '\n';
  print_live_report(live, prediction, execution, out);
  if (!options.json_file.empty()) {
    write_live_results_json(live, prediction, execution, options.json_file);
    out << "wrote " << options.json_file << '\n';
  }
  if (!options.trace_file.empty()) {
    write_live_trace(live, execution, options.trace_file);
    out << "wrote " << options.trace_file << '\n';
  }
}

}  // namespace lcsim::gpu
