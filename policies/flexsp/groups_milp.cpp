// Eq. 5-10 (FlexSP Sec. 4.1.1) as a MILP on COIN-OR CBC: virtual groups, every degree d of the view GPUs / d times;
//   min C  s.t.  sum_p A_kp = 1,  sum_k A_kp t_d(s_k) + c_d m_p <= C,  sum_k A_kp s_k <= capacity_d m_p,
//                sum_p d_p m_p <= GPUs,  A, m binary,
// where t_d(s) = a_d s^2 + b_d s and c_d are the view's formula. Added for speed, not changing the optimum: a
// virtual group is used only if the one before it of the same degree is (m_p+1 <= m_p), and A_kp = 0 where a
// sequence exceeds the degree's capacity. Deterministic as Hydraulis' packing MILP: one thread, a fixed seed, a
// node limit, the time limit only a backstop; silent.
#include <algorithm>
#include <cmath>

#include "CbcModel.hpp"
#include "CoinPackedMatrix.hpp"
#include "CoinPackedVector.hpp"
#include "OsiClpSolverInterface.hpp"
#include "policies/core/cbc_settings.hpp"
#include "policies/flexsp/groups.hpp"

namespace lcsim::flexsp {
namespace {

constexpr int kCbcSeed = 20250302;

struct GroupingModel {
  std::vector<const DegreeCost*> group;  ///< the degree of virtual group p
  std::vector<int> used;                 ///< column of m_p
  std::vector<std::vector<int>> assign;  ///< [k][p]: column of A_kp, or -1
  int makespan = 0;
  int columns = 0;
  CoinPackedMatrix matrix{false, 0, 0};
  std::vector<double> row_lo, row_hi, col_lo, col_hi, objective;

