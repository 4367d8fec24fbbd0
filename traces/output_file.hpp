#pragma once
// Atomic output: a results file is either the old one or the complete new one, never a truncated mix.
#include <string>

namespace lcsim {

/// Writes `text` to a temporary file beside `file`, flushes and closes it, then renames it over `file`. A failed
/// write (full disk, unwritable folder) throws InputError naming `file` and leaves any previous `file` intact.
void write_file_atomically(const std::string& file, const std::string& text);

}  // namespace lcsim
