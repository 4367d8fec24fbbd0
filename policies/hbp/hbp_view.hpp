#pragma once
// HBP's time and memory model as a view of the one CostModel: what HBP profiles on the real cluster is read from
// the CostModel, so HBP selects strategies from the same source that times its plans.
#include "model/cost_model.hpp"

namespace lcsim::hbp {

/// HBP (Appendix I): time and memory of training packs of length L with SP degree sp and gc checkpointed layers
/// on `world` GPUs (world / sp replicas, one pack per replica per step).
class HbpView {
 public:
  HbpView(const CostModel& cost, int world);
  /// Seconds of one step (one pack per SP group, forward + backward + recompute) at packing length L.
  double step_seconds(Tokens packing_length, int sp, int gc_layers) const;
  /// Peak bytes on one GPU.
  double peak_bytes(Tokens packing_length, int sp, int gc_layers) const;
  bool fits(Tokens packing_length, int sp, int gc_layers) const;

 private:
  const CostModel* cost_;
  int world_;
};

}  // namespace lcsim::hbp
