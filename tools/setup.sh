#!/usr/bin/env bash
# Prepares a Debian 12 machine and builds lcsim into build/: installs the build dependencies that are missing
# (apt-get runs only then), configures, builds. Idempotent: a second run installs nothing and rebuilds only what
# changed. --with-slurm also installs Debian's slurm-wlm and munge, so that tests/slurm_sweep_test.cpp runs a local
# one-node Slurm cluster instead of skipping (daemons, key and ports of its own, started and stopped by the test).
# --target NAME (repeatable) builds only that target and what it needs: the README's first command builds lcsim
# alone (its table in a fraction of the time the tests, benchmarks and GPU kernels take), the second everything.
# Without --target (the test set-up), also the test suite's own tools: Debian's chromium (the headless browser that
# opens `lcsim report`'s page) and python3-venv (a fresh virtual environment for `pip install ./python`), which the
# first command, building lcsim alone, does not wait for.
# Other arguments go to the CMake configure step (e.g. tools/setup.sh -DLCSIM_WITH_CUDA=OFF).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

packages=(build-essential cmake pkg-config libsimgrid-dev nlohmann-json3-dev libboost-program-options-dev
          libgtest-dev libbenchmark-dev python3-matplotlib coinor-libcbc-dev zlib1g-dev
          pybind11-dev python3-dev python3-pytest python3-pandas)
cmake_args=()
build_args=()
while (($# > 0)); do
  case "$1" in
    --with-slurm) packages+=(slurm-wlm munge) ;;
    --target)
      if (($# < 2)); then
        echo "setup: --target needs a target name (e.g. --target lcsim)" >&2
        exit 2
      fi
      build_args+=(--target "$2")
      shift
      ;;
    --target=*) build_args+=(--target "${1#--target=}") ;;
    *) cmake_args+=("$1") ;;
  esac
  shift
done
if ((${#build_args[@]} == 0)); then packages+=(chromium python3-venv); fi
missing=()
for package in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$package")
  fi
done

if ((${#missing[@]} > 0)); then
  as_root=()
  if [[ "$(id -u)" -ne 0 ]]; then as_root=(sudo); fi
  echo "setup: installing ${missing[*]}"
  "${as_root[@]}" apt-get update
  "${as_root[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "${missing[@]}"
fi

cmake -S . -B build "${cmake_args[@]}"
cmake --build build -j"$(nproc)" "${build_args[@]}"
