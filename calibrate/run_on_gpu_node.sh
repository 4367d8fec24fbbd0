#!/usr/bin/env bash
# Runs lcsim-gpu on a GPU node that has the NVIDIA libraries but perhaps not lcsim's other build dependencies.
#   calibrate/run_on_gpu_node.sh [--archive] BINARY OUTDIR STEP...
# --archive: every file goes to a scratch folder and OUTDIR receives one archive, results.tgz, rewritten after each
# step (a workplace that brings back a limited number of files then loses none, and a step that overruns its time
# keeps what the steps before it wrote).
# BINARY is a built lcsim-gpu (e.g. build-k/calibrate/lcsim-gpu, carried from the build machine); OUTDIR receives
# one log per step (and the profiles and measurements files). Steps, each a separate lcsim-gpu run:
#   selftest         kernel correctness against the references
#   bench:MODEL      attention TFLOP/s of lcsim's kernels, then PyTorch SDPA on the same shapes (needs python3+torch)
#   calibrate:MODEL  the full calibration; writes OUTDIR/<gpu>-<model>.json and .measurements.json
#   quick:MODEL      calibrate --quick (a smoke run)
#   live:SCENARIO[@SIM.json]
#                    lcsim-gpu live on SCENARIO (a path from the repository root), predicted by SIM.json (the
#                    results of `lcsim simulate --json` on the same scenario) when given, else by the program replay;
#                    writes OUTDIR/live-<scenario name>.json, .trace.json and .log
#   mix:SCENARIO     lcsim-gpu bench-mix on SCENARIO (Skrull-shaped micro-batches beside the cost model);
#                    writes OUTDIR/mix-<scenario name>.json and .log
#   torch:MODEL      calibrate/torch_trace_step.py: a torch.profiler trace of PyTorch training steps of MODEL's
#                    shape (needs python3+torch); writes OUTDIR/torch-<model>.trace.json.gz, .steps.json and .log
# Exits with the first failing step's status.
set -euo pipefail

archive=
if [[ ${1:-} == --archive ]]; then
  archive=1
  shift
fi
if [[ $# -lt 3 ]]; then
  sed -n '2,24p' "$0"
  exit 2
fi
binary=$1
outdir=$2
shift 2
mkdir -p "$outdir"
if [[ -n $archive ]]; then
  final=$(cd "$outdir" && pwd)
  outdir=$(mktemp -d)
  trap 'tar czf "$final/results.tgz" -C "$outdir" .' EXIT
fi

# cuBLASLt and CUPTI come from the CUDA toolkit (the binary's run path is /usr/local/cuda/lib64); where the toolkit
# lacks them, from PyTorch's NVIDIA wheels. NCCL is loaded at run time from the same places (or $LCSIM_NCCL_LIBRARY).
if ldd "$binary" | grep -q "not found"; then
  extra=$(find / -xdev \( -name 'libcublasLt.so.13' -o -name 'libcupti.so.13' -o -name 'libnccl.so.2' \) \
            -printf '%h\n' 2>/dev/null | sort -u | paste -sd: -)
  export LD_LIBRARY_PATH="${extra}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  echo "library path: $LD_LIBRARY_PATH"
fi
if ldd "$binary" | grep "not found"; then
  echo "missing libraries (above): install the CUDA 13 toolkit's cuBLAS and CUPTI" >&2
  exit 2
fi

gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1 | tr 'A-Z ' 'a-z-')
for step in "$@"; do
  kind=${step%%:*}
  model=${step#*:}
  echo "=== $step"
  case $kind in
    selftest)
      "$binary" selftest 2>&1 | tee "$outdir/selftest.log"
      ;;
    bench)
      "$binary" bench-attention --model "$model" 2>&1 | tee "$outdir/bench-$model.log"
      sdpa=$(grep -o 'python3 calibrate/sdpa_bench.py.*' "$outdir/bench-$model.log")
      (cd "$(dirname "$0")/.." && eval "$sdpa") 2>&1 | tee "$outdir/sdpa-$model.log"
      ;;
    calibrate | quick)
      lower=$(echo "$model" | tr 'A-Z' 'a-z')
      flags=()
      [[ $kind == quick ]] && flags=(--quick)
      "$binary" calibrate --model "$model" "${flags[@]}" --out "$outdir/$gpu-$lower.json" 2>&1 |
        tee "$outdir/calibrate-$model.log"
      ;;
    live)
      scenario=${model%%@*}
      predicted=()
      [[ $model == *@* ]] && predicted=(--predicted "${model#*@}")
      name=$(basename "$scenario" .json)
      "$binary" live "$scenario" "${predicted[@]}" --json "$outdir/live-$name.json" \
        --trace "$outdir/live-$name.trace.json" 2>&1 | tee "$outdir/live-$name.log"
      ;;
    mix)
      name=$(basename "$model" .json)
      "$binary" bench-mix "$model" --json "$outdir/mix-$name.json" 2>&1 | tee "$outdir/mix-$name.log"
      ;;
    torch)
      lower=$(echo "$model" | tr 'A-Z' 'a-z')
      (cd "$(dirname "$0")/.." && python3 calibrate/torch_trace_step.py --model "$model" \
        --out "$outdir/torch-$lower") 2>&1 | tee "$outdir/torch-$lower.log"
      ;;
    *)
      echo "unknown step $step" >&2
      exit 2
      ;;
  esac
  if [[ -n $archive ]]; then tar czf "$final/results.tgz" -C "$outdir" .; fi
done
