#!/usr/bin/env bash
# Device call 3 of 2026-11-27 (#36): plain-PyTorch training steps of the 0.5B and of the 7B shape (8 layers) with
# the caching allocator warm at every length (warm-up over all lengths twice), each length timed 5 times without
# the profiler, then one traced step per length: the framework's per-step overhead measured without the cold
# allocations and the profiler's own cost that the 2026-11-26 traces carried. One archive, after each step.
# Usage: measurements/scripts/h200-2026-11-27-call3.sh OUTDIR
set -uo pipefail
out=$1
work=$(mktemp -d)
mkdir -p "$out"
nvidia-smi > "$work/nvidia-smi.txt" 2>&1
run() {  # run NAME LIMIT_S ARGS...
  local name=$1 limit=$2 t0=$SECONDS
  shift 2
  timeout "$limit" python3 calibrate/torch_trace_step.py "$@" --out "$work/$name" > "$work/$name.log" 2>&1
  echo "=== $name: rc $? in $((SECONDS - t0)) s" | tee -a "$work/$name.log"
  grep -v Warning "$work/$name.log" | tail -16
  tar czf "$out/call3.tgz" -C "$work" .
}
run torch-qwen2.5-0.5b-warm 90 --model Qwen2.5-0.5B --warmup 12 --repeats 5
run torch-qwen2.5-7b-8layers-warm 90 --model Qwen2.5-7B --layers 8 --seqlens 512,1024,2048,4096,8192 --warmup 10 \
  --repeats 5
exit 0
