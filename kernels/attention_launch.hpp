#pragma once
// Host-side argument checks shared by the attention launchers.
#include <cstdint>
#include <stdexcept>
#include <string>

#include "kernels/attention.hpp"
#include "kernels/cuda_check.hpp"

namespace lcsim::kernels {

inline void check_attention_args(const VarlenLayout& layout, const AttentionDims& dims, const char* who) {
  if (!attention_supported(dims)) {
    throw std::invalid_argument(std::string(who) + ": unsupported dims (heads " + std::to_string(dims.heads) +
                                ", kv_heads " + std::to_string(dims.kv_heads) + ", head_dim " +
                                std::to_string(dims.head_dim) + "; need head_dim 64 or 128, heads % kv_heads == 0)");
  }
  if (layout.cu_seqlens == nullptr || layout.num_seqs < 0 || layout.total_tokens < 0 || layout.max_seqlen < 0) {
    throw std::invalid_argument(std::string(who) + ": bad varlen layout");
  }
}

/// Rows must allow 16-byte vector access: 16-byte aligned base, stride a multiple of 8 elements, wide enough.
template <class T>
void check_rows(const Rows<T>& rows, int heads, int head_dim, const char* name) {
  const auto address = reinterpret_cast<std::uintptr_t>(rows.data);
  if (rows.data == nullptr || address % 16 != 0 || rows.row_stride % 8 != 0 ||
      rows.row_stride < static_cast<std::int64_t>(heads) * head_dim) {
    throw std::invalid_argument(std::string("attention: tensor ") + name +
                                " must be 16-byte aligned with a row stride that is a multiple of 8 elements and >= "
                                "heads * head_dim");
  }
}

}  // namespace lcsim::kernels
