// Reading PyTorch profiler (Kineto) traces: every rule of the reader on small synthetic traces (step boundaries
// by launch time, correlation by id and by ac2g flow, several streams, integers beyond 2^53, c10d metadata,
// recorded shapes), bad traces as InputErrors naming the file, and a trimmed real trace (HTA's test data).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <set>

#include "base/errors.hpp"
#include "calibrate/kineto/kineto_kernels.hpp"
#include "calibrate/kineto/kineto_trace.hpp"

namespace lcsim {
namespace kineto_trace_test {

using nlohmann::json;

const std::string kRealTrace = std::string(LCSIM_SOURCE_DIR) + "/tests/data/kineto/hta-nccl-data-2steps.json.gz";

json event(const std::string& cat, const std::string& name, double ts, double dur, json args, int tid = 1) {
  return {{"ph", "X"},  {"cat", cat}, {"name", name}, {"pid", 1},
          {"tid", tid}, {"ts", ts},   {"dur", dur},   {"args", std::move(args)}};
}

/// Two steps; a kernel launched at the end of step 3 runs after it ends, one kernel has no args.correlation
/// and is linked by its ac2g flow, two streams, and ids beyond 2^53.
json synthetic() {
  const std::uint64_t big = (std::uint64_t{1} << 60) + 1;
  json events = json::array();
  events.push_back(event("user_annotation", "ProfilerStep#3", 0, 100, json::object()));
  events.push_back(event("user_annotation", "ProfilerStep#4", 100, 100, json::object()));
  events.push_back(event("cpu_op", "aten::mm", 10, 80,
                         {{"External id", big},
                          {"Input Dims", {{1024, 512}, {512, 256}}},
                          {"Input type", {"c10::BFloat16", "c10::BFloat16"}}}));
  events.push_back(event("cuda_runtime", "cudaLaunchKernel", 90, 5, {{"correlation", big + 1}, {"External id", big}}));
  events.push_back(event("kernel", "sm90_xmma_gemm_bf16", 120, 30,
                         {{"stream", 7}, {"device", 0}, {"correlation", big + 1}, {"External id", big}}, 7));
  events.push_back(
      event("cpu_op", "aten::cat", 110, 20, {{"External id", 5}, {"Input Dims", {{{2, 3}, {2, 3}}, json::array()}}}));
  events.push_back(event("cuda_runtime", "cudaLaunchKernel", 112, 2, {{"correlation", 77}, {"External id", 5}}));
  // No correlation in args: the ac2g flow that ends on it carries it.
  events.push_back(event("kernel", "void at::native::cat_kernel", 150, 4, {{"stream", 20}, {"device", 0}}, 20));
  events.push_back(json{
      {"ph", "f"}, {"cat", "ac2g"}, {"name", "ac2g"}, {"id", 77}, {"pid", 1}, {"tid", 20}, {"ts", 150}, {"bp", "e"}});
  return {{"schemaVersion", 1},
          {"baseTimeNanoseconds", std::uint64_t{1711964646000000001}},
          {"distributedInfo", {{"rank", 3}, {"world_size", 8}}},
          {"deviceProperties", {{{"name", "NVIDIA H100 80GB HBM3"}}}},
          {"traceEvents", events}};
}

std::string expect_input_error(const std::function<void()>& f) {
  try {
    f();
  } catch (const InputError& e) {
    return e.what();
  }
  ADD_FAILURE() << "no InputError";
  return "";
}

std::filesystem::path temp_file(const std::string& name, const std::string& bytes) {
  const auto dir = std::filesystem::temp_directory_path() / ("lcsim-kineto-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const auto path = dir / name;
  std::ofstream(path, std::ios::binary) << bytes;
  return path;
}

std::string real_trace_bytes() {
  std::ifstream in(kRealTrace, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

TEST(KinetoTrace, StepsByLaunchTimeAndCorrelation) {
  const auto t = kineto_trace_from_json(synthetic(), "s.json");
  ASSERT_EQ(t.steps.size(), 2u);
  EXPECT_EQ(t.steps[0].number, 3);
  EXPECT_EQ(t.steps[1].number, 4);
  ASSERT_EQ(t.kernels.size(), 2u);
  // The GEMM runs at 120-150 (step 4's window) but was launched at 90, inside step 3.
  EXPECT_EQ(t.kernels[0].step, 0);
  ASSERT_GE(t.kernels[0].op, 0);
  EXPECT_EQ(t.ops[static_cast<std::size_t>(t.kernels[0].op)].name, "aten::mm");
  EXPECT_EQ(t.kernels[0].stream, 7);
  // The flow-linked kernel: correlation 77 -> launch at 112 (step 4) -> aten::cat.
  EXPECT_EQ(t.kernels[1].correlation, std::optional<std::uint64_t>(77));
  ASSERT_GE(t.kernels[1].op, 0);
  EXPECT_EQ(t.ops[static_cast<std::size_t>(t.kernels[1].op)].name, "aten::cat");
  EXPECT_EQ(t.kernels[1].step, 1);
  EXPECT_EQ(t.kernels[1].stream, 20);
  EXPECT_EQ(t.step_thread, 1u);
}

TEST(KinetoTrace, IntegersBeyond2To53StayExact) {
  const auto t = kineto_trace_from_json(synthetic(), "s.json");
  EXPECT_EQ(t.base_time_ns, std::optional<std::uint64_t>(1711964646000000001));
  EXPECT_EQ(t.kernels[0].correlation, std::optional<std::uint64_t>((std::uint64_t{1} << 60) + 2));
  // A double would merge 2^60+1 with 2^60: the link would then go to whichever op came last.
  EXPECT_EQ(t.ops[0].external_id, std::optional<std::uint64_t>((std::uint64_t{1} << 60) + 1));
  EXPECT_EQ(t.rank, std::optional<int>(3));
  EXPECT_EQ(t.world_size, std::optional<int>(8));
  EXPECT_EQ(t.device_name, "NVIDIA H100 80GB HBM3");
}

TEST(KinetoTrace, RecordedShapes) {
  const auto t = kineto_trace_from_json(synthetic(), "s.json");
  ASSERT_EQ(t.ops[0].input_dims.size(), 2u);
  EXPECT_EQ(t.ops[0].input_dims[0], (std::vector<std::int64_t>{1024, 512}));
  EXPECT_EQ(t.ops[0].input_types[1], "c10::BFloat16");
  // A tensor list is not one tensor's shape.
  ASSERT_EQ(t.ops[1].input_dims.size(), 2u);
  EXPECT_TRUE(t.ops[1].input_dims[0].empty());
}

// PyTorch's SDPA as its profiler records it: the kernel's External id names the innermost op
// (aten::_cudnn_attention_forward), nested in aten::_scaled_dot_product_cudnn_attention and
// aten::scaled_dot_product_attention on the same thread; an op on another thread at the same time is not nested.
TEST(KinetoTrace, NestedOpsKnowTheirParent) {
  json events = json::array();
  events.push_back(event("user_annotation", "ProfilerStep#0", 0, 1000, json::object()));
  events.push_back(event("cpu_op", "aten::scaled_dot_product_attention", 100, 50, {{"External id", 140}}));
  events.push_back(event("cpu_op", "aten::_scaled_dot_product_cudnn_attention", 102, 45, {{"External id", 141}}));
  events.push_back(event("cpu_op", "aten::_cudnn_attention_forward", 104, 40, {{"External id", 142}}));
  events.push_back(event("cpu_op", "aten::empty", 105, 1, {{"External id", 143}}));
  events.push_back(event("cpu_op", "aten::linear", 120, 10, {{"External id", 144}}, 2));  // another thread
  events.push_back(event("cpu_op", "aten::add", 150, 5, {{"External id", 145}}));         // after the SDPA op
  events.push_back(event("cuda_runtime", "cudaLaunchKernel", 130, 2, {{"correlation", 624}, {"External id", 142}}));
  events.push_back(event("kernel", "cudnn_generated_fort_native_sdpa_sm90_flash_fprop_wgmma_f16_knob_7", 140, 8,
                         {{"stream", 7}, {"correlation", 624}, {"External id", 142}}, 7));
  const auto t = kineto_trace_from_json({{"traceEvents", events}}, "sdpa.json");
  auto index = [&](const std::string& name) {
    for (std::size_t i = 0; i < t.ops.size(); ++i) {
      if (t.ops[i].name == name) return static_cast<int>(i);
    }
    return -2;
  };
  ASSERT_EQ(t.kernels.size(), 1u);
  EXPECT_EQ(t.kernels[0].op, index("aten::_cudnn_attention_forward"));
  EXPECT_EQ(t.ops[static_cast<std::size_t>(index("aten::_cudnn_attention_forward"))].parent,
            index("aten::_scaled_dot_product_cudnn_attention"));
  EXPECT_EQ(t.ops[static_cast<std::size_t>(index("aten::_scaled_dot_product_cudnn_attention"))].parent,
            index("aten::scaled_dot_product_attention"));
  EXPECT_EQ(t.ops[static_cast<std::size_t>(index("aten::scaled_dot_product_attention"))].parent, -1);
  EXPECT_EQ(t.ops[static_cast<std::size_t>(index("aten::empty"))].parent, index("aten::_cudnn_attention_forward"));
  EXPECT_EQ(t.ops[static_cast<std::size_t>(index("aten::linear"))].parent, -1);
  EXPECT_EQ(t.ops[static_cast<std::size_t>(index("aten::add"))].parent, -1);
}

TEST(KinetoTrace, C10dMetadata) {
  json d = synthetic();
  d["traceEvents"].push_back(event("cpu_op", "record_param_comms", 20, 5,
                                   {{"External id", 9},
                                    {"Collective name", "_allgather_base"},
                                    {"In msg nelems", 1024},
                                    {"Out msg nelems", 8192},
                                    {"Group size", 8},
                                    {"dtype", "BFloat16"},
                                    {"Process Group Name", "3"},
                                    {"Process Group Ranks", "[8, 9, 10, 11, 12, 13, 14, 15]"}}));
  const auto t = kineto_trace_from_json(d, "s.json");
  const auto& op = t.ops.back();
  ASSERT_TRUE(op.collective);
  EXPECT_EQ(op.collective->name, "_allgather_base");
  EXPECT_EQ(op.collective->in_nelems, std::optional<std::uint64_t>(1024));
  EXPECT_EQ(op.collective->out_nelems, std::optional<std::uint64_t>(8192));
  EXPECT_EQ(op.collective->group_size, 8);
  EXPECT_EQ(op.collective->dtype, "BFloat16");
  EXPECT_EQ(op.collective->group_name, "3");
  EXPECT_EQ(op.collective->ranks, (std::vector<int>{8, 9, 10, 11, 12, 13, 14, 15}));
}

TEST(KinetoTrace, BadTracesNameTheFile) {
  EXPECT_NE(expect_input_error([] { kineto_trace_from_json(json::array(), "a.json"); }).find("a.json"),
            std::string::npos);
  EXPECT_NE(expect_input_error([] {
              kineto_trace_from_json({{"x", 1}}, "b.json");
            }).find("no \"traceEvents\""),
            std::string::npos);
  EXPECT_NE(expect_input_error([] {
              kineto_trace_from_json({{"traceEvents", json::array()}}, "c.json");
            }).find("c.json: empty trace"),
            std::string::npos);
  // A Chrome trace of something else: events, but none of Kineto's.
  const json chrome = {{"traceEvents", {{{"ph", "X"}, {"name", "step"}, {"ts", 0}, {"dur", 1}}}}};
  EXPECT_NE(expect_input_error([&] { kineto_trace_from_json(chrome, "d.json"); }).find("not a PyTorch profiler trace"),
            std::string::npos);
  json twice = synthetic();
  twice["traceEvents"].push_back(event("user_annotation", "ProfilerStep#4", 300, 10, json::object()));
  EXPECT_NE(expect_input_error([&] { kineto_trace_from_json(twice, "e.json"); }).find("ProfilerStep#4 appears twice"),
            std::string::npos);
  json no_dur = synthetic();
  no_dur["traceEvents"][4].erase("dur");
  EXPECT_NE(expect_input_error([&] { kineto_trace_from_json(no_dur, "f.json"); }).find("f.json: traceEvents[4]"),
            std::string::npos);
}

TEST(KinetoTrace, TruncatedAndEmptyFiles) {
  const std::string text = synthetic().dump();
  const auto cut = temp_file("cut.json", text.substr(0, text.size() / 2));
  EXPECT_NE(expect_input_error([&] { load_kineto_trace(cut.string()); }).find(cut.string() + ": not valid JSON"),
            std::string::npos);
  const auto empty = temp_file("empty.json", "");
  EXPECT_NE(expect_input_error([&] { load_kineto_trace(empty.string()); }).find("empty trace"), std::string::npos);
  const std::string gz = real_trace_bytes();
  ASSERT_GT(gz.size(), 1000u);
  const auto cut_gz = temp_file("cut.json.gz", gz.substr(0, gz.size() / 2));
  EXPECT_NE(expect_input_error([&] { load_kineto_trace(cut_gz.string()); }).find(cut_gz.string() + ": gzip data"),
            std::string::npos);
  std::string corrupt = gz;
  corrupt[gz.size() / 2] = static_cast<char>(corrupt[gz.size() / 2] ^ 0x5a);
  const auto bad_gz = temp_file("bad.json.gz", corrupt);
  EXPECT_THROW(load_kineto_trace(bad_gz.string()), InputError);
}

TEST(KinetoTrace, ANumberBeyondDoubleIsAnInputErrorNotACrash) {
  // Found by the kineto fuzz target (CI of 90d3e97): the JSON library throws out_of_range, not parse_error, for it.
  const auto huge = temp_file("huge.json", R"({"traceEvents": [{"ph": "X", "dur": 17641E5200}]})");
  const std::string message = expect_input_error([&] { load_kineto_trace(huge.string()); });
  EXPECT_NE(message.find(huge.string() + ": not valid JSON"), std::string::npos) << message;
  EXPECT_EQ(message.find("[json.exception"), std::string::npos) << message;
}

// HTA's tests/data/nccl_parser_config/nccl_data.json.gz, trimmed to ProfilerStep#5 and #6
// (tests/data/kineto/SOURCE.md).
TEST(KinetoTrace, RealTraceFromHta) {
  auto t = load_kineto_trace(kRealTrace);
  classify_kernels(t, KernelClassifier::builtin());
  ASSERT_EQ(t.steps.size(), 2u);
  EXPECT_EQ(t.steps[0].number, 5);
  EXPECT_EQ(t.steps[1].number, 6);
  EXPECT_EQ(t.base_time_ns, std::optional<std::uint64_t>(1711964646000000000));
  EXPECT_EQ(t.device_name, "NVIDIA A100-PG509-200");
  EXPECT_EQ(t.world_size, std::optional<int>(2));
  std::set<std::int64_t> streams;
  int linked = 0, in_step = 0, nccl = 0, gemm = 0;
  for (const auto& k : t.kernels) {
    streams.insert(k.stream);
    linked += k.op >= 0;
    in_step += k.step >= 0;
    gemm += k.family == "gemm";
    if (k.family == "collective") {
      ++nccl;
      ASSERT_TRUE(k.collective) << k.name;
      EXPECT_EQ(k.collective->group_size, 2);
      EXPECT_EQ(k.collective->ranks, (std::vector<int>{0, 1}));
      EXPECT_TRUE(k.collective->name == "allreduce" || k.collective->name == "broadcast") << k.collective->name;
    }
  }
  EXPECT_EQ(streams, (std::set<std::int64_t>{7, 40}));
  EXPECT_EQ(nccl, 14);
  EXPECT_GT(gemm, 100);
  // Every kernel was launched inside one of the two steps (the trim kept those) and linked to its CPU op.
  EXPECT_EQ(in_step, static_cast<int>(t.kernels.size()));
  EXPECT_EQ(linked, static_cast<int>(t.kernels.size()));
  int comms = 0;
  for (const auto& op : t.ops) {
    if (op.collective) {
      ++comms;
      EXPECT_EQ(op.collective->dtype.empty(), false);
    }
  }
  EXPECT_GT(comms, 0);
}

TEST(KinetoKernels, GlobMatch) {
  EXPECT_TRUE(glob_match("*gemm*", "ampere_sgemm_128x64_nn"));
  EXPECT_TRUE(glob_match("ncclDevKernel_*", "ncclDevKernel_AllGather_RING_LL(x)"));
  EXPECT_FALSE(glob_match("ncclDevKernel_*", "void ncclDevKernel_AllGather"));
  EXPECT_TRUE(glob_match("a*b*c", "abbbc"));
  EXPECT_FALSE(glob_match("a*b*c", "abbbd"));
  EXPECT_TRUE(glob_match("*", ""));
  EXPECT_FALSE(glob_match("abc", "abcd"));
}

// Every pattern of the built-in table: a name made from it (each '*' as "zz") is classified into its family, so
// no pattern is shadowed by an earlier family's.
TEST(KinetoKernels, EveryPatternReachesItsFamily) {
  const auto c = KernelClassifier::builtin();
  ASSERT_GE(c.families().size(), 4u);
  int patterns = 0;
  for (const auto& f : c.families()) {
    for (const auto& p : f.patterns) {
      std::string name;
      for (char ch : p) name += ch == '*' ? std::string("zz") : std::string(1, ch);
      EXPECT_EQ(c.family_of(name), f.family) << "pattern " << p << " -> " << name;
      ++patterns;
    }
  }
  EXPECT_GE(patterns, 20);
}

TEST(KinetoKernels, RealKernelNames) {
  const auto c = KernelClassifier::builtin();
  const std::vector<std::pair<std::string, std::string>> cases{
      {"sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_warpgroupsize1x1x1", "gemm"},
      {"nvjet_tst_128x256_64x4_1x2_h_bz_coopA_NTT", "gemm"},
      {"ampere_bf16_s16816gemm_bf16_128x128_ldg8_f2f_stages_32x5_tn", "gemm"},
      {"void cutlass::Kernel2<cutlass_80_wmma_tensorop_bf16_s161616gemm_bf16_16x16_128x2_tn_align8>(Params)", "gemm"},
      {"void cublasLt::splitKreduce_kernel<32, 16, int, float, float>(cublasLt::cublasSplitKParams<float>)", "gemm"},
      {"void flash_fwd_kernel<Flash_fwd_kernel_traits<128, 128, 64, 4, false, false, cutlass::bfloat16_t>>(Params)",
       "attention"},
      {"void pytorch_flash::flash_bwd_dq_dk_dv_loop_seqk_parallel_kernel<Traits, true>(Flash_bwd_params)", "attention"},
      {"fmha_cutlassF_bf16_aligned_64x64_rf_sm80(PyTorchMemEffAttention::AttentionKernel::Params)", "attention"},
      {"cudnn_generated_fort_native_sdpa_sm90_flash_fprop_wgmma_f16_knob_3_64x64x64_4x1x1_kernel0_0", "attention"},
      // cuDNN SDPA backward's pre- and post-pass (FlashAttention's are flash_bwd_dot_do_o / flash_bwd_convert_dq).
      {"void cudnn::fusion::compute_dot_do_o_specialized<true, 64>(void const*, void const*, void*, void*)",
       "attention"},
      {"void cudnn::fusion::convert_dq_to_16bits<true>(void const*, void*, unsigned int, unsigned int)", "attention"},
      {"ncclDevKernel_AllGather_RING_LL(ncclDevKernelArgsStorage<4096ul>)", "collective"},
      {"ncclKernel_AllReduce_RING_LL_Sum_float(ncclDevComm*, unsigned long, ncclWork*)", "collective"},
      {"void at::native::(anonymous namespace)::multi_tensor_apply_kernel<TensorListMetadata<4>, FusedAdamMathFunctor>",
       "optimizer"},
      {"void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>>(int)", "other"},
      {"Cijk_Ailk_Bljk_SB_MT64x64x16_MI32x32x2x1_SN_1LDSB0_APM1_ABV0", "gemm"},
      {"void cudnn::bn_bw_1C11_kernel_new<float, float, float2, 32, true, 1>(float)", "other"},
  };
  for (const auto& [name, family] : cases) EXPECT_EQ(c.family_of(name), family) << name;
}

TEST(KinetoKernels, MalformedTables) {
  const json ok = {{"format", "lcsim-kineto-kernels/1"},
                   {"families", {{{"family", "gemm"}, {"patterns", {"*gemm*"}}}}}};
  EXPECT_EQ(KernelClassifier::from_json(ok, "k.json").family_of("sgemm"), "gemm");
  json twice = ok;
  twice["families"].push_back(ok["families"][0]);
  EXPECT_NE(
      expect_input_error([&] { KernelClassifier::from_json(twice, "k.json"); }).find("k.json: families[1].family"),
      std::string::npos);
  json star = ok;
  star["families"][0]["patterns"] = {"**"};
  EXPECT_THROW(KernelClassifier::from_json(star, "k.json"), InputError);
  json other = ok;
  other["families"][0]["family"] = "other";
  EXPECT_THROW(KernelClassifier::from_json(other, "k.json"), InputError);
  json unknown = ok;
  unknown["extra"] = 1;
  EXPECT_THROW(KernelClassifier::from_json(unknown, "k.json"), InputError);
}

}  // namespace kineto_trace_test
}  // namespace lcsim
