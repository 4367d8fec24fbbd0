// Token-sharding context parallelism in the cost model: plain ring, zigzag (head-tail) ring and all-gather CP
// (docs/model.md, "Context parallelism"). Notation: s a sharded sequence's tokens, cp the CP degree, n = s / cp a
// rank's tokens, h = n / 2 a head-tail chunk, b a rank's K,V bytes, e_a(x) the attention efficiency curve.
//
// A ring block with `pairs` query-key pairs costs 4 head_dim pairs FLOPs per head of the TP slice at the efficiency
// of the causal kernel of equal work, e_a(sqrt(2 pairs)): the curve is measured on causal kernels of x tokens
// (x^2 / 2 pairs), and a smaller block is a smaller kernel whose launch, partial tiles and idle SMs weigh more, so
// they show up as cp grows. A causal n x n block has n^2 / 2 pairs (attention_flops' count): e_a(n); a full one
// n^2: e_a(1.41 n). An all-gather chunk call, like a per-sequence split's chunk, runs at e_a of its query tokens.
//
// Ring, rank r of cp holding tokens [r n, (r + 1) n): at step i it holds the K,V block of rank (r - i) mod cp,
// which lies before its queries when i <= r (a full block; i = 0 its causal diagonal) and after them otherwise
// (masked out, nothing to compute). Rank r computes r + 1 blocks; the last rank computes one at every step, so
// step 0 costs a diagonal block and steps 1..cp-1 a full block each for the slowest rank, and the ring, which hands
// every rank its next block from its neighbour, runs at that rank's pace: 1/2 + (cp - 1) full blocks against the
// cp / 2 a balanced split would give every rank.
//
// Zigzag, rank r holding chunks r and 2 cp - 1 - r of 2 cp: step 0 is its own two chunks, one causal kernel of n
// tokens; at step i > 0 a rank holding an earlier rank's chunks computes its n queries against their first chunk
// (n x h) and one holding a later rank's its second chunk against all n keys (h x n); either is n^2 / 2 pairs, at
// e_a(n). Every step costs the same on every rank: cp n^2 / 2 pairs in all, s^2 / (2 cp), as balanced as it gets.
//
// All-gather (Llama 3): the rank's two chunks, queries [r h, (r + 1) h) and [(2 cp - 1 - r) h, (2 cp - r) h),
// against the gathered K,V up to their end: h^2 (2 cp - 1) + h^2 pairs on every rank, s^2 / (2 cp), each call of h
// queries at e_a(h), as the per-sequence split prices its chunks (TransformerEngine runs the two calls on two
// streams to soften their wave quantisation; not credited).
//
// Exchanges per layer and pass (TransformerEngine's P2P ring): forward, the K,V block for step i + 1 moves beside
// step i's kernel, i = 0..cp-2, and the last step has no transfer; backward, K,V beside step 0, K,V plus the
// previous step's dK,dV beside steps 1..cp-2, nothing beside the last step, then its dK,dV alone, exposed:
// cp transfers, 2 (cp - 1) b in all. Steps with the same transfer beside the same kernel are one exchange.
// All-gather: the K,V all-gather before the forward's kernels; in backward the K,V all-gathered again and the
// full-length dK,dV reduce-scattered; nothing beside them (Llama 3 leaves them exposed).
#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

#include "model/cost_model.hpp"

