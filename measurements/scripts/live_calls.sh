# Sourced by a device call's script: the prelude every call shares. Usage, in the script:
#   source "$(dirname "$0")/live_calls.sh" BINARY OUTDIR ARCHIVE_NAME
#   live SCENARIO_STEM LIMIT_S REPETITIONS [LIVE ARGS...]   # one warm-up; the archive is rewritten after each step
# It finds cuBLASLt, CUPTI and NCCL where the toolkit does not have them (PyTorch's wheels on the device machine)
# and records nvidia-smi beside the results.
bin=$1
out=$2
archive=$3
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
  tar czf "$out/$archive" -C "$work" .
}
