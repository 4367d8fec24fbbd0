#pragma once
// A scenario's model cut down to fewer layers (`lcsim simulate --layers N`, `lcsim-gpu live --layers N`): for live
// runs on GPUs that cannot hold the full model, with the prediction made for the same scaled model. Only the layer
// count changes; the scheme's pipeline stages must still divide it.
#include "formats/scenario_loader.hpp"

namespace lcsim {

/// Sets the model's layer count to `layers` (1 <= layers <= the model's own, a multiple of parallel.pp), renames it
/// "<name> (<layers> of <full> layers)" so that every report shows the cut, and rebuilds the cost model. Throws
/// InputError naming the option otherwise. A value equal to the model's own layers changes nothing.
void scale_model_layers(LoadedScenario& loaded, int layers);

}  // namespace lcsim
