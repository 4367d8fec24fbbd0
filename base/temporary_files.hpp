#pragma once
// The temporary files of AtomicOutputFile (base/files.hpp) that a process killed mid-write leaves behind.
#include <sys/types.h>

#include <string>

namespace lcsim {

/// Removes the temporary files that process `pid` of this host made for `target` (any name in `target`'s folder that
/// process was writing): a Runner calls it for a child it killed, which could not remove its own.
void remove_temporaries_of(const std::string& target, pid_t pid);

}  // namespace lcsim
