#include "live/gpu/mix_command.hpp"

#include <cstdio>
#include <limits>

#include <cuda_runtime_api.h>

#include "base/files.hpp"
#include "kernels/cuda_check.hpp"
#include "kernels/device_info.hpp"
#include "live/gpu/live_device.hpp"
#include "live/mix_plan.hpp"

namespace lcsim::gpu {

void run_bench_mix(const std::vector<std::string>& args, std::ostream& out) {
  const MixBenchOptions options = parse_mix_options(args);
  const MixPlan sweep = plan_mix_bench(options);
  check_mix_outputs(options, scenario_input_files(sweep.loaded));
  visible_gpus();
  cudaDeviceProp prop{};
  kernels::check_cuda(cudaGetDeviceProperties(&prop, 0), "bench-mix: device properties");
  const std::string device = std::string("1 x ") + prop.name;

  LiveDevice gpu(0, sweep.loaded.cost->capacity_bytes(), 20250101);
  std::vector<MixMeasurement> measured;
  constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
  for (std::size_t i = 0; i < sweep.points.size(); ++i) {
    const MixPoint& p = sweep.points[i];
    const JobResult r = gpu.measure(p.job, options.warmup, options.repetitions);
    measured.push_back(r.oom ? MixMeasurement{kNaN, kNaN, kNaN, true}
                             : MixMeasurement{r.total_s, r.forward_s, r.backward_s, false});
    char line[200];
    std::snprintf(line, sizeof line, "[%zu/%zu] %s long %d, %d x %d: %.3f ms, predicted %.3f ms%s\n", i + 1,
                  sweep.points.size(), p.role.c_str(), p.long_tokens, p.shorts, p.short_tokens, r.total_s * 1e3,
                  p.predicted_s * 1e3, r.oom ? " (out of memory)" : "");
    out << line << std::flush;
  }
  out << '\n';
  print_mix_report(sweep, measured, device, out);
  if (!options.json_file.empty()) {
    write_file_atomically(options.json_file, mix_results_json(sweep, measured, device).dump(2) + "\n");
    out << "wrote " << options.json_file << '\n';
  }
}

}  // namespace lcsim::gpu
