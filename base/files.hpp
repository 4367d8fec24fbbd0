#pragma once
// Every file lcsim reads or writes goes through here (limits and guarantees: docs/robustness.md).
//   Inputs are regular files read whole under a size limit: a directory, a device or a pipe is refused before
//   anything is read, so `lcsim plan /dev/zero` cannot exhaust memory.
//   Outputs are written to a temporary file beside the target, then renamed over it: a results file is either
//   the previous one or the complete new one, never a truncated mix.
#include <cstdint>
#include <fstream>
#include <string>
#include <string_view>
#include <vector>

namespace lcsim {

/// Largest JSON input (scenario, profile, sweep, catalogue, measurements, results read back).
inline constexpr std::uintmax_t kMaxJsonFileBytes = std::uintmax_t{64} << 20;
/// Largest length trace.
inline constexpr std::uintmax_t kMaxTraceFileBytes = std::uintmax_t{256} << 20;
/// Largest results file read back (`lcsim sweep` and `validate` read their runs', `lcsim-gpu live --predicted`):
/// written by lcsim, with per-GPU figures of every iteration, so larger than any file a person writes.
inline constexpr std::uintmax_t kMaxResultsFileBytes = std::uintmax_t{1} << 30;

/// The whole text of `file` without a leading UTF-8 byte-order mark (editors add one; it is never data).
/// InputError naming `file` when it is missing, not a regular file, larger than `max_bytes` or unreadable.
std::string read_input_file(const std::string& file, std::uintmax_t max_bytes);

/// `text` as a message may quote it: at most `max_chars` characters, cut with a note of the full length, and
/// bytes that would not print (control characters, anything outside ASCII) written as \xNN.
std::string excerpt(std::string_view text, std::size_t max_chars = 80);

/// A file as its folder and name ("h200-2026-11-27b/x.live.json"): how tables tell apart the runs of one scenario
/// that measured runs keep in folders of their own.
std::string folder_and_name(const std::string& file);

/// A message as the terminal may show it, whatever input it quotes: control bytes other than newlines (ESC, BEL)
/// written as \xNN, and every line longer than `max_line` bytes cut with a note of its length.
std::string terminal_text(std::string_view message, std::size_t max_line = 1000);

/// An output written as a stream (the simulation timeline, which may be large). The text goes to a temporary
/// file beside `file`; commit() flushes it and renames it over `file`. Destroyed without commit() (the run
/// failed), the temporary file is removed and any previous `file` stays as it was. A special file (/dev/null,
/// /dev/stdout, a pipe) cannot be replaced by a rename and is written in place.
class AtomicOutputFile {
 public:
  /// InputError naming `file` when the temporary file cannot be created.
  explicit AtomicOutputFile(std::string file);
  AtomicOutputFile(const AtomicOutputFile&) = delete;
  AtomicOutputFile& operator=(const AtomicOutputFile&) = delete;
  ~AtomicOutputFile();

  std::ostream& stream() { return out_; }
  /// InputError naming the file when a write failed (full disk, /dev/full) or the rename did.
  void commit();
  const std::string& file() const { return file_; }

 private:
  std::string file_;
  std::string temporary_;  ///< "" when writing in place
  std::ofstream out_;
  bool committed_ = false;
};

/// Writes `text` to `file` through an AtomicOutputFile.
void write_file_atomically(const std::string& file, const std::string& text);

/// Writes one of a command's outputs and adds it to `written`. When it fails, the InputError also names the
/// outputs already written, so that the user knows which files of the run are new.
void write_output(const std::string& file, const std::string& text, std::vector<std::string>& written);

/// An output named on the command line: the option ("--json") and the file.
struct OutputOption {
  std::string option;
  std::string file;
};

/// The one check of a run's outputs against its inputs that every command makes before it writes anything
/// (docs/robustness.md#outputs): no output may be an input of the run or another output, and no file a run
/// generates inside a folder (a sweep's point-0000.json, validate's run-0000.json) may be one either. Paths are
/// compared resolved (std::filesystem::weakly_canonical: relative paths, "..", symbolic links) and existing files
/// also by device and inode; special files such as /dev/null may be named more than once.
class OutputGuard {
 public:
  /// A file the run reads; "" (no such input) is ignored.
  void add_input(const std::string& file);
  void add_inputs(const std::vector<std::string>& files);
  /// A file the run writes, named by `option` ("--json", or "--out DIR" for a file inside it).
  void add_output(const std::string& option, const std::string& file);
  /// Files the run writes into `dir` (`option` names the folder's option): DIR/NAME for every name of `names`.
  void add_folder(const std::string& option, const std::string& dir, std::vector<std::string> names);
  /// InputError naming the option, the output and the input (or the other output) it would overwrite.
  void check() const;

 private:
  struct Folder {
    std::string option;
    std::string dir;
    std::vector<std::string> names;  ///< sorted
  };
  std::vector<std::string> inputs_;
  std::vector<OutputOption> outputs_;
  std::vector<Folder> folders_;
};

/// OutputGuard over `outputs` and `inputs`, checked at once.
void check_output_files(const std::vector<OutputOption>& outputs, const std::vector<std::string>& inputs);

}  // namespace lcsim
