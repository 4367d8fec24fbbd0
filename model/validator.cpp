#include "model/validator.hpp"

#include <algorithm>
#include <cstdio>
#include <map>
#include <set>

#include "model/plan_demand.hpp"

namespace lcsim {
namespace {

std::string gib(double bytes) {
  char text[32];
  std::snprintf(text, sizeof text, "%.2f GiB", bytes / (1024.0 * 1024.0 * 1024.0));
  return text;
}

std::string where(std::size_t replica, std::size_t micro_batch) {
  return "replica " + std::to_string(replica) + ", micro-batch " + std::to_string(micro_batch);
}

class Checker {
 public:
  Checker(const IterationPlan& plan, std::span<const Sequence> batch, const CostModel& cost)
      : plan_(plan), cost_(cost), world_(cost.cluster().world_size()) {
    // By id, an id given twice merged (the later occurrence's tokens): one contiguous array to search, as a plan
    // of 16,384 GPUs looks up hundreds of thousands of placements.
    std::vector<const Sequence*> by_id;
    for (const auto& s : batch) by_id.push_back(&s);
    std::stable_sort(by_id.begin(), by_id.end(), [](const Sequence* x, const Sequence* y) { return x->id < y->id; });
    for (const Sequence* s : by_id) {
      if (expected_.empty() || expected_.back().id != s->id) expected_.push_back(Expected{s->id});
      expected_.back().tokens = s->tokens;
      ++expected_.back().count;
    }
  }

  std::vector<PlanIssue> run() {
    std::map<int, std::set<int>> used_per_phase;
    for (std::size_t r = 0; r < plan_.replicas.size(); ++r) {
      const auto& replica = plan_.replicas[r];
      const bool scheme_ok = check_scheme(r, replica);
      check_gpus(r, replica, scheme_ok, used_per_phase[replica.phase]);
      for (std::size_t m = 0; m < replica.micro_batches.size(); ++m) check_micro_batch(r, m, replica);
    }
    for (const auto& expected : expected_) {
      if (expected.placed < expected.count)
        add(PlanIssue::Kind::MissingSequence, "sequence " + std::to_string(expected.id) + " (" +
                                                  std::to_string(expected.tokens) + " tokens) is not placed");
    }
    return std::move(issues_);
  }

 private:
  struct Expected {
    std::int64_t id = 0;
    Tokens tokens = 0;
    int count = 0;
    int placed = 0;
  };

  void add(PlanIssue::Kind kind, std::string message) { issues_.push_back(PlanIssue{kind, std::move(message)}); }

  bool check_scheme(std::size_t r, const Replica& replica) {
    const auto& s = replica.scheme;
    const std::string at = "replica " + std::to_string(r) + ": ";
    bool ok = true;
    if (s.tp < 1 || s.pp < 1 || s.cp < 1) {
      add(PlanIssue::Kind::BadScheme, at + "parallel degrees must be >= 1 (tp " + std::to_string(s.tp) + ", pp " +
                                          std::to_string(s.pp) + ", cp " + std::to_string(s.cp) + ")");
      return false;
    }
    const int layers = cost_.model().layers;
    if (layers % s.pp != 0) {
      add(PlanIssue::Kind::BadScheme,
          at + "pp " + std::to_string(s.pp) + " does not divide the model's " + std::to_string(layers) + " layers");
      ok = false;
    } else if (s.virtual_pp < 1 || (s.virtual_pp > 1 && (s.pp < 2 || layers % s.virtual_stages() != 0))) {
      add(PlanIssue::Kind::BadScheme, at + "virtual_pp " + std::to_string(s.virtual_pp) + " needs pp >= 2 and " +
                                          std::to_string(s.pp) + " x " + std::to_string(s.virtual_pp) +
                                          " model chunks dividing the model's " + std::to_string(layers) + " layers");
      ok = false;
    } else if (s.checkpointed_layers < 0 || s.checkpointed_layers > layers / s.pp) {
      add(PlanIssue::Kind::BadScheme, at + "checkpointed_layers " + std::to_string(s.checkpointed_layers) +
                                          " outside [0, " + std::to_string(layers / s.pp) + "]");
      ok = false;
    }
    return ok;
  }

