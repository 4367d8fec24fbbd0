#!/usr/bin/env bash
# CI's second command: the whole test suite under AddressSanitizer + UndefinedBehaviorSanitizer (clang, no CUDA),
# then a 60 s smoke run of every libFuzzer target. Run after the README's test command (packages installed).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
if ! command -v clang++ > /dev/null; then
  as_root=()
  if [[ "$(id -u)" -ne 0 ]]; then as_root=(sudo); fi
  "${as_root[@]}" apt-get update
  "${as_root[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends clang
fi
cmake --preset asan
cmake --build --preset asan -j"$(nproc)"
ctest --preset asan -j"$(nproc)"
tools/fuzz.sh "${LCSIM_FUZZ_SECONDS:-60}"
