// `lcsim list`: the built-in names a scenario can use, with their key figures.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "base/suggest.hpp"
#include "base/terminal.hpp"
#include "cli/cli.hpp"
#include "model/finetuning.hpp"
#include "model/model.hpp"
#include "model/profile.hpp"
#include "model/topology.hpp"
#include "model/workload.hpp"
#include "policies/core/policy.hpp"

namespace lcsim {
namespace {

constexpr const char* kListUsage =
    "Usage: lcsim list models|gpus|distributions|policies|finetuning|topologies|profiles\n"
    "\n"
    "  models          model shapes usable as \"model\": \"NAME\" in a scenario\n"
    "  gpus            GPU kinds usable as cluster.gpu\n"
    "  distributions   sequence length distributions usable as dataset.distribution or in dataset.mix\n"
    "  policies        policy kinds usable as policies[].kind\n"
    "  finetuning      fine-tuning methods usable as training.finetuning.method, and LoRA's targets\n"
    "  topologies      cluster wirings usable as cluster.topology, with their keys\n"
    "  profiles        the shipped calibration profiles (calibrate/profiles/), stack presets included\n"
    "\n"
    "  --wide          lines as long as they come (default: the terminal's width, or 120 columns when not a\n"
    "                  terminal; longer source and summary texts carry on under themselves)\n";

using Row = std::vector<std::string>;

std::string fmt(const char* spec, double value) {
  char text[64];
  std::snprintf(text, sizeof text, spec, value);
  return text;
}

/// How wide lines may be (output_columns; 0: no limit), set once by run_list_command.
std::size_t g_columns = 0;

/// `text` after `prefix`, broken at spaces so that no line passes g_columns, carried on under its first word.
std::string hanging(const std::string& prefix, const std::string& text) {
  const std::size_t columns = g_columns;
  if (columns == 0 || prefix.size() + text.size() <= columns || prefix.size() + 20 > columns)
    return prefix + text + "\n";
  std::string out, line = prefix;
  const std::string indent(prefix.size(), ' ');
  std::size_t begin = 0;
  while (begin < text.size()) {
    std::size_t end = text.find(' ', begin);
    if (end == std::string::npos) end = text.size();
    const std::string word = text.substr(begin, end - begin);
    if (line.size() > indent.size() && line.size() + 1 + word.size() > columns) {
      out += line + "\n";
      line = indent;
    }
    line += (line.size() > indent.size() ? " " : "") + word;
    begin = end + 1;
  }
  return out + line + "\n";
}

/// Aligned columns: the first reads left to right, numbers align right; with `free_text_last` the last column
/// (a source citation) is printed as it is, carried on under itself past g_columns.
void print_rows(const std::vector<Row>& rows, std::ostream& out, bool free_text_last = false) {
  std::vector<std::size_t> width;
  for (const auto& row : rows) {
    width.resize(std::max(width.size(), row.size()), 0);
    for (std::size_t c = 0; c < row.size(); ++c) width[c] = std::max(width[c], row[c].size());
  }
  for (const auto& row : rows) {
    std::string line;
    for (std::size_t c = 0; c < row.size(); ++c) {
      const std::string pad(width[c] - row[c].size(), ' ');
      if (c == 0) {
        line += row[c] + pad;
      } else if (free_text_last && c + 1 == row.size()) {
        line = hanging(line + "  ", row[c]);
        line.pop_back();  // the newline below ends it
      } else {
        line += "  " + pad + row[c];
      }
    }
    out << line << '\n';
  }
}

void list_models(std::ostream& out) {
  std::vector<Row> rows{
      {"model", "params", "hidden", "layers", "heads", "kv_heads", "head_dim", "ffn", "vocab", "tied"}};
  for (const auto& m : named_models())
    rows.push_back({m.name, fmt("%.2fB", m.parameters() / 1e9), std::to_string(m.hidden), std::to_string(m.layers),
                    std::to_string(m.heads), std::to_string(m.kv_heads), std::to_string(m.head_dim),
                    std::to_string(m.ffn), std::to_string(m.vocab), m.tied_embeddings ? "yes" : "no"});
  print_rows(rows, out);
}

void list_gpus(std::ostream& out) {
  std::vector<Row> rows{{"gpu", "memory GiB", "BF16 TFLOP/s", "HBM TB/s", "NVLink GB/s/dir"}};
  for (const auto& g : named_gpus())
    rows.push_back({g.name, fmt("%.0f", g.memory_bytes / (1024.0 * 1024.0 * 1024.0)), fmt("%.0f", g.peak_bf16_tflops),
                    fmt("%.2f", g.hbm_TBps), fmt("%.0f", g.nvlink_GBps)});
  print_rows(rows, out);
}

/// Median and mean of the lengths the sampler draws (model/DISTRIBUTIONS.md): bin [low, high] with low the
/// previous upper + 1 (or shortest), length floor(x) for x log-uniform on [low, high + 1).
struct BinStats {
  double median = 0;
  double mean = 0;
};

BinStats bin_stats(const LengthDistribution& d) {
  BinStats stats;
  double previous_share = 0;
  bool median_found = false;
  for (std::size_t i = 0; i < d.upper.size(); ++i) {
    const Tokens low = i == 0 ? d.shortest : d.upper[i - 1] + 1;
    const Tokens high = d.upper[i];
    const double mass = d.share[i] - previous_share;
    previous_share = d.share[i];
    if (mass <= 0) continue;
    const double log_range = std::log(static_cast<double>(high + 1) / static_cast<double>(low));
    double bin_mean = 0;  // sum of k P(k), P(k) = ln((k + 1) / k) / log_range
    for (Tokens k = low; k <= high; ++k) bin_mean += static_cast<double>(k) * std::log1p(1.0 / static_cast<double>(k));
    stats.mean += mass * bin_mean / log_range;
    if (!median_found && d.share[i] >= 0.5) {
      const double within = (0.5 - (d.share[i] - mass)) / mass;
      stats.median = std::floor(static_cast<double>(low) * std::exp(log_range * within));
      median_found = true;
    }
  }
  return stats;
}

void list_distributions(std::ostream& out) {
  std::vector<Row> rows{{"distribution", "shortest", "median", "mean", "longest", "source"}};
  for (const auto& d : named_distributions()) {
    const BinStats stats = bin_stats(d);
    rows.push_back({d.name, std::to_string(d.shortest), fmt("%.0f", stats.median), fmt("%.0f", stats.mean),
                    std::to_string(d.upper.empty() ? d.shortest : d.upper.back()), d.source});
  }
  print_rows(rows, out, true);
  out << hanging("",
                 "lengths in tokens; median and mean of the sampled lengths follow exactly from the bins "
                 "(log-uniform inside each bin, see model/DISTRIBUTIONS.md)");
}

/// One line on a built-in kind (docs/policies.md has the rest); none for a kind registered out of tree.
std::string_view policy_summary(std::string_view kind) {
  static const std::map<std::string_view, std::string_view> summaries{
      {"deepspeed", "Skrull's DeepSpeed baseline: static Ulysses CP, one sequence per micro-batch"},
      {"sorted", "LongAlign sorted batching: the window sorted by length and cut into global batches"},
      {"packing", "fixed-length packing (ISF, FFD, BFS or random) to a packing length"},
      {"padded",
       "Hugging Face's padding collator: N sequences per micro-batch, padded to the longest; "
       "shuffle: random batching"},
      {"hbp", "HBP: hierarchical balance packing into groups of SP degrees, balanced micro-batches"},
      {"skrull", "Skrull: DACP (local or sharded sequences per micro-batch) inside GDS (global scheduling)"},
      {"skrull-dacp", "Skrull's DACP alone, on micro-batches in the baseline's order"},
      {"rr", "Skrull's GDS with round-robin placement (App. B.2)"},
      {"hydraulis", "Hydraulis: heterogeneous TP x PP pipelines per iteration, two-stage dispatch and packing"},
      {"megatron", "Megatron-LM (Hydraulis's baseline): static TP x PP, packs of the context dealt evenly"},
      {"deepspeed-ulysses", "DeepSpeed-Ulysses (Hydraulis's, FlexSP's baseline): static SP, fixed-length packs"},
      {"hotspa", "HotSPa: a few homogeneous strategies per length bucket, switched inside each iteration"},
      {"flexsp", "FlexSP: per micro-batch, SP groups of mixed power-of-two degrees, sequences balanced on them"},
      {"flexsp-batchada", "FlexSP-BatchAda: one homogeneous SP degree per global batch, chosen per batch"},
      {"wlb-llm",
       "WLB-LLM: variable-length packing with outlier queues, adaptive per-document / per-sequence CP split"},
      {"plain-4d", "WLB-LLM's Plain-4D: the loader's fixed-length packs in data order, per-sequence CP split"},
      {"fixed-4d", "WLB-LLM's Fixed-4D: sum-of-squares balanced fixed-length packing, one fixed CP split"},
  };
  const auto it = summaries.find(kind);
  return it == summaries.end() ? std::string_view{} : it->second;
}

void list_policies(std::ostream& out) {
  out << "policy kinds (use as policies[].kind; each kind documents its options in its header under policies/)\n";
  for (const auto& kind : policy_kinds()) {
    const std::string_view summary = policy_summary(kind);
    if (summary.empty()) {
      out << "  " << kind << '\n';
      continue;
    }
    out << hanging("  " + kind + std::string(kind.size() < 18 ? 18 - kind.size() : 1, ' '), std::string(summary));
  }
}

void list_finetuning(std::ostream& out) {
  out << "fine-tuning methods (use as training.finetuning.method; what each changes: docs/model.md)\n"
         "  full   every weight trained (the default)\n"
         "  lora   frozen bf16 base weights, trained LoRA adapters: {\"method\": \"lora\", \"rank\": r, "
         "\"alpha\": a,\n"
         "         \"targets\": [...]} (alpha scales the adapters and changes no time or memory)\n"
         "  frozen every weight trained but a frozen part (bf16, no gradients): {\"method\": \"frozen\",\n"
         "         \"embeddings\": bool, \"lm_head\": bool, \"first_layers\": N} (defaults false, false, 0)\n"
         "LoRA targets (default: all)\n ";
  for (LoraTarget target : all_lora_targets()) out << ' ' << to_string(target);
  out << '\n';
}

void list_topologies(std::ostream& out) {
  out << "topologies (use as cluster.topology; keys go in the cluster object; docs/topology.md)\n";
  std::vector<Row> rows;
  for (const TopologyEntry& entry : topology_kinds())
    rows.push_back({std::string(entry.name), std::string(entry.summary)});
  print_rows(rows, out, true);
  out << "keys: fat-tree takes oversubscription (1-64, default 1); rail-optimized takes pxn (bool, default false);\n"
         "nvlink-domain takes domain_gpus (required, a whole number of nodes dividing the cluster)\n";
}

/// The shipped profiles (measurement files are the fits' inputs, not profiles): what each describes and where its
/// numbers come from. docs/calibration.md says how to choose one.
void list_profiles(std::ostream& out) {
  const std::filesystem::path folder = std::filesystem::path(LCSIM_SOURCE_DIR) / "calibrate" / "profiles";
  std::vector<std::string> files;
  for (const auto& entry : std::filesystem::directory_iterator(folder)) {
    const std::string name = entry.path().filename().string();
    if (entry.path().extension() == ".json" && name.find(".measurements.") == std::string::npos) files.push_back(name);
  }
  std::sort(files.begin(), files.end());
  std::vector<Row> rows{{"profile", "gpu", "stack", "numbers"}};
  for (const auto& name : files) {
    const Profile profile = load_profile((folder / name).string());
    const Provenance& p = profile.provenance;
    rows.push_back({name, profile.gpu, p.stack.empty() ? "-" : p.stack,
                    p.calibrated ? "calibrated on " + p.device + ", " + p.date : "uncalibrated, " + p.source});
  }
  out << "shipped profiles in calibrate/profiles/ (a scenario's \"profile\" names one, relative to its folder; stack "
         "presets:\ndocs/calibration.md)\n";
  print_rows(rows, out, true);
}

}  // namespace

void run_list_command(const std::vector<std::string>& all_args, std::ostream& out) {
  std::vector<std::string> args;
  bool wide = false;
  for (const std::string& arg : all_args) {
    if (arg == "--wide")
      wide = true;
    else
      args.push_back(arg);
  }
  if (args.size() == 1 && (args[0] == "--help" || args[0] == "-h")) {
    out << kListUsage;
    return;
  }
  if (args.size() != 1)
    throw UsageError("list: expected one of models, gpus, distributions, policies, finetuning, topologies, profiles",
                     kListUsage);
  g_columns = output_columns(wide);
  const std::string& what = args[0];
  if (what == "models") {
    list_models(out);
  } else if (what == "gpus") {
    list_gpus(out);
  } else if (what == "distributions") {
    list_distributions(out);
  } else if (what == "policies") {
    list_policies(out);
  } else if (what == "finetuning") {
    list_finetuning(out);
  } else if (what == "topologies") {
    list_topologies(out);
  } else if (what == "profiles") {
    list_profiles(out);
  } else {
    throw UsageError(
        "list: unknown list \"" + what + "\"" +
            did_you_mean(what, {"models", "gpus", "distributions", "policies", "finetuning", "topologies", "profiles"}),
        kListUsage);
  }
}

}  // namespace lcsim
