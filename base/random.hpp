#pragma once
// A small, fully specified PRNG (xoshiro256** seeded through splitmix64). The standard library's distributions
// are implementation-defined, so every draw lcsim makes goes through this class: same seed, same bytes, on any
// compiler.
#include <cstdint>
#include <utility>
#include <vector>

#include "base/check.hpp"

namespace lcsim {

__extension__ using Uint128 = unsigned __int128;

class Rng {
 public:
  explicit Rng(std::uint64_t seed) {
    for (auto& word : state_) {
      seed += 0x9E3779B97F4A7C15ULL;
      std::uint64_t z = seed;
      z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
      z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
      word = z ^ (z >> 31);
    }
  }

  std::uint64_t next() {
    const std::uint64_t result = rotl(state_[1] * 5, 7) * 9;
    const std::uint64_t t = state_[1] << 17;
    state_[2] ^= state_[0];
    state_[3] ^= state_[1];
    state_[1] ^= state_[2];
    state_[0] ^= state_[3];
    state_[2] ^= t;
    state_[3] = rotl(state_[3], 45);
    return result;
  }

  /// Uniform in [0, 1) with 53 random bits.
  double uniform() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }

  /// Uniform integer in [0, n), n > 0 (Lemire's nearly-divisionless method, unbiased).
  std::uint64_t below(std::uint64_t n) {
    LCSIM_CHECK(n > 0, "Rng::below needs a non-empty range");
    Uint128 m = static_cast<Uint128>(next()) * n;
    auto low = static_cast<std::uint64_t>(m);
    if (low < n) {
      const std::uint64_t threshold = (0 - n) % n;
      while (low < threshold) {
        m = static_cast<Uint128>(next()) * n;
        low = static_cast<std::uint64_t>(m);
      }
    }
    return static_cast<std::uint64_t>(m >> 64);
  }

  template <class T>
  void shuffle(std::vector<T>& items) {
    for (std::size_t i = items.size(); i > 1; --i) std::swap(items[i - 1], items[below(i)]);
  }

  /// A child generator whose stream is independent of later draws from this one.
  Rng split(std::uint64_t salt) { return Rng(next() ^ (salt * 0xD1B54A32D192ED03ULL)); }

 private:
  static std::uint64_t rotl(std::uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
  std::uint64_t state_[4];
};

}  // namespace lcsim
