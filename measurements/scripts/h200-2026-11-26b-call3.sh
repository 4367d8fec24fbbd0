#!/usr/bin/env bash
# Device call 3 of 2026-11-26 (evening): live replay of Skrull Fig. 3's line-up of policies on the 0.5B and 7B
# wikipedia scenarios, so that the measured entries check who wins, not only Skrull against DeepSpeed. Every file
# goes into one archive ($2/call3.tgz): a device call brings back a limited number of files.
# Usage: measurements/scripts/h200-2026-11-26b-call3.sh BINARY OUTDIR
set -uo pipefail
bin=$1
out=$2
work=$(mktemp -d)
if ldd "$bin" | grep -q "not found"; then
  extra=$(find / -xdev \( -name 'libcublasLt.so.13' -o -name 'libcupti.so.13' -o -name 'libnccl.so.2' \) \
            -printf '%h\n' 2>/dev/null | sort -u | paste -sd: -)
  export LD_LIBRARY_PATH="${extra}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
fi
nvidia-smi > "$work/nvidia-smi.txt" 2>&1
live() {  # live SCENARIO_STEM LIMIT_S
  local s=$1 limit=$2 t0=$SECONDS
  timeout "$limit" "$bin" live "scenarios/live/$s.json" --json "$work/$s.live.json" --trace "$work/$s.trace.json" \
    > "$work/$s.live.log" 2>&1
  echo "=== $s: rc $? in $((SECONDS - t0)) s" | tee -a "$work/$s.live.log"
  [[ -f "$work/$s.trace.json" ]] && gzip -9 "$work/$s.trace.json"
  tail -12 "$work/$s.live.log"
  tar czf "$out/call3.tgz" -C "$work" .  # after each step: a later overrun keeps what is done
}
mkdir -p "$out"
live qwen2.5-0.5b-wikipedia-lineup-dp1-cp8-h200 120
live qwen2.5-7b-wikipedia-lineup-dp1-cp8-h200 230
exit 0
