#!/usr/bin/env python3
"""Writes the framework-benchmark family of the validation catalogue from the published tables in
docs/published-measurements/framework-benchmarks.md: one scenario per table row under scenarios/framework/, the
fixed-length traces they read, and the catalogue's "family": "framework" entries (scenarios/validation/catalogue.json,
replacing the family's previous entries and keeping every other entry as it is).

Every row of each chosen table is encoded; a row lcsim cannot express is an entry with its reason. The published
figure is tokens/s per GPU, read as printed, or converted from a table's TFLOP/s per GPU with that table's own FLOP
count (nemo_tokens_per_s). Run from the repository root: python3 tools/framework_family.py
"""
import json
import pathlib

ROOT = pathlib.Path(__file__).resolve().parent.parent
OUT = ROOT / "scenarios" / "framework"
CATALOGUE = ROOT / "scenarios" / "validation" / "catalogue.json"
TRACE_LINES = 2048

LLAMA2_70B = {"name": "LLaMA2-70B", "hidden": 8192, "layers": 80, "heads": 64, "kv_heads": 8, "ffn": 28672,
              "vocab": 32000}
LLAMA31_405B = {"name": "LLaMA3.1-405B", "hidden": 16384, "layers": 126, "heads": 128, "kv_heads": 8, "ffn": 53248,
                "vocab": 128256}
SHAPES = {"LLaMA2-7B": (4096, 32, 32, 32, 11008, 32000)}  # hidden, layers, heads, kv heads, ffn, vocab


def nemo_tokens_per_s(model, seq, tflops):
    """NeMo's Llama FLOP count as it stood when its long-sequence table was published (Oct 2024: attention counted
    without the causal discount, which NeMo added in Aug 2025): per token, fwd + bwd,
    L h^2 (12 + 12 g/a + 18 f/h + 12 s/h + 6 V / (L h))."""
    h, layers, heads, kv, f, vocab = SHAPES[model]
    per_token = layers * h * h * (12 + 12 * kv / heads + 18 * f / h + 12 * seq / h + 6 * vocab / (layers * h))
    return tflops * 1e12 / per_token


TORCHTITAN = {"paper": "torchtitan benchmarks (2024-12)", "framework": "pytorch-fsdp",
              "section": "pytorch/torchtitan benchmarks/llama3_h100_202412_torchtitan.md"}
ASYNC_TP = {"paper": "torchtitan async TP benchmarks (2025-06)", "framework": "pytorch-fsdp",
            "section": "pytorch/torchtitan benchmarks/asyncTP_llama3_h100_2025-06_torchtitan.md"}
TRAINY = {"paper": "Trainy torchtitan on H200 (2025-06)", "framework": "pytorch-fsdp",
          "section": "pytorch/torchtitan benchmarks/llama3-8b_h200_202506_trainy-whitefiber.md"}
NEMO_SUMMARY = {"paper": "NeMo 24.07 performance summary", "framework": "megatron",
                "section": "NVIDIA/NeMo docs/source/performance/performance_summary.md (NeMo 24.07)"}
NEMO_LONG = {"paper": "NeMo long-sequence performance", "framework": "megatron",
             "section": "NVIDIA/NeMo docs/source/performance/performance_long_sequence.md"}
DGXC = {"paper": "DGX Cloud benchmarking recipes v25.02", "framework": "megatron",
        "section": "NVIDIA/dgxc-benchmarking llama3.1/README_8b.md, README_70b.md, README_405b.md (release v25.02, "
                   "NeMo 24.12 container)"}

# Grand Teton: H100 SXM with 96 GB HBM2e at 2.4 TB/s, 400 Gb/s RDMA per GPU, at a 500 W limit, whose peak the
# benchmark notes put "between SXM and NVL" (989 and 835 TFLOP/s dense BF16): the middle of that range, 912.
GRAND_TETON = {"gpu": "H100-SXM", "gpu_memory_GiB": 96, "hbm_TBps": 2.4, "peak_tflops": 912, "ib_GBps": 50}
DGX_H100 = {"gpu": "H100-SXM", "ib_GBps": 50}


def row(source, where, rid, claim, published, precision, **setting):
    """One table row; setting holds its layout, or not_expressible with the reason."""
    return {"source": source, "where": where, "id": rid, "claim": claim, "published": published,
            "precision": precision, "setting": setting}


