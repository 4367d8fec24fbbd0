// The measured profiles in calibrate/profiles/ are what `lcsim-gpu fit` makes of the measurements beside them: a
// change to a fit or to the cost model that the fits use shows up here, and the profile must be refitted.
#include <gtest/gtest.h>

#include <string>

#include "calibrate/fit/default_profile.hpp"
#include "calibrate/fit/measurements.hpp"
#include "calibrate/fit/profile_fit.hpp"
#include "model/model.hpp"
#include "model/profile.hpp"

namespace lcsim {
namespace shipped_profiles_test {

class ShippedMeasuredProfile : public ::testing::TestWithParam<std::string> {};

TEST_P(ShippedMeasuredProfile, IsTheFitOfItsMeasurements) {
  const std::string base = std::string(LCSIM_SOURCE_DIR) + "/calibrate/profiles/" + GetParam();
  const Measurements m = load_measurements(base + ".measurements.json");
  ASSERT_FALSE(m.device.gpu_kind.empty());
  const FittedProfile fitted =
      fit_profile(m, named_model(m.model), derive_default_profile(named_gpu(m.device.gpu_kind)));
  const Profile shipped = load_profile(base + ".json");
  EXPECT_EQ(profile_to_json(fitted.profile), profile_to_json(shipped))
      << "refit with: lcsim-gpu fit --measurements " << base << ".measurements.json --out " << base << ".json";
  EXPECT_TRUE(shipped.provenance.calibrated);
  // The short-sequence layer timings are in the measurements, so both overhead terms were measured.
  EXPECT_GT(shipped.compute.layer_overhead_us, 0);
  EXPECT_GT(shipped.compute.gemm_work_overhead, 0);
  // lcsim's LM head keeps one bf16 logits buffer (kernels/lm_head.hpp), not the prior's unfused fp32 loss.
  EXPECT_EQ(shipped.memory.logits_bytes_per_token_per_vocab, 2);
  // It keeps a Ulysses shard's post-all-to-all copies until backward (kernels/ulysses_copies.hpp).
  EXPECT_EQ(shipped.memory.sharded_attention.per_q_element, 4);
  EXPECT_EQ(shipped.memory.sharded_attention.per_kv_element, 4);
  EXPECT_EQ(shipped.memory.sharded_attention.per_head, 4);
  EXPECT_GT(derive_default_profile(named_gpu(m.device.gpu_kind)).memory.logits_bytes_per_token_per_vocab, 2);
}

INSTANTIATE_TEST_SUITE_P(H200, ShippedMeasuredProfile,
                         ::testing::Values("h200-qwen2.5-0.5b", "h200-qwen2.5-7b", "h200-llama3.1-8b"),
                         [](const ::testing::TestParamInfo<std::string>& param) {
                           std::string name = param.param;
                           for (char& c : name) {
                             if (c == '-' || c == '.') c = '_';
                           }
                           return name;
                         });

// The profile built from published H100 figures (docs/published-measurements) takes the same road: it is what
// `lcsim-gpu fit` makes of the measurements file tools/published_measurements.py writes from points.json.
TEST(PublishedMeasurementsProfile, IsTheFitOfThePublishedFigures) {
  const std::string root = LCSIM_SOURCE_DIR;
  const std::string measurements = root + "/docs/published-measurements/h100-sxm.measurements.json";
  const std::string out = root + "/calibrate/profiles/h100-sxm-published.json";
  const Measurements m = load_measurements(measurements);
  EXPECT_FALSE(m.published.empty());
  const FittedProfile fitted = fit_profile(m, named_model(m.model), derive_default_profile(named_gpu("H100-SXM")));
  const Profile shipped = load_profile(out);
  EXPECT_EQ(profile_to_json(fitted.profile), profile_to_json(shipped))
      << "refit with: lcsim-gpu fit --measurements " << measurements << " --prior calibrate/profiles/"
      << "h100-sxm-default.json --out " << out;
  EXPECT_FALSE(shipped.provenance.calibrated);
  // Every NVLink collective the catalogue's Table 5 rows test is measured, so none of them is fitted here.
  EXPECT_TRUE(shipped.provenance.fitted_on.empty());
  // Published figures are not lcsim's kernels: the logits keep the prior's bytes.
  EXPECT_EQ(shipped.memory.logits_bytes_per_token_per_vocab,
            derive_default_profile(named_gpu("H100-SXM")).memory.logits_bytes_per_token_per_vocab);
  EXPECT_FALSE(shipped.memory.sharded_attention.any());
}

}  // namespace shipped_profiles_test
}  // namespace lcsim
