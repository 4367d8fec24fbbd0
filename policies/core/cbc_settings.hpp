#pragma once
// How lcsim runs COIN-OR CBC (Hydraulis' packing, FlexSP's grouping): silent, single-threaded, seeded, and limited
// in branch-and-bound nodes so that a result does not depend on the machine's speed; the time limit is a backstop
// that only binds on a machine too slow to reach the node limit.
class CbcModel;

namespace lcsim {

void configure_cbc(CbcModel& model, int seed, int max_nodes, double time_limit_s);

}  // namespace lcsim
