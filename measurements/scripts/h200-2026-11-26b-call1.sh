#!/usr/bin/env bash
# Device call 1 of 2026-11-26 (evening): attention at Ulysses shard head counts (lcsim kernels and PyTorch SDPA),
# then live replay of two models the layer cost model was not derived from. Every step has its own limit, and a
# failed step does not stop the others. Usage: measurements/scripts/h200-2026-11-26b-call1.sh BINARY OUTDIR
set -uo pipefail
bin=$1
out=$2
mkdir -p "$out"
if ldd "$bin" | grep -q "not found"; then
  extra=$(find / -xdev \( -name 'libcublasLt.so.13' -o -name 'libcupti.so.13' -o -name 'libnccl.so.2' \) \
            -printf '%h\n' 2>/dev/null | sort -u | paste -sd: -)
  export LD_LIBRARY_PATH="${extra}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
fi
nvidia-smi > "$out/nvidia-smi.txt" 2>&1
step() {  # step NAME LIMIT_S COMMAND...
  local name=$1 limit=$2
  shift 2
  local t0=$SECONDS
  echo "=== $name: $*" | tee "$out/$name.log"
  timeout "$limit" "$@" >> "$out/$name.log" 2>&1
  echo "=== $name: rc $? in $((SECONDS - t0)) s" | tee -a "$out/$name.log"
}
short=1024,4096,16384,32768
long=1024,4096,16384,32768,65536,131072
step attn-qwen0.5b-14h 60 "$bin" bench-attention --model Qwen2.5-0.5B --seqlens $short --tokens 32768 --warmup 3 --reps 10
step attn-qwen0.5b-2h 90 "$bin" bench-attention --model Qwen2.5-0.5B --heads 2 --kv-heads 1 --seqlens $long --tokens 131072 --warmup 2 --reps 8
step attn-qwen7b-28h 60 "$bin" bench-attention --model Qwen2.5-7B --seqlens $short --tokens 32768 --warmup 3 --reps 10
step attn-qwen7b-4h 90 "$bin" bench-attention --model Qwen2.5-7B --heads 4 --kv-heads 1 --seqlens $long --tokens 131072 --warmup 2 --reps 6
step sdpa-d64-14h 40 python3 calibrate/sdpa_bench.py --heads 14 --kv-heads 2 --head-dim 64 --seqlens $short --tokens 32768 --warmup 3 --reps 10
step sdpa-d64-2h 40 python3 calibrate/sdpa_bench.py --heads 2 --kv-heads 1 --head-dim 64 --seqlens $long --tokens 131072 --warmup 2 --reps 8
step sdpa-d128-28h 40 python3 calibrate/sdpa_bench.py --heads 28 --kv-heads 4 --head-dim 128 --seqlens $short --tokens 32768 --warmup 3 --reps 10
step sdpa-d128-4h 40 python3 calibrate/sdpa_bench.py --heads 4 --kv-heads 1 --head-dim 128 --seqlens $long --tokens 131072 --warmup 2 --reps 6
for s in qwen2.5-7b-wikipedia-dp1-cp8-h200 llama3.1-8b-wikipedia-dp1-cp8-h200; do
  step "live-$s" 160 "$bin" live "scenarios/live/$s.json" --json "$out/$s.live.json" --trace "$out/$s.trace.json"
  [[ -f "$out/$s.trace.json" ]] && gzip -9 "$out/$s.trace.json"
done
exit 0