  void check_gpus(std::size_t r, const Replica& replica, bool scheme_ok, std::set<int>& used) {
    const std::string at = "replica " + std::to_string(r) + ": ";
    const auto& s = replica.scheme;
    bool indices_ok = true;
    for (int g : replica.gpus) {
      if (g < 0 || g >= world_) {
        add(PlanIssue::Kind::BadGpu,
            at + "GPU index " + std::to_string(g) + " outside the cluster [0, " + std::to_string(world_) + ")");
        indices_ok = false;
      } else if (!used.insert(g).second) {
        add(PlanIssue::Kind::BadGpu,
            at + "GPU " + std::to_string(g) + " is used more than once in phase " + std::to_string(replica.phase));
      }
    }
    if (!scheme_ok) return;
    if (replica.gpus.size() != static_cast<std::size_t>(s.gpus())) {
      add(PlanIssue::Kind::BadGpu, at + "has " + std::to_string(replica.gpus.size()) + " GPUs, its scheme needs " +
                                       std::to_string(s.gpus()) + " (tp x pp x cp)");
      return;
    }
    if (!indices_ok || s.tp == 1) return;
    const auto topology = cost_.cluster().topology();
    for (int stage = 0; stage < s.pp; ++stage) {
      for (int j = 0; j < s.cp; ++j) {
        const int first = replica.gpu(stage, j, 0);
        for (int t = 1; t < s.tp; ++t) {
          if (!topology.same_domain(replica.gpu(stage, j, t), first)) {
            add(PlanIssue::Kind::BadScheme, at + "TP group of stage " + std::to_string(stage) + ", CP rank " +
                                                std::to_string(j) + " spans more than one node");
            break;
          }
        }
      }
    }
  }

  void check_micro_batch(std::size_t r, std::size_t m, const Replica& replica) {
    const auto& mb = replica.micro_batches[m];
    if (mb.placements.empty()) add(PlanIssue::Kind::EmptyMicroBatch, where(r, m) + ": no sequences");
    // A per-sequence split deals the pack's head-tail chunks across ranks: it means nothing where Ulysses shards
    // heads or where a plain ring keeps contiguous shards, and neither Skrull's overlap nor padding has a chunked form.
    if (mb.cp_split == CpSplit::PerSequence && replica.scheme.cp > 1) {
      if (!head_tail_chunks(cost_.options().cp_attention))
        add(PlanIssue::Kind::BadScheme, where(r, m) +
                                            ": a per-sequence CP split needs head-tail chunks (cp_attention "
                                            "\"zigzag\" or \"all-gather\"), not \"" +
                                            std::string(to_string(cost_.options().cp_attention)) + "\"");
      if (replica.overlap_cp_comm || mb.padded)
        add(PlanIssue::Kind::BadScheme,
            where(r, m) + ": a per-sequence CP split is not modelled with overlap_cp_comm or padding");
    }
    for (const auto& p : mb.placements) {
      // Spelled out only for an issue: a valid plan of 300,000 sequences would otherwise build as many strings.
      const auto seq = [&] {
        return "sequence " + std::to_string(p.sequence_id) + " (" + std::to_string(p.tokens) + " tokens)";
      };
      if (p.cp_rank < Placement::kSharded || (replica.scheme.cp >= 1 && p.cp_rank >= replica.scheme.cp)) {
        add(PlanIssue::Kind::BadRank, where(r, m) + ": " + seq() + " on cp_rank " + std::to_string(p.cp_rank) +
                                          ", outside [-1, " + std::to_string(replica.scheme.cp) + ")");
      }
      const auto it = std::lower_bound(expected_.begin(), expected_.end(), p.sequence_id,
                                       [](const Expected& e, std::int64_t id) { return e.id < id; });
      if (it == expected_.end() || it->id != p.sequence_id) {
        add(PlanIssue::Kind::UnknownSequence, where(r, m) + ": " + seq() + " is not in the batch");
      } else if (it->tokens != p.tokens) {
        add(PlanIssue::Kind::UnknownSequence,
            where(r, m) + ": " + seq() + " has " + std::to_string(it->tokens) + " tokens in the batch");
      } else if (++it->placed > it->count) {
        add(PlanIssue::Kind::DuplicateSequence, where(r, m) + ": " + seq() + " is placed more than once");
      }
    }
  }

