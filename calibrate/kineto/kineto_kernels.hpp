#pragma once
// Which family a GPU kernel belongs to (GEMM, attention, collective, ...), by a table of name patterns kept in one
// data file, calibrate/kineto/kineto_kernels.json, compiled into the library so the tool runs anywhere. A new kernel
// library is one line there.
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "calibrate/kineto/kineto_trace.hpp"

namespace lcsim {

/// The family of kernels no pattern matches: element-wise, normalisation, copies.
inline constexpr const char* kOtherKernelFamily = "other";

struct KernelFamilyPatterns {
  std::string family;
  std::vector<std::string> patterns;  ///< '*' matches any run of characters; the rest must match exactly
};

class KernelClassifier {
 public:
  /// The table compiled in from calibrate/kineto/kineto_kernels.json.
  static KernelClassifier builtin();
  /// A table in the same format; InputError naming `file` and the JSON path when it is malformed.
  static KernelClassifier from_json(const nlohmann::json& document, const std::string& file);
  static KernelClassifier load(const std::string& file);

  /// The first family one of whose patterns matches `kernel_name`; kOtherKernelFamily when none does.
  const std::string& family_of(const std::string& kernel_name) const;
  const std::vector<KernelFamilyPatterns>& families() const { return families_; }

 private:
  std::vector<KernelFamilyPatterns> families_;
};

/// Whether `text` matches `pattern` as a whole ('*' any run of characters, including none).
bool glob_match(const std::string& pattern, const std::string& text);

/// Sets every kernel's family.
void classify_kernels(KinetoTrace& trace, const KernelClassifier& classifier);

}  // namespace lcsim
