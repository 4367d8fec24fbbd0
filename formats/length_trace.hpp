#pragma once
// Dataset length traces: the token count of every sequence of a real dataset, in epoch order.
//
// Two formats are read:
//   * plain text: one positive integer token count per line;
//   * CSV: a header line naming its columns, one of them `tokens` (other columns are ignored), then one row per
//     sequence with as many comma-separated fields as the header. Quoted fields are not supported.
// In both, blank lines and lines whose first non-blank character is '#' are skipped (comments), and surrounding
// spaces, tabs and a trailing '\r' are ignored. The format is chosen by the first non-comment line: a positive
// integer means plain text, anything else must be a CSV header with a `tokens` column.
// Sequence ids are 0..n-1 in file order; the dataset is named after the file's stem ("lens.txt" -> "lens").
// Any malformed line is an InputError "file:LINE: message"; a trace without sequences is an error too.
#include <string>

#include "model/workload.hpp"

namespace lcsim {

Dataset load_length_trace(const std::string& file);

/// Writes `dataset` as a plain-text trace (a '#' header comment, then one token count per line in dataset order).
/// Sequence ids are not written: loading the file numbers the sequences 0..n-1.
void save_length_trace(const Dataset& dataset, const std::string& file);

}  // namespace lcsim
