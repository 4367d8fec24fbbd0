#pragma once
// How wide printed output may be: the terminal's width when the output is a terminal, 120 columns otherwise (a
// pipe, a file, a log), no limit with --wide. Every command that prints a table reads it here.
#include <cstddef>
#include <string>

namespace lcsim {

/// The width of printed output when it is not a terminal.
inline constexpr std::size_t kDefaultOutputColumns = 120;

/// The width of the terminal on file descriptor `fd` (TIOCGWINSZ); 0 when `fd` is not a terminal or has no width.
std::size_t terminal_columns(int fd);

/// The columns a command's standard output may take: 0 (no limit) when `wide`, the terminal's width when standard
/// output is a terminal, else kDefaultOutputColumns.
std::size_t output_columns(bool wide);

/// `text` with every line longer than `max_columns` (0: no limit) broken at its last space that fits, the rest
/// indented two columns past the line's own indent; a line without such a space stays whole.
std::string wrap_lines(const std::string& text, std::size_t max_columns);

}  // namespace lcsim
