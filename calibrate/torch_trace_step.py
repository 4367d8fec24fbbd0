#!/usr/bin/env python3
"""A torch.profiler (Kineto) trace of real PyTorch training steps, for `lcsim-fit-trace` (docs/calibration.md).

Builds a decoder of a named model's shape in plain PyTorch (BF16 weights, RMSNorm, rotary, grouped-query attention
through scaled_dot_product_attention with K/V repeated to every head as Hugging Face's repeat_kv does, SwiGLU MLP,
LM head and cross-entropy), trains it with fused AdamW on one sequence per step, and records the steps whose
lengths are --seqlens with record_shapes=True, so that the trace carries the GEMM and attention input shapes that
lcsim-fit-trace fits. Writes OUT.trace.json.gz (Kineto's Chrome trace, gzip) and OUT.steps.json (each step's
length and its time by CUDA events, with the device and versions).

    python3 calibrate/torch_trace_step.py --model Qwen2.5-0.5B --out /tmp/torch-qwen2.5-0.5b
"""
import argparse
import gzip
import json
import os
import shutil
import time

import torch
import torch.nn.functional as F

# hidden, layers, heads, kv_heads, ffn, vocab (model/model.cpp)
MODELS = {
    "Qwen2.5-0.5B": (896, 24, 14, 2, 4864, 151936),
    "Qwen2.5-7B": (3584, 28, 28, 4, 18944, 152064),
    "LLaMA3.1-8B": (4096, 32, 32, 8, 14336, 128256),
}


class RMSNorm(torch.nn.Module):
    def __init__(self, hidden):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.ones(hidden))

    def forward(self, x):
        var = x.float().pow(2).mean(-1, keepdim=True)
        return (x.float() * torch.rsqrt(var + 1e-6)).to(x.dtype) * self.weight


def rotate(x, cos, sin):
    half = x.shape[-1] // 2
    x1, x2 = x[..., :half], x[..., half:]
    return x * cos + torch.cat((-x2, x1), dim=-1) * sin


class Layer(torch.nn.Module):
    def __init__(self, hidden, heads, kv_heads, ffn):
        super().__init__()
        self.heads, self.kv_heads, self.head_dim = heads, kv_heads, hidden // heads
        self.norm1, self.norm2 = RMSNorm(hidden), RMSNorm(hidden)
        self.qkv = torch.nn.Linear(hidden, (heads + 2 * kv_heads) * self.head_dim, bias=True)
        self.o = torch.nn.Linear(heads * self.head_dim, hidden, bias=False)
        self.gate_up = torch.nn.Linear(hidden, 2 * ffn, bias=False)
        self.down = torch.nn.Linear(ffn, hidden, bias=False)

    def forward(self, x, cos, sin):
        b, s, _ = x.shape
        d = self.head_dim
        q, k, v = self.qkv(self.norm1(x)).split([self.heads * d, self.kv_heads * d, self.kv_heads * d], dim=-1)
        q = rotate(q.view(b, s, self.heads, d).transpose(1, 2), cos, sin)
        k = rotate(k.view(b, s, self.kv_heads, d).transpose(1, 2), cos, sin)
        v = v.view(b, s, self.kv_heads, d).transpose(1, 2)
        group = self.heads // self.kv_heads
        k, v = k.repeat_interleave(group, dim=1), v.repeat_interleave(group, dim=1)
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.o(a.transpose(1, 2).reshape(b, s, self.heads * d))
        gate, up = self.gate_up(self.norm2(x)).chunk(2, dim=-1)
        return x + self.down(F.silu(gate) * up)


