#!/usr/bin/env python3
"""Writes the stack presets (calibrate/profiles/h100-sxm-{megatron,pytorch-fsdp,deepspeed}.json, and the variant
h100-sxm-megatron-apex-adam.json) from the default H100 profile and published kernel figures; docs/calibration.md
("Stack presets") says how to choose one.

Each preset is the default H100-SXM profile (calibrate/profiles/h100-sxm-default.json) with what distinguishes the
stack's kernels, every number from a published figure (docs/published-measurements/SOURCES.md, section 2a, and
docs/published-measurements/framework-benchmarks.md, "FP8 GEMM rate"); nothing is fitted on a catalogue entry:
- attention_efficiency: the stack's attention kernel, causal forward, head dim 128, FlashAttention-3 paper Fig. 5
  (H100 SXM5, BF16): cuDNN for Megatron/NeMo (Transformer Engine's fused attention), FlashAttention-2 for
  PyTorch-native (SDPA's flash backend) and DeepSpeed (the flash_attn package Hugging Face models call);
- attention_backward_ratio: backward over forward time, 2.5 FLOPs ratio x forward rate / backward rate of the same
  kernel, non-causal, 16K (Fig. 5 and 6; the paper publishes no causal backward);
- fp8_gemm_speedup: FP8 over BF16 GEMM rate at 8192^3: cuBLASLt (Transformer Engine's path) 1609 / 797 TFLOP/s;
  torch._scaled_mm (torchao Float8's path) 1175 / 797; DeepSpeed ships no FP8 GEMM path of its own: none.
- PyTorch-native "selective" is torchtitan's per-op policy (torchtitan parallelize_llama.py `_save_list`, commit
  9dec370 of the benchmarks): a block saves its input, the attention kernel's output and every other matmul's
  output (Q, V, gate, down; K, output and up are recomputed), bf16: 4 h + 4 q + 2 kv + 2 f bytes per token and
  layer with q = h (activation_bytes_per_token_per_layer.selective 8 h + 2 kv + 2 f), and it reruns the K, output
  and up projections: 0.37 of a forward pass's GEMM FLOPs over Llama 2 and 3 shapes (0.365 8B, 0.363 70B, 0.389 7B)
  (selective_recompute_gemm_share). Megatron's selective (the attention core only) is the default profile's.
- Main gradients: Megatron-LM accumulates and reduces BF16 training's gradients in fp32 (arguments.py sets
  accumulate_allreduce_grads_in_fp32 under --bf16), so its static bytes per parameter are Megatron's documented
  18 (bf16 parameters 2, fp32 gradients 4, fp32 master + Adam moments 12) and, with the distributed optimizer
  (lcsim's ZeRO stage 1), 6 + 12/d (docs/distrib_optimizer.md), and the gradient sync reduces 4 bytes a
  parameter. torchtitan's FSDP2 reduces in fp32 too (training.mixed_precision_reduce = "float32", its default);
  its sharded state is the default's 16 bytes (fp32 parameters as the master, fp32 gradients, two moments).
  DeepSpeed ZeRO keeps the default's bf16 gradients.
- The megatron-apex-adam variant (h100-sxm-megatron-apex-adam.json): the megatron preset as NeMo 1.0's launcher runs it
  with `optim.name: distributed_fused_adam`, BF16 and `megatron_amp_O2` (DGX Cloud benchmarking recipes v25.02,
  llama3.1/llama3.1_{8b,70b,405b}.yaml, NeMo 24.12 = NeMo v2.1.0 with Megatron-Core core_r0.10.0 and Apex 810ffae):
  * Apex's DistributedFusedAdam keeps its contiguous gradient buffer in grad_sync_dtype, which the recipes set to
    bf16 (2 bytes, and the reduce-scatter moves 2); NeMo (megatron_base_model.py setup_optimization) sets
    store_params=False, store_param_remainders=True for an fp32 optimizer over bf16 parameters, so each shard holds
    the int16 remainder of the fp32 master (2) and the two fp32 moments (8): 4 + 10/d instead of 6 + 12/d, d the
    data-parallel x CP group (MegatronDistributedFusedAdam's process group).
  * Megatron-Core's fused SwiGLU (bias_activation_fusion, set in the recipes; mlp.py -> bias_swiglu_impl) saves only
    its input, the fc1 output (gate and up, 4 f bytes), and recomputes the product from it: with nothing recomputed a
    layer keeps 12 h + 4 kv + 6 f, not the unfused 8 f.
  * Megatron-Core's vocab-parallel cross entropy (fused or not, tensor_parallel/cross_entropy.py) makes one fp32
    copy of the bf16 logits and computes max, exp, softmax and the gradient in place on it, the gradient leaving as
    bf16: at most 2 + 4 = 6 bytes per token per vocabulary entry are alive at once, not 10.
  Nothing else differs. Under FP8 (fp8_params) NeMo stores the fp32 master instead of its remainder (sharded 12)
  and the weights are Transformer Engine FP8 tensors (1 byte and any cached transpose); the variant describes the
  BF16 rows, and the FP8 rows' static bytes to about 2/d a parameter.
Every preset also lists the three kernels as compute.attention_implementations (fa2, fa3, cudnn: the same figures),
for a scenario's training.attention to choose one.
Run from the repository root: python3 tools/stack_presets.py
"""
import json
import pathlib

