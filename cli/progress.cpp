#include "cli/progress.hpp"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <iostream>
#include <string_view>

#include "base/terminal.hpp"

namespace lcsim {
namespace {

enum class ProgressMode { Automatic, Lines, None };

ProgressMode progress_mode() {
  static const ProgressMode mode = [] {
    const char* value = std::getenv("LCSIM_PROGRESS");
    if (value == nullptr) return ProgressMode::Automatic;
    if (std::string_view(value) == "lines") return ProgressMode::Lines;
    if (std::string_view(value) == "none") return ProgressMode::None;
    return ProgressMode::Automatic;
  }();
  return mode;
}

void print_line(std::size_t done, std::size_t total, const std::string& what) {
  std::cerr << "lcsim-progress " << done << ' ' << total << ' ' << what << '\n' << std::flush;
}

}  // namespace

std::string progress_bar_line(std::size_t done, std::size_t total, const std::string& what, std::size_t columns) {
  constexpr std::size_t kBar = 40, kShortestBar = 10;
  const std::string count = " " + std::to_string(done) + "/" + std::to_string(total) + " ";
  // "[" bar "]" count what, within columns - 1 (the last column would wrap on some terminals).
  const std::size_t room = columns == 0 ? std::string::npos : columns - 1;
  std::size_t bar = kBar;
  if (columns > 0 && 2 + bar + count.size() + what.size() > room) {
    const std::size_t fixed = 2 + count.size() + what.size();
    bar = fixed + kShortestBar <= room ? room - fixed : kShortestBar;
  }
  const std::size_t filled = total > 0 ? std::min(bar, bar * done / total) : bar;
  std::string line = "[" + std::string(filled, '#') + std::string(bar - filled, '.') + "]" + count + what;
  if (columns > 0 && line.size() > room) line.resize(room);
  return line;
}

void print_warning(const std::string& text) {
  const std::size_t terminal = terminal_columns(STDERR_FILENO);
  std::cerr << wrap_lines("lcsim: warning: " + text + "\n", terminal > 0 ? terminal : kDefaultOutputColumns)
            << std::flush;
}

void print_progress(std::size_t done, std::size_t total, const std::string& what) {
  if (total == 0) return;
  const ProgressMode mode = progress_mode();
  if (mode == ProgressMode::None) return;
  if (mode == ProgressMode::Lines) return print_line(done, total, what);
  using Clock = std::chrono::steady_clock;
  static const Clock::time_point started = Clock::now();
  if (isatty(STDERR_FILENO) == 0) {
    // A pipe or a log: nothing for a short run, lines once it has run for a while, at most one a second.
    static Clock::time_point last_line{};
    const Clock::time_point now = Clock::now();
    if (now - started < std::chrono::seconds(2)) return;
    if (done != total && now - last_line < std::chrono::seconds(1)) return;
    last_line = now;
    return print_line(done, total, what);
  }
  // "\r" back to the start of the line, "\033[K" clears what a longer line left.
  std::cerr << '\r' << progress_bar_line(done, total, what, terminal_columns(STDERR_FILENO)) << "\033[K"
            << (done == total ? "\n" : "") << std::flush;
}

}  // namespace lcsim