namespace lcsim {

namespace {
constexpr double kBf16Bytes = 2;
}  // namespace

std::string_view to_string(CpAttention mode) {
  switch (mode) {
    case CpAttention::Ulysses:
      return "ulysses";
    case CpAttention::Ring:
      return "ring";
    case CpAttention::Zigzag:
      return "zigzag";
    case CpAttention::AllGather:
      return "all-gather";
  }
  return "unknown";
}

bool shards_tokens(CpAttention mode) {
  return mode != CpAttention::Ulysses;
}

bool head_tail_chunks(CpAttention mode) {
  return mode == CpAttention::Zigzag || mode == CpAttention::AllGather;
}

double CostModel::kv_tensor_bytes(double tokens, int tp) const {
  return tokens * 2 * model_.kv_hidden() * kBf16Bytes / tp;
}

double CostModel::block_attention_seconds(double pairs, double queries, double keys, int tp) const {
  return 4.0 * model_.q_hidden() * pairs / tp /
         (tensor_peak_flops() * profile_.compute.attention_efficiency.at(std::min(queries, keys)));
}

std::vector<double> CostModel::cp_step_seconds(const SequenceShare& share, int tp) const {
  if (share.cp < 2 || share.chunk() || share.sequence_tokens <= 0)
    throw std::invalid_argument("cost model: cp_step_seconds takes a whole sequence sharded over cp >= 2 ranks");
  const int cp = share.cp;
  const double n = static_cast<double>(share.sequence_tokens) / cp;
  const double h = n / 2;
  // A ring block of `pairs` pairs at the efficiency of the causal kernel of equal work (header comment).
  const auto ring_block_seconds = [&](double pairs) {
    const double equal_work_tokens = std::sqrt(2 * pairs);
    return block_attention_seconds(pairs, equal_work_tokens, equal_work_tokens, tp);
  };
  switch (options_.cp_attention) {
    case CpAttention::Ring: {
      std::vector<double> steps(static_cast<std::size_t>(cp), ring_block_seconds(n * n));
      steps[0] = ring_block_seconds(n * n / 2);
      return steps;
    }
    case CpAttention::Zigzag:
      return std::vector<double>(static_cast<std::size_t>(cp), ring_block_seconds(n * n / 2));
    case CpAttention::AllGather:
      return {block_attention_seconds(2 * cp * h * h, h, h, tp)};
    case CpAttention::Ulysses:
      break;
  }
  throw std::invalid_argument("cost model: Ulysses runs no ring steps");
}

std::vector<double> CostModel::ring_step_totals(std::span<const SequenceShare> dist, int cp, int tp) const {
  std::vector<double> steps(static_cast<std::size_t>(cp), 0.0);
  for (const SequenceShare& share : dist) {
    if (share.sequence_tokens <= 0 || share.cp < 2) continue;
    if (share.chunk()) {  // a per-sequence split's chunk: its kernel spread evenly over the steps
      const auto c = static_cast<double>(share.chunk_tokens);
      const double whole = block_attention_seconds(causal_pairs(share.chunk_tokens, share.chunk_offset), c, c, tp);
      for (double& step : steps) step += whole / cp;
      continue;
    }
    if (share.cp != cp) throw std::invalid_argument("cost model: a sharded share's cp differs from its scheme's");
    const std::vector<double> own = cp_step_seconds(share, tp);
    for (std::size_t i = 0; i < steps.size(); ++i) steps[i] += own[i];
  }
  return steps;
}

std::vector<CpExchange> CostModel::ring_exchanges(std::span<const SequenceShare> dist, Tokens tokens_on_gpu,
                                                  const ParallelScheme& scheme, int layers, int backward,
                                                  int checkpointed) const {
  const int cp = scheme.cp;
  const double block = kv_tensor_bytes(static_cast<double>(tokens_on_gpu), scheme.tp);
  const std::vector<double> steps = ring_step_totals(dist, cp, scheme.tp);
  const double first = steps.front();
  double middle = 0;  // steps 1..cp-2, each with a transfer beside it (the same kernel on each)
  for (int i = 1; i + 1 < cp; ++i) middle += steps[static_cast<std::size_t>(i)];
  const double middles = cp - 2;
  const double r = profile_.compute.attention_backward_ratio;
  std::vector<CpExchange> exchanges;
  // `per_layer` transfers of `bytes` beside `beside` seconds of kernels per layer, in `passes` layer passes.
  const auto add = [&](CpExchange::Pass pass, double bytes, double per_layer, double beside, int passes) {
    if (passes <= 0 || per_layer <= 0) return;
    exchanges.push_back({pass, {{CollectiveOp::SendRecv, 2, bytes, per_layer * passes}}, beside * passes});
  };
  add(CpExchange::Pass::Forward, block, 1, first, layers);
  add(CpExchange::Pass::Forward, block, middles, middle, layers);
  add(CpExchange::Pass::Backward, block, 1, first, checkpointed);  // recomputed forwards
  add(CpExchange::Pass::Backward, block, middles, middle, checkpointed);
  add(CpExchange::Pass::Backward, block, 1, r * first, backward);             // K,V
  add(CpExchange::Pass::Backward, 2 * block, middles, r * middle, backward);  // K,V and the previous step's dK,dV
  add(CpExchange::Pass::Backward, block, 1, 0.0, backward);                   // the last dK,dV, after every kernel
  return exchanges;
}

std::vector<CpExchange> CostModel::all_gather_exchanges(Tokens tokens_on_gpu, const ParallelScheme& scheme, int layers,
                                                        int backward, int checkpointed) const {
  const int cp = scheme.cp;
  // nccl-tests size of an all-gather or reduce-scatter: the whole, gathered buffer, which is also what the GPU holds.
  const double gathered = cp * kv_tensor_bytes(static_cast<double>(tokens_on_gpu), scheme.tp);
  std::vector<CpExchange> exchanges;
  if (layers > 0)
    exchanges.push_back(
        {CpExchange::Pass::Forward, {{CollectiveOp::AllGather, cp, gathered, 1.0 * layers}}, 0, gathered});
  if (checkpointed > 0)
    exchanges.push_back(
        {CpExchange::Pass::Backward, {{CollectiveOp::AllGather, cp, gathered, 1.0 * checkpointed}}, 0, gathered});
  if (backward > 0)  // K,V gathered again beside the full-length dK,dV
    exchanges.push_back({CpExchange::Pass::Backward,
                         {{CollectiveOp::AllGather, cp, gathered, 1.0 * backward},
                          {CollectiveOp::ReduceScatter, cp, gathered, 1.0 * backward}},
                         0,
                         2 * gathered});
  return exchanges;
}

double CostModel::cp_buffer_bytes(Tokens tokens_on_gpu, const ParallelScheme& scheme, LayerSpan layers) const {
  if (options_.cp_attention != CpAttention::AllGather || scheme.cp < 2 || tokens_on_gpu <= 0 || layers.count <= 0)
    return 0;
  const double gathered = scheme.cp * kv_tensor_bytes(static_cast<double>(tokens_on_gpu), scheme.tp);
  return layer_mix(scheme, layers).with_backward() > 0 ? 2 * gathered : gathered;
}

}  // namespace lcsim