ROOT = pathlib.Path(__file__).resolve().parent.parent
PROFILES = ROOT / "calibrate" / "profiles"
PEAK = 989.0  # H100 SXM dense BF16, the efficiencies' reference
SEQ = [512.0, 1024.0, 2048.0, 4096.0, 8192.0, 16384.0]
# FlashAttention-3 paper (arXiv 2407.08608v2) Fig. 5, causal forward, head dim 128, TFLOP/s.
CAUSAL_FORWARD = {"cudnn": [315, 410, 484, 518, 529, 539], "fa2": [191, 260, 298, 319, 333, 335],
                  "fa3": [292, 423, 521, 579, 602, 616]}
# Fig. 5 / Fig. 6, non-causal forward and backward at 16K, head dim 128, TFLOP/s.
NONCAUSAL_16K = {"cudnn": (595, 516), "fa2": (370, 322), "fa3": (648, 561)}
KERNEL_NAMES = {"cudnn": "cuDNN fused attention", "fa2": "FlashAttention-2", "fa3": "FlashAttention-3 (July 2024 beta)"}
BF16_GEMM_8192 = 797.51  # SOURCES.md G5
FP8_GEMM_8192 = {"cublaslt": 1608.6, "scaled_mm": 1174.95}  # framework-benchmarks.md, "FP8 GEMM rate"

FP32_GRADIENT_BYTES = 4.0
BF16_PARAMETER_BYTES, ADAM_STATE_BYTES = 2.0, 12.0  # fp32 master copy and two moments


BF16_GRADIENT_BYTES = 2.0
# Apex DistributedFusedAdam with store_param_remainders: an int16 remainder of the fp32 master and two fp32 moments.
REMAINDER_ADAM_STATE_BYTES = 10.0


def static_bytes(gradient, optimizer=ADAM_STATE_BYTES):
    """memory.static_bytes_per_param by ZeRO stage 0..3 (lcsim's stage 1 is Megatron's distributed optimizer):
    stage 1 shards the optimizer state, stage 2 the gradients too, stage 3 everything."""
    p, g, o = BF16_PARAMETER_BYTES, gradient, optimizer
    return {"replicated": [p + g + o, p + g, p, 0.0], "sharded": [0.0, o, g + o, p + g + o]}

PRESETS = {
    "megatron": ("cudnn", "cublaslt", "Megatron-LM / NeMo with Transformer Engine: cuDNN fused attention"),
    "pytorch-fsdp": ("fa2", "scaled_mm", "PyTorch-native (FSDP2 + SDPA, e.g. torchtitan): FlashAttention-2 kernels, "
                     "per-op selective checkpointing"),
    "deepspeed": ("fa2", None, "DeepSpeed ZeRO with Hugging Face models: flash_attn (FlashAttention-2) kernels"),
    "megatron-apex-adam": ("cudnn", "cublaslt", "NeMo 1.0 launcher (Megatron-Core, Transformer Engine) with Apex "
                           "DistributedFusedAdam: bf16 gradient buffer, fp32 master kept as int16 remainders, fused "
                           "SwiGLU and Megatron's in-place vocab-parallel cross entropy"),
}

