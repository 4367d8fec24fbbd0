#include "traces/output_file.hpp"

#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <system_error>

#include "policies/core/errors.hpp"

namespace lcsim {

void write_file_atomically(const std::string& file, const std::string& text) {
  namespace fs = std::filesystem;
  const fs::path target(file);
  // A special file (/dev/stdout, /dev/null, a pipe) cannot be replaced by a rename: write it in place.
  std::error_code status_error;
  const auto status = fs::status(target, status_error);
  if (!status_error && fs::exists(status) && !fs::is_regular_file(status)) {
    std::ofstream out(file, std::ios::binary);
    if (!out) throw InputError(file + ": cannot open for writing");
    out << text;
    out.flush();
    if (!out) throw InputError(file + ": write failed");
    return;
  }
  const fs::path temporary =
      target.parent_path() / ("." + target.filename().string() + ".tmp." + std::to_string(::getpid()));
  {
    std::ofstream out(temporary, std::ios::binary | std::ios::trunc);
    if (!out) throw InputError(file + ": cannot open for writing (" + temporary.string() + ")");
    out << text;
    out.close();
    if (!out) {
      std::error_code ignored;
      fs::remove(temporary, ignored);
      throw InputError(file + ": write failed");
    }
  }
  if (std::rename(temporary.c_str(), target.c_str()) != 0) {
    const std::string reason = std::strerror(errno);
    std::error_code ignored;
    fs::remove(temporary, ignored);
    throw InputError(file + ": cannot replace: " + reason);
  }
}

}  // namespace lcsim
