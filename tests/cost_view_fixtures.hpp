#pragma once
// The tiny model, flat profile and cluster of the cost-view tests (skrull_view_test, hydraulis_view_test,
// hbp_view_test): every figure of a view is checkable by hand.
#include "model/cost_model.hpp"
#include "tests/flat_profile_fixtures.hpp"

namespace lcsim::testing {

inline ModelConfig view_tiny_model() {
  return flat_tiny_model();
}

/// The flat compute profile and memory, with every collective on both links: NVLink 1 us + size / 1 GB/s,
/// InfiniBand 5 us + size / 0.5 GB/s.
inline Profile flat_profile(double attention_efficiency = 0.5, double layer_overhead_us = 10) {
  Profile p = flat_compute_profile(attention_efficiency, layer_overhead_us);
  add_flat_memory(p);
  for (auto op : {CollectiveOp::AllGather, CollectiveOp::ReduceScatter, CollectiveOp::AllReduce, CollectiveOp::AllToAll,
                  CollectiveOp::SendRecv}) {
    const int n = op == CollectiveOp::SendRecv ? 2 : 4;
    p.collectives.push_back(single_segment(op, LinkClass::NvLink, n, 1, 1));
    p.collectives.push_back(single_segment(op, LinkClass::InfiniBand, n, 5, 0.5));
  }
  return p;
}

/// 2 nodes of 4 GPUs.
inline ClusterSpec view_tiny_cluster(double memory_bytes = 1e9) {
  return flat_tiny_cluster(2, 4, memory_bytes);
}

}  // namespace lcsim::testing
