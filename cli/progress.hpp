#pragma once
// Progress of long commands on stderr: a bar on a terminal, `lcsim-progress` lines for a program reading a pipe.
#include <cstddef>
#include <string>

namespace lcsim {

/// Progress on stderr (docs/commands.md, "Progress"):
///  - a terminal: one line redrawn in place, "[####....] done/total what", cut to the terminal's width and cleared
///    to its end, so a shorter update leaves nothing of a longer one; a newline when done == total;
///  - LCSIM_PROGRESS=lines, or stderr not a terminal once the command has run for more than 2 seconds: one line
///    per update, "lcsim-progress DONE TOTAL WHAT" (unprompted, at most one a second besides the last of each
///    count), for a log or a program that reads the pipe;
///  - LCSIM_PROGRESS=none: nothing.
void print_progress(std::size_t done, std::size_t total, const std::string& what);

/// "lcsim: warning: TEXT" on stderr, its lines within the terminal's width (120 columns when stderr is not one).
void print_warning(const std::string& text);

/// The line drawn on a terminal of `columns` columns (0: no limit) for print_progress's arguments, without the
/// carriage return and the clearing: the bar shrinks (down to 10 marks) and then `what` is cut to fit.
std::string progress_bar_line(std::size_t done, std::size_t total, const std::string& what, std::size_t columns);

}  // namespace lcsim
