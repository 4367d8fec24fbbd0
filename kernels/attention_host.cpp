// Host-side pieces of the attention API that need no kernel.
#include <cstdint>

#include "kernels/attention.hpp"

namespace lcsim::kernels {

bool attention_supported(const AttentionDims& dims) {
  return (dims.head_dim == 64 || dims.head_dim == 128) && dims.heads > 0 && dims.kv_heads > 0 &&
         dims.heads % dims.kv_heads == 0;
}

std::size_t attention_backward_workspace_bytes(const VarlenLayout& layout, const AttentionDims& dims) {
  const auto rows = static_cast<std::size_t>(layout.total_tokens) * static_cast<std::size_t>(dims.heads);
  const std::size_t dq_accumulator = rows * static_cast<std::size_t>(dims.head_dim) * sizeof(float);
  const std::size_t delta = rows * sizeof(float);
  // The delta array starts at a 256-byte boundary after the accumulator.
  return (dq_accumulator + 255) / 256 * 256 + delta;
}

}  // namespace lcsim::kernels