class Decoder(torch.nn.Module):
    def __init__(self, hidden, layers, heads, kv_heads, ffn, vocab):
        super().__init__()
        self.head_dim = hidden // heads
        self.embed = torch.nn.Embedding(vocab, hidden)
        self.layers = torch.nn.ModuleList(Layer(hidden, heads, kv_heads, ffn) for _ in range(layers))
        self.norm = RMSNorm(hidden)
        self.lm_head = torch.nn.Linear(hidden, vocab, bias=False)

    def forward(self, tokens):
        s = tokens.shape[1]
        inv = 1.0 / (1e6 ** (torch.arange(0, self.head_dim, 2, device=tokens.device).float() / self.head_dim))
        angles = torch.outer(torch.arange(s, device=tokens.device).float(), inv)
        angles = torch.cat((angles, angles), dim=-1)
        cos, sin = angles.cos().to(torch.bfloat16), angles.sin().to(torch.bfloat16)
        x = self.embed(tokens)
        for layer in self.layers:
            x = layer(x, cos, sin)
        return self.lm_head(self.norm(x))


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="Qwen2.5-0.5B", choices=sorted(MODELS))
    parser.add_argument("--layers", type=int, default=0, help="layers (default: the model's)")
    parser.add_argument("--seqlens", default="512,1024,2048,4096,8192,16384", help="one traced step per length")
    parser.add_argument("--warmup", type=int, default=2, help="untraced steps before the traced ones")
    parser.add_argument("--repeats", type=int, default=0,
                        help="before tracing, time each length this many times without the profiler (its median "
                             "is the step's untraced_seconds: what the job takes when nobody records it)")
    parser.add_argument("--out", required=True, help="output prefix")
    args = parser.parse_args()

    hidden, layers, heads, kv_heads, ffn, vocab = MODELS[args.model]
    layers = args.layers or layers
    seqlens = [int(s) for s in args.seqlens.split(",")]
    torch.manual_seed(0)
    model = Decoder(hidden, layers, heads, kv_heads, ffn, vocab).cuda().to(torch.bfloat16)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-5, fused=True)

    def step(s):
        tokens = torch.randint(0, vocab, (1, s + 1), device="cuda")
        logits = model(tokens[:, :-1])
        loss = F.cross_entropy(logits.view(-1, vocab).float(), tokens[:, 1:].reshape(-1))
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)

    for i in range(args.warmup):
        step(seqlens[i % len(seqlens)])
    torch.cuda.synchronize()

    untraced = {}
    for s in seqlens:
        times = []
        for _ in range(args.repeats):
            start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            step(s)
            stop.record()
            stop.synchronize()
            times.append(start.elapsed_time(stop) / 1e3)
        if times:
            untraced[s] = sorted(times)[len(times) // 2]
            print("untraced: %d tokens, median of %d: %.2f ms" % (s, len(times), untraced[s] * 1e3), flush=True)

    steps = []
    activities = [torch.profiler.ProfilerActivity.CPU, torch.profiler.ProfilerActivity.CUDA]
    with torch.profiler.profile(activities=activities, record_shapes=True) as prof:
        for s in seqlens:
            start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            with torch.profiler.record_function("ProfilerStep#%d" % len(steps)):
                start.record()
                step(s)
                stop.record()
            stop.synchronize()
            steps.append({"tokens": s, "sequences": 1, "seconds": start.elapsed_time(stop) / 1e3})
            if s in untraced:
                steps[-1]["untraced_seconds"] = untraced[s]
            print("step %d: 1 sequence of %d tokens, %.2f ms" % (len(steps) - 1, s, steps[-1]["seconds"] * 1e3),
                  flush=True)

    raw = args.out + ".trace.json"
    prof.export_chrome_trace(raw)
    with open(raw, "rb") as source, gzip.open(raw + ".gz", "wb", compresslevel=9) as target:
        shutil.copyfileobj(source, target)
    os.remove(raw)
    props = torch.cuda.get_device_properties(0)
    backends = {
        "flash": torch.backends.cuda.flash_sdp_enabled(),
        "cudnn": torch.backends.cuda.cudnn_sdp_enabled(),
        "efficient": torch.backends.cuda.mem_efficient_sdp_enabled(),
    }
    record = {
        "format": "lcsim-torch-steps/1",
        "model": args.model,
        "layers": layers,
        "device": "%s (%d MiB)" % (props.name, props.total_memory // (1 << 20)),
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "sdpa_backends_enabled": backends,
        "recorded": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "steps": steps,
    }
    with open(args.out + ".steps.json", "w") as f:
        json.dump(record, f, indent=2)
        f.write("\n")
    print("wrote %s.trace.json.gz and %s.steps.json" % (args.out, args.out))


if __name__ == "__main__":
    main()
