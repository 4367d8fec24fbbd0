#include "policies/hbp/hbp_view.hpp"

#include <stdexcept>

#include "policies/core/cost_view_support.hpp"

namespace lcsim::hbp {
namespace {

/// HBP trains each pack with SP (Ulysses) over `sp` GPUs and full checkpointing on `gc` layers; the other layers
/// keep all their activations.
ParallelScheme hbp_scheme(const CostModel& cost, int world, int sp, int gc_layers) {
  if (sp < 1 || sp > world) throw std::invalid_argument("HbpView: sp must be in [1, world]");
  if (gc_layers < 0 || gc_layers > cost.model().layers)
    throw std::invalid_argument("HbpView: gc layers must be in [0, layers]");
  ParallelScheme scheme;
  scheme.cp = sp;
  scheme.recompute = Recompute::None;
  scheme.checkpointed_layers = gc_layers;
  return scheme;
}

}  // namespace

HbpView::HbpView(const CostModel& cost, int world) : cost_(&cost), world_(world) {
  if (world < 1) throw std::invalid_argument("HbpView: world must be >= 1");
}

double HbpView::step_seconds(Tokens packing_length, int sp, int gc_layers) const {
  const ParallelScheme scheme = hbp_scheme(*cost_, world_, sp, gc_layers);
  const LayerSpan layers = stage_span(cost_->model(), 1, 0);  // HBP runs no pipeline
  const SequenceShare share{packing_length, sp};
  return cost_->compute_seconds({&share, 1}, scheme, layers, true) +
         cost_->cp_comm_seconds({&share, 1}, views::ceil_div(packing_length, sp), scheme, layers,
                                views::group_link(*cost_, sp));
}

double HbpView::peak_bytes(Tokens packing_length, int sp, int gc_layers) const {
  const ParallelScheme scheme = hbp_scheme(*cost_, world_, sp, gc_layers);
  // Every GPU holds the whole model (no TP/PP), so ZeRO shards across the whole world.
  return cost_->static_bytes(scheme, world_, 0) +
         cost_->activation_bytes_per_token(scheme, stage_span(cost_->model(), 1, 0), true) *
             static_cast<double>(views::ceil_div(packing_length, sp));
}

bool HbpView::fits(Tokens packing_length, int sp, int gc_layers) const {
  return peak_bytes(packing_length, sp, gc_layers) <= cost_->capacity_bytes();
}

}  // namespace lcsim::hbp
