// Model shapes, parameter counts, GPU kinds and the cluster's link classes.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "base/errors.hpp"
#include "model/cluster.hpp"
#include "model/model.hpp"

namespace lcsim {
namespace model_test {

TEST(ModelConfigTest, ParameterCountsMatchPublishedSizes) {
  // Published sizes (model cards); the formula leaves out biases, so allow 2%.
  const struct {
    const char* name;
    double billions;
  } expected[] = {
      {"Qwen2.5-0.5B", 0.49}, {"Qwen2.5-7B", 7.61}, {"Qwen2.5-14B", 14.7}, {"Qwen2.5-32B", 32.5},  {"LLaMA2-7B", 6.74},
      {"LLaMA2-13B", 13.0},   {"LLaMA-32B", 32.5},  {"LLaMA3.1-8B", 8.03}, {"LLaMA3.1-70B", 70.6},
  };
  ASSERT_EQ(named_models().size(), std::size(expected));
  for (const auto& e : expected) {
    SCOPED_TRACE(e.name);
    EXPECT_NEAR(named_model(e.name).parameters() / 1e9, e.billions, 0.02 * e.billions);
  }
}

TEST(ModelConfigTest, LayerParametersByHand) {
  // LLaMA2-7B: 4096 * (4096 + 2 * 4096) QKV + 4096^2 O + 3 * 4096 * 11008 MLP + 2 * 4096 norms.
  const auto& llama = named_model("LLaMA2-7B");
  EXPECT_DOUBLE_EQ(llama.layer_parameters(), 50331648.0 + 16777216.0 + 135266304.0 + 8192.0);
  // + 2 * 32000 * 4096 untied embeddings + 4096 final norm.
  EXPECT_DOUBLE_EQ(llama.parameters(), 32 * 202383360.0 + 262144000.0 + 4096.0);
  // Qwen2.5-0.5B: GQA (2 KV heads of 64) and tied embeddings (151936 * 896 counted once).
  const auto& qwen = named_model("Qwen2.5-0.5B");
  EXPECT_EQ(qwen.kv_hidden(), 128);
  EXPECT_DOUBLE_EQ(qwen.layer_parameters(), 896.0 * (896 + 256) + 896.0 * 896 + 3.0 * 896 * 4864 + 2.0 * 896);
  EXPECT_DOUBLE_EQ(qwen.parameters(), 24 * qwen.layer_parameters() + 151936.0 * 896 + 896);
}

TEST(ModelConfigTest, ShapesFollowTheReferenceTable) {
  for (const auto& model : named_models()) {
    SCOPED_TRACE(model.name);
    EXPECT_EQ(model.head_dim * model.heads, model.hidden);
    EXPECT_EQ(model.q_hidden(), model.hidden);
    EXPECT_EQ(model.heads % model.kv_heads, 0);
    EXPECT_EQ(model.tied_embeddings, model.name == "Qwen2.5-0.5B");
  }
  const auto& big = named_model("LLaMA3.1-70B");
  EXPECT_EQ(big.hidden, 8192);
  EXPECT_EQ(big.layers, 80);
  EXPECT_EQ(big.heads, 64);
  EXPECT_EQ(big.kv_heads, 8);
  EXPECT_EQ(big.head_dim, 128);
  EXPECT_EQ(big.ffn, 28672);
  EXPECT_EQ(big.vocab, 128256);
  const auto& llama32 = named_model("LLaMA-32B");
  EXPECT_EQ(llama32.hidden, 6656);
  EXPECT_EQ(llama32.layers, 60);
  EXPECT_EQ(llama32.head_dim, 128);
}

TEST(ModelConfigTest, UnknownModelListsTheKnownOnes) {
  try {
    named_model("GPT-7B");
    FAIL() << "expected InputError";
  } catch (const InputError& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find("unknown model 'GPT-7B'"), std::string::npos) << message;
    EXPECT_NE(message.find("Qwen2.5-0.5B, Qwen2.5-7B"), std::string::npos) << message;
    EXPECT_NE(message.find("LLaMA3.1-70B"), std::string::npos) << message;
  }
}

TEST(ModelGpuTest, DatasheetFigures) {
  const double gib = 1024.0 * 1024.0 * 1024.0;
  const auto& h100 = named_gpu("H100-SXM");
  EXPECT_DOUBLE_EQ(h100.memory_bytes, 80 * gib);
  EXPECT_DOUBLE_EQ(h100.peak_bf16_tflops, 989);
  EXPECT_DOUBLE_EQ(h100.hbm_TBps, 3.35);
  EXPECT_DOUBLE_EQ(h100.nvlink_GBps, 450);
  const auto& h200 = named_gpu("H200");
  EXPECT_DOUBLE_EQ(h200.memory_bytes, 141 * gib);
  EXPECT_DOUBLE_EQ(h200.peak_bf16_tflops, 989);
  EXPECT_DOUBLE_EQ(h200.hbm_TBps, 4.8);
  EXPECT_DOUBLE_EQ(h200.nvlink_GBps, 450);
  const auto& a800 = named_gpu("A800");
  EXPECT_DOUBLE_EQ(a800.memory_bytes, 80 * gib);
  EXPECT_DOUBLE_EQ(a800.peak_bf16_tflops, 312);
  EXPECT_DOUBLE_EQ(a800.hbm_TBps, 2.0);
  EXPECT_DOUBLE_EQ(a800.nvlink_GBps, 200);
  EXPECT_EQ(named_gpus().size(), 4u);
}

TEST(ModelGpuTest, UnknownGpuListsTheKnownOnes) {
  try {
    named_gpu("H20");
    FAIL() << "expected InputError";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("unknown GPU 'H20' (did you mean `H200`?) (known: H100-SXM, H200, A800, "
                                         "A100-40GB)"),
              std::string::npos)
        << e.what();
  }
  // What people call them: H100 is the SXM part lcsim knows; case and punctuation do not matter.
  EXPECT_EQ(named_gpu("H100").name, "H100-SXM");
  EXPECT_EQ(named_gpu("h100 sxm").name, "H100-SXM");
  EXPECT_EQ(named_model("Llama-3.1-8B").name, "LLaMA3.1-8B");
}

