#pragma once
// What the layer proxy keeps for a Ulysses shard beyond a whole-sequence layer, plain C++ so that the calibration
// fit (host code) names the numbers the device code allocates (kernels/layer_proxy.cpp, sharded_forward): for
// every token of the sharded sequences, the post-all-to-all Q, K and V of the rank's heads (bf16), the attention
// output in that layout (bf16) and its log-sum-exp (fp32), all saved until the layer's backward.
namespace lcsim::kernels {

/// Bytes per element of the rank's query heads x head_dim: Q (bf16) and the attention output (bf16).
inline constexpr int kShardCopyBytesPerQElement = 2 + 2;
/// Bytes per element of the rank's KV heads x head_dim: K and V (bf16 each).
inline constexpr int kShardCopyBytesPerKvElement = 2 + 2;
/// Bytes per query head: the log-sum-exp (fp32).
inline constexpr int kShardCopyBytesPerHead = 4;

}  // namespace lcsim::kernels