def titan(where, rid, claim, tps, precision, model, gpus, dp, seq, lbs, recompute, tp=1, pp=1, cp=1, source=None,
          fits=None, elementwise="fused", tp_overlap="none"):
    """elementwise: "eager" for the rows run without torch.compile (the tables' "FSDP" rows), else fused;
    tp_overlap: "async" for the rows run with async TP (collective matmuls)."""
    return row(source or TORCHTITAN, where, rid, claim, tps, precision, stack="pytorch-fsdp", cluster=GRAND_TETON,
               model=model, gpus=gpus, dp=dp, tp=tp, pp=pp, cp=cp, seq=seq, per_micro_batch=lbs,
               sequences=dp * lbs, zero=3, recompute=recompute, fits=fits, elementwise=elementwise,
               tp_overlap=tp_overlap)


def nemo(source, where, rid, claim, tps, model, gpus, gbs, seq, tp, pp, cp, recompute="selective", finetuning=None,
         fits=None, vp=1, precision="fp8", tp_overlap="none", preset="megatron"):
    """vp: the table's VP column, Megatron's virtual pipeline size (interleaved 1F1B); tp_overlap: "async" for the
    rows whose recipe turns on Transformer Engine's TP communication overlap (userbuffers); preset: the stack preset's
    file (h100-sxm-PRESET.json), a variant of the megatron one where the run's configuration is known to differ."""
    dp = gpus // (tp * pp * cp)
    return row(source, where, rid, claim, tps, precision, stack="megatron", cluster=DGX_H100, model=model, gpus=gpus,
               dp=dp, tp=tp, pp=pp, cp=cp, seq=seq, per_micro_batch=1, sequences=gbs, zero=1, recompute=recompute,
               finetuning=finetuning, fits=fits, vp=vp, tp_overlap=tp_overlap, preset=preset)


LORA = {"method": "lora", "rank": 32, "alpha": 32}

# DGX Cloud benchmarking recipes v25.02 (NeMo 24.12 on DGX-H100): Llama 3.1 pretraining at 8K with no activation
# recompute, each layout run in BF16 and in FP8 (delayed scaling) at every GPU count. Per size: lcsim model, TP, CP,
# and per GPU count: GPUs, GBS, layers, PP, VP, then tokens/s over all GPUs in BF16 and in FP8, as printed. Their
# stack preset is megatron-apex-adam: the recipes' yaml runs NeMo 1.0's distributed_fused_adam (Apex) with bf16
# gradient sync, fused SwiGLU and fused cross entropy (tools/stack_presets.py says what each changes).
DGXC_LLAMA31 = {
    "8B": ("LLaMA3.1-8B", 1, 2, [(g, 16 * g, 32, 1, 1, b, f) for g, b, f in [
        (8, 82028, 111054), (16, 161443, 221358), (32, 322638, 437088), (64, 645277, 870639),
        (128, 1275155, 1725163)]]),
    "70B": ("LLaMA3.1-70B", 4, 2, [(g, 2 * g, 80, 4, 5, b, f) for g, b, f in [
        (64, 71756, 100275), (128, 142663, 199292), (256, 284881, 390167), (512, 566797, 779393),
        (1024, 1129246, 1549142), (2048, 2260623, 3053178)]]),
    # Below 576 GPUs the recipe runs proxies: the 405B's layers cut to 7, 21 or 42, PP 1 or 3.
    "405B": (None, 8, 2, [(32, 126, 7, 1, 1, 114637, 179511), (96, 126, 21, 3, 7, 116342, 183337),
                          (192, 252, 42, 3, 7, 119328, 191146), (576, 252, 126, 9, 7, 117964, 187671),
                          (1152, 504, 126, 9, 7, 234589, 371961), (2304, 1008, 126, 9, 7, 466527, 737280)]),
}


def dgxc_405b(layers):
    """The recipe's 405B as it ran: 16 query groups (its config and its FLOP count), the GPT-2 tokenizer of its
    synthetic-data runs (50,257 entries), and the table's layer count."""
    return dict(LLAMA31_405B, name=f"LLaMA3.1-405B-dgxc-{layers}L", kv_heads=16, vocab=50257, layers=layers)


