#pragma once
// Hydraulis (Sec. 5.1): the parallel scheme space P = {<TP, PP>} and heterogeneous strategies S = sum_i d_i x P_i.
//
// Scheme space: TP a power of two dividing the GPUs per node (so every TP group stays inside a node whatever the
// mix of schemes, see lay_out()), PP a divisor of the layers, TP x PP <= N. Each scheme carries its paper
// quantities from the HydraulisView of the one cost model: MaxLen(P) (App. B.1), T(l, P) = a l^2 + b l + c (App.
// B.2, fitted) and UtilLen(P) (App. C). Schemes that cannot hold a single token (MaxLen 0) are left out.
//
// Cost conventions used by dispatch and packing: a packed micro-batch of sequences l_1..l_m costs
// c + sum_i (a l_i^2 + b l_i) on one stage -- the paper sums T over the packed sequences (Sec. 6.1, varlen
// attention); the fixed term c (kernel launches, collective latencies) is paid once per micro-batch, as the
// reference implementation does (stylke/Hetu examples/hydraulis, strategy/new_dynamic.py).
#include <cstddef>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "model/cost_model.hpp"
#include "model/fitting.hpp"
#include "model/workload.hpp"

namespace lcsim::hydraulis {

struct SchemeInfo {
  ParallelScheme scheme;  ///< cp == 1
  Tokens max_len = 0;     ///< MaxLen(P): the most tokens one micro-batch may hold
  Tokens util_len = 0;    ///< UtilLen(P)
  QuadraticFit latency;   ///< T(l, P) for one stage, seconds
  /// Seconds a pipeline of this scheme spends after propagation, whether it got sequences or not: the cost
  /// model's ZeRO gradient reduce-scatter + parameter all-gather of its parameters and its optimizer step (what
  /// lcsim's estimate adds to every replica); 0 when the optimisation phase is taken as hidden (SpaceOptions).
  double sync = 0;

  int gpus() const { return scheme.gpus(); }
  /// a l^2 + b l: what one sequence adds to a packed micro-batch.
  double work(Tokens l) const {
    const double x = static_cast<double>(l);
    return (latency.a * x + latency.b) * x;
  }
  /// c: paid once per micro-batch.
  double overhead() const { return latency.c; }
  /// T(l, P) of a micro-batch holding one sequence.
  double seconds(Tokens l) const { return work(l) + overhead(); }
};

/// "<8,2>": TP and PP as the paper writes them.
std::string describe(const ParallelScheme& scheme);

struct SpaceOptions {
  Recompute recompute = Recompute::Selective;
  double util_threshold = 0.85;  ///< UtilLen's share of the best throughput
  /// true: SchemeInfo::sync from the cost model (lcsim's estimate runs the optimisation phase after propagation);
  /// false: 0, the paper's view (Sec. 5.3: subgraph scheduling hides pull and push behind propagation).
  bool serial_optimization = true;
};

class SchemeSpace {
 public:
  /// Every <TP, PP> of the space on `total_gpus` GPUs (see the file comment).
  SchemeSpace(const CostModel& cost, int total_gpus, const SpaceOptions& options);
  /// Only the given <TP, PP> pairs (a scenario's explicit strategies); InputError when one is outside the space.
  SchemeSpace(const CostModel& cost, int total_gpus, const SpaceOptions& options,
              const std::vector<std::pair<int, int>>& tp_pp);
  /// Given schemes (hand-made ones in tests); throws std::invalid_argument for an empty list, MaxLen or
  /// UtilLen < 1, or a scheme wider than `total_gpus`.
  SchemeSpace(std::vector<SchemeInfo> schemes, int total_gpus, int domain_gpus);

  const std::vector<SchemeInfo>& schemes() const { return schemes_; }
  const SchemeInfo& operator[](std::size_t i) const { return schemes_[i]; }
  std::size_t size() const { return schemes_.size(); }
  int total_gpus() const { return total_gpus_; }
  /// GPUs per NVLink domain: a TP group's bound, and the widest group on NVLink.
  int domain_gpus() const { return domain_gpus_; }
  std::optional<std::size_t> find(int tp, int pp) const;
  /// Index of the scheme with the largest MaxLen (ties: fewer GPUs, then lower index); the space is non-empty.
  std::size_t longest() const;

 private:
  void add(const CostModel& cost, int tp, int pp, const SpaceOptions& options);

  std::vector<SchemeInfo> schemes_;
  int total_gpus_ = 0;
  int domain_gpus_ = 0;
};

/// SchemeSpace(cost, total_gpus, options), memoised: fitting every scheme costs about a millisecond and a policy
/// plans many windows with one cost model. The key is the full content of what the space depends on (model,
/// cluster, profile, ZeRO stage, GPUs, options), never an address; the memo holds the 32 most recent spaces.
/// Thread-safe.
std::shared_ptr<const SchemeSpace> shared_scheme_space(const CostModel& cost, int total_gpus,
                                                       const SpaceOptions& options);

/// TP degrees of the space: powers of two dividing `domain_gpus` (an NVLink domain), at most `total_gpus`.
std::vector<int> tp_degrees(int domain_gpus, int total_gpus);
/// PP degrees of the space: divisors of `layers`, at most `total_gpus`.
std::vector<int> pp_degrees(int layers, int total_gpus);

/// A heterogeneous strategy: (scheme index, pipelines) pairs, sorted by scheme index, every count >= 1.
struct Strategy {
  std::vector<std::pair<std::size_t, int>> counts;

  int gpus(const SchemeSpace& space) const;
  int pipelines() const;
  /// The longest MaxLen among its schemes (0 for an empty strategy).
  Tokens max_len(const SchemeSpace& space) const;
  /// "1x<8,1> + 4x<2,1>", largest MaxLen first.
  std::string describe(const SchemeSpace& space) const;
  friend bool operator==(const Strategy&, const Strategy&) = default;
};

/// Builds a Strategy from (scheme, count) pairs in any order; merges repeated schemes, drops zero counts.
Strategy make_strategy(std::vector<std::pair<std::size_t, int>> counts);

/// One pipeline of a laid-out strategy: its scheme and GPUs (index stage * tp + tp_rank, cp = 1).
struct Pipeline {
  std::size_t scheme = 0;
  std::vector<int> gpus;
};

/// The strategy's pipelines in dispatch order -- MaxLen descending, then scheme index -- each with its GPUs.
/// GPUs are handed out contiguously from 0 in order of TP descending: every pipeline then starts at a multiple
/// of its TP (all sizes before it are multiples of a larger power of two), so each stage's TP group is aligned
/// and, TP dividing the GPUs per node, inside one node. Throws PlanningError when the strategy needs more GPUs
/// than the space has.
std::vector<Pipeline> lay_out(const Strategy& strategy, const SchemeSpace& space);
/// lay_out()'s schemes alone, in its order, without handing out GPUs (screening needs no more).
std::vector<std::size_t> pipeline_schemes(const Strategy& strategy, const SchemeSpace& space);

}  // namespace lcsim::hydraulis
