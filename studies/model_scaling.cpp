#include "studies/model_scaling.hpp"

#include <memory>
#include <string>

#include "base/errors.hpp"

namespace lcsim {

void scale_model_layers(LoadedScenario& loaded, int layers) {
  Scenario& s = loaded.scenario;
  const int full = s.model.layers;
  if (layers < 1 || layers > full)
    throw InputError("--layers: must be between 1 and " + s.model.name + "'s " + std::to_string(full) +
                     " layers, got " + std::to_string(layers));
  if (layers % s.layout.pp != 0)
    throw InputError("--layers: " + std::to_string(layers) + " layers cannot be split over " + s.file +
                     "'s parallel.pp = " + std::to_string(s.layout.pp) + " pipeline stages");
  if (layers % (s.layout.pp * s.layout.virtual_pp) != 0)
    throw InputError("--layers: " + std::to_string(layers) + " layers cannot be split into " + s.file +
                     "'s parallel.pp x parallel.virtual_pp = " + std::to_string(s.layout.pp) + " x " +
                     std::to_string(s.layout.virtual_pp) + " model chunks");
  // The frozen layers are counted from the first: fewer layers cannot keep the count, nor a trained layer.
  const Finetuning& f = s.training.finetuning;
  if (f.frozen() &&
      (f.frozen_layers > layers || (f.frozen_layers == layers && f.frozen_embeddings && f.frozen_lm_head)))
    throw InputError("--layers: " + std::to_string(layers) + " layers cannot hold " + s.file +
                     "'s training.finetuning.first_layers = " + std::to_string(f.frozen_layers) +
                     " frozen layers with something left to train; lower first_layers or keep more layers");
  if (layers == full) return;
  s.model.layers = layers;
  s.model.name += " (" + std::to_string(layers) + " of " + std::to_string(full) + " layers)";
  loaded.cost = std::make_unique<CostModel>(s.model, s.cluster, loaded.profile, loaded.cost->options());
}

}  // namespace lcsim
