#pragma once
// Chrome trace event JSON (the format chrome://tracing and https://ui.perfetto.dev open), written as a stream so
// that a long timeline never sits in memory as one JSON document:
//   {"displayTimeUnit":"ms","metadata":{...},"traceEvents":[
//     {"name":"process_name","ph":"M","pid":1,"args":{"name":"GPU 0 (node 0)"}},
//     {"name":"forward mb 3","cat":"compute","ph":"X","pid":1,"tid":0,"ts":12.5,"dur":40.25,"args":{...}},
//     ...]}
// Times are microseconds ("ts", "dur"), printed with nanosecond resolution. Spans of one (pid, tid) track must
// not partially overlap (viewers nest spans by time), so callers put concurrent activities on separate tids.
// The file appears only when close() succeeds (base/files.hpp): a failed run keeps the previous one.
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/files.hpp"

namespace lcsim {

/// One complete ("X") event.
struct TraceSpan {
  int pid = 0;
  int tid = 0;
  double start_s = 0;
  double end_s = 0;
  std::string name;
  std::string category;
  std::vector<std::pair<std::string, nlohmann::json>> args;
};

class ChromeTraceWriter {
 public:
  /// Opens a temporary file beside `file`; InputError when it cannot. Destroyed without close(), it leaves
  /// `file` as it was. A non-empty `metadata` object is written as the document's "metadata" (what the trace is of:
  /// viewers ignore it, plots caption with it).
  explicit ChromeTraceWriter(const std::string& file, const nlohmann::ordered_json& metadata = {});

  /// Names a process track group; viewers order groups by `sort_index`.
  void name_process(int pid, const std::string& name, int sort_index);
  void name_thread(int pid, int tid, const std::string& name, int sort_index);
  void add(const TraceSpan& span);
  /// Writes the closing brackets and puts the file in place; InputError naming the file when writing failed.
  void close();

 private:
  void begin_event();

  AtomicOutputFile file_;
  std::ostream& out_;
  bool first_ = true;
  bool closed_ = false;
};

}  // namespace lcsim
