#!/usr/bin/env bash
# Device call 1 of 2026-11-27 (second session): the head to head replayed live, rank-serially, on one H200. The
# wikipedia and ChatQA2 line-ups of Skrull's case study with HBP, Hydraulis, WLB-LLM and FlexSP beside DeepSpeed,
# Skrull and RR, then HBP's main setting at 8 GPUs on the LLaMA3.1-8B shape with 8 layers. 1 warm-up and 3 (wikipedia)
# or 2 timed runs per distinct job, to fit one call. One archive ($OUT/call1.tgz), rewritten after each step.
# Usage: measurements/scripts/h200-2026-11-27b-call1.sh BINARY OUTDIR
set -uo pipefail
bin=$1
out=$2
work=$(mktemp -d)
if ldd "$bin" | grep -q "not found"; then
  extra=$(find / -xdev \( -name 'libcublasLt.so.13' -o -name 'libcupti.so.13' -o -name 'libnccl.so.2' \) \
            -printf '%h\n' 2>/dev/null | sort -u | paste -sd: -)
  export LD_LIBRARY_PATH="${extra}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
fi
mkdir -p "$out"
nvidia-smi > "$work/nvidia-smi.txt" 2>&1
live() {  # live SCENARIO_STEM LIMIT_S REPETITIONS [ARGS...]
  local s=$1 limit=$2 reps=$3 t0=$SECONDS
  shift 3
  timeout "$limit" "$bin" live "scenarios/live/$s.json" --warmup 1 --repetitions "$reps" "$@" \
    --json "$work/$s.live.json" --trace "$work/$s.trace.json" > "$work/$s.live.log" 2>&1
  echo "=== $s: rc $? in $((SECONDS - t0)) s" | tee -a "$work/$s.live.log"
  [[ -f "$work/$s.trace.json" ]] && gzip -9 "$work/$s.trace.json"
  tail -12 "$work/$s.live.log"
  tar czf "$out/call1.tgz" -C "$work" .
}
live qwen2.5-0.5b-wikipedia-headtohead-dp1-cp8-h200 90 3
live qwen2.5-0.5b-chatqa2-headtohead-dp1-cp8-h200 300 2
live llama3.1-8b-tulu3-longcite-headtohead-dp1-cp8-h200 120 2 --layers 8
exit 0