TEST(ModelClusterTest, LinkClassFollowsNodeBoundaries) {
  ClusterSpec cluster;
  cluster.gpu = named_gpu("H100-SXM");
  cluster.nodes = 4;
  cluster.gpus_per_node = 8;
  EXPECT_EQ(cluster.world_size(), 32);
  const std::vector<int> one_node{8, 9, 10, 15};
  const std::vector<int> two_nodes{7, 8};
  const std::vector<int> single{31};
  EXPECT_EQ(cluster.topology().link_class(one_node), LinkClass::NvLink);
  EXPECT_EQ(cluster.topology().link_class(two_nodes), LinkClass::InfiniBand);
  EXPECT_EQ(cluster.topology().link_class(single), LinkClass::NvLink);
  // Not contiguous, but all on node 2.
  EXPECT_EQ(cluster.topology().link_class(std::vector<int>{23, 16, 20}), LinkClass::NvLink);
  EXPECT_EQ(cluster.topology().link_class(std::vector<int>{0, 1, 2, 31}), LinkClass::InfiniBand);
  EXPECT_THROW(cluster.topology().link_class(std::vector<int>{}), std::invalid_argument);
  EXPECT_THROW(cluster.topology().link_class(std::vector<int>{0, 32}), std::out_of_range);
  EXPECT_THROW(cluster.topology().link_class(std::vector<int>{-1}), std::out_of_range);
}

TEST(ModelClusterTest, FatTreeDomainsAreNodes) {
  ClusterSpec cluster;
  cluster.nodes = 3;
  cluster.gpus_per_node = 4;
  const Topology t = cluster.topology();
  EXPECT_EQ(t.name(), "fat-tree");
  EXPECT_EQ(t.world_size(), 12);
  EXPECT_EQ(t.domain_size(), 4);
  EXPECT_EQ(t.domains(), 3);
  EXPECT_EQ(t.nodes(), 3);
  EXPECT_EQ(t.domain_of(0), 0);
  EXPECT_EQ(t.domain_of(3), 0);
  EXPECT_EQ(t.domain_of(4), 1);
  EXPECT_EQ(t.domain_of(11), 2);
  EXPECT_TRUE(t.same_domain(5, 7));
  EXPECT_FALSE(t.same_domain(3, 4));
  EXPECT_EQ(t.link_class(std::vector<int>{4, 5, 6, 7}), LinkClass::NvLink);
  EXPECT_EQ(t.link_class(std::vector<int>{3, 4}), LinkClass::InfiniBand);
  // The view follows the spec's fields (a sweep changes the node count after the kind was read).
  cluster.nodes = 5;
  EXPECT_EQ(cluster.topology().world_size(), 20);
  cluster.nodes = 0;
  EXPECT_THROW(cluster.topology(), std::invalid_argument);
}

TEST(ModelClusterTest, LinkClassNames) {
  EXPECT_EQ(to_string(LinkClass::NvLink), "nvlink");
  EXPECT_EQ(to_string(LinkClass::InfiniBand), "infiniband");
}

}  // namespace model_test
}  // namespace lcsim
