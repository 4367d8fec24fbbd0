#!/usr/bin/env python3
"""PyTorch's scaled_dot_product_attention on the shapes `lcsim-gpu bench-attention` times, for comparison.

For each sequence length s, max(1, tokens // s) causal sequences of s tokens (BF16, the model's heads, KV heads and
head_dim), forward and backward, timed with CUDA events (median over --reps after --warmup), inputs rotated over two
sets. TFLOP/s use lcsim's convention: forward 2 s^2 q_hidden per sequence, backward 2.5x that. Two variants are
timed and the faster is reported: enable_gqa=True, and K/V repeated to every query head (plain MHA, which every SDPA
backend takes). PyTorch picks its backend (flash, cuDNN or memory-efficient) itself; the script prints which ones are
enabled.

    python3 calibrate/sdpa_bench.py --heads 28 --kv-heads 4 --head-dim 128 --seqlens 512,1024,4096 --tokens 32768
"""
import argparse
import statistics

import torch
import torch.nn.functional as F


def time_ms(fn, warmup, reps):
    for i in range(warmup):
        fn(i)
    torch.cuda.synchronize()
    times = []
    for i in range(reps):
        start = torch.cuda.Event(enable_timing=True)
        stop = torch.cuda.Event(enable_timing=True)
        start.record()
        fn(warmup + i)
        stop.record()
        stop.synchronize()
        times.append(start.elapsed_time(stop))
    return statistics.median(times)


def bench(s, n, heads, kv_heads, head_dim, gqa, warmup, reps):
    kv = kv_heads if gqa else heads
    sets = []
    for _ in range(2):
        q = torch.randn(n, heads, s, head_dim, device="cuda", dtype=torch.bfloat16, requires_grad=True)
        k = torch.randn(n, kv_heads, s, head_dim, device="cuda", dtype=torch.bfloat16)
        v = torch.randn(n, kv_heads, s, head_dim, device="cuda", dtype=torch.bfloat16)
        if not gqa:
            k = k.repeat_interleave(heads // kv_heads, dim=1)
            v = v.repeat_interleave(heads // kv_heads, dim=1)
        k.requires_grad_(True)
        v.requires_grad_(True)
        dout = torch.randn(n, heads, s, head_dim, device="cuda", dtype=torch.bfloat16)
        sets.append((q, k, v, dout))
    assert kv == sets[0][1].shape[1]

    def forward(i):
        q, k, v, _ = sets[i % 2]
        with torch.no_grad():
            F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=gqa)

    outputs = [F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=gqa) for q, k, v, _ in sets]

    def backward(i):
        q, k, v, dout = sets[i % 2]
        torch.autograd.grad(outputs[i % 2], (q, k, v), dout, retain_graph=True)

    return time_ms(forward, warmup, reps), time_ms(backward, warmup, reps)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--heads", type=int, required=True)
    parser.add_argument("--kv-heads", type=int, required=True)
    parser.add_argument("--head-dim", type=int, required=True)
    parser.add_argument("--seqlens", default="512,1024,2048,4096,8192,16384")
    parser.add_argument("--tokens", type=int, default=32768)
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--reps", type=int, default=20)
    args = parser.parse_args()
    print(f"torch {torch.__version__} on {torch.cuda.get_device_name(0)}; SDPA backends enabled: "
          f"flash {torch.backends.cuda.flash_sdp_enabled()}, cudnn {torch.backends.cuda.cudnn_sdp_enabled()}, "
          f"mem_efficient {torch.backends.cuda.mem_efficient_sdp_enabled()}")
    q_hidden = args.heads * args.head_dim
    print(f"#{'seq_len':>8}{'seqs':>6}{'fwd(us)':>11}{'TFLOP/s':>10}{'bwd(us)':>11}{'TFLOP/s':>10}  variant")
    for s in (int(x) for x in args.seqlens.split(",")):
        n = max(1, args.tokens // s)
        flops = n * 2.0 * s * s * q_hidden
        best = None
        for gqa in (True, False):
            fwd, bwd = bench(s, n, args.heads, args.kv_heads, args.head_dim, gqa, args.warmup, args.reps)
            if best is None or fwd + bwd < best[0] + best[1]:
                best = (fwd, bwd, "enable_gqa" if gqa else "K/V repeated")
        fwd, bwd, variant = best
        print(f"{s:>9}{n:>6}{fwd * 1e3:>11.1f}{flops / (fwd * 1e-3) / 1e12:>10.1f}"
              f"{bwd * 1e3:>11.1f}{2.5 * flops / (bwd * 1e-3) / 1e12:>10.1f}  {variant}")


if __name__ == "__main__":
    main()
