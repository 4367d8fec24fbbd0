#pragma once
// FNV-1a, 64 bits: the same digest on every machine and compiler, unlike std::hash. Sweep digests, the sampled worlds'
// per-label streams and the estimate's replica kinds (program/iteration_program.cpp) all use it.
#include <cstdint>
#include <string_view>

namespace lcsim {

class Fnv1a {
 public:
  Fnv1a& add(std::string_view bytes) {
    for (const char c : bytes) add_byte(static_cast<unsigned char>(c));
    return *this;
  }
  /// The value's 8 bytes, least significant first.
  Fnv1a& add(std::int64_t value) {
    auto bits = static_cast<std::uint64_t>(value);
    for (int i = 0; i < 8; ++i, bits >>= 8) add_byte(static_cast<unsigned char>(bits & 0xffU));
    return *this;
  }
  std::uint64_t digest() const { return hash_; }

 private:
  void add_byte(unsigned char byte) { hash_ = (hash_ ^ byte) * 0x100000001b3ULL; }
  std::uint64_t hash_ = 0xcbf29ce484222325ULL;
};

/// The digest of one string.
inline std::uint64_t fnv1a(std::string_view bytes) {
  return Fnv1a().add(bytes).digest();
}

}  // namespace lcsim
