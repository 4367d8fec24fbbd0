#!/usr/bin/env python3
"""GPU kernel time per training step of a PyTorch profiler (Kineto) trace, by kernel family: GEMM, attention,
collective and optimizer as calibrate/kineto/kineto_kernels.json names them, the loss (softmax / cross-entropy / NLL
kernels) apart, and the rest (element-wise, normalisation, copies). The last column is the rest over the GEMMs:
the element-wise work a layer runs beside its GEMMs (docs/validation.md, "The element-wise floor").

    tools/trace_kernel_shares.py measurements/torch/h200-2026-11-26/torch-qwen2.5-0.5b.trace.json.gz

Steps are the trace's `ProfilerStep#N` spans on the GPU timeline (gpu_user_annotation); a kernel belongs to the
step whose span holds its start.
"""
import fnmatch
import gzip
import json
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LOSS = re.compile(r"softmax|cross_entropy|nll_loss", re.IGNORECASE)


def load(path):
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt", encoding="utf-8") as f:
        return json.load(f)


def families():
    with open(os.path.join(ROOT, "calibrate", "kineto_kernels.json"), encoding="utf-8") as f:
        return [(e["family"], e["patterns"]) for e in json.load(f)["families"]]


def family_of(name, table):
    for family, patterns in table:
        if any(fnmatch.fnmatchcase(name, p) for p in patterns):
            return family
    return "loss" if LOSS.search(name) else "other"


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    events = load(sys.argv[1])["traceEvents"]
    table = families()
    steps = sorted((e for e in events if e.get("cat") == "gpu_user_annotation" and
                    e.get("name", "").startswith("ProfilerStep#")), key=lambda e: e["ts"])
    kernels = [e for e in events if e.get("cat") == "kernel"]
    if not steps:
        sys.exit(f"{sys.argv[1]}: no ProfilerStep# spans on the GPU timeline")
    names = ["gemm", "attention", "loss", "optimizer", "collective", "other"]
    print(f"{'step':<16}{'span ms':>9}{'busy ms':>9}" + "".join(f"{n + ' ms':>14}" for n in names) + f"{'other/gemm':>12}")
    for step in steps:
        start, end = step["ts"], step["ts"] + step["dur"]
        ms = dict.fromkeys(names, 0.0)
        for k in kernels:
            if start <= k["ts"] < end:
                ms[family_of(k["name"], table)] += k["dur"] / 1e3
        ratio = ms["other"] / ms["gemm"] if ms["gemm"] > 0 else float("nan")
        print(f"{step['name']:<16}{step['dur'] / 1e3:>9.1f}{sum(ms.values()):>9.1f}" +
              "".join(f"{ms[n]:>14.2f}" for n in names) + f"{ratio:>12.2f}")


if __name__ == "__main__":
    main()