# A variant: the stack's preset where a framework's configuration is known to differ in memory (its own file).
VARIANT_OF = {"megatron-apex-adam": "megatron"}


def efficiency(kernel):
    return {"seq_tokens": SEQ, "efficiency": [round(t / PEAK, 4) for t in CAUSAL_FORWARD[kernel]], "fit_mape": None}


def backward_ratio(kernel):
    forward, backward = NONCAUSAL_16K[kernel]
    return round(2.5 * forward / backward, 4)


def implementations():
    """Every kernel of the figures above, for training.attention to choose (compute.attention_implementations)."""
    return {kernel: {"efficiency": efficiency(kernel), "backward_ratio": backward_ratio(kernel),
                     "source": f"{KERNEL_NAMES[kernel]}: FlashAttention-3 paper (arXiv 2407.08608v2) Fig. 5 causal "
                               "forward and Figs. 5-6 non-causal forward/backward at 16K, head dim 128, H100 SXM5, "
                               "BF16 (docs/published-measurements/SOURCES.md, 2a)"}
            for kernel in sorted(CAUSAL_FORWARD)}


def preset(stack, kernel, fp8, what):
    profile = json.loads((PROFILES / "h100-sxm-default.json").read_text())
    compute = profile["compute"]
    compute["attention_efficiency"] = efficiency(kernel)
    compute["attention_backward_ratio"] = backward_ratio(kernel)
    compute["attention_implementations"] = implementations()
    compute.pop("attention_blocks", None)  # the default's tile model describes lcsim's own kernel
    if fp8:
        compute["fp8_gemm_speedup"] = round(FP8_GEMM_8192[fp8] / BF16_GEMM_8192, 4)
    memory = profile["memory"]
    if stack == "megatron":
        memory["static_bytes_per_param"] = static_bytes(FP32_GRADIENT_BYTES)
    if stack in ("megatron", "pytorch-fsdp"):
        memory["gradient_reduce_bytes_per_param"] = FP32_GRADIENT_BYTES
    if stack == "megatron-apex-adam":
        memory["static_bytes_per_param"] = static_bytes(BF16_GRADIENT_BYTES, REMAINDER_ADAM_STATE_BYTES)
        memory["gradient_reduce_bytes_per_param"] = BF16_GRADIENT_BYTES
        memory["activation_bytes_per_token_per_layer"]["none"]["per_ffn"] = 6.0  # fused SwiGLU keeps its input only
        memory["logits_bytes_per_token_per_vocab"] = 6.0  # bf16 logits + one fp32 copy worked on in place
    if stack == "pytorch-fsdp":
        profile["memory"]["activation_bytes_per_token_per_layer"]["selective"] = {
            "per_hidden": 8.0, "per_kv_hidden": 2.0, "per_ffn": 2.0}
        compute["selective_recompute_gemm_share"] = 0.37
    provenance = profile["provenance"]
    provenance["stack"] = VARIANT_OF.get(stack, stack)  # a variant keeps its stack's name (profile_json.cpp checks it)
    provenance["notes"] = (
        f"Stack preset: {what}. The default H100-SXM profile (its notes below) with the stack's attention kernel, "
        f"FP8 path and main-gradient precision"
        + (" (and its optimizer, SwiGLU and loss memory) from the sources it names" if stack in VARIANT_OF
           else " from published figures")
        + " (tools/stack_presets.py names each). "
        f"Uncalibrated. "
        + provenance["notes"])
    return profile


for stack, (kernel, fp8, what) in PRESETS.items():
    path = PROFILES / f"h100-sxm-{stack}.json"
    path.write_text(json.dumps(preset(stack, kernel, fp8, what), indent=1) + "\n")
    print(path.relative_to(ROOT))
