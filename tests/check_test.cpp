// LCSIM_CHECK: always-on invariant checks that throw InternalError naming file and line.
#include <gtest/gtest.h>

#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

#include "base/check.hpp"
#include "model/plan.hpp"
#include "base/random.hpp"
#include "policies/skrull/gds.hpp"

namespace lcsim {
namespace check_test {

// main() maps InputError and PlanningError to their own exit codes; InternalError must reach the std::exception
// handler ("internal error", exit 1).
static_assert(std::is_base_of_v<std::logic_error, InternalError>);
static_assert(!std::is_base_of_v<InputError, InternalError> && !std::is_base_of_v<PlanningError, InternalError>);

/// The message of the InternalError `f` throws ("" when it throws none).
template <class F>
std::string internal_error_message(F f) {
  try {
    f();
  } catch (const InternalError& e) {
    return e.what();
  }
  return "";
}

TEST(Check, PassingCheckDoesNotEvaluateItsMessage) {
  int evaluated = 0;
  auto message = [&] {
    ++evaluated;
    return std::string("never built");
  };
  EXPECT_NO_THROW(LCSIM_CHECK(1 + 1 == 2, message()));
  EXPECT_EQ(evaluated, 0);
}

TEST(Check, FailingCheckNamesFileLineConditionAndMessage) {
  const int line = __LINE__ + 1;
  const std::string what = internal_error_message([] { LCSIM_CHECK(2 < 1, "two is not below one"); });
  EXPECT_NE(what.find("check_test.cpp:" + std::to_string(line) + ": "), std::string::npos) << what;
  EXPECT_NE(what.find("check failed: 2 < 1: two is not below one"), std::string::npos) << what;
}

TEST(Check, MessageMayBeBuiltAtRunTime) {
  const int ranks = 0;
  const std::string what = internal_error_message([&] { LCSIM_CHECK(ranks > 0, "ranks = " + std::to_string(ranks)); });
  EXPECT_NE(what.find("ranks = 0"), std::string::npos) << what;
}

// The replaced asserts fire in every build type, from public functions given inputs their callers must not pass.
TEST(Check, InvariantsHoldInReleaseBuilds) {
  const std::vector<double> flops{1, 2, 3};
  const std::string binpack = internal_error_message([&] { skrull::binpack_by_flops(flops, 0); });
  EXPECT_NE(binpack.find("gds.cpp:"), std::string::npos) << binpack;
  EXPECT_NE(binpack.find("ranks >= 1"), std::string::npos) << binpack;

  Rng rng(1);
  EXPECT_THROW(rng.below(0), InternalError);

  Replica replica;
  replica.gpus = {0, 1};
  EXPECT_EQ(replica.gpu(0, 0, 1), 1);
  EXPECT_THROW(replica.gpu(0, 0, 2), InternalError);  // index 2 of a replica that holds 2 GPUs
}

}  // namespace check_test
}  // namespace lcsim
