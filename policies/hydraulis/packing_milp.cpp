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
#include "policies/hydraulis/packing.hpp"

namespace lcsim::hydraulis {
namespace {

constexpr int kCbcSeed = 20250101;

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

  // Sequences by cost descending; item k of the model is sequence order[k].
  std::vector<std::size_t> order(u);
  std::iota(order.begin(), order.end(), std::size_t{0});
  std::stable_sort(order.begin(), order.end(), [&](std::size_t x, std::size_t y) { return costs[x] > costs[y]; });
  const auto bins = static_cast<std::size_t>(v);

  // Column of o_kj (j <= k) and z.
  std::vector<std::vector<int>> column(u, std::vector<int>(bins, -1));
  int columns = 0;
  for (std::size_t k = 0; k < u; ++k)
    for (std::size_t j = 0; j < bins && j <= k; ++j) column[k][j] = columns++;
  const int z = columns++;

  CoinPackedMatrix matrix(false, 0, 0);
  matrix.setDimensions(0, columns);
  std::vector<double> row_lo, row_hi;
  const double infinity = OsiClpSolverInterface().getInfinity();
  for (std::size_t k = 0; k < u; ++k) {
    CoinPackedVector row;
    for (std::size_t j = 0; j < bins; ++j)
      if (column[k][j] >= 0) row.insert(column[k][j], 1.0);
    matrix.appendRow(row);
    row_lo.push_back(1.0);
    row_hi.push_back(1.0);
  }
  for (std::size_t j = 0; j < bins; ++j) {
    CoinPackedVector time_row, token_row;
    for (std::size_t k = 0; k < u; ++k) {
      if (column[k][j] < 0) continue;
      time_row.insert(column[k][j], costs[order[k]]);
      token_row.insert(column[k][j], static_cast<double>(lengths[order[k]]));
    }
    time_row.insert(z, -1.0);
    matrix.appendRow(time_row);
    row_lo.push_back(-infinity);
    row_hi.push_back(0.0);
    matrix.appendRow(token_row);
    row_lo.push_back(-infinity);
    row_hi.push_back(static_cast<double>(capacity));
  }
  std::vector<double> col_lo(static_cast<std::size_t>(columns), 0.0);
  std::vector<double> col_hi(static_cast<std::size_t>(columns), 1.0);
  col_hi[static_cast<std::size_t>(z)] = infinity;
  // z is at least the costliest sequence and the mean load: the LP relaxation alone only knows the mean, and
  // without the first bound the search cannot prove most incumbents optimal.
  double total = 0;
  double largest = 0;
  for (double c : costs) {
    total += c;
    largest = std::max(largest, c);
  }
  col_lo[static_cast<std::size_t>(z)] = std::max(largest, total / v);
  std::vector<double> objective(static_cast<std::size_t>(columns), 0.0);
  objective[static_cast<std::size_t>(z)] = 1.0;

  OsiClpSolverInterface solver;
  solver.messageHandler()->setLogLevel(0);
  solver.loadProblem(matrix, col_lo.data(), col_hi.data(), objective.data(), row_lo.data(), row_hi.data());
  for (int c = 0; c < z; ++c) solver.setInteger(c);

  CbcModel model(solver);
  model.setLogLevel(0);
  model.messageHandler()->setLogLevel(0);
  model.solver()->messageHandler()->setLogLevel(0);
  model.setNumberThreads(0);
  model.setRandomSeed(kCbcSeed);
  model.setMaximumNodes(options.max_nodes);
  model.setMaximumSeconds(options.time_limit_s);
  // A strict cutoff: only partitions whose costliest micro-batch is below `below` are of use.
  if (std::isfinite(below)) model.setCutoff(below * (1 - 1e-9));

  // The incumbent, relabelled so that micro-batches are numbered by their first item (the symmetry rows).
  if (!incumbent.empty()) {
    std::vector<std::size_t> item_of(u);
    for (std::size_t k = 0; k < u; ++k) item_of[order[k]] = k;
    std::vector<int> bin_of(u, -1);
    for (std::size_t b = 0; b < incumbent.size(); ++b)
      for (std::size_t i : incumbent[b]) bin_of[item_of[i]] = static_cast<int>(b);
    if (incumbent.size() <= bins && std::none_of(bin_of.begin(), bin_of.end(), [](int b) { return b < 0; })) {
      std::vector<int> label(incumbent.size(), -1);
      int next = 0;
      std::vector<double> solution(static_cast<std::size_t>(columns), 0.0);
      std::vector<double> bin_cost(bins, 0.0);
      for (std::size_t k = 0; k < u; ++k) {
        auto& l = label[static_cast<std::size_t>(bin_of[k])];
        if (l < 0) l = next++;
        const auto j = static_cast<std::size_t>(l);
        solution[static_cast<std::size_t>(column[k][j])] = 1.0;
        bin_cost[j] += costs[order[k]];
      }
      const double zmax = *std::max_element(bin_cost.begin(), bin_cost.end());
      solution[static_cast<std::size_t>(z)] = std::max(zmax, col_lo[static_cast<std::size_t>(z)]);
      if (zmax < below) model.setBestSolution(solution.data(), columns, solution[static_cast<std::size_t>(z)], true);
    }
  }

  model.branchAndBound();
  const double* best = model.bestSolution();
  out.optimal = model.isProvenOptimal() || model.isProvenInfeasible();
  if (best == nullptr) return out;
  out.micro_batches.assign(bins, {});
  for (std::size_t k = 0; k < u; ++k)
    for (std::size_t j = 0; j < bins; ++j) {
      const int c = column[k][j];
      if (c >= 0 && best[c] > 0.5) {
        out.micro_batches[j].push_back(order[k]);
        break;
      }
    }
  for (auto& mb : out.micro_batches) std::sort(mb.begin(), mb.end());
  return out;
}

}  // namespace lcsim::hydraulis
