#include "model/model.hpp"

#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "base/errors.hpp"
#include "base/suggest.hpp"

namespace lcsim {

UlyssesHeads ulysses_rank_heads(int heads, int kv_heads, int cp) {
  if (heads < 1 || kv_heads < 1 || cp < 1) throw std::invalid_argument("ulysses_rank_heads: heads, kv_heads, cp >= 1");
  const auto ceil_div = [](int a, int b) { return (a + b - 1) / b; };
  UlyssesHeads rank;
  rank.kv_heads = ceil_div(kv_heads, cp);
  rank.heads = ceil_div(ceil_div(heads, cp), rank.kv_heads) * rank.kv_heads;
  return rank;
}

double ModelConfig::layer_parameters() const {
  const double h = hidden;
  // QKV projection, output projection, gated MLP (gate, up, down), two RMSNorm weights. Biases (Qwen2.5 has
  // QKV biases, < 0.1% of a layer) are left out.
  return h * (q_hidden() + 2.0 * kv_hidden()) + static_cast<double>(q_hidden()) * h + 3.0 * h * ffn + 2.0 * h;
}

double ModelConfig::parameters() const {
  const double embeddings = static_cast<double>(vocab) * hidden * (tied_embeddings ? 1.0 : 2.0);
  return layers * layer_parameters() + embeddings + hidden /* final norm */;
}

namespace {

ModelConfig make_model(std::string name, int hidden, int layers, int heads, int kv_heads, int ffn, std::int64_t vocab,
                       bool tied) {
  return ModelConfig{std::move(name), hidden, layers, heads, kv_heads, hidden / heads, ffn, vocab, tied};
}

template <class T>
std::string names_of(const std::vector<T>& items) {
  std::string names;
  for (const auto& item : items) {
    if (!names.empty()) names += ", ";
    names += item.name;
  }
  return names;
}

template <class T>
std::vector<std::string> name_list(const std::vector<T>& items) {
  std::vector<std::string> names;
  for (const auto& item : items) names.push_back(item.name);
  return names;
}

/// The item named `name` exactly, or loosely (case, '-', '_', '.' and spaces aside: "Llama-3.1-8B" is
/// "LLaMA3.1-8B"); nullptr when none is.
template <class T>
const T* find_named(const std::vector<T>& items, std::string_view name) {
  for (const auto& item : items)
    if (item.name == name) return &item;
  const std::string loose = loose_name(name);
  for (const auto& item : items)
    if (loose_name(item.name) == loose) return &item;
  return nullptr;
}

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

}  // namespace

// Shapes from each model's published config.json (see ../shared/reference.md).
const std::vector<ModelConfig>& named_models() {
  static const std::vector<ModelConfig> models = {
      make_model("Qwen2.5-0.5B", 896, 24, 14, 2, 4864, 151936, true),
      make_model("Qwen2.5-7B", 3584, 28, 28, 4, 18944, 152064, false),
      make_model("Qwen2.5-14B", 5120, 48, 40, 8, 13824, 152064, false),
      make_model("Qwen2.5-32B", 5120, 64, 40, 8, 27648, 152064, false),
      make_model("LLaMA2-7B", 4096, 32, 32, 32, 11008, 32000, false),
      make_model("LLaMA2-13B", 5120, 40, 40, 40, 13824, 32000, false),
      // The papers' "32B" LLaMA: the LLaMA-33B shape (60 layers of 6656, 52 heads).
      make_model("LLaMA-32B", 6656, 60, 52, 52, 17920, 32000, false),
      make_model("LLaMA3.1-8B", 4096, 32, 32, 8, 14336, 128256, false),
      make_model("LLaMA3.1-70B", 8192, 80, 64, 8, 28672, 128256, false),
  };
  return models;
}

const ModelConfig& named_model(std::string_view name) {
  if (const ModelConfig* model = find_named(named_models(), name)) return *model;
  throw InputError("unknown model '" + std::string(name) + "'" + did_you_mean(name, name_list(named_models())) +
                   " (known: " + names_of(named_models()) + ")");
}

// Datasheet figures. Memory: the vendors' "80GB" and "141GB" are binary gigabytes of HBM -- nvidia-smi shows
// 81559 MiB on an H100 SXM and 143771 MiB on an H200, i.e. just under 80 and 141 GiB -- so capacities are taken as
// 80 GiB and 141 GiB; what CUDA cannot hand out (context, NCCL buffers, fragmentation) is the profile's reserve.
// NVLink is per direction: 900 GB/s total on H100/H200 (NVLink 4, 18 links), 400 GB/s total on A800 (NVLink 3,
// capped at 8 of A100's 12 links), 600 GB/s total on A100 (NVLink 3, 12 links). A100 40GB: 40 GiB of HBM2 at
// 1.555 TB/s (FlexSP's cluster).
const std::vector<GpuKind>& named_gpus() {
  static const std::vector<GpuKind> gpus = {
      {"H100-SXM", 80 * kGiB, 989.0, 3.35, 450.0},
      {"H200", 141 * kGiB, 989.0, 4.8, 450.0},
      {"A800", 80 * kGiB, 312.0, 2.0, 200.0},
      {"A100-40GB", 40 * kGiB, 312.0, 1.555, 300.0},
  };
  return gpus;
}

const GpuKind& named_gpu(std::string_view name) {
  if (const GpuKind* gpu = find_named(named_gpus(), name)) return *gpu;
  // What people call them: the H100 lcsim knows is the SXM part (the PCIe card has other figures).
  static const std::vector<std::pair<std::string, std::string>> aliases{
      {"h100", "H100-SXM"}, {"h100sxm5", "H100-SXM"}, {"h10080gb", "H100-SXM"}, {"h100sxm580gb", "H100-SXM"},
      {"h200sxm", "H200"},  {"h200141gb", "H200"},    {"a80080gb", "A800"},     {"a100sxm440gb", "A100-40GB"}};
  for (const auto& [alias, canonical] : aliases)
    if (loose_name(name) == alias) return *find_named(named_gpus(), canonical);
  throw InputError("unknown GPU '" + std::string(name) + "'" + did_you_mean(name, name_list(named_gpus())) +
                   " (known: " + names_of(named_gpus()) + ")");
}

}  // namespace lcsim
