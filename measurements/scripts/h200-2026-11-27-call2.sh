#!/usr/bin/env bash
# Device call 2 of 2026-11-27: Skrull's case study at BucketSize 12K (Fig. 4a's fifth point beside call 1's four),
# then Skrull Fig. 3's line-up on the 7B wikipedia scenario, which overran its limit on 2026-11-26 with 2 warm-up and
# 5 timed runs per job; here 1 and 3. One archive ($OUT/call2.tgz), rewritten after each step.
# Usage: measurements/scripts/h200-2026-11-27-call2.sh BINARY OUTDIR
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
live() {  # live SCENARIO_STEM LIMIT_S
  local s=$1 limit=$2 t0=$SECONDS
  timeout "$limit" "$bin" live "scenarios/live/$s.json" --warmup 1 --repetitions 3 --json "$work/$s.live.json" \
    --trace "$work/$s.trace.json" > "$work/$s.live.log" 2>&1
  echo "=== $s: rc $? in $((SECONDS - t0)) s" | tee -a "$work/$s.live.log"
  [[ -f "$work/$s.trace.json" ]] && gzip -9 "$work/$s.trace.json"
  tail -14 "$work/$s.live.log"
  tar czf "$out/call2.tgz" -C "$work" .
}
live qwen2.5-0.5b-chatqa2-bucket12k-dp1-cp8-h200 70
live qwen2.5-7b-wikipedia-lineup-dp1-cp8-h200 200
exit 0
