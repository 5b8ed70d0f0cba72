#!/usr/bin/env bash
# Builds occl (the CUDA targets too when nvcc is installed: compiled, and run where a GPU is)
# and runs the whole test suite; then builds the suites that run on the simt backend (the CUDA
# daemon's device code on emulated blocks, tests/simt) under ThreadSanitizer and runs them with
# 2, 3 and 7 lanes a block; then the MSCCL-IR loader fuzzer for a bounded time.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/deps.sh
occl_install_deps
BUILD_DIR="${OCCL_BUILD_DIR:-build}"
occl_build "$BUILD_DIR"
ctest --test-dir "$BUILD_DIR" --output-on-failure --timeout 900 -j "$(nproc)"

TSAN_DIR="${OCCL_TSAN_BUILD_DIR:-build-tsan}"
# Without UCX: its libucm replaces madvise, which glibc calls as a thread exits, after
# ThreadSanitizer has torn the thread's state down (a crash in every test). The simt suites
# need no NET connector.
cmake -S . -B "$TSAN_DIR" -DCMAKE_BUILD_TYPE=Release -DOCCL_ENABLE_CUDA=OFF -DOCCL_BUILD_BENCH=OFF -DOCCL_ENABLE_UCX=OFF \
  -DOCCL_SANITIZE=thread "-DOCCL_SIMT_LANE_COUNTS=2;3;7" -DOCCL_SIMT_TORTURE_ITERS=4
cmake --build "$TSAN_DIR" -j "$(nproc)" --target occl_simt_suites
ctest --test-dir "$TSAN_DIR" -L simt --output-on-failure --timeout 900 -j "$(nproc)"

if [ -x tests/fuzz/run_fuzz.sh ] || [ -f tests/fuzz/run_fuzz.sh ]; then
  bash tests/fuzz/run_fuzz.sh "${OCCL_FUZZ_SECONDS:-60}"
fi
