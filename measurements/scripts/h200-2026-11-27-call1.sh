#!/usr/bin/env bash
# Device call 1 of 2026-11-27: (1) selftest of the kernels rebuilt on mma.cuh's gemm() helper (#33), and their
# attention timings beside the binary built before it; (2) live replay of Skrull's case study at four BucketSizes
# (Fig. 4a's trend, Table 3's Skrull vs RR; #28) with the binary built before the helper, so the measurement does
# not lean on the change under test. Every file goes into one archive ($OUT/call1.tgz), rewritten after each step.
# Usage: measurements/scripts/h200-2026-11-27-call1.sh NEW_BINARY OLD_BINARY OUTDIR
set -uo pipefail
new=$1
old=$2
out=$3
work=$(mktemp -d)
if ldd "$new" | grep -q "not found"; then
  extra=$(find / -xdev \( -name 'libcublasLt.so.13' -o -name 'libcupti.so.13' -o -name 'libnccl.so.2' \) \
            -printf '%h\n' 2>/dev/null | sort -u | paste -sd: -)
  export LD_LIBRARY_PATH="${extra}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
fi
mkdir -p "$out"
pack() { tar czf "$out/call1.tgz" -C "$work" .; }
step() {  # step NAME LIMIT_S COMMAND...
  local name=$1 limit=$2 t0=$SECONDS
  shift 2
  timeout "$limit" "$@" > "$work/$name.log" 2>&1
  echo "=== $name: rc $? in $((SECONDS - t0)) s" | tee -a "$work/$name.log"
  tail -25 "$work/$name.log"
  pack
}
nvidia-smi > "$work/nvidia-smi.txt" 2>&1
step selftest 120 "$new" selftest
for b in 26 16 8 20; do
  s=qwen2.5-0.5b-chatqa2-bucket${b}k-dp1-cp8-h200
  step "$s.live" "$([[ $b == 26 ]] && echo 150 || echo 110)" "$old" live "scenarios/live/$s.json" --warmup 1 --repetitions 3 --json "$work/$s.live.json" \
    --trace "$work/$s.trace.json"
  [[ -f "$work/$s.trace.json" ]] && gzip -9 "$work/$s.trace.json" && pack
done
for i in 1 2; do  # interleaved: old, new, old, new
  step "bench-old-$i" 40 "$old" bench-attention --model Qwen2.5-7B --seqlens 1024,8192 --tokens 32768
  step "bench-new-$i" 40 "$new" bench-attention --model Qwen2.5-7B --seqlens 1024,8192 --tokens 32768
done
exit 0
