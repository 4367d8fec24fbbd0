#pragma once
// What a training run updates: every weight (full fine-tuning, the default), LoRA adapters beside frozen base
// weights, or every weight but a frozen part (partial freezing: embeddings, LM head, the first layers). The cost model
// derives every time and memory term from it (docs/model.md, "Fine-tuning methods").
#include <cstdint>
#include <string_view>
#include <utility>
#include <vector>

#include "model/model.hpp"

namespace lcsim {

enum class FinetuningMethod : std::uint8_t { Full, Lora, Frozen };
std::string_view to_string(FinetuningMethod method);

/// The weight matrices of a layer a LoRA adapter may sit beside.
enum class LoraTarget : std::uint8_t { Q, K, V, O, Gate, Up, Down };
std::string_view to_string(LoraTarget target);
/// Every target, in layer order.
const std::vector<LoraTarget>& all_lora_targets();

struct Finetuning {
  FinetuningMethod method = FinetuningMethod::Full;
  int lora_rank = 0;                     ///< LoRA: r of A (d_in x r) and B (r x d_out)
  double lora_alpha = 0;                 ///< LoRA: the adapters' scale alpha / r; no effect on time or memory
  std::vector<LoraTarget> lora_targets;  ///< LoRA: the adapted matrices, no duplicates
  bool frozen_embeddings = false;        ///< Frozen: the input embeddings
  bool frozen_lm_head = false;           ///< Frozen: the LM head
  int frozen_layers = 0;                 ///< Frozen: the first layers, [0, frozen_layers)
  bool lora() const { return method == FinetuningMethod::Lora; }
  bool frozen() const { return method == FinetuningMethod::Frozen; }
};

/// {d_in, d_out} of a target's weight matrix in `model`.
std::pair<double, double> lora_target_shape(const ModelConfig& model, LoraTarget target);
/// Adapter parameters of one layer: r (d_in + d_out) per target; 0 for full fine-tuning.
double lora_parameters_per_layer(const ModelConfig& model, const Finetuning& finetuning);

}  // namespace lcsim
