#include "calibrate/kineto/kineto_trace.hpp"

#include <zlib.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <map>
#include <set>
#include <string_view>
#include <tuple>

#include "base/errors.hpp"
#include "base/files.hpp"
#include "base/json_reader.hpp"

namespace lcsim {
namespace {

using nlohmann::json;

struct Reader {
  const std::string& file;

  [[noreturn]] void fail(const std::string& path, const std::string& what) const {
    throw InputError(file + ": " + path + ": " + what);
  }

  double number(const json& e, const char* key, const std::string& path) const {
    const auto it = e.find(key);
    if (it == e.end()) fail(path, std::string("no \"") + key + "\"");
    if (!it->is_number()) fail(path + "." + key, "not a number");
    const double v = it->get<double>();
    if (!std::isfinite(v)) fail(path + "." + key, "not finite");
    return v;
  }

  /// An id or count: an integer, read as one (ids beyond 2^53 would lose their low bits as doubles). A float
  /// is accepted only when it is integral and exactly representable.
  std::optional<std::uint64_t> id(const json& args, const char* key, const std::string& path) const {
    const auto it = args.find(key);
    if (it == args.end() || it->is_null()) return std::nullopt;
    if (it->is_number_unsigned()) return it->get<std::uint64_t>();
    if (it->is_number_integer()) {
      const auto v = it->get<std::int64_t>();
      if (v < 0) return std::nullopt;  // Kineto writes -1 for "none"
      return static_cast<std::uint64_t>(v);
    }
    if (it->is_number_float()) {
      const double v = it->get<double>();
      if (v >= 0 && v <= 9007199254740992.0 && std::floor(v) == v) return static_cast<std::uint64_t>(v);
    }
    fail(path + ".args[\"" + key + "\"]", "not a non-negative integer");
  }

  /// pid / tid as Kineto writes them: an integer, or a string such as "stream 7".
  static std::string thread_key(const json& e, const char* key) {
    const auto it = e.find(key);
    if (it == e.end()) return "";
    return it->is_string() ? it->get<std::string>() : it->dump();
  }

  static std::uint64_t tid_of(const json& e) {
    const auto it = e.find("tid");
    if (it != e.end() && it->is_number_unsigned()) return it->get<std::uint64_t>();
    if (it != e.end() && it->is_number_integer()) return static_cast<std::uint64_t>(it->get<std::int64_t>());
    return std::hash<std::string>{}(thread_key(e, "tid"));
  }

  static std::string text(const json& args, const char* key) {
    const auto it = args.find(key);
    if (it == args.end()) return "";
    return it->is_string() ? it->get<std::string>() : it->dump();
  }

  /// "[0, 1, 2]" (as PyTorch writes it) or a JSON array; empty when abbreviated or absent.
  static std::vector<int> ranks(const json& args) {
    const auto it = args.find("Process Group Ranks");
    if (it == args.end()) return {};
    json list = *it;
    if (it->is_string()) {
      list = json::parse(it->get<std::string>(), nullptr, false);
      if (list.is_discarded()) return {};
    }
    std::vector<int> out;
    if (!list.is_array()) return {};
    for (const auto& r : list) {
      if (!r.is_number_integer()) return {};
      out.push_back(r.get<int>());
    }
    return out;
  }

  std::optional<KinetoCollective> collective(const json& args, const std::string& path) const {
    const auto it = args.find("Collective name");
    if (it == args.end()) return std::nullopt;
    KinetoCollective c;
    c.name = text(args, "Collective name");
    c.in_nelems = id(args, "In msg nelems", path);
    c.out_nelems = id(args, "Out msg nelems", path);
    if (const auto g = id(args, "Group size", path))
      c.group_size = static_cast<int>(std::min<std::uint64_t>(*g, 1u << 30));
    c.dtype = text(args, "dtype");
    c.group_name = text(args, "Process Group Name");
    c.ranks = ranks(args);
    return c;
  }

  static std::vector<std::vector<std::int64_t>> dims(const json& args) {
    std::vector<std::vector<std::int64_t>> out;
    const auto it = args.find("Input Dims");
    if (it == args.end() || !it->is_array()) return out;
    for (const auto& d : *it) {
      std::vector<std::int64_t> shape;
      // A tensor list's entry is a list of shapes: not a single tensor, recorded as [].
      if (d.is_array() && std::all_of(d.begin(), d.end(), [](const json& v) { return v.is_number_integer(); })) {
        for (const auto& v : d) shape.push_back(v.get<std::int64_t>());
      }
      out.push_back(std::move(shape));
    }
    return out;
  }

