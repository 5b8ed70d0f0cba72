#!/usr/bin/env bash
# Builds occl (the CUDA targets too when nvcc is installed: compiled, and run where a GPU is)
# and runs the whole test suite, then the MSCCL-IR loader fuzzer for a bounded time.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/deps.sh
occl_install_deps
BUILD_DIR="${OCCL_BUILD_DIR:-build}"
occl_build "$BUILD_DIR"
ctest --test-dir "$BUILD_DIR" --output-on-failure --timeout 900 -j "$(nproc)"
if [ -x tests/fuzz/run_fuzz.sh ] || [ -f tests/fuzz/run_fuzz.sh ]; then
  bash tests/fuzz/run_fuzz.sh "${OCCL_FUZZ_SECONDS:-60}"
fi
