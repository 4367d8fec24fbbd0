#!/usr/bin/env bash
# Runs every libFuzzer target of the sanitizer build for SECONDS each (default 60) and prints executions and
# findings per target. Needs the `asan` preset built (clang, ASan + UBSan, LCSIM_FUZZ):
#   cmake --preset asan && cmake --build --preset asan -j"$(nproc)" && tools/fuzz.sh 600
# Corpora grow in build-asan/fuzz-corpus/TARGET (seeded from the shipped files); a crash, leak, sanitizer report,
# uncaught exception other than InputError, or a 10 s input is saved as build-asan/fuzz-findings/TARGET-*, and
# the script exits 1. Reproduce one with: build-asan/fuzz/TARGET_fuzz FILE
# Targets run LCSIM_FUZZ_JOBS at a time (default: one per core).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
seconds=${1:-60}
build=build-asan
targets=(scenario profile length_trace sweep sweep_shard measurements kineto)
declare -A seeds=(
  [scenario]="scenarios"
  [profile]="calibrate/profiles"
  [length_trace]="fuzz/seeds/length_trace"
  [sweep]="scenarios/sweeps"
  [sweep_shard]="fuzz/seeds/sweep_shard"
  [measurements]="calibrate/profiles"
  [kineto]="fuzz/seeds/kineto"
)
mkdir -p "$build/fuzz-findings"
jobs=${LCSIM_FUZZ_JOBS:-$(nproc)}

# One target: seed its corpus, fuzz it for $seconds, leave its exit status beside its log.
fuzz_one() {
  local t=$1
  local corpus="$build/fuzz-corpus/$t"
  mkdir -p "$corpus"
  case $t in
    # Not scenarios/validation: the 200 KB catalogue only meets the loader's first refusal, and as the largest seed
    # it set libFuzzer's input size, halving the target's executions.
    scenario) find "${seeds[$t]}" -path "${seeds[$t]}/validation" -prune \
                -o -type f \( -name '*.json' -o -name '*.txt' \) -exec cp --backup=numbered -t "$corpus" {} + ;;
    profile) find "${seeds[$t]}" -name '*.json' ! -name '*.measurements.json' -exec cp -t "$corpus" {} + ;;
    measurements) find "${seeds[$t]}" -name '*.measurements.json' -exec cp -t "$corpus" {} + ;;
    *) find "${seeds[$t]}" -type f \( -name '*.json' -o -name '*.txt' \) -exec cp --backup=numbered -t "$corpus" {} + ;;
  esac
  local rc=0
  "$build/fuzz/${t}_fuzz" "$corpus" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=4096 -print_final_stats=1 \
    -artifact_prefix="$build/fuzz-findings/$t-" > "$build/fuzz-$t.log" 2>&1 || rc=$?
  echo "$rc" > "$build/fuzz-$t.rc"
}

for t in "${targets[@]}"; do
  rm -f "$build/fuzz-$t.rc"
  if [[ ! -x "$build/fuzz/${t}_fuzz" ]]; then
    echo "fuzz.sh: $build/fuzz/${t}_fuzz is not built (see the header of this script)" >&2
    exit 2
  fi
done
# The targets are independent single-threaded processes: run them $jobs at a time (one per core by default), so
# the smoke run costs ceil(targets / jobs) * SECONDS of wall time, each target still fuzzed for SECONDS.
running=0
for t in "${targets[@]}"; do
  if (( running >= jobs )); then
    wait -n || true
    running=$((running - 1))
  fi
  fuzz_one "$t" &
  running=$((running + 1))
done
wait || true

status=0
printf '%-14s %8s %12s %9s\n' target seconds executions findings
for t in "${targets[@]}"; do
  log="$build/fuzz-$t.log"
  rc=$(cat "$build/fuzz-$t.rc" 2> /dev/null || echo "no status")
  runs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' || echo "?")
  found=$(find "$build/fuzz-findings" -name "$t-*" | wc -l)
  printf '%-14s %8s %12s %9s\n' "$t" "$seconds" "$runs" "$found"
  if [[ $rc != 0 || $found -ne 0 ]]; then
    status=1
    echo "  $t: exit $rc; log $log" >&2
    grep -m3 -E 'ERROR|SUMMARY|terminate|what\(\)' "$log" >&2 || true
  fi
done
exit $status
