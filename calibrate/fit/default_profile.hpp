#pragma once
// Default calibration profiles from public figures only, labelled uncalibrated. Every number and its source is
// listed in calibrate/PROFILE.md (and, briefly, in the profile's provenance.notes).
#include <vector>

#include "calibrate/fit/fit.hpp"
#include "model/model.hpp"
#include "model/profile.hpp"

namespace lcsim {

/// Skrull Table 5 (Appendix C.3): latency of `op` on H100 by message size, 2 MB to 512 MB, as nccl-tests samples
/// (MB read as MiB; assumed one node of 8 GPUs over NVLink). Ops: AllGather, AllToAll, ReduceScatter, AllReduce;
/// throws std::invalid_argument for SendRecv, which the table lacks.
std::vector<CollectiveSample> skrull_table5(CollectiveOp op);

/// Every k-th point of the table is held out of the fit; fit_mape is the error on those.
inline constexpr int kTableHoldOutEvery = 3;

/// The default profile of a named GPU kind (H100-SXM, H200, A800). Throws InputError for a GPU whose
/// interconnect lcsim has no public figures for.
Profile derive_default_profile(const GpuKind& gpu);

}  // namespace lcsim