  void row(const CoinPackedVector& r, double lo, double hi) {
    matrix.appendRow(r);
    row_lo.push_back(lo);
    row_hi.push_back(hi);
  }
};

GroupingModel build_model(std::span<const Tokens> lengths, const FlexSpView& view) {
  GroupingModel m;
  for (const auto& d : view.degrees())
    for (int i = 0; i < view.gpus() / d.degree; ++i) m.group.push_back(&d);
  const std::size_t groups = m.group.size(), u = lengths.size();
  for (std::size_t p = 0; p < groups; ++p) m.used.push_back(m.columns++);
  m.assign.assign(u, std::vector<int>(groups, -1));
  for (std::size_t k = 0; k < u; ++k)
    for (std::size_t p = 0; p < groups; ++p)
      if (lengths[k] <= m.group[p]->capacity) m.assign[k][p] = m.columns++;
  m.makespan = m.columns++;

  m.matrix.setDimensions(0, m.columns);
  const double infinity = OsiClpSolverInterface().getInfinity();
  for (std::size_t k = 0; k < u; ++k) {  // each sequence in one group
    CoinPackedVector r;
    for (std::size_t p = 0; p < groups; ++p)
      if (m.assign[k][p] >= 0) r.insert(m.assign[k][p], 1.0);
    m.row(r, 1.0, 1.0);
  }
  for (std::size_t p = 0; p < groups; ++p) {
    const DegreeCost& d = *m.group[p];
    CoinPackedVector time, tokens;
    for (std::size_t k = 0; k < u; ++k) {
      if (m.assign[k][p] < 0) continue;
      const auto s = static_cast<double>(lengths[k]);
      time.insert(m.assign[k][p], d.time.a * s * s + d.time.b * s);
      tokens.insert(m.assign[k][p], s);
    }
    time.insert(m.used[p], d.time.c);
    time.insert(m.makespan, -1.0);
    m.row(time, -infinity, 0.0);
    tokens.insert(m.used[p], -static_cast<double>(d.capacity));
    m.row(tokens, -infinity, 0.0);
    if (p > 0 && m.group[p - 1] == m.group[p]) {  // symmetry: use the virtual groups of a degree in order
      CoinPackedVector order;
      order.insert(m.used[p], 1.0);
      order.insert(m.used[p - 1], -1.0);
      m.row(order, -infinity, 0.0);
    }
  }
  CoinPackedVector devices;
  for (std::size_t p = 0; p < groups; ++p) devices.insert(m.used[p], m.group[p]->degree);
  m.row(devices, -infinity, view.gpus());

  const auto columns = static_cast<std::size_t>(m.columns);
  m.col_lo.assign(columns, 0.0);
  m.col_hi.assign(columns, 1.0);
  m.col_lo[static_cast<std::size_t>(m.makespan)] = -infinity;
  m.col_hi[static_cast<std::size_t>(m.makespan)] = infinity;
  m.objective.assign(columns, 0.0);
  m.objective[static_cast<std::size_t>(m.makespan)] = 1.0;
  return m;
}

/// The incumbent's groups on the first free virtual groups of their degrees.
void set_incumbent(CbcModel& model, const GroupingModel& m, const GroupPlan& incumbent) {
  std::vector<double> solution(static_cast<std::size_t>(m.columns), 0.0);
  std::vector<bool> taken(m.group.size(), false);
  for (const auto& g : incumbent.groups) {
    std::size_t p = 0;
    while (p < m.group.size() && (taken[p] || m.group[p]->degree != g.degree)) ++p;
    if (p == m.group.size()) return;
    taken[p] = true;
    solution[static_cast<std::size_t>(m.used[p])] = 1.0;
    for (std::size_t k : g.members) {
      if (m.assign[k][p] < 0) return;
      solution[static_cast<std::size_t>(m.assign[k][p])] = 1.0;
    }
  }
  // The symmetry rows want the used virtual groups of a degree first: the incumbent took them in order.
  solution[static_cast<std::size_t>(m.makespan)] = incumbent.makespan;
  model.setBestSolution(solution.data(), m.columns, incumbent.makespan, true);
}

}  // namespace

ExactResult assign_exact(std::span<const Tokens> lengths, const FlexSpView& view, const ExactOptions& options,
                         const std::optional<GroupPlan>& incumbent) {
  ExactResult out;
  if (lengths.empty()) {
    out.plan = GroupPlan{};
    out.optimal = true;
    return out;
  }
  const GroupingModel m = build_model(lengths, view);
  OsiClpSolverInterface solver;
  solver.messageHandler()->setLogLevel(0);
  solver.loadProblem(m.matrix, m.col_lo.data(), m.col_hi.data(), m.objective.data(), m.row_lo.data(), m.row_hi.data());
  for (int c = 0; c < m.makespan; ++c) solver.setInteger(c);
  CbcModel model(solver);
  configure_cbc(model, kCbcSeed, options.max_nodes, options.time_limit_s);
  if (incumbent) set_incumbent(model, m, *incumbent);
  model.branchAndBound();
  out.optimal = model.isProvenOptimal() || model.isProvenInfeasible();
  const double* best = model.bestSolution();
  if (best == nullptr) return out;
  GroupPlan plan;
  for (std::size_t p = 0; p < m.group.size(); ++p) {
    Group g{m.group[p]->degree, {}, 0, 0};
    for (std::size_t k = 0; k < lengths.size(); ++k) {
      const int c = m.assign[k][p];
      if (c < 0 || best[c] < 0.5) continue;
      const auto s = static_cast<double>(lengths[k]);
      g.members.push_back(k);
      g.sum += s;
      g.sum_sq += s * s;
    }
    if (!g.members.empty()) plan.groups.push_back(std::move(g));
  }
  for (auto& g : plan.groups)
    std::stable_sort(g.members.begin(), g.members.end(),
                     [&](std::size_t x, std::size_t y) { return lengths[x] > lengths[y]; });
  for (const auto& g : plan.groups) plan.makespan = std::max(plan.makespan, group_time(g, view));
  out.plan = std::move(plan);
  return out;
}

}  // namespace lcsim::flexsp
