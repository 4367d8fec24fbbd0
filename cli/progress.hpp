#pragma once
// Progress of long commands on stderr: a bar on a terminal, `lcsim-progress` lines for a program reading a pipe.
#include <cstddef>
#include <string>

namespace lcsim {

/// A progress bar on stderr when it is a terminal: "[####....] done/total what". With LCSIM_PROGRESS=lines, one
/// line per update instead: "lcsim-progress DONE TOTAL WHAT".
void print_progress(std::size_t done, std::size_t total, const std::string& what);

}  // namespace lcsim
