#include "studies/tune.hpp"

#include <algorithm>
#include <iomanip>
#include <map>
#include <set>
#include <sstream>

#include "base/check.hpp"
#include "base/errors.hpp"
#include "base/json_reader.hpp"
#include "formats/scenario.hpp"
#include "studies/sweep.hpp"

namespace lcsim {
namespace {

using Json = nlohmann::json;

/// Writes `value` at the dotted `path` of `doc` (null removes the key: the scenario's or policy's default).
void set_knob(Json& doc, Json& options, const std::string& path, const Json& value) {
  if (path.rfind(kTuneOptionsPrefix, 0) == 0) {
    const std::string key = path.substr(std::string(kTuneOptionsPrefix).size());
    if (value.is_null())
      options.erase(key);
    else
      options[key] = value;
    return;
  }
  set_dotted_path(doc, path, value);
}

std::vector<int> powers_of_two_up_to(int limit) {
  std::vector<int> out;
  for (int d = 1; d <= limit; d *= 2) out.push_back(d);
  return out;
}

std::string value_text(const Json& v) {
  if (v.is_null()) return "default";
  if (v.is_string()) return v.get<std::string>();
  return v.dump();
}

std::string short_name(const std::string& path) {
  const auto dot = path.rfind('.');
  return dot == std::string::npos ? path : path.substr(dot + 1);
}

std::string ratio_text(double ratio) {
  std::ostringstream s;
  s << std::fixed << std::setprecision(2) << ratio << "x";
  return s.str();
}

/// The value of knob `k` (0-2: cp, tp, pp; then settings) of a candidate, as text.
std::string knob_value(const TuneCandidate& c, std::size_t k) {
  if (k == 0) return std::to_string(c.layout.cp);
  if (k == 1) return std::to_string(c.layout.tp);
  if (k == 2) return std::to_string(c.layout.pp);
  return value_text(c.settings[k - 3].second);
}

}  // namespace

std::vector<TuneKnob> default_policy_knobs(const Scenario& scenario, const PolicySpec& policy) {
  // Each policy kind declares its own knobs (its descriptor's tune_knobs).
  const TuneKnobContext context{scenario.training.context_length, scenario.training.bucket_size_tokens};
  std::vector<TuneKnob> knobs;
  for (TuneKnobSpec& knob : tune_knobs(policy, context))
    knobs.push_back({std::move(knob.path), std::move(knob.values)});
  return knobs;
}

std::vector<ParallelLayout> tune_layouts(const Scenario& scenario, const TuneSpec& spec) {
  // TP stays inside an NVLink domain (the topology's), as the validator requires.
  const auto topology = scenario.cluster.topology();
  const int gpus = topology.world_size(), domain = topology.domain_size();
  const std::vector<int> cps = spec.cp.empty() ? powers_of_two_up_to(gpus) : spec.cp;
  const std::vector<int> tps = spec.tp.empty() ? powers_of_two_up_to(domain) : spec.tp;
  const std::vector<int> pps = spec.pp.empty() ? std::vector<int>{1, 2, 4} : spec.pp;
  std::vector<ParallelLayout> out;
  for (int cp : cps)
    for (int tp : tps)
      for (int pp : pps) {
        const int per_replica = cp * tp * pp;
        if (gpus % per_replica != 0 || domain % tp != 0 || scenario.model.layers % pp != 0) continue;
        // The scenario's interleaving stays where its chunks still divide the candidate's stages.
        const int v = scenario.layout.virtual_pp;
        const bool interleaves = v > 1 && pp >= 2 && scenario.model.layers % (pp * v) == 0;
        out.push_back({gpus / per_replica, cp, tp, pp, interleaves ? v : 1});
      }
  return out;
}

namespace {

bool selected(const std::vector<std::string>& labels, const std::string& label) {
  return labels.empty() || std::find(labels.begin(), labels.end(), label) != labels.end();
}

/// Every tune.policies label names a policy of the scenario.
void check_tuned_labels(const Scenario& scenario, const TuneSpec& spec) {
  for (const auto& tuned : spec.policies) {
    const std::string& label = tuned.first;  // a named variable: clang 14 cannot capture a structured binding
    if (std::none_of(scenario.policies.begin(), scenario.policies.end(),
                     [&](const auto& p) { return p.label == label; }))
      throw InputError(scenario.file + ": tune.policies." + label + ": the scenario has no policy labelled \"" + label +
                       "\"");
  }
}

/// The candidates are counted before any is built, so that a huge space is refused up front, as sweeps are.
void check_candidate_count(const Scenario& scenario, const TuneSpec& spec, std::size_t layouts,
                           const std::vector<std::string>& labels) {
  std::size_t total = 0;
  for (const PolicySpec& policy : scenario.policies) {
    if (!selected(labels, policy.label)) continue;
    const auto own = spec.policies.find(policy.label);
    std::size_t count = policy_descriptor(policy).plans_under_layout ? layouts : 1;
    for (const auto* list : {&spec.keys, own != spec.policies.end() ? &own->second : nullptr})
      if (list)
        for (const auto& k : *list)
          if (count <= kMaxTuneCandidates) count *= k.values.size();
    if (own == spec.policies.end())
      for (const auto& k : default_policy_knobs(scenario, policy))
        if (count <= kMaxTuneCandidates) count *= k.values.size();
    total += std::min(count, kMaxTuneCandidates + 1);
  }
  if (total > kMaxTuneCandidates)
    throw InputError(scenario.file + ": tune: more than " + std::to_string(kMaxTuneCandidates) +
                     " candidates (layouts x the values of every free key, summed over the policies), the most a "
                     "search may have; narrow tune.layout, tune.keys or tune.policies");
}

/// Combination `combo` of the knobs' values, the last knob varying fastest.
std::vector<std::pair<std::string, Json>> knob_settings(const std::vector<TuneKnob>& knobs, std::size_t combo) {
  std::vector<std::pair<std::string, Json>> settings;
  std::size_t rest = combo;
  for (std::size_t k = knobs.size(); k-- > 0;) {
    settings.insert(settings.begin(), {knobs[k].path, knobs[k].values[rest % knobs[k].values.size()]});
    rest /= knobs[k].values.size();
  }
  return settings;
}

/// The candidate's scenario: the layout as its "parallel", policy `pi` alone with the settings applied, beside
/// the baseline.
Json candidate_document(const Json& document, const Scenario& scenario, std::size_t pi, const PolicySpec* baseline,
                        const TuneCandidate& c) {
  const PolicySpec& policy = scenario.policies[pi];
  Json doc = document;
  doc.erase("tune");
  doc.erase("paper_figures");
  Json& parallel = doc["parallel"];
  if (!parallel.is_object()) parallel = Json::object();
  parallel["dp"] = c.layout.dp, parallel["cp"] = c.layout.cp, parallel["tp"] = c.layout.tp,
  parallel["pp"] = c.layout.pp;
  if (c.layout.virtual_pp > 1)
    parallel["virtual_pp"] = c.layout.virtual_pp;
  else
    parallel.erase("virtual_pp");
  Json tuned = document.at("policies").at(pi);
  tuned.erase("parallel");  // the candidate's layout is the scenario's "parallel" above
  Json options = tuned.value("options", Json::object());
  for (const auto& [path, value] : c.settings) set_knob(doc, options, path, value);
  if (options.empty())
    tuned.erase("options");
  else
    tuned["options"] = options;
  doc["policies"] = Json::array({tuned});
  if (baseline && baseline->label != policy.label)
    doc["policies"].push_back(document.at("policies").at(static_cast<std::size_t>(baseline - &scenario.policies[0])));
  doc["baseline"] = baseline ? baseline->label : policy.label;
  return doc;
}

/// A value the user made free that no candidate could take (a misspelt option, a value out of range) is an
/// error, not a silently smaller search: by key ("where\nvalue"), whether a candidate took it, else why not.
struct ValueUse {
  bool accepted = false;
  std::string refusal;
};

}  // namespace

TuneSpace expand_tune_space(const Scenario& scenario, const Json& document, const TuneSpec& spec,
                            const std::vector<std::string>& labels) {
  TuneSpace space;
  const std::vector<ParallelLayout> layouts = tune_layouts(scenario, spec);
  const PolicySpec* baseline = nullptr;
  for (const auto& p : scenario.policies)
    if (p.label == scenario.baseline) baseline = &p;
  check_tuned_labels(scenario, spec);
  check_candidate_count(scenario, spec, layouts.size(), labels);

  std::map<std::string, ValueUse> uses;
  const auto use_key = [](const std::string& where, const Json& value) { return where + "\n" + value.dump(); };
  for (std::size_t pi = 0; pi < scenario.policies.size(); ++pi) {
    const PolicySpec& policy = scenario.policies[pi];
    if (!selected(labels, policy.label)) continue;
    std::vector<TuneKnob> knobs = spec.keys;
    const auto own = spec.policies.find(policy.label);
    const std::vector<TuneKnob> policy_knobs =
        own != spec.policies.end() ? own->second : default_policy_knobs(scenario, policy);
    knobs.insert(knobs.end(), policy_knobs.begin(), policy_knobs.end());
    // The knobs the scenario's "tune" object names (the defaults' values may fail on a scenario without a word).
    const std::size_t user_knobs = spec.keys.size() + (own != spec.policies.end() ? own->second.size() : 0);
    auto& names = space.knob_names[policy.label];
    names = {"cp", "tp", "pp"};
    for (const auto& k : knobs) names.push_back(k.path);

    std::size_t combinations = 1;
    for (const auto& k : knobs) combinations *= k.values.size();
    // A policy that chooses its own parallel strategies gets the scenario's layout only: the others would repeat it.
    const std::vector<ParallelLayout> own_layouts =
        policy_descriptor(policy).plans_under_layout
            ? layouts
            : std::vector<ParallelLayout>{policy.layout.value_or(scenario.layout)};
    for (const ParallelLayout& layout : own_layouts) {
      if (!layout_refusal(policy, layout).empty()) {
        space.refused[policy.label] += static_cast<int>(combinations);
        continue;
      }
      for (std::size_t combo = 0; combo < combinations; ++combo) {
        TuneCandidate c;
        c.policy = policy.label;
        c.layout = layout;
        c.settings = knob_settings(knobs, combo);
        Json doc = candidate_document(document, scenario, pi, baseline, c);
        std::vector<std::string> used;
        for (std::size_t k = 0; k < user_knobs; ++k)
          used.push_back(
              use_key((k < spec.keys.size() ? "tune.keys." : "tune.policies." + policy.label + ".") + knobs[k].path,
                      c.settings[k].second));
        try {
          const Scenario checked = scenario_from_json(doc, scenario.file);
          for (const auto& p : checked.policies) {
            (void)make_policy(p);  // its options, checked
            if (p.label == policy.label) c.own_process = needs_own_process(p);
          }
        } catch (const InputError& e) {
          ++space.refused[policy.label];
          for (const auto& key : used)
            if (uses[key].refusal.empty()) uses[key].refusal = e.what();
          continue;
        }
        for (const auto& key : used) uses[key].accepted = true;
        c.index = static_cast<int>(space.candidates.size());
        c.scenario = std::move(doc);
        space.candidates.push_back(std::move(c));
      }
    }
  }
  for (const auto& [key, use] : uses)
    if (!use.accepted) {
      const std::size_t newline = key.find('\n');
      throw InputError(scenario.file + ": " + key.substr(0, newline) + ": no candidate can take the value " +
                       excerpt(key.substr(newline + 1)) + ": " + excerpt(use.refusal, 300));
    }
  return space;
}

int exact_estimates(int simulate_top) {
  return simulate_top + 2;
}

double prune_threshold(std::vector<double> accepted, int keep) {
  if (keep < 1 || accepted.size() < static_cast<std::size_t>(keep)) return 0;
  const auto kth = accepted.begin() + (keep - 1);
  std::nth_element(accepted.begin(), kth, accepted.end(), std::greater<>());
  return *kth;
}

bool bound_loses(const std::optional<double>& bound, double threshold) {
  constexpr double kMargin = 1e-6;
  return bound && threshold > 0 && *bound * (1 + kMargin) < threshold;
}

void prune_candidates(const TuneSpace& space, std::vector<TuneOutcome>& outcomes, int keep) {
  std::map<std::string, std::vector<double>> accepted;
  for (const auto& c : space.candidates)
    if (const TuneOutcome& o = outcomes[static_cast<std::size_t>(c.index)]; o.accepted())
      accepted[c.policy].push_back(o.estimate_tokens_per_s);
  std::map<std::string, double> threshold;
  for (const auto& [policy, estimates] : accepted) threshold[policy] = prune_threshold(estimates, keep);
  for (const auto& c : space.candidates) {
    TuneOutcome& o = outcomes[static_cast<std::size_t>(c.index)];
    const double t = threshold.count(c.policy) ? threshold.at(c.policy) : 0.0;
    const bool memory = o.memory_oom_iterations > 0;
    const bool compute = !memory && bound_loses(o.compute_bound_tokens_per_s, t);
    if (!memory && !compute && !bound_loses(o.replica_bound_tokens_per_s, t)) continue;
    // Whether the replica bound was computed depends on the threshold when the candidate ran: dropped when the
    // compute bound already prunes.
    if (compute) o.replica_bound_tokens_per_s.reset();
    o.pruned = true;
    o.estimated = false;
    o.failed.clear();
    o.estimate_tokens_per_s = 0;
    o.p99_iteration_s = 0;
    o.peak_gib = 0;
    o.oom_iterations = o.memory_oom_iterations;
  }
}

std::vector<int> most_promising(const std::vector<TuneCandidate>& candidates, const std::vector<TuneOutcome>& outcomes,
                                const std::string& policy, int top) {
  std::vector<int> ranked;
  for (const auto& c : candidates)
    if (c.policy == policy && outcomes[static_cast<std::size_t>(c.index)].accepted()) ranked.push_back(c.index);
  std::stable_sort(ranked.begin(), ranked.end(), [&](int a, int b) {
    return outcomes[static_cast<std::size_t>(a)].estimate_tokens_per_s >
           outcomes[static_cast<std::size_t>(b)].estimate_tokens_per_s;
  });
  if (static_cast<int>(ranked.size()) > top) ranked.resize(static_cast<std::size_t>(top));
  return ranked;
}

TuneVerdict judge_tune(const TuneSpace& space, const std::vector<TuneOutcome>& outcomes,
                       const std::vector<std::string>& policies) {
  TuneVerdict verdict;
  const auto at = [&](int i) -> const TuneOutcome& { return outcomes[static_cast<std::size_t>(i)]; };
  for (const auto& label : policies) {
    PolicyVerdict v;
    v.policy = label;
    const auto refused = space.refused.find(label);
    v.refused = refused == space.refused.end() ? 0 : refused->second;
    // Best: the highest throughput among accepted candidates, simulated ones ranked by their simulation and
    // ahead of any that were only estimated (the simulation is the better-informed figure).
    std::vector<int> ranked;
    for (const auto& c : space.candidates) {
      if (c.policy != label) continue;
      const TuneOutcome& o = at(c.index);
      v.estimated += o.estimated ? 1 : 0;
      v.simulated += o.simulated ? 1 : 0;
      v.failed += o.failed.empty() ? 0 : 1;
      v.rejected_oom += o.failed.empty() && o.oom_iterations > 0 ? 1 : 0;
      v.pruned += o.pruned ? 1 : 0;
      if (o.accepted()) ranked.push_back(c.index);
    }
    std::stable_sort(ranked.begin(), ranked.end(), [&](int a, int b) {
      if (at(a).simulated != at(b).simulated) return at(a).simulated;
      return at(a).tokens_per_s() > at(b).tokens_per_s();
    });
    if (!ranked.empty()) v.best = ranked[0];
    if (ranked.size() > 1) v.runner_up = ranked[1];
    if (v.best) {
      const TuneCandidate& best = space.candidates[static_cast<std::size_t>(*v.best)];
      const std::size_t knob_count = 3 + best.settings.size();
      const auto& names = space.knob_names.at(label);
      for (std::size_t k = 0; k < knob_count; ++k) {
        KnobSensitivity s;
        s.knob = k < 3 ? names[k] : short_name(names[k]);
        for (const auto& c : space.candidates) {
          if (c.policy != label) continue;
          bool others_equal = true;
          for (std::size_t j = 0; j < knob_count && others_equal; ++j)
            if (j != k && knob_value(c, j) != knob_value(best, j)) others_equal = false;
          // dp follows cp, tp and pp; a layout knob moves with dp alone.
          if (!others_equal) continue;
          const TuneOutcome& o = at(c.index);
          std::string cell = !o.failed.empty()      ? "failed"
                             : o.oom_iterations > 0 ? "OOM"
                             : o.pruned             ? "pruned"
                             : o.estimated ? ratio_text(o.estimate_tokens_per_s / at(*v.best).estimate_tokens_per_s)
                                           : "-";
          s.values.emplace_back(knob_value(c, k), cell);
          if (!o.failed.empty()) s.failures.emplace_back(knob_value(c, k), o.failed);
        }
        v.sensitivity.push_back(std::move(s));
      }
    }
    verdict.policies.push_back(std::move(v));
  }
  // The winner: the best policy by its best candidate's throughput; the margin over the next policy.
  std::vector<const PolicyVerdict*> with_best;
  for (const auto& v : verdict.policies)
    if (v.best) with_best.push_back(&v);
  std::stable_sort(with_best.begin(), with_best.end(), [&](const PolicyVerdict* a, const PolicyVerdict* b) {
    return at(*a->best).tokens_per_s() > at(*b->best).tokens_per_s();
  });
  if (!with_best.empty()) verdict.winner = with_best[0]->policy;
  if (with_best.size() > 1) {
    verdict.second = with_best[1]->policy;
    verdict.margin = at(*with_best[0]->best).tokens_per_s() / at(*with_best[1]->best).tokens_per_s();
  }
  return verdict;
}

Json tuned_scenario(const Json& document, const Scenario& scenario, const TuneSpace& space,
                    const TuneVerdict& verdict) {
  Json doc = document;  // its "tune" object stays: tuning the file written finds the same bests
  std::map<std::string, std::pair<Json, std::string>> shared;  // scenario key -> (value, the policy that set it)
  std::set<std::string> tuned;
  for (const PolicyVerdict& v : verdict.policies) {
    if (!v.best) continue;
    tuned.insert(v.policy);
    const TuneCandidate& c = space.candidates.at(static_cast<std::size_t>(*v.best));
    const auto at = std::find_if(scenario.policies.begin(), scenario.policies.end(),
                                 [&](const PolicySpec& p) { return p.label == c.policy; });
    LCSIM_CHECK(at != scenario.policies.end(), "a tune candidate's policy is one of the scenario's");
    Json entry = c.scenario.at("policies").at(0);  // the policy's entry with the candidate's options
    const bool own_layout = policy_descriptor(*at).plans_under_layout &&
                            (c.layout.dp != scenario.layout.dp || c.layout.cp != scenario.layout.cp ||
                             c.layout.tp != scenario.layout.tp || c.layout.pp != scenario.layout.pp);
    if (own_layout) {
      entry["parallel"] = {{"dp", c.layout.dp}, {"cp", c.layout.cp}, {"tp", c.layout.tp}, {"pp", c.layout.pp}};
      if (c.layout.virtual_pp > 1) entry["parallel"]["virtual_pp"] = c.layout.virtual_pp;
    }
    doc["policies"][static_cast<std::size_t>(at - scenario.policies.begin())] = entry;
    for (const auto& [path, value] : c.settings) {
      if (path.rfind(kTuneOptionsPrefix, 0) == 0) continue;  // in the entry already
      const auto [it, fresh] = shared.emplace(path, std::make_pair(value, c.policy));
      if (!fresh && it->second.first != value)
        throw InputError(scenario.file + ": " + path + ": the best of " + it->second.second + " sets it to " +
                         value_text(it->second.first) + ", the best of " + c.policy + " to " + value_text(value) +
                         "; one scenario holds one value (tune them apart with --policy)");
    }
  }
  for (const auto& entry : shared) {
    const std::string& path = entry.first;  // a named reference: clang 14 cannot capture a structured binding
    // A key of the tune object's "keys" is every policy's; a policy's own knob is read by whoever declares it.
    const bool everyones = std::any_of(scenario.tune.keys.begin(), scenario.tune.keys.end(),
                                       [&](const TuneKnob& knob) { return knob.path == path; });
    for (const PolicySpec& p : scenario.policies) {
      if (tuned.count(p.label)) continue;
      const auto knobs = default_policy_knobs(scenario, p);
      if (everyones || std::any_of(knobs.begin(), knobs.end(), [&](const TuneKnob& k) { return k.path == path; }))
        throw InputError(scenario.file + ": " + path + ": " + p.label + ", which was not tuned, reads it too; tune " +
                         p.label + " as well (--policy), or set it by hand");
    }
    set_dotted_path(doc, path, entry.second.first);
  }
  return doc;
}

std::string describe_settings(const TuneCandidate& c) {
  std::ostringstream s;
  s << describe_layout(c.layout);
  for (const auto& [path, value] : c.settings) s << " " << short_name(path) << "=" << value_text(value);
  return s.str();
}

nlohmann::ordered_json tune_to_json(const Scenario& scenario, const std::string& profile_label,
                                    const std::string& dataset_label, const TuneSpace& space,
                                    const std::vector<TuneOutcome>& outcomes, const TuneVerdict& verdict,
                                    std::optional<int> keep) {
  using OJson = nlohmann::ordered_json;
  const auto maybe = [](const std::optional<double>& v) { return v ? OJson(*v) : OJson(nullptr); };
  OJson j;
  j["schema"] = "lcsim-tune/1";
  j["scenario"] = scenario.name;
  j["scenario_file"] = scenario.file;
  j["dataset"] = dataset_label;
  j["profile"] = {{"label", profile_label}};
  OJson candidates = OJson::array();
  for (const auto& c : space.candidates) {
    const TuneOutcome& o = outcomes[static_cast<std::size_t>(c.index)];
    OJson item;
    item["index"] = c.index;
    item["policy"] = c.policy;
    item["layout"] = {{"dp", c.layout.dp}, {"cp", c.layout.cp}, {"tp", c.layout.tp}, {"pp", c.layout.pp}};
    if (c.layout.virtual_pp > 1) item["layout"]["virtual_pp"] = c.layout.virtual_pp;
    OJson settings = OJson::object();
    for (const auto& [path, value] : c.settings) settings[path] = value;
    item["settings"] = settings;
    item["estimated"] = o.estimated;
    item["simulated"] = o.simulated;
    item["failed"] = o.failed;
    item["estimate_tokens_per_s"] = o.estimate_tokens_per_s;
    item["simulated_tokens_per_s"] = o.simulated ? OJson(o.simulated_tokens_per_s) : OJson(nullptr);
    item["p99_iteration_s"] = o.p99_iteration_s;
    item["peak_GiB"] = o.peak_gib;
    item["headroom_GiB"] = o.capacity_gib - o.peak_gib;
    item["oom_iterations"] = o.oom_iterations;
    item["pruned"] = o.pruned;
    item["compute_bound_tokens_per_s"] = maybe(o.compute_bound_tokens_per_s);
    item["replica_bound_tokens_per_s"] = maybe(o.replica_bound_tokens_per_s);
    item["memory_bound_GiB"] = maybe(o.memory_bound_gib);
    candidates.push_back(std::move(item));
  }
  j["candidates"] = std::move(candidates);
  OJson policies = OJson::array();
  for (const auto& v : verdict.policies) {
    OJson item;
    item["policy"] = v.policy;
    item["best"] = v.best ? OJson(*v.best) : OJson(nullptr);
    item["runner_up"] = v.runner_up ? OJson(*v.runner_up) : OJson(nullptr);
    item["estimated"] = v.estimated;
    item["simulated"] = v.simulated;
    item["rejected_oom"] = v.rejected_oom;
    item["failed"] = v.failed;
    item["refused"] = v.refused;
    item["pruned"] = v.pruned;
    OJson sensitivity = OJson::array();
    for (const auto& s : v.sensitivity) {
      OJson values = OJson::array();
      for (const auto& [value, cell] : s.values) values.push_back({{"value", value}, {"relative", cell}});
      sensitivity.push_back({{"knob", s.knob}, {"values", values}});
    }
    item["sensitivity"] = std::move(sensitivity);
    policies.push_back(std::move(item));
  }
  j["policies"] = std::move(policies);
  j["winner"] = verdict.winner ? OJson(*verdict.winner) : OJson(nullptr);
  j["second"] = verdict.second ? OJson(*verdict.second) : OJson(nullptr);
  j["margin"] = verdict.margin;
  j["pruning"] = keep ? OJson{{"exact_estimates_per_policy", *keep}} : OJson(nullptr);
  return j;
}

std::string tune_to_csv(const TuneSpace& space, const std::vector<TuneOutcome>& outcomes) {
  std::ostringstream s;
  s << std::setprecision(10);
  s << "index,policy,dp,cp,tp,pp,settings,estimate_tokens_per_s,simulated_tokens_per_s,p99_iteration_s,peak_GiB,"
       "oom_iterations,failed,pruned\n";
  for (const auto& c : space.candidates) {
    const TuneOutcome& o = outcomes[static_cast<std::size_t>(c.index)];
    std::string failed = o.failed;
    std::replace(failed.begin(), failed.end(), '"', '\'');
    std::string settings;
    for (const auto& [path, value] : c.settings)
      settings += (settings.empty() ? "" : " ") + short_name(path) + "=" + value_text(value);
    s << c.index << "," << c.policy << "," << c.layout.dp << "," << c.layout.cp << "," << c.layout.tp << ","
      << c.layout.pp << ",\"" << settings << "\"," << o.estimate_tokens_per_s << ","
      << (o.simulated ? o.simulated_tokens_per_s : 0.0) << "," << o.p99_iteration_s << "," << o.peak_gib << ","
      << o.oom_iterations << ",\"" << failed << "\"," << (o.pruned ? 1 : 0) << "\n";
  }
  return s.str();
}

nlohmann::ordered_json tune_slice_to_json(const TuneSlice& slice) {
  using OJson = nlohmann::ordered_json;
  OJson j;
  j["schema"] = "lcsim-tune-slice/2";
  j["search_digest"] = slice.search_digest;
  j["shard"] = slice.shard;
  j["shards"] = slice.shards;
  j["candidates_total"] = slice.candidates_total;
  OJson estimates = OJson::array();
  for (const auto& [index, o] : slice.estimates) {
    OJson item{{"index", index},
               {"estimated", o.estimated},
               {"failed", o.failed},
               {"estimate_tokens_per_s", o.estimate_tokens_per_s},
               {"p99_iteration_s", o.p99_iteration_s},
               {"peak_GiB", o.peak_gib},
               {"oom_iterations", o.oom_iterations},
               {"memory_oom_iterations", o.memory_oom_iterations}};
    if (o.compute_bound_tokens_per_s) item["compute_bound_tokens_per_s"] = *o.compute_bound_tokens_per_s;
    if (o.replica_bound_tokens_per_s) item["replica_bound_tokens_per_s"] = *o.replica_bound_tokens_per_s;
    if (o.memory_bound_gib) item["memory_bound_GiB"] = *o.memory_bound_gib;
    estimates.push_back(std::move(item));
  }
  j["estimates"] = std::move(estimates);
  return j;
}

TuneSlice tune_slice_from_json(const Json& document, const std::string& file) {
  JsonObjectReader r(document, file);
  if (r.required<std::string>("schema") != "lcsim-tune-slice/2")
    r.fail("schema",
           "expected \"lcsim-tune-slice/2\" (a file of lcsim tune --shard K/N --slice FILE; slices of an older lcsim "
           "carry no bounds: run them again)");
  TuneSlice slice;
  slice.search_digest = r.required<std::string>("search_digest");
  slice.shards = static_cast<int>(r.integer_in("shards", 1, 1 << 20));
  slice.shard = static_cast<int>(r.integer_in("shard", 1, slice.shards));
  slice.candidates_total = static_cast<int>(r.integer_in("candidates_total", 0, 1 << 24));
  const Json& estimates = r.value("estimates");
  if (!estimates.is_array()) r.fail("estimates", "expected an array");
  for (std::size_t i = 0; i < estimates.size(); ++i) {
    JsonObjectReader e = r.child(estimates[i], r.path("estimates[" + std::to_string(i) + "]"));
    TuneOutcome o;
    const int index = static_cast<int>(e.integer_in("index", 0, slice.candidates_total - 1));
    o.estimated = e.required<bool>("estimated");
    o.failed = e.required<std::string>("failed");
    o.estimate_tokens_per_s = e.required<double>("estimate_tokens_per_s");
    o.p99_iteration_s = e.required<double>("p99_iteration_s");
    o.peak_gib = e.required<double>("peak_GiB");
    o.oom_iterations = static_cast<int>(e.integer_in("oom_iterations", 0, 1 << 24));
    o.memory_oom_iterations = static_cast<int>(e.integer_in("memory_oom_iterations", 0, 1 << 24));
    o.compute_bound_tokens_per_s = e.maybe<double>("compute_bound_tokens_per_s");
    o.replica_bound_tokens_per_s = e.maybe<double>("replica_bound_tokens_per_s");
    o.memory_bound_gib = e.maybe<double>("memory_bound_GiB");
    e.finish();
    slice.estimates.emplace_back(index, std::move(o));
  }
  r.finish();
  return slice;
}

std::vector<TuneOutcome> merge_tune_slices(const std::vector<std::pair<std::string, TuneSlice>>& slices,
                                           const std::string& digest, std::size_t candidates) {
  if (slices.empty()) throw InputError("--merge: no slice files");
  const int n = slices.front().second.shards;
  std::vector<std::string> file_of(static_cast<std::size_t>(n) + 1);
  std::vector<TuneOutcome> out(candidates);
  std::vector<bool> seen(candidates, false);
  for (const auto& [file, slice] : slices) {
    if (slice.search_digest != digest || static_cast<std::size_t>(slice.candidates_total) != candidates)
      throw InputError(file + ": a slice of another search (a different scenario, --iterations or --policy)");
    if (slice.shards != n)
      throw InputError(file + ": slice of " + std::to_string(slice.shards) + ", but " + slices.front().first +
                       " is a slice of " + std::to_string(n));
    auto& owner = file_of[static_cast<std::size_t>(slice.shard)];
    if (!owner.empty())
      throw InputError(file + ": slice " + std::to_string(slice.shard) + "/" + std::to_string(n) + " again (also " +
                       owner + ")");
    owner = file;
    for (const auto& [index, o] : slice.estimates) {
      const auto i = static_cast<std::size_t>(index);
      if (index % n + 1 != slice.shard || seen[i])
        throw InputError(file + ": candidate " + std::to_string(index) + " does not belong to slice " +
                         std::to_string(slice.shard) + "/" + std::to_string(n) + " or is listed twice");
      seen[i] = true;
      out[i] = o;
    }
  }
  for (int k = 1; k <= n; ++k)
    if (file_of[static_cast<std::size_t>(k)].empty())
      throw InputError("--merge: slice " + std::to_string(k) + "/" + std::to_string(n) + " is missing");
  for (std::size_t i = 0; i < candidates; ++i)
    if (!seen[i]) throw InputError("--merge: no slice holds candidate " + std::to_string(i));
  return out;
}

}  // namespace lcsim
