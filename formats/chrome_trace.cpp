#include "formats/chrome_trace.hpp"

#include <cmath>
#include <cstdio>

#include "base/check.hpp"
#include "base/errors.hpp"

namespace lcsim {
namespace {

/// Microseconds with nanosecond resolution: enough for any simulated span, and stable text for identical runs.
std::string microseconds(double seconds) {
  char text[48];
  std::snprintf(text, sizeof text, "%.3f", seconds * 1e6);
  return text;
}

std::string quoted(const std::string& text) {
  return nlohmann::json(text).dump();
}

}  // namespace

ChromeTraceWriter::ChromeTraceWriter(const std::string& file, const nlohmann::ordered_json& metadata)
    : file_(file), out_(file_.stream()) {
  out_ << "{\"displayTimeUnit\":\"ms\",";
  if (metadata.is_object() && !metadata.empty()) out_ << "\"metadata\":" << metadata.dump() << ",";
  out_ << "\"traceEvents\":[";
}

void ChromeTraceWriter::begin_event() {
  out_ << (first_ ? "\n" : ",\n");
  first_ = false;
}

void ChromeTraceWriter::name_process(int pid, const std::string& name, int sort_index) {
  begin_event();
  out_ << R"({"name":"process_name","ph":"M","pid":)" << pid << R"(,"args":{"name":)" << quoted(name) << "}}";
  begin_event();
  out_ << R"({"name":"process_sort_index","ph":"M","pid":)" << pid << R"(,"args":{"sort_index":)" << sort_index << "}}";
}

void ChromeTraceWriter::name_thread(int pid, int tid, const std::string& name, int sort_index) {
  begin_event();
  out_ << R"({"name":"thread_name","ph":"M","pid":)" << pid << R"(,"tid":)" << tid << R"(,"args":{"name":)"
       << quoted(name) << "}}";
  begin_event();
  out_ << R"({"name":"thread_sort_index","ph":"M","pid":)" << pid << R"(,"tid":)" << tid << R"(,"args":{"sort_index":)"
       << sort_index << "}}";
}

void ChromeTraceWriter::add(const TraceSpan& span) {
  // "dur":inf is not JSON: a non-finite time reaching the trace is a bug, not a file to write.
  LCSIM_CHECK(std::isfinite(span.start_s) && std::isfinite(span.end_s), "a trace span's time: " + span.name);
  begin_event();
  out_ << R"({"name":)" << quoted(span.name) << R"(,"cat":)" << quoted(span.category) << R"(,"ph":"X","pid":)"
       << span.pid << R"(,"tid":)" << span.tid << R"(,"ts":)" << microseconds(span.start_s) << R"(,"dur":)"
       << microseconds(span.end_s - span.start_s);
  if (!span.args.empty()) {
    out_ << R"(,"args":{)";
    for (std::size_t i = 0; i < span.args.size(); ++i)
      out_ << (i ? "," : "") << quoted(span.args[i].first) << ':' << span.args[i].second.dump();
    out_ << '}';
  }
  out_ << '}';
}

void ChromeTraceWriter::close() {
  if (closed_) return;
  closed_ = true;
  out_ << "\n]}\n";
  file_.commit();
}

}  // namespace lcsim
