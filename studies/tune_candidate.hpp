#pragma once
// One `lcsim tune` candidate planned, bounded and estimated in this process: what `lcsim plan --samples 1
// --policy LABEL` on its scenario writes, without the process. Each call builds its own scenario, cost model and
// policy, so candidates run on several threads at once (cli/tune_command.cpp).
#include <exception>
#include <functional>
#include <string>

#include "studies/tune.hpp"

namespace lcsim {

/// How far a candidate's bounds (program/bound.hpp) go before its estimate.
enum class CandidateBounds {
  None,   ///< no bounds: estimate (--no-prune)
  Prune,  ///< memory, compute, then replica bound, each compared with the threshold: stop at the first that loses
  All,    ///< every bound, then the estimate unless memory rules the candidate out (a slice: the merge prunes)
};

/// Plans candidate `c` (its scenario read as `file`), bounds and estimates it. `threshold()` is its policy's
/// prune threshold at the time (prune_threshold). Figures are rounded as results files round them, so that the
/// outcome is the one `lcsim plan`'s results file gives. A failure is recorded as `describe(error)`, whatever
/// was thrown.
TuneOutcome estimate_candidate(const TuneCandidate& c, const std::string& file, CandidateBounds bounds,
                               const std::function<double()>& threshold,
                               const std::function<std::string(const std::exception&)>& describe);

}  // namespace lcsim