  const IterationPlan& plan_;
  const CostModel& cost_;
  int world_;
  std::vector<Expected> expected_;  // by id: deterministic messages
  std::vector<PlanIssue> issues_;
};

}  // namespace

bool ValidationReport::structurally_valid() const {
  return std::none_of(issues.begin(), issues.end(),
                      [](const PlanIssue& i) { return i.kind != PlanIssue::Kind::OutOfMemory; });
}

bool ValidationReport::out_of_memory() const {
  return std::any_of(issues.begin(), issues.end(),
                     [](const PlanIssue& i) { return i.kind == PlanIssue::Kind::OutOfMemory; });
}

std::string ValidationReport::summary() const {
  std::string text;
  for (const auto& issue : issues) {
    text += issue.message;
    text += '\n';
  }
  return text;
}

ValidationReport validate_plan(const IterationPlan& plan, std::span<const Sequence> batch, const CostModel& cost) {
  ValidationReport report;
  report.issues = check_plan_structure(plan, batch, cost);
  report.peak_bytes = estimate_peak_bytes(plan, cost);
  const double capacity = cost.capacity_bytes();
  for (std::size_t g = 0; g < report.peak_bytes.size(); ++g) {
    if (report.peak_bytes[g] > capacity) {
      report.issues.push_back(PlanIssue{PlanIssue::Kind::OutOfMemory, "GPU " + std::to_string(g) + ": estimated peak " +
                                                                          gib(report.peak_bytes[g]) +
                                                                          " exceeds the usable " + gib(capacity)});
    }
  }
  return report;
}

std::vector<PlanIssue> check_plan_structure(const IterationPlan& plan, std::span<const Sequence> batch,
                                            const CostModel& cost) {
  return Checker(plan, batch, cost).run();
}

std::vector<Sequence> plan_sequences(const IterationPlan& plan) {
  std::vector<Sequence> sequences;
  for (const auto& replica : plan.replicas)
    for (const auto& mb : replica.micro_batches)
      for (const auto& p : mb.placements) sequences.push_back(Sequence{p.sequence_id, p.tokens});
  return sequences;
}

std::vector<PlanIssue> validate_window(std::span<const IterationPlan> plans, std::span<const GlobalBatch> batches) {
  std::map<std::int64_t, std::pair<Tokens, int>> remaining;  // id -> (tokens, times still expected)
  for (const auto& batch : batches)
    for (const auto& s : batch) {
      auto& entry = remaining[s.id];
      entry.first = s.tokens;
      ++entry.second;
    }
  std::vector<PlanIssue> issues;
  for (const auto& plan : plans) {
    for (const auto& s : plan_sequences(plan)) {
      const std::string seq = "plan " + std::to_string(plan.index) + ": sequence " + std::to_string(s.id) + " (" +
                              std::to_string(s.tokens) + " tokens)";
      auto it = remaining.find(s.id);
      if (it == remaining.end() || it->second.first != s.tokens)
        issues.push_back({PlanIssue::Kind::UnknownSequence, seq + " is not in the window"});
      else if (--it->second.second < 0)
        issues.push_back({PlanIssue::Kind::DuplicateSequence, seq + " is placed more than once in the window"});
    }
  }
  for (const auto& [id, entry] : remaining) {
    if (entry.second > 0)
      issues.push_back({PlanIssue::Kind::MissingSequence, "sequence " + std::to_string(id) + " (" +
                                                              std::to_string(entry.first) +
                                                              " tokens) is in no plan of the window"});
  }
  return issues;
}

}  // namespace lcsim
