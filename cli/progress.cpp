#include "cli/progress.hpp"

#include <unistd.h>

#include <cstdlib>
#include <iostream>
#include <string_view>

namespace lcsim {

void print_progress(std::size_t done, std::size_t total, const std::string& what) {
  if (total == 0) return;
  // LCSIM_PROGRESS=lines: a line per update, `lcsim-progress DONE TOTAL WHAT`, for a program that runs lcsim
  // through a pipe and shows the progress its own way (the Python package).
  static const bool lines = [] {
    const char* mode = std::getenv("LCSIM_PROGRESS");
    return mode != nullptr && std::string_view(mode) == "lines";
  }();
  if (lines) {
    std::cerr << "lcsim-progress " << done << ' ' << total << ' ' << what << '\n' << std::flush;
    return;
  }
  if (!isatty(STDERR_FILENO)) return;
  constexpr int kWidth = 40;
  const auto filled = static_cast<int>(kWidth * done / total);
  std::cerr << "\r[" << std::string(static_cast<std::size_t>(filled), '#')
            << std::string(static_cast<std::size_t>(kWidth - filled), '.') << "] " << done << "/" << total << " "
            << what << (done == total ? "\n" : "") << std::flush;
}

}  // namespace lcsim
