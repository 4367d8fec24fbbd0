#pragma once
// Collectives and transfers as flows over the platform, so that groups sharing a link slow each other down.
// The cost model says how long a collective takes alone (latency + transfer, from the profile's fits); the flows
// reproduce exactly that time when nothing else uses the links, and CM02 max-min sharing stretches them when
// something does. Algorithms (sim/collectives.cpp explains each):
//   - Ulysses all-to-all (CP):   one flow per rank to a peer, carrying all n-1 of its messages
//   - ring attention (CP):       one flow per rank to its ring successor, carrying all its steps
//   - ring all-gather / reduce-scatter / all-reduce (TP, ZeRO): collapsed ring, one flow per rank
//   - send/recv (pipelines):     one flow
#include <algorithm>
#include <memory>
#include <vector>

#include "sim/iteration_program.hpp"
#include "sim/platform.hpp"
#include "sim/simgrid_compat.hpp"

namespace lcsim::sim {

/// When a member's communication ran: from the moment the last member arrived to completion.
struct CommInterval {
  double start = 0;
  double end = 0;
};

/// The flows of one collective instance, `bytes` each.
struct FlowPlan {
  struct Flow {
    sg4::Host* from = nullptr;
    sg4::Host* to = nullptr;
  };
  std::vector<Flow> flows;
  std::uint64_t bytes = 0;
  double delay_s = 0;  ///< the collective's latency, paid before the flows start
};
/// Exposed for tests: the flows that make `spec` take exactly its cost-model time on an idle platform.
FlowPlan plan_flows(const Platform& platform, const CollectiveSpec& spec);

/// One flow before hosts are chosen: it leaves through the links of class `link` of `from` and enters through
/// those of `to` (one GPU: its own endpoint; more, on one node: their aggregate).
struct FlowShape {
  LinkClass link = LinkClass::NvLink;
  std::vector<int> from;
  std::vector<int> to;
};
/// The flows of a collective of `kind` over `gpus` (in group order) on link class `link`, or of a transfer
/// (`kind` PpActivation or PpGradient, `gpus` = {from, to}); `aggregate` false: one flow per member, never per
/// node. plan_flows() gives these hosts; link_uses() declares them to the platform.
std::vector<FlowShape> flow_shapes(int gpus_per_node, const std::vector<int>& gpus, LinkClass link, WorkKind kind,
                                   bool aggregate);
/// What the flows of a collective (or transfer) of `kind` over `gpus` cross, on the group's link class: the
/// platform must be built with these for plan_flows() to find its aggregates and its endpoints unmerged.
std::vector<LinkUse> link_uses(const ClusterSpec& cluster, const std::vector<int>& gpus, WorkKind kind);

/// A reusable barrier over n actors whose cost grows linearly with n: SimGrid 3.32's Barrier does work linear in
/// its waiting actors at every arrival, so one barrier over 1024 actors costs about a million steps per round.
/// Arrivals form groups of kGroup in arrival order; the last of each group arrives at a TreeBarrier over the
/// groups (so no SimGrid barrier is ever wider than kGroup), and the very last arrival of all runs `last` before
/// anyone is released.
///
/// Release cascades down the tree over several scheduling rounds, so an actor released early could arrive for the
/// next round while some group barrier of this round has not yet let its members go (SimGrid's first-in first-out
/// run queue happens to run the leaders first; correctness should not rest on that). Rounds therefore alternate
/// between two sets of group barriers: every barrier of round k-1 has completed before round k can complete (each
/// of its members left one), so round k+1 finds its set free.
class TreeBarrier {
 public:
  static constexpr std::size_t kGroup = 16;
  explicit TreeBarrier(std::size_t n) : n_(n) {}

  template <class Last>
  void arrive(Last&& last) {
    const std::size_t k = arrived_++;
    std::vector<sg4::BarrierPtr>& groups = groups_[round_ % 2];
    if (k + 1 == n_) {  // this round is complete: the next one starts counting on the other set
      arrived_ = 0;
      ++round_;
    }
    const std::size_t group = k / kGroup;
    const std::size_t group_size = std::min(kGroup, n_ - group * kGroup);
    if (groups.size() <= group) groups.resize(group + 1);
    if (!groups[group]) groups[group] = sg4::Barrier::create(static_cast<unsigned>(group_size));
    const sg4::BarrierPtr barrier = groups[group];
    if (k % kGroup + 1 < group_size) {
      barrier->wait();
      return;
    }
    // The group is complete. The group of the very last arrival completes last, so its leader is the last to
    // arrive above and runs `last` there.
    const std::size_t group_count = (n_ + kGroup - 1) / kGroup;
    if (group_count > 1) {
      if (!above_) above_ = std::make_unique<TreeBarrier>(group_count);
      above_->arrive(last);
    } else {
      last();
    }
    barrier->wait();
  }

 private:
  std::size_t n_;
  std::size_t arrived_ = 0;
  std::size_t round_ = 0;
  std::vector<sg4::BarrierPtr> groups_[2];  // by round parity
  std::unique_ptr<TreeBarrier> above_;
};

/// One collective instance at run time. It starts when the last member is ready and ends when the last flow does
/// (as NCCL collectives do: each rank needs data from all), and every member leaves knowing when it ran. Two ways to
/// use it:
///   - join(): each member calls it from its own actor with when it is ready (its queued compute may end later than
///     now: see the executor); the last to join runs the flows while the others wait at a barrier.
///   - arrive() / run(): the executor records arrivals without blocking (a member may even be arrived on another's
///     behalf) and has the actor of the last arrival call run(); who waits, and how, is the caller's business.
class CollectiveRun {
 public:
  CommInterval join(const Platform& platform, const CollectiveSpec& spec, double ready);

  /// Records `gpu`'s arrival, ready at `ready`; true when it completes the spec's members.
  bool arrive(const CollectiveSpec& spec, int gpu, double ready);
  /// Runs the collective once every member has arrived (blocking the calling actor for its simulated duration).
  CommInterval run(const Platform& platform, const CollectiveSpec& spec);
  /// The members in arrival order (arrive() only).
  const std::vector<int>& members() const { return members_; }

 private:
  void run_flows(const Platform& platform, const CollectiveSpec& spec);

  std::unique_ptr<TreeBarrier> barrier_;
  std::vector<int> members_;
  double ready_ = 0;
  CommInterval interval_;
};

/// One point-to-point transfer at run time: the flow starts when both sides have arrived (NCCL send/recv is a
/// rendezvous); the sender never waits, the receiver waits for the data.
class TransferRun {
 public:
  void send(const Platform& platform, const TransferSpec& spec);
  CommInterval receive(const Platform& platform, const TransferSpec& spec);

 private:
  sg4::CommPtr start(const Platform& platform, const TransferSpec& spec);

  bool sent_ = false;
  bool receiver_waiting_ = false;
  double start_ = 0;
  sg4::CommPtr comm_;
  sg4::SemaphorePtr ready_;
};

}  // namespace lcsim::sim
