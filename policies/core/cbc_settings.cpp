#include "policies/core/cbc_settings.hpp"

#include "CbcModel.hpp"

namespace lcsim {

void configure_cbc(CbcModel& model, int seed, int max_nodes, double time_limit_s) {
  model.setLogLevel(0);
  model.messageHandler()->setLogLevel(0);
  model.solver()->messageHandler()->setLogLevel(0);
  model.setNumberThreads(0);
  model.setRandomSeed(seed);
  model.setMaximumNodes(max_nodes);
  model.setMaximumSeconds(time_limit_s);
}

}  // namespace lcsim
