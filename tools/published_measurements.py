#!/usr/bin/env python3
"""Turn docs/published-measurements/points.json into an lcsim-measurements/1 file for `lcsim-gpu fit`.

The published H100 figures take the same road as a GPU run: this script only selects and converts them; the fit
(calibrate/fit/profile_fit.cpp) does the rest. Usage, from the repository root:

    tools/published_measurements.py > docs/published-measurements/h100-sxm.measurements.json
    build-k/bin/lcsim-gpu fit --measurements docs/published-measurements/h100-sxm.measurements.json \
        --prior calibrate/profiles/h100-sxm-default.json --out calibrate/profiles/h100-sxm-published.json

Selection (declared once, here and in docs/published-measurements/SOURCES.md; never tuned to a catalogue row):
- GEMM: BF16 GEMMs whose weight matrix is at least 4096 x 4096 (n, k >= 4096: the 7B+ models most of the catalogue
  runs; narrower shapes are not these models' layers). Time = 2 m n k / (TFLOP/s).
- Attention: FlashAttention-2, the kernel Skrull and Hydraulis name, causal, head dim 128 (the 7B+ models'), as the
  FlashAttention-3 paper measured it (Fig. 5; 16K tokens per call, hidden 2048). Backward = the FlashAttention-2
  paper's causal forward+backward time (Fig. 7, same shape) minus that forward time: derived, as SOURCES.md says.
- Collectives: NVLink, 8 GPUs: the full-range ring sweeps (128 B .. 8 GiB) for all_gather, reduce_scatter and
  all_reduce, the 32 MiB+ sweep for all_to_all; send_recv (pairwise) from the 8-GPU sweep. NVLink, 4 GPUs: the
  32 MiB+ sweep. InfiniBand: the 10-node sweep with 8 GPUs per node (80 ranks), the layout of every shipped
  multi-node cluster; the sweeps with 1, 2 or 4 GPUs per node are left out (lcsim keys collectives by group size
  only). InfiniBand send_recv is left out: at 80 ranks most pairs stay inside a node.
- Optimizer: no published point gives its parameter count, so none is used (the prior is kept).
"""
import json
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
POINTS = os.path.join(ROOT, "docs", "published-measurements", "points.json")

TOGETHER = "togethercomputer/together-nccl-tests"
XXRJUN = "xxrjun/nccl-tests-cluster"


def timing(seconds):
    return {"kernel_s": seconds, "event_s": seconds, "kernels": 0}


def gemm_points(points):
    out = []
    for g in points["gemm"]:
        if not g.get("dtype", "").startswith(("bf16", "16-bit")) or g["n"] < 4096 or g["k"] < 4096:
            continue
        seconds = 2.0 * g["tokens"] * g["n"] * g["k"] / (g["tflops"] * 1e12)
        out.append({"tokens": g["tokens"], "n": g["n"], "k": g["k"], "forward": timing(seconds)})
    return sorted(out, key=lambda g: (g["tokens"], g["n"], g["k"]))


def attention_points(points):
    tokens_per_call, q_hidden = 16384, 2048

    def rate(pass_name, s):
        (match,) = [a["tflops"] for a in points["attention"]
                    if a["kernel"] == "FlashAttention-2" and a["causal"] and a["head_dim"] == 128
                    and a["pass"] == pass_name and a["seq_len"] == s]
        return match * 1e12

    out = []
    for s in sorted({a["seq_len"] for a in points["attention"] if a["kernel"] == "FlashAttention-2"}):
        sequences = tokens_per_call // s
        forward_flops = sequences * 2.0 * s * s * q_hidden  # causal: 4 s^2 d h / 2
        forward_s = forward_flops / rate("fwd", s)
        both_s = 3.5 * forward_flops / rate("fwd+bwd", s)  # FlashAttention's convention: fwd + bwd = 3.5 x fwd
        out.append({"seq_len": s, "sequences": sequences, "q_hidden": q_hidden, "forward": timing(forward_s),
                    "backward": timing(both_s - forward_s)})
    return out


def collective(points, op, link, group_size, source, as_group=None):
    samples = sorted((c["bytes"], c["time_us"] * 1e-6) for c in points["collectives"]
                     if c["op"] == op and c["link"] == link and c["group_size"] == group_size
                     and c["source"].startswith(source) and c["bytes"] is not None)
    if not samples:
        raise SystemExit(f"published_measurements: no {op} {link} n={group_size} points from {source}")
    entry = {"op": op, "group_size": as_group or group_size}
    if link != "nvlink":
        entry["link"] = link
    entry["samples"] = [{"bytes": b, "seconds": t} for b, t in samples]
    return entry


def collective_points(points):
    out = [collective(points, op, "nvlink", 8, TOGETHER) for op in ("all_gather", "reduce_scatter", "all_reduce")]
    out.append(collective(points, "all_to_all", "nvlink", 8, XXRJUN))
    out.append(collective(points, "send_recv", "nvlink", 8, XXRJUN, as_group=2))
    out += [collective(points, op, "nvlink", 4, XXRJUN)
            for op in ("all_gather", "reduce_scatter", "all_reduce", "all_to_all")]
    out += [collective(points, op, "infiniband", 80, XXRJUN)
            for op in ("all_gather", "reduce_scatter", "all_reduce", "all_to_all")]
    return out


def main():
    with open(POINTS) as f:
        points = json.load(f)
    measurements = {
        "format": "lcsim-measurements/1",
        "published": "docs/published-measurements/SOURCES.md, selected and converted by "
                     "tools/published_measurements.py",
        "device": {
            "name": "NVIDIA H100 80GB HBM3",
            "gpu_kind": "H100-SXM",
            "count": 8,
            "compute_capability": "9.0",
            "multiprocessors": 132,
            "memory_bytes": 85899345920,
            "driver": "not stated (several systems)",
            "cuda": "not stated (several systems)",
            "nccl": "2.26.2 (8-GPU ring sweeps), 2.29.2 (the others)",
            "date": "2026-03-05",
            "host": "",
        },
        "model": "Qwen2.5-7B",
        "timing": "published figures: GEMM and attention TFLOP/s, nccl-tests out-of-place times",
        "warmup": 0,
        "repetitions": 1,
        "gemm": gemm_points(points),
        "attention": attention_points(points),
        "layers": [],
        "memory": [],
        "collectives": collective_points(points),
        "ulysses": [],
        "optimizer": [],
        "warnings": [],
    }
    json.dump(measurements, sys.stdout, indent=1)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