def dgxc_pairs():
    """The BF16 and FP8 rows of each DGXC table column, and the trend that compares each pair."""
    rows, trends = [], []
    for size, (model, tp, cp, columns) in DGXC_LLAMA31.items():
        for gpus, gbs, layers, pp, vp, *totals in columns:
            layout = f"TP {tp} PP {pp} CP {cp}" + (f" VP {vp}" if vp > 1 else "")
            proxy = f" ({layers}-layer proxy)" if size == "405B" and layers != 126 else ""
            ids = []
            for precision, total in zip(("bf16", "fp8"), totals):
                rid = f"dgxc-2502-llama31-{size.lower()}-{precision}-{gpus}gpu"
                claim = (f"Llama 3.1 {size}{proxy} pretraining, {precision.upper()}, {gpus} GPUs, GBS {gbs}, 8K, "
                         f"{layout}: {total:,} tokens/s = {total / gpus:,.1f} tokens/s/GPU")
                rows.append(nemo(DGXC, f"Llama 3.1 {size} {precision.upper()} table, {gpus}x H100", rid, claim,
                                 round(total / gpus, 1), model or dgxc_405b(layers), gpus, gbs, 8192, tp, pp, cp,
                                 recompute="none", vp=vp, precision=precision, preset="megatron-apex-adam",
                                 fits="a row of NVIDIA's table, run on 80 GB H100s",
                                 # The 70B and 405B recipes set tp_comm_overlap (configure.sh and the yaml).
                                 tp_overlap="async" if tp > 1 else "none"))
                ids.append(rid)
            trends.append((DGXC, f"Llama 3.1 {size} BF16 and FP8 tables, {gpus}x H100",
                           f"dgxc-2502-llama31-{size.lower()}-{gpus}gpu-fp8-trend",
                           f"Llama 3.1 {size}{proxy}, {gpus} GPUs, {layout}: FP8 raises tokens/s/GPU over BF16 "
                           "(same layout and container)", ids, "increasing"))
    return rows, trends


DGXC_ROWS, DGXC_TRENDS = dgxc_pairs()