  static std::vector<std::string> strings(const json& args, const char* key) {
    std::vector<std::string> out;
    const auto it = args.find(key);
    if (it == args.end() || !it->is_array()) return out;
    for (const auto& v : *it) out.push_back(v.is_string() ? v.get<std::string>() : v.dump());
    return out;
  }
};

bool starts_with(std::string_view s, std::string_view prefix) {
  return s.substr(0, prefix.size()) == prefix;
}

/// An ac2g flow end's (pid, tid, ts) -> its id, the correlation id of the kernel it ends on.
using FlowEnds = std::map<std::tuple<std::string, std::string, double>, std::uint64_t>;

/// What the events say beyond the trace's kernels and ops, for tying those together afterwards.
struct EventLinks {
  std::map<std::uint64_t, std::pair<double, std::optional<std::uint64_t>>> launches;  // correlation -> ts, ext id
  std::vector<std::pair<std::uint64_t, KinetoStep>> steps;                            // (thread, step), file order
  int kineto_events = 0;
};

/// The "traceEvents" array of a document that is a Kineto trace at first sight.
const json& trace_events(const json& document, const std::string& file) {
  if (!document.is_object()) throw InputError(file + ": not a PyTorch profiler trace: not a JSON object");
  const auto events_it = document.find("traceEvents");
  if (events_it == document.end() || !events_it->is_array()) {
    throw InputError(file + ": not a PyTorch profiler trace: no \"traceEvents\" array");
  }
  const json& events = *events_it;
  if (events.empty()) throw InputError(file + ": empty trace: \"traceEvents\" has no events");
  return events;
}

/// distributedInfo, deviceProperties and baseTimeNanoseconds.
void read_trace_header(const Reader& r, const json& document, KinetoTrace& t) {
  if (const auto d = document.find("distributedInfo"); d != document.end() && d->is_object()) {
    if (const auto rank = r.id(*d, "rank", "distributedInfo")) t.rank = static_cast<int>(*rank);
    if (const auto ws = r.id(*d, "world_size", "distributedInfo")) t.world_size = static_cast<int>(*ws);
  }
  if (const auto p = document.find("deviceProperties"); p != document.end() && p->is_array() && !p->empty()) {
    if ((*p)[0].is_object()) t.device_name = Reader::text((*p)[0], "name");
  }
  t.base_time_ns = r.id(document, "baseTimeNanoseconds", "");
}

std::string event_path(std::size_t i) {
  return "traceEvents[" + std::to_string(i) + "]";
}

/// The ac2g flow that ends on a kernel ("f", bound to the enclosing slice) carries the correlation id for
/// traces whose kernels lack args.correlation. A first pass, so that a flow may follow its kernel in the file.
FlowEnds read_flow_ends(const Reader& r, const json& events) {
  FlowEnds flow_ends;
  for (std::size_t i = 0; i < events.size(); ++i) {
    const json& e = events[i];
    const std::string path = event_path(i);
    if (!e.is_object()) r.fail(path, "not an object");
    if (Reader::text(e, "cat") == "ac2g" && Reader::text(e, "ph") == "f") {
      if (const auto id = r.id(e, "id", path)) {
        flow_ends[{Reader::thread_key(e, "pid"), Reader::thread_key(e, "tid"), r.number(e, "ts", path)}] = *id;
      }
    }
  }
  return flow_ends;
}

KinetoKernel read_kernel(const Reader& r, const json& e, const json& args, const std::string& name,
                         const std::string& path, const FlowEnds& flow_ends) {
  KinetoKernel k;
  k.name = name;
  k.ts_us = r.number(e, "ts", path);
  k.dur_us = r.number(e, "dur", path);
  if (k.dur_us < 0) r.fail(path + ".dur", "negative");
  if (const auto dev = r.id(args, "device", path + ".args")) k.device = static_cast<std::int64_t>(*dev);
  if (const auto s = r.id(args, "stream", path + ".args")) k.stream = static_cast<std::int64_t>(*s);
  k.correlation = r.id(args, "correlation", path);
  k.external_id = r.id(args, "External id", path);
  k.collective = r.collective(args, path);
  if (!k.correlation) {
    const auto f = flow_ends.find({Reader::thread_key(e, "pid"), Reader::thread_key(e, "tid"), k.ts_us});
    if (f != flow_ends.end()) k.correlation = f->second;
  }
  return k;
}

KinetoStep read_step(const Reader& r, const json& e, const std::string& name, const std::string& path) {
  KinetoStep s;
  const std::string n = name.substr(13);
  if (n.empty() || n.find_first_not_of("0123456789") != std::string::npos || n.size() > 18) {
    r.fail(path + ".name", "\"" + excerpt(name) + "\" is not ProfilerStep#<number>");
  }
  s.number = std::stoll(n);
  s.ts_us = r.number(e, "ts", path);
  s.dur_us = r.number(e, "dur", path);
  return s;
}

KinetoCpuOp read_cpu_op(const Reader& r, const json& e, const json& args, const std::string& name,
                        const std::string& path) {
  KinetoCpuOp op;
  op.name = name;
  op.tid = Reader::tid_of(e);
  op.ts_us = r.number(e, "ts", path);
  op.dur_us = r.number(e, "dur", path);
  op.external_id = r.id(args, "External id", path);
  op.input_dims = Reader::dims(args);
  op.input_types = Reader::strings(args, "Input type");
  op.concrete_inputs = Reader::strings(args, "Concrete Inputs");
  op.collective = r.collective(args, path);
  return op;
}

/// One complete ("X") event, by category: a kernel, a runtime launch, a CPU op or step, or one only counted as
/// Kineto's. Other phases and categories are not read.
void read_event(const Reader& r, const json& e, const std::string& path, const FlowEnds& flow_ends, KinetoTrace& t,
                EventLinks& links) {
  const std::string ph = Reader::text(e, "ph");
  const std::string cat = Reader::text(e, "cat");
  static const json kNoArgs = json::object();
  const auto args_it = e.find("args");
  const json& args = args_it != e.end() && args_it->is_object() ? *args_it : kNoArgs;
  if (ph != "X") return;
  const std::string name = Reader::text(e, "name");
  if (cat == "kernel") {
    ++links.kineto_events;
    t.kernels.push_back(read_kernel(r, e, args, name, path, flow_ends));
  } else if (cat == "cuda_runtime" || cat == "cuda_driver") {
    ++links.kineto_events;
    if (const auto c = r.id(args, "correlation", path)) {
      links.launches[*c] = {r.number(e, "ts", path), r.id(args, "External id", path)};
      ++t.runtime_launches;
    }
  } else if (cat == "cpu_op" || cat == "user_annotation" || cat == "python_function") {
    ++links.kineto_events;
    if (starts_with(name, "ProfilerStep#")) {
      const KinetoStep s = read_step(r, e, name, path);
      links.steps.push_back({Reader::tid_of(e), s});
    } else if (cat == "cpu_op") {
      t.ops.push_back(read_cpu_op(r, e, args, name, path));
    }
  } else if (cat == "gpu_memcpy" || cat == "gpu_memset" || cat == "gpu_user_annotation") {
    ++links.kineto_events;
  }
}

/// ProfilerStep#N windows in time order; the thread that recorded the last is the training loop's.
void set_steps(std::vector<std::pair<std::uint64_t, KinetoStep>> steps, KinetoTrace& t) {
  std::sort(steps.begin(), steps.end(), [](const auto& a, const auto& b) { return a.second.ts_us < b.second.ts_us; });
  std::set<std::int64_t> numbers;
  for (const auto& [tid, s] : steps) {
    if (!numbers.insert(s.number).second) {
      throw InputError(t.file + ": ProfilerStep#" + std::to_string(s.number) + " appears twice");
    }
    t.steps.push_back(s);
    t.step_thread = tid;
  }
}

/// Nesting on each thread: ops ordered by start (an enclosing op first when two start together); an op's parent
/// is the innermost open op whose span contains its start.
void link_parents(KinetoTrace& t) {
  std::vector<std::size_t> order(t.ops.size());
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
    const auto& x = t.ops[a];
    const auto& y = t.ops[b];
    return std::tie(x.tid, x.ts_us, y.dur_us) < std::tie(y.tid, y.ts_us, x.dur_us);
  });
  std::vector<std::size_t> open;
  for (std::size_t n = 0; n < order.size(); ++n) {
    KinetoCpuOp& op = t.ops[order[n]];
    if (n > 0 && t.ops[order[n - 1]].tid != op.tid) open.clear();
    while (!open.empty() && t.ops[open.back()].ts_us + t.ops[open.back()].dur_us <= op.ts_us) open.pop_back();
    if (!open.empty()) op.parent = static_cast<int>(open.back());
    open.push_back(order[n]);
  }
}

