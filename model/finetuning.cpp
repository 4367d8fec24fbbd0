#include "model/finetuning.hpp"

namespace lcsim {

std::string_view to_string(FinetuningMethod method) {
  switch (method) {
    case FinetuningMethod::Full:
      return "full";
    case FinetuningMethod::Lora:
      return "lora";
    case FinetuningMethod::Frozen:
      return "frozen";
  }
  return "unknown";
}

std::string_view to_string(LoraTarget target) {
  switch (target) {
    case LoraTarget::Q:
      return "q";
    case LoraTarget::K:
      return "k";
    case LoraTarget::V:
      return "v";
    case LoraTarget::O:
      return "o";
    case LoraTarget::Gate:
      return "gate";
    case LoraTarget::Up:
      return "up";
    case LoraTarget::Down:
      return "down";
  }
  return "unknown";
}

const std::vector<LoraTarget>& all_lora_targets() {
  static const std::vector<LoraTarget> targets{LoraTarget::Q,    LoraTarget::K,  LoraTarget::V,   LoraTarget::O,
                                               LoraTarget::Gate, LoraTarget::Up, LoraTarget::Down};
  return targets;
}

std::pair<double, double> lora_target_shape(const ModelConfig& model, LoraTarget target) {
  const double h = model.hidden;
  switch (target) {
    case LoraTarget::Q:
      return {h, model.q_hidden()};
    case LoraTarget::K:
    case LoraTarget::V:
      return {h, model.kv_hidden()};
    case LoraTarget::O:
      return {model.q_hidden(), h};
    case LoraTarget::Gate:
    case LoraTarget::Up:
      return {h, static_cast<double>(model.ffn)};
    case LoraTarget::Down:
      return {static_cast<double>(model.ffn), h};
  }
  return {0, 0};
}

double lora_parameters_per_layer(const ModelConfig& model, const Finetuning& finetuning) {
  if (!finetuning.lora()) return 0;
  double parameters = 0;
  for (LoraTarget target : finetuning.lora_targets) {
    const auto [d_in, d_out] = lora_target_shape(model, target);
    parameters += finetuning.lora_rank * (d_in + d_out);
  }
  return parameters;
}

}  // namespace lcsim