ROWS = [
    # torchtitan, Table 1: Llama 3.1 8B, 8 GPUs, FSDP, local batch 2 (seq 8192), selective AC.
    titan("Table 1, FSDP", "torchtitan-t1-fsdp-8b-8gpu", "Llama 3.1 8B, FSDP 8, eager, BF16: 5,762 TPS/GPU (82.4 GiB)",
          5762, "bf16", "LLaMA3.1-8B", 8, 8, 8192, 2, "selective", fits="ran at 82.4 GiB of 96", elementwise="eager"),
    titan("Table 1, FSDP + torch.compile", "torchtitan-t1-fsdp-compile-8b-8gpu",
          "Llama 3.1 8B, FSDP 8, torch.compile, BF16: 6,667 TPS/GPU", 6667, "bf16", "LLaMA3.1-8B", 8, 8, 8192, 2,
          "selective"),
    titan("Table 1, FSDP + torch.compile + Float8", "torchtitan-t1-fsdp-compile-float8-8b-8gpu",
          "Llama 3.1 8B, FSDP 8, torch.compile, Float8: 8,532 TPS/GPU", 8532, "fp8", "LLaMA3.1-8B", 8, 8, 8192, 2,
          "selective"),
    # Table 2: FSDP + CP, torch.compile + Float8, local batch 1, full AC: the context grows with the CP degree.
    *[titan(f"Table 2, FSDP {8 // cp}, CP {cp}", f"torchtitan-t2-8b-cp{cp}-{seq // 1024}k",
            f"Llama 3.1 8B, 8 GPUs, FSDP {8 // cp} x CP {cp}, {seq // 1024}K: {tps:,} TPS/GPU ({mem} GiB)", tps, "fp8",
            "LLaMA3.1-8B", 8, 8 // cp, seq, 1, "full", cp=cp, fits=f"ran at {mem} GiB of 96")
      for cp, seq, tps, mem in [(1, 32768, 3890, 83.9), (2, 65536, 2540, 84.2), (4, 131072, 1071, 84.0),
                                (8, 262144, 548, 84.5)]],
    # Table 3: 128 GPUs.
    titan("Table 3, FSDP", "torchtitan-t3-fsdp-8b-128gpu", "Llama 3.1 8B, FSDP 128, eager, BF16: 5,605 TPS/GPU",
          5605, "bf16", "LLaMA3.1-8B", 128, 128, 8192, 2, "selective", elementwise="eager"),
    titan("Table 3, FSDP + torch.compile", "torchtitan-t3-fsdp-compile-8b-128gpu",
          "Llama 3.1 8B, FSDP 128, torch.compile, BF16: 6,514 TPS/GPU", 6514, "bf16", "LLaMA3.1-8B", 128, 128, 8192, 2,
          "selective"),
    titan("Table 3, FSDP + torch.compile + Float8", "torchtitan-t3-fsdp-compile-float8-8b-128gpu",
          "Llama 3.1 8B, FSDP 128, torch.compile, Float8: 8,380 TPS/GPU", 8380, "fp8", "LLaMA3.1-8B", 128, 128, 8192,
          2, "selective"),
    # Table 4: 70B, 256 GPUs, FSDP 32 x TP 8, local batch 16, full AC, compile + Float8.
    titan("Table 4, 2D", "torchtitan-t4-70b-fsdp32-tp8", "Llama 3.1 70B, 256 GPUs, FSDP 32 x TP 8, Float8: 829 TPS/GPU",
          829, "fp8", "LLaMA3.1-70B", 256, 32, 8192, 16, "full", tp=8, fits="ran at 71.9 GiB of 96"),
    titan("Table 4, 2D + AsyncTP", "torchtitan-t4-70b-fsdp32-tp8-async-tp", "Llama 3.1 70B, 256 GPUs, FSDP 32 x "
          "TP 8, Float8, AsyncTP: 876 TPS/GPU", 876, "fp8", "LLaMA3.1-70B", 256, 32, 8192, 16, "full", tp=8,
          fits="ran at 67.6 GiB of 96", tp_overlap="async"),
    # Table 5: 405B, 512 GPUs, FSDP 8 x TP 8 x PP 8.
    row(TORCHTITAN, "Tables 5 and 6", "torchtitan-t5-t6-405b", "Llama 3.1 405B, 512 GPUs, TP 8 x PP 8: 1F1B 100, "
        "interleaved 128 (Table 5); CP 1-8 at 32K-256K: 76, 47, 31, 16 (Table 6) TPS/GPU", "6 values", "fp8",
        not_expressible="126 layers over 8 pipeline stages: lcsim's stages hold equal layer counts (torchtitan "
        "splits them unevenly), and equal model chunks for its interleaved 1F1B (parallel.virtual_pp)"),
    # torchtitan async TP (June 2025): the vanilla-TP column; async TP and rowwise Float8 listed.
    titan("70B table, None (bfloat16), vanilla TP", "torchtitan-async-70b-bf16-vanilla-tp",
          "Llama 3 70B, 256 GPUs, FSDP 32 x TP 8, BF16, vanilla TP: 597.3 TPS/GPU", 597.3, "bf16", "LLaMA3.1-70B", 256,
          32, 8192, 16, "full", tp=8, source=ASYNC_TP),
    titan("70B table, float8 tensorwise, vanilla TP", "torchtitan-async-70b-float8-vanilla-tp",
          "Llama 3 70B, 256 GPUs, FSDP 32 x TP 8, Float8 tensorwise, vanilla TP: 809.8 TPS/GPU", 809.8, "fp8",
          "LLaMA3.1-70B", 256, 32, 8192, 16, "full", tp=8, source=ASYNC_TP),
    titan("8B table, None (bfloat16), vanilla TP", "torchtitan-async-8b-bf16-vanilla-tp",
          "Llama 3 8B, 64 GPUs, FSDP 8 x TP 8, BF16, vanilla TP: 4,378 TPS/GPU", 4378, "bf16", "LLaMA3.1-8B", 64, 8,
          8192, 12, "selective", tp=8, source=ASYNC_TP),
    titan("8B table, float8 tensorwise, vanilla TP", "torchtitan-async-8b-float8-vanilla-tp",
          "Llama 3 8B, 64 GPUs, FSDP 8 x TP 8, Float8 tensorwise, vanilla TP: 5,078.1 TPS/GPU", 5078.1, "fp8",
          "LLaMA3.1-8B", 64, 8, 8192, 12, "selective", tp=8, source=ASYNC_TP),
    *[titan(f"{size} table, {what}, async TP", f"torchtitan-async-{key}-async-tp", f"Llama 3 {size}, {gpus} GPUs, "
            f"FSDP {dp} x TP 8, {what}, async TP: {tps:,} TPS/GPU", tps, precision, model, gpus, dp, 8192, lbs,
            recompute, tp=8, source=ASYNC_TP, tp_overlap="async")
      for size, key, what, precision, tps, model, gpus, dp, lbs, recompute in [
          ("70B", "70b-bf16", "None (bfloat16)", "bf16", 652.4, "LLaMA3.1-70B", 256, 32, 16, "full"),
          ("70B", "70b-float8", "float8 tensorwise", "fp8", 942.4, "LLaMA3.1-70B", 256, 32, 16, "full"),
          ("8B", "8b-bf16", "None (bfloat16)", "bf16", 4809.4, "LLaMA3.1-8B", 64, 8, 12, "selective"),
          ("8B", "8b-float8", "float8 tensorwise", "fp8", 5570.1, "LLaMA3.1-8B", 64, 8, 12, "selective")]],
    row(ASYNC_TP, "both tables, float8 rowwise rows", "torchtitan-async-float8-rowwise", "Float8 rowwise, vanilla / "
        "async TP: 599.6 / 624.8 (70B), 3,708.5 / 3,914.9 (8B)", "4 values", "fp8", not_expressible="rowwise-scaled "
        "Float8 is a third GEMM path (per-row scales; the table's note calls its TP baseline slow); a profile prices "
        "one FP8 path"),
    row(TRAINY, "Results table", "trainy-h200-8b", "Llama 3.1 8B on 32 / 64 H200, FSDP, compile + Float8: "
        "10,938 / 10,753 TPS/GPU", "10938, 10753", "fp8",
        not_expressible="no PyTorch-native stack preset for the H200 yet (the presets are H100-SXM profiles)"),
    # NeMo 24.07 performance summary, DGX-H100, FP8: pretraining rows with VP 1, finetuning rows.
    nemo(NEMO_SUMMARY, "Pretraining, LLAMA2-7B", "nemo-2407-pretrain-llama2-7b", "LLAMA2-7B pretraining, 8 GPUs, "
         "GBS 128, 4K, TP 1 PP 1: 16,934 tokens/s/GPU", 16934, "LLaMA2-7B", 8, 128, 4096, 1, 1, 1),
    nemo(NEMO_SUMMARY, "Pretraining, LLAMA3-8B", "nemo-2407-pretrain-llama3-8b", "LLAMA3-8B pretraining, 8 GPUs, "
         "GBS 128, 8K, TP 1 PP 1 CP 2: 12,273 tokens/s/GPU", 12273, "LLaMA3.1-8B", 8, 128, 8192, 1, 1, 2),
    nemo(NEMO_SUMMARY, "Finetuning, LLAMA2-7B SFT", "nemo-2407-sft-llama2-7b", "LLAMA2-7B SFT, 8 GPUs, GBS 32, "
         "packed 4K, TP 1 PP 1: 16,891 tokens/s/GPU", 16891, "LLaMA2-7B", 8, 32, 4096, 1, 1, 1),
    nemo(NEMO_SUMMARY, "Finetuning, LLAMA2-13B SFT", "nemo-2407-sft-llama2-13b", "LLAMA2-13B SFT, 8 GPUs, GBS 32, "
         "packed 4K, TP 1 PP 4: 10,176 tokens/s/GPU", 10176, "LLaMA2-13B", 8, 32, 4096, 1, 4, 1),
    nemo(NEMO_SUMMARY, "Finetuning, LLAMA2-70B SFT", "nemo-2407-sft-llama2-70b", "LLAMA2-70B SFT, 16 GPUs, GBS 32, "
         "packed 4K, TP 4 PP 4: 1,816 tokens/s/GPU", 1816, LLAMA2_70B, 16, 32, 4096, 4, 4, 1,
         fits="a 70B full fine-tune on 16 H100s of 80 GB"),
    nemo(NEMO_SUMMARY, "Finetuning, LLAMA2-7B LoRA", "nemo-2407-lora-llama2-7b", "LLAMA2-7B LoRA, 8 GPUs, GBS 32, "
         "packed 4K, TP 1 PP 1: 24,824 tokens/s/GPU", 24824, "LLaMA2-7B", 8, 32, 4096, 1, 1, 1, finetuning=LORA),
    nemo(NEMO_SUMMARY, "Finetuning, LLAMA2-13B LoRA", "nemo-2407-lora-llama2-13b", "LLAMA2-13B LoRA, 8 GPUs, "
         "GBS 32, packed 4K, TP 1 PP 1: 14,629 tokens/s/GPU", 14629, "LLaMA2-13B", 8, 32, 4096, 1, 1, 1,
         finetuning=LORA),
    nemo(NEMO_SUMMARY, "Finetuning, LLAMA2-70B LoRA", "nemo-2407-lora-llama2-70b", "LLAMA2-70B LoRA, 8 GPUs, "
         "GBS 32, packed 4K, TP 2 PP 4: 2,621 tokens/s/GPU", 2621, LLAMA2_70B, 8, 32, 4096, 2, 4, 1,
         finetuning=LORA),
    row(NEMO_SUMMARY, "Pretraining, GPT3 and Nemotron rows", "nemo-2407-gpt3-nemotron", "GPT3-5B/20B/175B and "
        "Nemotron-8B/22B/340B pretraining", "7 rows", "fp8", not_expressible="GPT-3 and Nemotron use non-gated MLPs "
        "(GeLU, squared ReLU); lcsim's model is a gated (SwiGLU) MLP"),
    # The rows with VP > 1 run interleaved 1F1B (parallel.virtual_pp): one or four layers a model chunk. The 70B
    # rows run TP communication overlap: NeMo-Framework-Launcher's llama2_70b.yaml and llama3_70b.yaml at tag 24.07
    # set ub_tp_comm_overlap (the SFT and LoRA rows' configurations are not in that tag).
    nemo(NEMO_SUMMARY, "Pretraining, LLAMA2-13B", "nemo-2407-pretrain-llama2-13b", "LLAMA2-13B pretraining, 16 GPUs, "
         "GBS 128, 4K, TP 1 PP 4 CP 1 VP 10: 8,715 tokens/s/GPU", 8715, "LLaMA2-13B", 16, 128, 4096, 1, 4, 1, vp=10),
    nemo(NEMO_SUMMARY, "Pretraining, LLAMA2-70B", "nemo-2407-pretrain-llama2-70b", "LLAMA2-70B pretraining, 64 GPUs, "
         "GBS 128, 4K, TP 4 PP 4 CP 1 VP 20: 1,728 tokens/s/GPU", 1728, LLAMA2_70B, 64, 128, 4096, 4, 4, 1, vp=20,
         tp_overlap="async"),
    nemo(NEMO_SUMMARY, "Pretraining, LLAMA3-70B", "nemo-2407-pretrain-llama3-70b", "LLAMA3-70B pretraining, 64 GPUs, "
         "GBS 128, 8K, TP 4 PP 4 CP 2 VP 5: 1,524 tokens/s/GPU", 1524, "LLaMA3.1-70B", 64, 128, 8192, 4, 4, 2, vp=5,
         tp_overlap="async"),
    # NeMo long-sequence table, LLAMA2-7B FP8 on DGX-H100, the "with CP" configurations: tokens per global batch fixed
    # at 4M, GPUs grow with the context.
    *[nemo(NEMO_LONG, f"LLAMA2-7B (FP8) - H100, {k}K with CP", f"nemo-long-llama2-7b-{k}k",
           f"LLAMA2-7B, {k}K, {k} GPUs, TP {tp} PP {pp} DP {dp} CP {cp}: {tf} TFLOP/s/GPU = "
           f"{nemo_tokens_per_s('LLaMA2-7B', k * 1024, tf):,.0f} tokens/s/GPU by the table's FLOP count",
           round(nemo_tokens_per_s("LLaMA2-7B", k * 1024, tf), 1), "LLaMA2-7B", k, 4096 // k, k * 1024, tp, pp, cp)
      for k, tp, pp, dp, cp, tf in [(4, 1, 1, 4, 1, 768), (8, 1, 2, 4, 1, 730), (16, 2, 1, 8, 1, 660),
                                    (32, 2, 1, 8, 2, 610), (64, 4, 1, 8, 2, 574), (128, 4, 1, 8, 4, 555),
                                    (256, 4, 1, 8, 8, 549), (512, 8, 1, 4, 16, 549), (1024, 8, 1, 4, 32, 536)]],
    row(NEMO_LONG, "LLAMA2-7B (FP8) - H100, without CP", "nemo-long-llama2-7b-without-cp", "the best layout without "
        "CP, 4K to 1024K", "9 values", "fp8", not_expressible="the table does not publish the layouts of its runs "
        "without CP"),
    row(NEMO_LONG, "LLAMA3-8B (FP8) - B200", "nemo-long-llama3-8b-b200", "LLAMA3-8B on B200, 8K to 1024K",
        "16 values", "fp8", not_expressible="lcsim has no B200 GPU kind or profile"),
    *DGXC_ROWS,
]

TRENDS = [
    (TORCHTITAN, "Table 2", "torchtitan-t2-8b-context-trend", "Llama 3.1 8B on 8 GPUs: TPS/GPU falls as the context "
     "grows 32K to 256K with CP 1 to 8", [f"torchtitan-t2-8b-cp{cp}-{s}k" for cp, s in
                                          [(1, 32), (2, 64), (4, 128), (8, 256)]]),
    *[(TORCHTITAN, f"Tables 1 and 3, {what}", f"torchtitan-t1-t3-8b-gpus-trend-{key}", f"Llama 3.1 8B, {what}: "
       "TPS/GPU falls from 8 to 128 GPUs", [f"torchtitan-t1-{key}-8b-8gpu", f"torchtitan-t3-{key}-8b-128gpu"])
      for key, what in [("fsdp", "FSDP"), ("fsdp-compile", "FSDP + torch.compile"),
                        ("fsdp-compile-float8", "FSDP + torch.compile + Float8")]],
    (NEMO_LONG, "LLAMA2-7B (FP8) - H100, with CP", "nemo-long-llama2-7b-context-trend", "LLAMA2-7B: tokens/s/GPU "
     "falls as the context grows 4K to 1024K (GPUs grow with it)",
     [f"nemo-long-llama2-7b-{k}k" for k in [4, 8, 16, 32, 64, 128, 256, 512, 1024]]),
    (TORCHTITAN, "Table 4, 2D and 2D + AsyncTP", "torchtitan-t4-70b-async-tp-trend", "Llama 3.1 70B, 256 GPUs: "
     "async TP raises TPS/GPU over vanilla TP", ["torchtitan-t4-70b-fsdp32-tp8", "torchtitan-t4-70b-fsdp32-tp8-async-tp"],
     "increasing"),
    *[(ASYNC_TP, f"{size} table, {what}", f"torchtitan-async-{key}-tp-trend", f"Llama 3 {size}, {what}: async TP "
       "raises TPS/GPU over vanilla TP", [f"torchtitan-async-{key}-vanilla-tp", f"torchtitan-async-{key}-async-tp"],
       "increasing")
      for size, key, what in [("70B", "70b-bf16", "None (bfloat16)"), ("70B", "70b-float8", "float8 tensorwise"),
                              ("8B", "8b-bf16", "None (bfloat16)"), ("8B", "8b-float8", "float8 tensorwise")]],
    *DGXC_TRENDS,
]


def trace(seq, sequences):
    """A trace of TRACE_LINES sequences of one length, or of two global batches where a batch holds more than half of
    that (its own file, so that the shared traces stay as they are): every shipped scenario can run two iterations."""
    lines = max(2 * sequences, TRACE_LINES)
    name = f"fixed-{seq}.txt" if lines == TRACE_LINES else f"fixed-{seq}-x{lines}.txt"
    path = OUT / "traces" / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"{seq}\n" * lines)
    return f"traces/{name}"


def scenario(r):
    s = r["setting"]
    gpus = s["gpus"]
    per_node = min(8, gpus)
    model = s["model"]
    training = {"global_batch_sequences": s["sequences"], "iterations": 1, "zero_stage": s["zero"],
                "recompute": s["recompute"], "context_length_tokens": s["seq"] * s["per_micro_batch"],
                "precision": r["precision"]}
    if s.get("elementwise", "fused") != "fused":
        training["elementwise"] = s["elementwise"]
    if s.get("finetuning"):
        training["finetuning"] = s["finetuning"]
    where = f"{r['source']['paper']}, {r['where']}"
    doc = {
        "name": r["id"],
        "description": f"{where}: {r['claim']}. Generated by tools/framework_family.py from "
                       "docs/published-measurements/framework-benchmarks.md (every sequence the row's length; a "
                       "micro-batch holds the row's local batch of sequences, attention per sequence). Uncalibrated "
                       f"{s.get('preset', s['stack'])} stack preset.",
        "seed": 0,
        "model": model,
        "cluster": dict(s["cluster"], nodes=gpus // per_node, gpus_per_node=per_node),
        "profile": f"../../calibrate/profiles/h100-sxm-{s.get('preset', s['stack'])}.json",
        "dataset": {"trace": trace(s["seq"], s["sequences"]), "shuffle": False},
        "training": training,
        # Both stacks' CP is a load-balanced ring: torchtitan's context_parallel shards head-tail by default, and
        # Megatron-Core (NeMo) reorders each sequence into 2 cp chunks for its P2P ring: zigzag in lcsim's terms.
        "parallel": {"dp": s["dp"], "cp": s["cp"], "tp": s["tp"], "pp": s["pp"], "cp_attention": "zigzag",
                     **({"tp_overlap": s["tp_overlap"]} if s.get("tp_overlap", "none") != "none" else {})},
        "policies": [{"kind": "plain-4d", "label": "run"}],
    }
    if s.get("vp", 1) > 1:
        doc["parallel"]["virtual_pp"] = s["vp"]
    path = OUT / f"{r['id']}.json"
    path.write_text(json.dumps(doc, indent=2) + "\n")
    return f"../framework/{r['id']}.json"


def source_of(r):
    src = r["source"]
    return {"paper": src["paper"], "where": r["where"], "section": src["section"], "framework": src["framework"],
            "precision": r["precision"]}


def entries():
    out, files = [], {}
    for r in ROWS:
        entry = {"id": r["id"], "family": "framework", "source": source_of(r), "claim": r["claim"],
                 "quantity": "tokens_per_gpu_s"}
        if "not_expressible" in r["setting"]:
            entry["published"] = r["published"] if isinstance(r["published"], str) else str(r["published"])
            entry["not_expressible"] = r["setting"]["not_expressible"]
            out.append(entry)
            continue
        files[r["id"]] = scenario(r)
        entry.update({"mode": "plan", "scenario": files[r["id"]], "policy": "run", "published": r["published"]})
        out.append(entry)
    for src, where, rid, claim, ids, *direction in TRENDS:
        by_id = {r["id"]: r for r in ROWS}
        points = [{"scenario": files[i], "label": i, "published": by_id[i]["published"]} for i in ids]
        out.append({"id": rid, "family": "framework", "source": dict(source_of(by_id[ids[0]]), where=where),
                    "claim": claim, "quantity": "tokens_per_gpu_s", "mode": "plan", "policy": "run",
                    "combine": "series", "points": points, "published": direction[0] if direction else "decreasing"})
    for r in ROWS:
        fits = r["setting"].get("fits")
        if fits:
            out.append({"id": r["id"] + "-fits", "family": "framework", "source": source_of(r),
                        "claim": f"{r['claim']}: the layout ran ({fits}); it fits", "quantity": "oom",
                        "mode": "plan", "scenario": files[r["id"]], "policy": "run", "published": False})
    return out


def main():
    for old in OUT.glob("*.json"):
        old.unlink()
    family = entries()
    catalogue = json.loads(CATALOGUE.read_text())
    kept = [e for e in catalogue["entries"] if e.get("family") != "framework"]
    catalogue["entries"] = kept + family
    CATALOGUE.write_text(json.dumps(catalogue, indent=2, ensure_ascii=False) + "\n")
    print(f"{len(family)} framework entries, {len(list(OUT.glob('*.json')))} scenarios")


if __name__ == "__main__":
    main()