/// Each kernel's CPU op and step, through its launch: the runtime call with the kernel's correlation id, whose
/// External id names the CPU op and whose time places it in a step.
void link_kernels(const EventLinks& links, KinetoTrace& t) {
  std::map<std::uint64_t, int> op_by_external;
  for (std::size_t i = 0; i < t.ops.size(); ++i) {
    if (t.ops[i].external_id) op_by_external.emplace(*t.ops[i].external_id, static_cast<int>(i));
  }
  for (auto& k : t.kernels) {
    double launch_ts = k.ts_us;
    std::optional<std::uint64_t> external = k.external_id;
    if (k.correlation) {
      if (const auto l = links.launches.find(*k.correlation); l != links.launches.end()) {
        launch_ts = l->second.first;
        if (!external) external = l->second.second;
      }
    }
    if (external) {
      if (const auto o = op_by_external.find(*external); o != op_by_external.end()) {
        k.op = o->second;
        if (!k.correlation) launch_ts = t.ops[static_cast<std::size_t>(o->second)].ts_us;
      }
    }
    for (std::size_t s = 0; s < t.steps.size(); ++s) {
      if (launch_ts >= t.steps[s].ts_us && launch_ts <= t.steps[s].ts_us + t.steps[s].dur_us) {
        k.step = static_cast<int>(s);
        break;
      }
    }
  }
}

}  // namespace

