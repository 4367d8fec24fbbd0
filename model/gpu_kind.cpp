#include "model/gpu_kind.hpp"

#include <algorithm>
#include <cctype>

namespace lcsim {
namespace {

bool contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

}  // namespace

std::string match_gpu_kind(const std::string& device_name) {
  std::string name = device_name;
  std::transform(name.begin(), name.end(), name.begin(), [](unsigned char c) { return std::toupper(c); });
  // PCIe and NVL cards run at other clocks and power limits than the SXM parts the named kinds describe.
  if (contains(name, "PCIE") || contains(name, "NVL")) return "";
  if (contains(name, "H100")) return "H100-SXM";
  if (contains(name, "H200")) return "H200";
  if (contains(name, "A800")) return "A800";
  return "";
}

}  // namespace lcsim
