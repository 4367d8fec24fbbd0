#include "calibrate/fit/measurements.hpp"

#include <cmath>

#include "base/errors.hpp"
#include "base/files.hpp"
#include "base/json_reader.hpp"

namespace lcsim {

Recompute parse_recompute(const std::string& name, const std::string& what) {
  for (auto r : {Recompute::None, Recompute::Selective, Recompute::Full}) {
    if (name == to_string(r)) return r;
  }
  throw InputError(what + ": unknown recomputation '" + name + "' (known: none, selective, full)");
}

CollectiveOp parse_collective_op(const std::string& name, const std::string& what) {
  for (auto op : {CollectiveOp::AllGather, CollectiveOp::ReduceScatter, CollectiveOp::AllReduce, CollectiveOp::AllToAll,
                  CollectiveOp::SendRecv}) {
    if (name == to_string(op)) return op;
  }
  throw InputError(what + ": unknown collective '" + name +
                   "' (known: all_gather, reduce_scatter, all_reduce, all_to_all, send_recv)");
}

namespace {

using ordered = nlohmann::ordered_json;

ordered timing_json(const KernelTiming& t) {
  return ordered{{"kernel_s", t.kernel_seconds}, {"event_s", t.event_seconds}, {"kernels", t.kernels}};
}

std::string indexed(const std::string& key, std::size_t i) {
  return key + "[" + std::to_string(i) + "]";
}

/// A finite number > 0.
double positive(JsonObjectReader& r, std::string_view key) {
  const double v = r.positive(key);
  if (!std::isfinite(v)) r.fail(key, "must be finite");
  return v;
}

KernelTiming read_timing(JsonObjectReader r) {
  KernelTiming t;
  t.kernel_seconds = positive(r, "kernel_s");
  t.event_seconds = positive(r, "event_s");
  t.kernels = static_cast<int>(r.integer_in("kernels", 0, 1 << 20));
  r.finish();
  return t;
}

/// Calls read(item reader) for each object of the array at `key`.
template <class Read>
void for_each_item(JsonObjectReader& r, std::string_view key, Read read) {
  const auto& items = r.value(key);
  if (!items.is_array()) r.fail(key, "expected an array, got " + json_type_name(items));
  for (std::size_t i = 0; i < items.size(); ++i) read(r.child(items[i], r.path(indexed(std::string(key), i))));
}

std::vector<int> read_ints(JsonObjectReader& r, std::string_view key, int lo, int hi) {
  const auto& v = r.value(key);
  if (!v.is_array() || v.empty()) r.fail(key, "expected a non-empty array of integers");
  std::vector<int> out;
  for (std::size_t i = 0; i < v.size(); ++i) {
    if (!v[i].is_number_integer() || v[i].get<std::int64_t>() < lo || v[i].get<std::int64_t>() > hi) {
      r.fail(indexed(std::string(key), i),
             "expected an integer in [" + std::to_string(lo) + ", " + std::to_string(hi) + "], got " + v[i].dump());
    }
    out.push_back(v[i].get<int>());
  }
  return out;
}

std::vector<double> read_positive_numbers(JsonObjectReader& r, std::string_view key) {
  const auto& v = r.value(key);
  if (!v.is_array() || v.empty()) r.fail(key, "expected a non-empty array of numbers");
  std::vector<double> out;
  for (std::size_t i = 0; i < v.size(); ++i) {
    if (!v[i].is_number() || !(v[i].get<double>() > 0) || !std::isfinite(v[i].get<double>())) {
      r.fail(indexed(std::string(key), i), "expected a finite number > 0, got " + v[i].dump());
    }
    out.push_back(v[i].get<double>());
  }
  return out;
}

LinkClass read_link(JsonObjectReader& r) {
  const std::string name = r.optional<std::string>("link", "nvlink");
  for (auto link : {LinkClass::NvLink, LinkClass::InfiniBand}) {
    if (name == to_string(link)) return link;
  }
  r.fail("link", "unknown link '" + name + "' (known: nvlink, infiniband)");
}

std::optional<KernelTiming> read_optional_timing(JsonObjectReader& r, std::string_view key) {
  if (!r.has(key)) return std::nullopt;
  return read_timing(r.object(key));
}

DeviceDescription read_device(JsonObjectReader r) {
  DeviceDescription d;
  d.name = r.required<std::string>("name");
  d.gpu_kind = r.required<std::string>("gpu_kind");
  d.count = static_cast<int>(r.integer_in("count", 1, 1 << 16));
  d.compute_capability = r.required<std::string>("compute_capability");
  d.multiprocessors = static_cast<int>(r.integer_in("multiprocessors", 1, 1 << 16));
  d.memory_bytes = positive(r, "memory_bytes");
  d.driver = r.required<std::string>("driver");
  d.cuda = r.required<std::string>("cuda");
  d.nccl = r.required<std::string>("nccl");
  d.date = r.required<std::string>("date");
  d.host = r.required<std::string>("host");
  r.finish();
  if (d.name.empty()) r.fail("name", "must not be empty");
  if (d.date.empty()) r.fail("date", "must not be empty");
  return d;
}

}  // namespace

nlohmann::ordered_json measurements_to_json(const Measurements& m) {
  ordered j;
  j["format"] = kMeasurementsFormat;
  if (!m.published.empty()) j["published"] = m.published;
  const auto& d = m.device;
  j["device"] = ordered{{"name", d.name},
                        {"gpu_kind", d.gpu_kind},
                        {"count", d.count},
                        {"compute_capability", d.compute_capability},
                        {"multiprocessors", d.multiprocessors},
                        {"memory_bytes", d.memory_bytes},
                        {"driver", d.driver},
                        {"cuda", d.cuda},
                        {"nccl", d.nccl},
                        {"date", d.date},
                        {"host", d.host}};
  j["model"] = m.model;
  j["timing"] = m.timing;
  j["warmup"] = m.warmup;
  j["repetitions"] = m.repetitions;
  j["gemm"] = ordered::array();
  for (const auto& g : m.gemm) {
    ordered item{{"tokens", g.tokens}};
    if (g.n > 0) item["n"] = g.n, item["k"] = g.k;
    item["forward"] = timing_json(g.forward);
    if (g.backward) item["backward"] = timing_json(*g.backward);
    j["gemm"].push_back(item);
  }
  j["attention"] = ordered::array();
  for (const auto& a : m.attention) {
    ordered item{{"seq_len", a.seq_len}, {"sequences", a.sequences}};
    if (a.q_hidden > 0) item["q_hidden"] = a.q_hidden;
    item["forward"] = timing_json(a.forward);
    if (a.backward) item["backward"] = timing_json(*a.backward);
    j["attention"].push_back(item);
  }
  j["layers"] = ordered::array();
  for (const auto& l : m.layers) {
    j["layers"].push_back(
        ordered{{"seqlens", l.seqlens}, {"recompute", std::string(to_string(l.recompute))}, {"seconds", l.seconds}});
  }
  j["memory"] = ordered::array();
  for (const auto& mm : m.memory) {
    j["memory"].push_back(ordered{{"model", mm.model},
                                  {"hidden", mm.hidden},
                                  {"kv_hidden", mm.kv_hidden},
                                  {"ffn", mm.ffn},
                                  {"tokens", mm.tokens},
                                  {"recompute", std::string(to_string(mm.recompute))},
                                  {"layers", mm.layers},
                                  {"peak_bytes", mm.peak_bytes}});
  }
  j["collectives"] = ordered::array();
  for (const auto& c : m.collectives) {
    ordered samples = ordered::array();
    for (const auto& s : c.samples) samples.push_back(ordered{{"bytes", s.bytes}, {"seconds", s.seconds}});
    ordered item{{"op", std::string(to_string(c.op))}, {"group_size", c.group_size}};
    if (c.link != LinkClass::NvLink) item["link"] = std::string(to_string(c.link));
    item["samples"] = samples;
    j["collectives"].push_back(item);
  }
  j["ulysses"] = ordered::array();
  for (const auto& u : m.ulysses) {
    j["ulysses"].push_back(ordered{{"cp", u.cp}, {"tokens_per_gpu", u.tokens_per_gpu}, {"seconds", u.seconds}});
  }
  j["optimizer"] = ordered::array();
  for (const auto& o : m.optimizer) {
    j["optimizer"].push_back(ordered{{"parameters", o.parameters}, {"seconds", o.seconds}});
  }
  j["warnings"] = m.warnings;
  return j;
}

Measurements measurements_from_json(const nlohmann::json& document, const std::string& file) {
  JsonObjectReader r(document, file);
  const std::string format = r.required<std::string>("format");
  if (format != kMeasurementsFormat) r.fail("format", "expected \"" + std::string(kMeasurementsFormat) + "\"");
  Measurements m;
  m.published = r.optional<std::string>("published", "");
  if (r.has("published") && m.published.empty()) r.fail("published", "must not be empty when present");
  m.device = read_device(r.object("device"));
  m.model = r.required<std::string>("model");
  m.timing = r.required<std::string>("timing");
  m.warmup = static_cast<int>(r.integer_in("warmup", 0, 1 << 20));
  m.repetitions = static_cast<int>(r.integer_in("repetitions", 1, 1 << 20));
  for_each_item(r, "gemm", [&](JsonObjectReader item) {
    GemmMeasurement g;
    g.tokens = item.integer_in("tokens", 1, std::int64_t{1} << 40);
    if (item.has("n") || item.has("k")) {
      g.n = static_cast<double>(item.integer_in("n", 1, std::int64_t{1} << 40));
      g.k = static_cast<double>(item.integer_in("k", 1, std::int64_t{1} << 40));
    }
    g.forward = read_timing(item.object("forward"));
    g.backward = read_optional_timing(item, "backward");
    item.finish();
    m.gemm.push_back(g);
  });
  for_each_item(r, "attention", [&](JsonObjectReader item) {
    AttentionMeasurement a;
    a.seq_len = static_cast<int>(item.integer_in("seq_len", 1, 1 << 30));
    a.sequences = static_cast<int>(item.integer_in("sequences", 1, 1 << 30));
    if (item.has("q_hidden")) a.q_hidden = static_cast<int>(item.integer_in("q_hidden", 1, 1 << 24));
    a.forward = read_timing(item.object("forward"));
    a.backward = read_optional_timing(item, "backward");
    item.finish();
    m.attention.push_back(a);
  });
  for_each_item(r, "layers", [&](JsonObjectReader item) {
    LayerMeasurement l;
    l.seqlens = read_ints(item, "seqlens", 1, 1 << 30);
    l.recompute = parse_recompute(item.required<std::string>("recompute"), file + ": " + item.path("recompute"));
    l.seconds = positive(item, "seconds");
    item.finish();
    m.layers.push_back(l);
  });
  for_each_item(r, "memory", [&](JsonObjectReader item) {
    MemoryMeasurement mm;
    mm.model = item.required<std::string>("model");
    mm.hidden = static_cast<int>(item.integer_in("hidden", 1, 1 << 24));
    mm.kv_hidden = static_cast<int>(item.integer_in("kv_hidden", 1, 1 << 24));
    mm.ffn = static_cast<int>(item.integer_in("ffn", 1, 1 << 24));
    mm.tokens = static_cast<int>(item.integer_in("tokens", 1, 1 << 30));
    mm.recompute = parse_recompute(item.required<std::string>("recompute"), file + ": " + item.path("recompute"));
    mm.layers = read_ints(item, "layers", 1, 1 << 10);
    mm.peak_bytes = read_positive_numbers(item, "peak_bytes");
    item.finish();
    if (mm.layers.size() != mm.peak_bytes.size()) item.fail("peak_bytes", "needs one value per entry of layers");
    m.memory.push_back(mm);
  });
  for_each_item(r, "collectives", [&](JsonObjectReader item) {
    CollectiveMeasurement c;
    c.op = parse_collective_op(item.required<std::string>("op"), file + ": " + item.path("op"));
    c.group_size = static_cast<int>(item.integer_in("group_size", 2, 1 << 20));
    c.link = read_link(item);
    for_each_item(item, "samples", [&](JsonObjectReader s) {
      c.samples.push_back({positive(s, "bytes"), positive(s, "seconds")});
      s.finish();
    });
    item.finish();
    m.collectives.push_back(c);
  });
  for_each_item(r, "ulysses", [&](JsonObjectReader item) {
    UlyssesMeasurement u;
    u.cp = static_cast<int>(item.integer_in("cp", 2, 1 << 20));
    u.tokens_per_gpu = static_cast<int>(item.integer_in("tokens_per_gpu", 1, 1 << 30));
    u.seconds = positive(item, "seconds");
    item.finish();
    m.ulysses.push_back(u);
  });
  for_each_item(r, "optimizer", [&](JsonObjectReader item) {
    m.optimizer.push_back({positive(item, "parameters"), positive(item, "seconds")});
    item.finish();
  });
  const auto& warnings = r.value("warnings");
  if (!warnings.is_array()) r.fail("warnings", "expected an array of strings");
  for (std::size_t i = 0; i < warnings.size(); ++i) {
    if (!warnings[i].is_string()) r.fail(indexed("warnings", i), "expected a string");
    m.warnings.push_back(warnings[i].get<std::string>());
  }
  r.finish();
  return m;
}

Measurements load_measurements(const std::string& file) {
  return measurements_from_json(parse_json_file(file), file);
}

void save_measurements(const Measurements& m, const std::string& file) {
  write_file_atomically(file, measurements_to_json(m).dump(1) + "\n");
}

}  // namespace lcsim
