#pragma once
// Model shapes and GPU kinds: the public figures of ../shared/reference.md.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace lcsim {

/// A decoder-only transformer with grouped-query attention and a gated (SwiGLU) MLP.
struct ModelConfig {
  std::string name;
  int hidden = 0;
  int layers = 0;
  int heads = 0;
  int kv_heads = 0;
  int head_dim = 0;  ///< hidden / heads unless the model says otherwise
  int ffn = 0;
  std::int64_t vocab = 0;
  bool tied_embeddings = false;  ///< input embedding shared with the LM head (Qwen2.5-0.5B)

  int kv_hidden() const { return kv_heads * head_dim; }
  int q_hidden() const { return heads * head_dim; }
  /// Parameters of one transformer layer (QKV, O, gated MLP, two norms).
  double layer_parameters() const;
  /// All parameters, embeddings and LM head included.
  double parameters() const;
};

/// The attention heads one rank of a Ulysses group runs: its whole KV heads (ceil(kv_heads / cp)) and the query
/// heads of those groups (ceil(heads / cp), rounded up to whole groups). A rank cannot hold part of a head, so when
/// cp does not divide the heads the busiest rank runs more than heads / cp, and the group waits for it.
struct UlyssesHeads {
  int heads = 0;
  int kv_heads = 0;
};
UlyssesHeads ulysses_rank_heads(int heads, int kv_heads, int cp);

/// Qwen2.5-0.5B/7B/14B/32B, LLaMA2-7B/13B, LLaMA-32B (LLaMA-33B shape), LLaMA3.1-8B/70B.
const std::vector<ModelConfig>& named_models();
/// Throws InputError listing the known names.
const ModelConfig& named_model(std::string_view name);

struct GpuKind {
  std::string name;
  double memory_bytes = 0;      ///< HBM capacity
  double peak_bf16_tflops = 0;  ///< dense BF16 tensor-core peak
  double hbm_TBps = 0;
  double nvlink_GBps = 0;  ///< NVLink bandwidth per direction per GPU
};

/// H100-SXM, H200, A800.
const std::vector<GpuKind>& named_gpus();
/// Throws InputError listing the known names.
const GpuKind& named_gpu(std::string_view name);

}  // namespace lcsim
