#include "calibrate/kineto/kineto_kernels.hpp"

#include <set>

#include "base/errors.hpp"
#include "base/files.hpp"

namespace lcsim {

extern const char* const kKinetoKernelsJson;  // generated from calibrate/kineto/kineto_kernels.json (CMake)

bool glob_match(const std::string& pattern, const std::string& text) {
  // Greedy matching with backtracking to the last '*': linear in practice, no recursion.
  std::size_t p = 0, t = 0, star = std::string::npos, mark = 0;
  while (t < text.size()) {
    if (p < pattern.size() && pattern[p] == '*') {
      star = p++;
      mark = t;
    } else if (p < pattern.size() && pattern[p] == text[t]) {
      ++p;
      ++t;
    } else if (star != std::string::npos) {
      p = star + 1;
      t = ++mark;
    } else {
      return false;
    }
  }
  while (p < pattern.size() && pattern[p] == '*') ++p;
  return p == pattern.size();
}

KernelClassifier KernelClassifier::from_json(const nlohmann::json& document, const std::string& file) {
  auto fail = [&](const std::string& path, const std::string& what) {
    throw InputError(file + ": " + path + ": " + what);
  };
  if (!document.is_object()) fail("(top level)", "not an object");
  for (const auto& [key, value] : document.items()) {
    if (key != "format" && key != "about" && key != "families") fail(key, "unknown key");
  }
  if (!document.contains("format") || document["format"] != "lcsim-kineto-kernels/1") {
    fail("format", "must be \"lcsim-kineto-kernels/1\"");
  }
  if (!document.contains("families") || !document["families"].is_array()) fail("families", "not an array");
  KernelClassifier c;
  std::set<std::string> seen;
  const auto& families = document["families"];
  for (std::size_t i = 0; i < families.size(); ++i) {
    const std::string path = "families[" + std::to_string(i) + "]";
    const auto& f = families[i];
    if (!f.is_object() || f.size() != 2 || !f.contains("family") || !f.contains("patterns")) {
      fail(path, "must be {\"family\": NAME, \"patterns\": [...]}");
    }
    if (!f["family"].is_string() || f["family"].get<std::string>().empty()) fail(path + ".family", "not a name");
    const std::string family = f["family"].get<std::string>();
    if (family == kOtherKernelFamily || !seen.insert(family).second) {
      fail(path + ".family", "\"" + family + "\" is reserved or listed twice");
    }
    if (!f["patterns"].is_array() || f["patterns"].empty()) fail(path + ".patterns", "not a non-empty array");
    KernelFamilyPatterns entry{family, {}};
    for (std::size_t j = 0; j < f["patterns"].size(); ++j) {
      const auto& p = f["patterns"][j];
      if (!p.is_string() || p.get<std::string>().find_first_not_of('*') == std::string::npos) {
        fail(path + ".patterns[" + std::to_string(j) + "]", "not a pattern with at least one literal character");
      }
      entry.patterns.push_back(p.get<std::string>());
    }
    c.families_.push_back(std::move(entry));
  }
  return c;
}

KernelClassifier KernelClassifier::builtin() {
  static const KernelClassifier table =
      from_json(nlohmann::json::parse(kKinetoKernelsJson), "calibrate/kineto/kineto_kernels.json (built in)");
  return table;
}

KernelClassifier KernelClassifier::load(const std::string& file) {
  const std::string text = read_input_file(file, kMaxJsonFileBytes);
  const auto document = nlohmann::json::parse(text, nullptr, false);
  if (document.is_discarded()) throw InputError(file + ": not valid JSON");
  return from_json(document, file);
}

const std::string& KernelClassifier::family_of(const std::string& kernel_name) const {
  static const std::string other = kOtherKernelFamily;
  for (const auto& f : families_) {
    for (const auto& p : f.patterns) {
      if (glob_match(p, kernel_name)) return f.family;
    }
  }
  return other;
}

void classify_kernels(KinetoTrace& trace, const KernelClassifier& classifier) {
  for (auto& k : trace.kernels) k.family = classifier.family_of(k.name);
}

}  // namespace lcsim
