#include "base/terminal.hpp"

#include <sys/ioctl.h>
#include <unistd.h>

#include <algorithm>

namespace lcsim {

std::size_t terminal_columns(int fd) {
  if (isatty(fd) == 0) return 0;
  winsize size{};
  if (ioctl(fd, TIOCGWINSZ, &size) != 0) return 0;
  return size.ws_col;
}

std::size_t output_columns(bool wide) {
  if (wide) return 0;
  const std::size_t terminal = terminal_columns(STDOUT_FILENO);
  return terminal > 0 ? terminal : kDefaultOutputColumns;
}

std::string wrap_lines(const std::string& text, std::size_t max_columns) {
  if (max_columns == 0) return text;
  std::string out;
  std::size_t begin = 0;
  while (begin < text.size()) {
    std::size_t end = text.find('\n', begin);
    const bool newline = end != std::string::npos;
    if (!newline) end = text.size();
    std::string line = text.substr(begin, end - begin);
    const std::size_t indent = std::min(line.find_first_not_of(' '), line.size());
    const std::string pad(indent + 2, ' ');
    while (line.size() > max_columns) {
      const std::size_t cut = line.rfind(' ', max_columns);
      if (cut == std::string::npos || cut <= indent + 2) break;
      out += line.substr(0, cut) + '\n';
      line = pad + line.substr(cut + 1);
    }
    out += line + (newline ? "\n" : "");
    begin = end + 1;
  }
  return out;
}

}  // namespace lcsim
