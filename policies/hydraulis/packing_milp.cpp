// Eq. 1 for one V as a MILP, solved by COIN-OR CBC (Debian's coinor-libcbc-dev), as the reference solves it with
// PuLP's CBC (strategy/new_dynamic.py, solve_v_micro_batches):
//   min z  s.t.  sum_j o_ij = 1 (each sequence once),  sum_i cost_i o_ij <= z,  sum_i l_i o_ij <= capacity,
//   o_ij binary.
// Added for speed, not changing the optimum: sequences sorted by cost descending and o_ij = 0 for j > i
// (micro-batches labelled by their first sequence; removes the V! symmetric copies of every solution); z bounded
// below by the costliest sequence and the mean load; a cutoff at the best packing other V gave.
// Deterministic: one thread, a fixed seed, a node limit; the time limit is a backstop that only binds on a
// machine too slow to reach the node limit. CBC prints nothing (log level 0).
#include <algorithm>
#include <cmath>
#include <numeric>
#include <stdexcept>

#include "CbcModel.hpp"
#include "CoinPackedMatrix.hpp"
#include "CoinPackedVector.hpp"
#include "OsiClpSolverInterface.hpp"
#include "policies/core/cbc_settings.hpp"
#include "policies/hydraulis/packing.hpp"

namespace lcsim::hydraulis {
namespace {

constexpr int kCbcSeed = 20250101;

/// Eq. 1 for one V as CBC reads it: columns o_kj (item k = k-th costliest sequence, j <= k) then z.
struct PartitionModel {
  std::vector<std::size_t> order;        ///< item k is sequence order[k]
  std::vector<std::vector<int>> column;  ///< [item][micro-batch]: column of o_kj, or -1
  int z = 0;                             ///< column of the makespan
  int columns = 0;
  CoinPackedMatrix matrix{false, 0, 0};
  std::vector<double> row_lo, row_hi, col_lo, col_hi, objective;
};

PartitionModel build_model(std::span<const Tokens> lengths, std::span<const double> costs, Tokens capacity,
                           std::size_t bins) {
  const std::size_t u = lengths.size();
  PartitionModel m;
  m.order.resize(u);
  std::iota(m.order.begin(), m.order.end(), std::size_t{0});
  std::stable_sort(m.order.begin(), m.order.end(), [&](std::size_t x, std::size_t y) { return costs[x] > costs[y]; });
  m.column.assign(u, std::vector<int>(bins, -1));
  for (std::size_t k = 0; k < u; ++k)
    for (std::size_t j = 0; j < bins && j <= k; ++j) m.column[k][j] = m.columns++;
  m.z = m.columns++;

  m.matrix.setDimensions(0, m.columns);
  const double infinity = OsiClpSolverInterface().getInfinity();
  for (std::size_t k = 0; k < u; ++k) {  // each sequence once
    CoinPackedVector row;
    for (std::size_t j = 0; j < bins; ++j)
      if (m.column[k][j] >= 0) row.insert(m.column[k][j], 1.0);
    m.matrix.appendRow(row);
    m.row_lo.push_back(1.0);
    m.row_hi.push_back(1.0);
  }
  for (std::size_t j = 0; j < bins; ++j) {  // each micro-batch's cost below z, its tokens within capacity
    CoinPackedVector time_row, token_row;
    for (std::size_t k = 0; k < u; ++k) {
      if (m.column[k][j] < 0) continue;
      time_row.insert(m.column[k][j], costs[m.order[k]]);
      token_row.insert(m.column[k][j], static_cast<double>(lengths[m.order[k]]));
    }
    time_row.insert(m.z, -1.0);
    m.matrix.appendRow(time_row);
    m.row_lo.push_back(-infinity);
    m.row_hi.push_back(0.0);
    m.matrix.appendRow(token_row);
    m.row_lo.push_back(-infinity);
    m.row_hi.push_back(static_cast<double>(capacity));
  }
  const auto columns = static_cast<std::size_t>(m.columns);
  const auto z = static_cast<std::size_t>(m.z);
  m.col_lo.assign(columns, 0.0);
  m.col_hi.assign(columns, 1.0);
  m.col_hi[z] = infinity;
  // z is at least the costliest sequence and the mean load: the LP relaxation alone only knows the mean, and
  // without the first bound the search cannot prove most incumbents optimal.
  double total = 0;
  double largest = 0;
  for (double c : costs) {
    total += c;
    largest = std::max(largest, c);
  }
  m.col_lo[z] = std::max(largest, total / static_cast<double>(bins));
  m.objective.assign(columns, 0.0);
  m.objective[z] = 1.0;
  return m;
}

/// Silent, single-threaded, seeded, node- and time-limited; a strict cutoff at `below` (only partitions whose
/// costliest micro-batch is below it are of use).
void configure(CbcModel& model, const MilpOptions& options, double below) {
  configure_cbc(model, kCbcSeed, options.max_nodes, options.time_limit_s);
  if (std::isfinite(below)) model.setCutoff(below * (1 - 1e-9));
}

/// Gives CBC the incumbent, relabelled so that micro-batches are numbered by their first item (the symmetry
/// rows), when it covers every sequence in at most V micro-batches and beats `below`.
void set_incumbent(CbcModel& model, const PartitionModel& m, std::span<const double> costs, std::size_t bins,
                   double below, const std::vector<std::vector<std::size_t>>& incumbent) {
  const std::size_t u = m.order.size();
  std::vector<std::size_t> item_of(u);
  for (std::size_t k = 0; k < u; ++k) item_of[m.order[k]] = k;
  std::vector<int> bin_of(u, -1);
  for (std::size_t b = 0; b < incumbent.size(); ++b)
    for (std::size_t i : incumbent[b]) bin_of[item_of[i]] = static_cast<int>(b);
  if (incumbent.size() > bins || std::any_of(bin_of.begin(), bin_of.end(), [](int b) { return b < 0; })) return;
  std::vector<int> label(incumbent.size(), -1);
  int next = 0;
  std::vector<double> solution(static_cast<std::size_t>(m.columns), 0.0);
  std::vector<double> bin_cost(bins, 0.0);
  for (std::size_t k = 0; k < u; ++k) {
    auto& l = label[static_cast<std::size_t>(bin_of[k])];
    if (l < 0) l = next++;
    const auto j = static_cast<std::size_t>(l);
    solution[static_cast<std::size_t>(m.column[k][j])] = 1.0;
    bin_cost[j] += costs[m.order[k]];
  }
  const double zmax = *std::max_element(bin_cost.begin(), bin_cost.end());
  const auto z = static_cast<std::size_t>(m.z);
  solution[z] = std::max(zmax, m.col_lo[z]);
  if (zmax < below) model.setBestSolution(solution.data(), m.columns, solution[z], true);
}

/// The micro-batches of CBC's best solution, each listing its sequences in increasing index.
std::vector<std::vector<std::size_t>> read_solution(const double* best, const PartitionModel& m, std::size_t bins) {
  std::vector<std::vector<std::size_t>> micro_batches(bins);
  for (std::size_t k = 0; k < m.order.size(); ++k)
    for (std::size_t j = 0; j < bins; ++j) {
      const int c = m.column[k][j];
      if (c >= 0 && best[c] > 0.5) {
        micro_batches[j].push_back(m.order[k]);
        break;
      }
    }
  for (auto& mb : micro_batches) std::sort(mb.begin(), mb.end());
  return micro_batches;
}

}  // namespace

MilpPartition partition_milp(std::span<const Tokens> lengths, std::span<const double> costs, Tokens capacity, int v,
                             double below, const std::vector<std::vector<std::size_t>>& incumbent,
                             const MilpOptions& options) {
  if (v < 1) throw std::invalid_argument("hydraulis::partition_milp: v must be >= 1");
  MilpPartition out;
  const std::size_t u = lengths.size();
  if (u == 0) {
    out.optimal = true;
    return out;
  }
  for (Tokens l : lengths)
    if (l > capacity) {
      out.optimal = true;  // proven infeasible
      return out;
    }

  const auto bins = static_cast<std::size_t>(v);
  const PartitionModel m = build_model(lengths, costs, capacity, bins);
  OsiClpSolverInterface solver;
  solver.messageHandler()->setLogLevel(0);
  solver.loadProblem(m.matrix, m.col_lo.data(), m.col_hi.data(), m.objective.data(), m.row_lo.data(), m.row_hi.data());
  for (int c = 0; c < m.z; ++c) solver.setInteger(c);
  CbcModel model(solver);
  configure(model, options, below);
  if (!incumbent.empty()) set_incumbent(model, m, costs, bins, below, incumbent);

  model.branchAndBound();
  const double* best = model.bestSolution();
  out.optimal = model.isProvenOptimal() || model.isProvenInfeasible();
  if (best != nullptr) out.micro_batches = read_solution(best, m, bins);
  return out;
}

}  // namespace lcsim::hydraulis
