#!/usr/bin/env bash
# Submits an lcsim sweep to Slurm: a job array of N slices (tools/slurm/lcsim-sweep.sbatch) and the merge job that
# runs after it. Prints the two job ids; results land in OUTROOT/sweep.csv and OUTROOT/sweep.json, logs in
# OUTROOT/slurm-*.out. Further arguments go to both sbatch calls (e.g. --partition=cpu --time=1:00:00 -c 8).
# Usage: tools/slurm/submit.sh SWEEP N OUTROOT [SBATCH OPTION]...
set -euo pipefail

if (($# < 3)) || ! [[ "$2" =~ ^[1-9][0-9]*$ ]]; then
  echo "usage: $0 SWEEP N OUTROOT [SBATCH OPTION]...  (N: number of slices, at least 1)" >&2
  exit 2
fi
sweep="$1" n="$2" out="$3"
shift 3
script="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/lcsim-sweep.sbatch"
mkdir -p "$out"

# --parsable prints "JOBID" or "JOBID;CLUSTER".
array="$(sbatch --parsable --array="1-$n" --output="$out/slurm-%A_%a.out" "$@" "$script" "$sweep" "$n" "$out")"
array="${array%%;*}"
merge="$(sbatch --parsable --dependency="afterany:$array" --job-name=lcsim-sweep-merge \
  --output="$out/slurm-%j-merge.out" "$@" "$script" --merge "$n" "$out")"
merge="${merge%%;*}"
echo "array job $array ($n slices), merge job $merge: $out/sweep.csv and $out/sweep.json when it ends"
