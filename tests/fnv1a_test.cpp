// FNV-1a (base/fnv1a.hpp): the published 64-bit test vectors, and integers as their little-endian bytes.
#include "base/fnv1a.hpp"

#include <gtest/gtest.h>

#include <string>

namespace lcsim {
namespace fnv1a_test {

TEST(Fnv1a, MatchesThePublishedVectors) {
  EXPECT_EQ(fnv1a(""), 0xcbf29ce484222325ULL);
  EXPECT_EQ(fnv1a("a"), 0xaf63dc4c8601ec8cULL);
  EXPECT_EQ(fnv1a("foobar"), 0x85944171f73967e8ULL);
  EXPECT_EQ(Fnv1a().add("foo").add("bar").digest(), fnv1a("foobar"));  // parts add up to the whole
}

TEST(Fnv1a, AnIntegerIsItsEightBytesLeastSignificantFirst) {
  EXPECT_EQ(Fnv1a().add(std::int64_t{0x61}).digest(), fnv1a(std::string("a") + std::string(7, '\0')));
  EXPECT_NE(Fnv1a().add(std::int64_t{1}).digest(), Fnv1a().add(std::int64_t{256}).digest());
}

}  // namespace fnv1a_test
}  // namespace lcsim
