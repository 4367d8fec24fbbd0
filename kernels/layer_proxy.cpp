#include "kernels/layer_proxy.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>
#include <utility>

#include "kernels/attention.hpp"
#include "kernels/cuda_check.hpp"
#include "kernels/layer_ops.hpp"

namespace lcsim::kernels {
namespace {

constexpr float kRotaryBase = 10000.f;
constexpr float kNormEps = 1e-6f;

std::int64_t count(int rows, int width) {
  return static_cast<std::int64_t>(rows) * width;
}
std::size_t bf16_bytes(std::int64_t elements) {
  return static_cast<std::size_t>(elements) * sizeof(bf16);
}
std::size_t f32_bytes(std::int64_t elements) {
  return static_cast<std::size_t>(elements) * sizeof(float);
}

}  // namespace

struct LayerProxy::Saved {
  const bf16* x = nullptr;  // the layer input, owned by the caller
  DeviceBuffer n1, rstd1, qkv, attn, lse, x2, n2, rstd2, gu, act;
  DeviceBuffer u_qkv, u_attn, u_lse;  // sharded sequences' attention, post-all-to-all shape
};

LayerProxy::LayerProxy(const ModelConfig& model, DeviceArena& arena, GemmRunner& gemm, std::uint64_t seed)
    : model_(model),
      arena_(arena),
      gemm_(gemm),
      stream_(gemm.stream()),
      seed_(seed),
      q_width_(model.q_hidden()),
      kv_width_(model.kv_hidden()),
      qkv_width_(model.q_hidden() + 2 * model.kv_hidden()) {
  if (!attention_supported({model.heads, model.kv_heads, model.head_dim}) || model.hidden > kMaxNormWidth ||
      model.hidden % 8 != 0 || model.ffn % 8 != 0) {
    throw std::invalid_argument("layer proxy: model " + model.name + " has a shape the kernels do not support");
  }
  const int h = model.hidden;
  const int f = model.ffn;
  // Uniform(-1/sqrt(in), 1/sqrt(in)) keeps activations of order one through the layer.
  w_qkv_ = random_bf16(count(qkv_width_, h), 1.f / std::sqrt(static_cast<float>(h)));
  w_o_ = random_bf16(count(h, q_width_), 1.f / std::sqrt(static_cast<float>(q_width_)));
  w_gu_ = random_bf16(count(2 * f, h), 1.f / std::sqrt(static_cast<float>(h)));
  w_down_ = random_bf16(count(h, f), 1.f / std::sqrt(static_cast<float>(f)));
  norm1_ = arena_.allocate(bf16_bytes(h));
  norm2_ = arena_.allocate(bf16_bytes(h));
  fill_value(norm1_.as<bf16>(), h, 1.f, stream_);
  fill_value(norm2_.as<bf16>(), h, 1.f, stream_);
  g_qkv_ = zeros_bf16(count(qkv_width_, h));
  g_o_ = zeros_bf16(count(h, q_width_));
  g_gu_ = zeros_bf16(count(2 * f, h));
  g_down_ = zeros_bf16(count(h, f));
  g_norm1_ = arena_.allocate(f32_bytes(h));
  g_norm2_ = arena_.allocate(f32_bytes(h));
  zero_weight_grads();
}

DeviceBuffer LayerProxy::zeros_bf16(std::int64_t elements) {
  DeviceBuffer b = arena_.allocate(bf16_bytes(elements));
  check_cuda(cudaMemsetAsync(b.as<void>(), 0, bf16_bytes(elements), stream_), "layer proxy: zeroing");
  return b;
}

DeviceBuffer LayerProxy::random_bf16(std::int64_t elements, float scale) {
  DeviceBuffer b = arena_.allocate(bf16_bytes(elements));
  fill_uniform(b.as<bf16>(), elements, seed_++, scale, stream_);
  return b;
}

void LayerProxy::zero_weight_grads() {
  for (auto* g : {&g_qkv_, &g_o_, &g_gu_, &g_down_, &g_norm1_, &g_norm2_}) {
    check_cuda(cudaMemsetAsync(g->as<void>(), 0, g->bytes(), stream_), "layer proxy: zeroing gradients");
  }
}

std::vector<LayerProxy::Tensor> LayerProxy::weight_grads() const {
  const int h = model_.hidden;
  const int f = model_.ffn;
  return {{"Wqkv", g_qkv_.as<bf16>(), count(qkv_width_, h)},
          {"Wo", g_o_.as<bf16>(), count(h, q_width_)},
          {"Wgate_up", g_gu_.as<bf16>(), count(2 * f, h)},
          {"Wdown", g_down_.as<bf16>(), count(h, f)}};
}

void LayerProxy::set_batch(std::span<const int> seqlens) {
  set_batch(seqlens, Sharded{});
}

void LayerProxy::set_batch(std::span<const int> seqlens, const Sharded& sharded) {
  std::vector<int> cu = {0};
  std::vector<int> positions;
  max_seqlen_ = 0;
  for (int s : seqlens) {
    if (s <= 0) throw std::invalid_argument("layer proxy: sequence lengths must be positive");
    cu.push_back(cu.back() + s);
    for (int p = 0; p < s; ++p) positions.push_back(p);
    max_seqlen_ = std::max(max_seqlen_, s);
  }
  num_seqs_ = static_cast<int>(seqlens.size());
  local_tokens_ = cu.back();
  // Sharded sequences: ceil(S / cp) rows each (positions of the rank's chunk), attention over all S tokens.
  std::vector<int> u_cu = {0};
  u_max_seqlen_ = 0;
  if (!sharded.seqlens.empty()) {
    if (sharded.cp < 1 || sharded.heads < 1 || sharded.kv_heads < 1 || sharded.heads % sharded.kv_heads != 0 ||
        !attention_supported({sharded.heads, sharded.kv_heads, model_.head_dim}))
      throw std::invalid_argument("layer proxy: sharded attention with " + std::to_string(sharded.heads) + " heads, " +
                                  std::to_string(sharded.kv_heads) + " KV heads is not supported");
    for (int s : sharded.seqlens) {
      if (s <= 0) throw std::invalid_argument("layer proxy: sequence lengths must be positive");
      u_cu.push_back(u_cu.back() + s);
      u_max_seqlen_ = std::max(u_max_seqlen_, s);
      for (int p = 0; p < (s + sharded.cp - 1) / sharded.cp; ++p) positions.push_back(p);
    }
  }
  sharded_ = sharded;
  u_tokens_ = u_cu.back();
  u_width_ = (sharded.heads + 2 * sharded.kv_heads) * model_.head_dim;
  tokens_ = static_cast<int>(positions.size());
  if (tokens_ == 0) throw std::invalid_argument("layer proxy: empty batch");
  // Release the previous batch's buffers before allocating this one's.
  x0_.reset();
  dy0_.reset();
  dx0_.reset();
  cu_seqlens_ = arena_.allocate(cu.size() * sizeof(int));
  positions_ = arena_.allocate(std::max<std::size_t>(positions.size(), 1) * sizeof(int));
  u_cu_seqlens_ = arena_.allocate(u_cu.size() * sizeof(int));
  check_cuda(
      cudaMemcpyAsync(cu_seqlens_.as<void>(), cu.data(), cu.size() * sizeof(int), cudaMemcpyHostToDevice, stream_),
      "layer proxy: cu_seqlens upload");
  check_cuda(cudaMemcpyAsync(positions_.as<void>(), positions.data(), positions.size() * sizeof(int),
                             cudaMemcpyHostToDevice, stream_),
             "layer proxy: positions upload");
  check_cuda(cudaMemcpyAsync(u_cu_seqlens_.as<void>(), u_cu.data(), u_cu.size() * sizeof(int), cudaMemcpyHostToDevice,
                             stream_),
             "layer proxy: sharded cu_seqlens upload");
  // The uploads read host vectors that die with this function.
  check_cuda(cudaStreamSynchronize(stream_), "layer proxy: batch upload");
  x0_ = random_bf16(count(tokens_, model_.hidden), 1.f);
  dy0_ = random_bf16(count(tokens_, model_.hidden), 1e-2f);
}

LayerProxy::Saved LayerProxy::forward(const bf16* x, Recompute recompute, DeviceBuffer& y) {
  const int t = tokens_;
  const int h = model_.hidden;
  const int f = model_.ffn;
  Saved s;
  s.x = x;
  s.n1 = arena_.allocate(bf16_bytes(count(t, h)));
  s.rstd1 = arena_.allocate(f32_bytes(t));
  rms_norm_forward(x, norm1_.as<bf16>(), s.n1.as<bf16>(), s.rstd1.as<float>(), t, h, kNormEps, stream_);
  s.qkv = arena_.allocate(bf16_bytes(count(t, qkv_width_)));
  gemm_.gemm(t, qkv_width_, h, s.n1.as<bf16>(), false, w_qkv_.as<bf16>(), true, s.qkv.as<bf16>());
  if (recompute == Recompute::Selective) s.n1.reset();
  bf16* qkv = s.qkv.as<bf16>();
  rotary(qkv, qkv_width_, model_.heads, model_.head_dim, positions_.as<int>(), t, kRotaryBase, false, stream_);
  rotary(qkv + q_width_, qkv_width_, model_.kv_heads, model_.head_dim, positions_.as<int>(), t, kRotaryBase, false,
         stream_);

  s.attn = arena_.allocate(bf16_bytes(count(t, q_width_)));
  s.lse = arena_.allocate(f32_bytes(count(model_.heads, std::max(local_tokens_, 1))));
  if (num_seqs_ > 0) {  // the whole sequences: rows [0, local_tokens_)
    AttentionForwardArgs a;
    a.layout = {cu_seqlens_.as<int>(), num_seqs_, local_tokens_, max_seqlen_};
    a.dims = {model_.heads, model_.kv_heads, model_.head_dim};
    a.q = {qkv, qkv_width_};
    a.k = {qkv + q_width_, qkv_width_};
    a.v = {qkv + q_width_ + kv_width_, qkv_width_};
    a.out = {s.attn.as<bf16>(), q_width_};
    a.lse = s.lse.as<float>();
    a.softmax_scale = 1.f / std::sqrt(static_cast<float>(model_.head_dim));
    attention_forward(a, stream_);
  }
  if (u_tokens_ > 0) sharded_forward(s);

  {
    DeviceBuffer o = arena_.allocate(bf16_bytes(count(t, h)));
    gemm_.gemm(t, h, q_width_, s.attn.as<bf16>(), false, w_o_.as<bf16>(), true, o.as<bf16>());
    s.x2 = arena_.allocate(bf16_bytes(count(t, h)));
    add(x, o.as<bf16>(), s.x2.as<bf16>(), count(t, h), stream_);
  }
  s.n2 = arena_.allocate(bf16_bytes(count(t, h)));
  s.rstd2 = arena_.allocate(f32_bytes(t));
  rms_norm_forward(s.x2.as<bf16>(), norm2_.as<bf16>(), s.n2.as<bf16>(), s.rstd2.as<float>(), t, h, kNormEps, stream_);
  s.gu = arena_.allocate(bf16_bytes(count(t, 2 * f)));
  gemm_.gemm(t, 2 * f, h, s.n2.as<bf16>(), false, w_gu_.as<bf16>(), true, s.gu.as<bf16>());
  if (recompute == Recompute::Selective) s.n2.reset();
  s.act = arena_.allocate(bf16_bytes(count(t, f)));
  swiglu_forward(s.gu.as<bf16>(), s.act.as<bf16>(), t, f, stream_);
  {
    DeviceBuffer down = arena_.allocate(bf16_bytes(count(t, h)));
    gemm_.gemm(t, h, f, s.act.as<bf16>(), false, w_down_.as<bf16>(), true, down.as<bf16>());
    if (recompute == Recompute::Selective) s.act.reset();
    y = arena_.allocate(bf16_bytes(count(t, h)));
    add(s.x2.as<bf16>(), down.as<bf16>(), y.as<bf16>(), count(t, h), stream_);
  }
  if (recompute == Recompute::Full) {
    s = Saved{};
    s.x = x;
  }
  return s;
}

DeviceBuffer LayerProxy::backward(Saved& saved, Recompute recompute, const bf16* dy) {
  const int t = tokens_;
  const int h = model_.hidden;
  const int f = model_.ffn;
  if (recompute == Recompute::Full) {
    DeviceBuffer discarded;
    saved = forward(saved.x, Recompute::None, discarded);
  }
  Saved& s = saved;

  // MLP.
  if (!s.act) {
    s.act = arena_.allocate(bf16_bytes(count(t, f)));
    swiglu_forward(s.gu.as<bf16>(), s.act.as<bf16>(), t, f, stream_);
  }
  DeviceBuffer d_gu = arena_.allocate(bf16_bytes(count(t, 2 * f)));
  {
    DeviceBuffer d_act = arena_.allocate(bf16_bytes(count(t, f)));
    gemm_.gemm(t, f, h, dy, false, w_down_.as<bf16>(), false, d_act.as<bf16>());
    gemm_.gemm(h, f, t, dy, true, s.act.as<bf16>(), false, g_down_.as<bf16>(), 1.f);
    s.act.reset();
    swiglu_backward(s.gu.as<bf16>(), d_act.as<bf16>(), d_gu.as<bf16>(), t, f, stream_);
  }
  s.gu.reset();
  if (!s.n2) {
    s.n2 = arena_.allocate(bf16_bytes(count(t, h)));
    rms_norm_apply(s.x2.as<bf16>(), norm2_.as<bf16>(), s.rstd2.as<float>(), s.n2.as<bf16>(), t, h, stream_);
  }
  DeviceBuffer dx2 = arena_.allocate(bf16_bytes(count(t, h)));
  {
    DeviceBuffer d_n2 = arena_.allocate(bf16_bytes(count(t, h)));
    gemm_.gemm(t, h, 2 * f, d_gu.as<bf16>(), false, w_gu_.as<bf16>(), false, d_n2.as<bf16>());
    gemm_.gemm(2 * f, h, t, d_gu.as<bf16>(), true, s.n2.as<bf16>(), false, g_gu_.as<bf16>(), 1.f);
    d_gu.reset();
    s.n2.reset();
    rms_norm_backward(s.x2.as<bf16>(), norm2_.as<bf16>(), s.rstd2.as<float>(), d_n2.as<bf16>(), dy, dx2.as<bf16>(),
                      g_norm2_.as<float>(), t, h, stream_);
  }
  s.x2.reset();
  s.rstd2.reset();

  // Attention block.
  DeviceBuffer d_qkv = arena_.allocate(bf16_bytes(count(t, qkv_width_)));
  {
    DeviceBuffer d_attn = arena_.allocate(bf16_bytes(count(t, q_width_)));
    gemm_.gemm(t, q_width_, h, dx2.as<bf16>(), false, w_o_.as<bf16>(), false, d_attn.as<bf16>());
    gemm_.gemm(h, q_width_, t, dx2.as<bf16>(), true, s.attn.as<bf16>(), false, g_o_.as<bf16>(), 1.f);
    const bf16* qkv = s.qkv.as<bf16>();
    bf16* dqkv = d_qkv.as<bf16>();
    if (num_seqs_ > 0) {
      AttentionBackwardArgs a;
      a.layout = {cu_seqlens_.as<int>(), num_seqs_, local_tokens_, max_seqlen_};
      a.dims = {model_.heads, model_.kv_heads, model_.head_dim};
      a.q = {qkv, qkv_width_};
      a.k = {qkv + q_width_, qkv_width_};
      a.v = {qkv + q_width_ + kv_width_, qkv_width_};
      a.out = {s.attn.as<bf16>(), q_width_};
      a.dout = {d_attn.as<bf16>(), q_width_};
      a.lse = s.lse.as<float>();
      a.dq = {dqkv, qkv_width_};
      a.dk = {dqkv + q_width_, qkv_width_};
      a.dv = {dqkv + q_width_ + kv_width_, qkv_width_};
      a.softmax_scale = 1.f / std::sqrt(static_cast<float>(model_.head_dim));
      DeviceBuffer workspace = arena_.allocate(attention_backward_workspace_bytes(a.layout, a.dims));
      attention_backward(a, workspace.as<void>(), stream_);
    }
    if (u_tokens_ > 0) sharded_backward(s, d_attn.as<bf16>(), dqkv);
  }
  s.attn.reset();
  s.lse.reset();
  s.qkv.reset();
  bf16* dqkv = d_qkv.as<bf16>();
  rotary(dqkv, qkv_width_, model_.heads, model_.head_dim, positions_.as<int>(), t, kRotaryBase, true, stream_);
  rotary(dqkv + q_width_, qkv_width_, model_.kv_heads, model_.head_dim, positions_.as<int>(), t, kRotaryBase, true,
         stream_);
  if (!s.n1) {
    s.n1 = arena_.allocate(bf16_bytes(count(t, h)));
    rms_norm_apply(s.x, norm1_.as<bf16>(), s.rstd1.as<float>(), s.n1.as<bf16>(), t, h, stream_);
  }
  DeviceBuffer dx = arena_.allocate(bf16_bytes(count(t, h)));
  {
    DeviceBuffer d_n1 = arena_.allocate(bf16_bytes(count(t, h)));
    gemm_.gemm(t, h, qkv_width_, dqkv, false, w_qkv_.as<bf16>(), false, d_n1.as<bf16>());
    gemm_.gemm(qkv_width_, h, t, dqkv, true, s.n1.as<bf16>(), false, g_qkv_.as<bf16>(), 1.f);
    d_qkv.reset();
    s.n1.reset();
    rms_norm_backward(s.x, norm1_.as<bf16>(), s.rstd1.as<float>(), d_n1.as<bf16>(), dx2.as<bf16>(), dx.as<bf16>(),
                      g_norm1_.as<float>(), t, h, stream_);
  }
  s.rstd1.reset();
  return dx;
}

void LayerProxy::run(int layers, Recompute recompute) {
  run(layers, recompute, 0, {});
}

void LayerProxy::run(int layers, Recompute recompute, int checkpointed, const std::function<void()>& between) {
  if (layers < 1) throw std::invalid_argument("layer proxy: layers must be >= 1");
  if (checkpointed < 0) throw std::invalid_argument("layer proxy: checkpointed layers must be >= 0");
  if (tokens_ == 0) throw std::logic_error("layer proxy: set_batch first");
  const auto mode = [&](int layer) { return layer < checkpointed ? Recompute::Full : recompute; };
  dx0_.reset();
  std::vector<Saved> saved;
  std::vector<DeviceBuffer> outputs;  // outputs[i] is layer i's output, layer i + 1's input
  saved.reserve(static_cast<std::size_t>(layers));
  outputs.reserve(static_cast<std::size_t>(layers));
  for (int i = 0; i < layers; ++i) {
    const bf16* input = i == 0 ? x0_.as<bf16>() : outputs.back().as<bf16>();
    DeviceBuffer y;
    saved.push_back(forward(input, mode(i), y));
    outputs.push_back(std::move(y));
  }
  outputs.back().reset();  // the last output would feed the LM head, outside the layer
  if (between) between();
  DeviceBuffer grad;
  for (int i = layers - 1; i >= 0; --i) {
    DeviceBuffer dx =
        backward(saved[static_cast<std::size_t>(i)], mode(i), i == layers - 1 ? dy0_.as<bf16>() : grad.as<bf16>());
    saved.pop_back();
    if (i > 0) outputs[static_cast<std::size_t>(i - 1)].reset();  // layer i's input, no longer needed
    grad = std::move(dx);
  }
  dx0_ = std::move(grad);
}

void LayerProxy::copy_cyclic(void* dst, std::size_t dst_bytes, const void* src, std::size_t src_bytes) {
  if (src_bytes == 0) throw std::logic_error("layer proxy: copy from an empty buffer");
  for (std::size_t done = 0; done < dst_bytes; done += src_bytes)
    check_cuda(cudaMemcpyAsync(static_cast<char*>(dst) + done, src, std::min(src_bytes, dst_bytes - done),
                               cudaMemcpyDeviceToDevice, stream_),
               "layer proxy: sharded exchange copy");
}

void LayerProxy::sharded_forward(Saved& s) {
  const int heads = sharded_.heads;
  const int kv_heads = sharded_.kv_heads;
  const int d = model_.head_dim;
  const int rows = tokens_ - local_tokens_;
  // All-to-all in: this rank's Q, K, V rows of the shards -> every token's Q, K, V for the rank's heads. u_qkv,
  // u_attn and u_lse stay saved until backward: kernels/ulysses_copies.hpp gives the fit their bytes.
  s.u_qkv = arena_.allocate(bf16_bytes(count(u_tokens_, u_width_)));
  copy_cyclic(s.u_qkv.as<void>(), s.u_qkv.bytes(), s.qkv.as<bf16>() + count(local_tokens_, qkv_width_),
              bf16_bytes(count(rows, qkv_width_)));
  s.u_attn = arena_.allocate(bf16_bytes(count(u_tokens_, heads * d)));
  s.u_lse = arena_.allocate(f32_bytes(count(heads, u_tokens_)));
  const bf16* q = s.u_qkv.as<bf16>();
  AttentionForwardArgs a;
  a.layout = {u_cu_seqlens_.as<int>(), static_cast<int>(sharded_.seqlens.size()), u_tokens_, u_max_seqlen_};
  a.dims = {heads, kv_heads, d};
  a.q = {q, u_width_};
  a.k = {q + heads * d, u_width_};
  a.v = {q + (heads + kv_heads) * d, u_width_};
  a.out = {s.u_attn.as<bf16>(), heads * d};
  a.lse = s.u_lse.as<float>();
  a.softmax_scale = 1.f / std::sqrt(static_cast<float>(d));
  attention_forward(a, stream_);
  // All-to-all out: the attention output back to this rank's rows, every head.
  copy_cyclic(s.attn.as<bf16>() + count(local_tokens_, q_width_), bf16_bytes(count(rows, q_width_)),
              s.u_attn.as<void>(), s.u_attn.bytes());
}

void LayerProxy::sharded_backward(Saved& s, const bf16* d_attn, bf16* d_qkv) {
  const int heads = sharded_.heads;
  const int kv_heads = sharded_.kv_heads;
  const int d = model_.head_dim;
  const int rows = tokens_ - local_tokens_;
  DeviceBuffer du_attn = arena_.allocate(bf16_bytes(count(u_tokens_, heads * d)));
  copy_cyclic(du_attn.as<void>(), du_attn.bytes(), d_attn + count(local_tokens_, q_width_),
              bf16_bytes(count(rows, q_width_)));
  DeviceBuffer du_qkv = arena_.allocate(bf16_bytes(count(u_tokens_, u_width_)));
  const bf16* q = s.u_qkv.as<bf16>();
  bf16* dq = du_qkv.as<bf16>();
  AttentionBackwardArgs a;
  a.layout = {u_cu_seqlens_.as<int>(), static_cast<int>(sharded_.seqlens.size()), u_tokens_, u_max_seqlen_};
  a.dims = {heads, kv_heads, d};
  a.q = {q, u_width_};
  a.k = {q + heads * d, u_width_};
  a.v = {q + (heads + kv_heads) * d, u_width_};
  a.out = {s.u_attn.as<bf16>(), heads * d};
  a.dout = {du_attn.as<bf16>(), heads * d};
  a.lse = s.u_lse.as<float>();
  a.dq = {dq, u_width_};
  a.dk = {dq + heads * d, u_width_};
  a.dv = {dq + (heads + kv_heads) * d, u_width_};
  a.softmax_scale = 1.f / std::sqrt(static_cast<float>(d));
  {
    DeviceBuffer workspace = arena_.allocate(attention_backward_workspace_bytes(a.layout, a.dims));
    attention_backward(a, workspace.as<void>(), stream_);
  }
  du_attn.reset();
  s.u_qkv.reset();
  s.u_attn.reset();
  s.u_lse.reset();
  // All-to-all back: the Q, K, V gradients to this rank's rows.
  copy_cyclic(d_qkv + count(local_tokens_, qkv_width_), bf16_bytes(count(rows, qkv_width_)), du_qkv.as<void>(),
              du_qkv.bytes());
}

}  // namespace lcsim::kernels
