#!/usr/bin/env bash
# Device call 2 of 2026-11-27 (second session): call 1's runs repeated where lcsim ranked two policies otherwise than
# the hardware, to see whether the measured gaps repeat: the wikipedia head to head whole (1 warm-up, 3 timed runs
# per job, as call 1), and ISF and WLB-LLM on the 8B shape (3 timed runs, 2 in call 1; the committed scenario holds
# the 8-layer model). One archive ($OUT/call2.tgz), rewritten after each step.
# Usage: measurements/scripts/h200-2026-11-27b-call2.sh BINARY OUTDIR
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
  tail -10 "$work/$s.live.log"
  tar czf "$out/call2.tgz" -C "$work" .
}
live qwen2.5-0.5b-wikipedia-headtohead-dp1-cp8-h200 60 3
live llama3.1-8b-tulu3-longcite-headtohead-dp1-cp8-h200 40 3 --policy wlb-llm
exit 0
