#pragma once
// Which named GPU kind (model/model.hpp) a CUDA device is, from the name the runtime reports.
#include <string>

namespace lcsim {

/// "H100-SXM" for an H100 SXM (e.g. "NVIDIA H100 80GB HBM3"), "H200" for an H200 SXM ("NVIDIA H200"), "A800" for an
/// A800 SXM ("NVIDIA A800-SXM4-80GB"), and "" for anything else: the PCIe and NVL cards differ in peak and
/// interconnect from the SXM parts the named kinds describe.
std::string match_gpu_kind(const std::string& device_name);

}  // namespace lcsim