std::string gunzip(const std::string& compressed, const std::string& file, std::uintmax_t max_bytes) {
  z_stream z{};
  if (inflateInit2(&z, 16 + MAX_WBITS) != Z_OK) throw InputError(file + ": cannot initialise zlib");
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(compressed.data()));
  z.avail_in = static_cast<uInt>(std::min<std::size_t>(compressed.size(), std::numeric_limits<uInt>::max()));
  std::string out;
  char buffer[1 << 16];
  int rc = Z_OK;
  while (rc != Z_STREAM_END) {
    z.next_out = reinterpret_cast<Bytef*>(buffer);
    z.avail_out = sizeof buffer;
    rc = inflate(&z, Z_NO_FLUSH);
    if (rc != Z_OK && rc != Z_STREAM_END) {
      const std::string why = z.msg ? z.msg : (rc == Z_BUF_ERROR ? "unexpected end of data" : "corrupt data");
      inflateEnd(&z);
      throw InputError(file + ": gzip data is corrupt or truncated (" + why + ")");
    }
    out.append(buffer, sizeof buffer - z.avail_out);
    if (out.size() > max_bytes) {
      inflateEnd(&z);
      throw InputError(file + ": decompressed trace larger than " + std::to_string(max_bytes >> 20) + " MiB");
    }
    if (rc == Z_OK && z.avail_in == 0 && z.avail_out != 0) {
      inflateEnd(&z);
      throw InputError(file + ": gzip data is truncated (the stream ends before its end marker)");
    }
  }
  inflateEnd(&z);
  return out;
}

KinetoTrace kineto_trace_from_json(const nlohmann::json& document, const std::string& file) {
  const Reader r{file};
  const json& events = trace_events(document, file);
  KinetoTrace t;
  t.file = file;
  read_trace_header(r, document, t);
  const FlowEnds flow_ends = read_flow_ends(r, events);
  EventLinks links;
  for (std::size_t i = 0; i < events.size(); ++i) read_event(r, events[i], event_path(i), flow_ends, t, links);
  if (links.kineto_events == 0) {
    throw InputError(file + ": not a PyTorch profiler trace: none of its " + std::to_string(events.size()) +
                     " events is a Kineto CPU op, kernel or runtime call");
  }
  set_steps(std::move(links.steps), t);
  std::stable_sort(t.kernels.begin(), t.kernels.end(),
                   [](const KinetoKernel& a, const KinetoKernel& b) { return a.ts_us < b.ts_us; });
  link_parents(t);
  link_kernels(links, t);
  return t;
}

KinetoTrace load_kineto_trace(const std::string& file) {
  std::string text = read_input_file(file, kMaxKinetoTraceBytes);
  if (text.size() >= 2 && static_cast<unsigned char>(text[0]) == 0x1f && static_cast<unsigned char>(text[1]) == 0x8b) {
    text = gunzip(text, file, kMaxKinetoTraceBytes);
  }
  if (text.find_first_not_of(" \t\r\n") == std::string::npos) throw InputError(file + ": empty trace: no JSON");
  json document;
  try {
    document = json::parse(text);
  } catch (const json::exception& e) {  // a syntax error, or a number out of range (out_of_range.406)
    throw InputError(file + ": not valid JSON (a truncated trace?): " + json_error_text(e));
  }
  return kineto_trace_from_json(document, file);
}

}  // namespace lcsim
