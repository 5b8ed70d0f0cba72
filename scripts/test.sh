#!/usr/bin/env bash
# Builds occl (the CUDA targets too when nvcc is installed: compiled, and run where a GPU is) and
# runs the whole test suite; then the sanitizer builds (README "Tests" says what each covers):
#   AddressSanitizer + UndefinedBehaviorSanitizer: every host test (not the simt runs);
#   ThreadSanitizer: the suites on the simt backend (the CUDA daemon's device code on emulated
#   blocks, tests/simt) with 2, 3 and 7 lanes a block, and the suites labelled "tsan" on the host
#   backend (queues, callbacks, bootstrap, processes, torture across processes, ...);
# then the MSCCL-IR loader fuzzer for a bounded time.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/deps.sh
occl_install_deps
BUILD_DIR="${OCCL_BUILD_DIR:-build}"
occl_build "$BUILD_DIR"
ctest --test-dir "$BUILD_DIR" --output-on-failure --timeout 900 -j "$(nproc)"

# -O1 with assertions: sanitizer reports with usable stacks, at about half Release's speed.
SANITIZER_FLAGS=(-DCMAKE_BUILD_TYPE=RelWithDebInfo "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O1 -g"
                 "-DCMAKE_C_FLAGS_RELWITHDEBINFO=-O1 -g" -DOCCL_ENABLE_CUDA=OFF -DOCCL_BUILD_BENCH=OFF)

ASAN_DIR="${OCCL_ASAN_BUILD_DIR:-build-asan}"
cmake -S . -B "$ASAN_DIR" "${SANITIZER_FLAGS[@]}" -DOCCL_SANITIZE=address,undefined
cmake --build "$ASAN_DIR" -j "$(nproc)"
# The installed-package test builds a consumer without the sanitizer runtime; the main build runs it.
ASAN_OPTIONS=detect_leaks=1:abort_on_error=0 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
  ctest --test-dir "$ASAN_DIR" -LE simt -E '^install_' --output-on-failure --timeout 900 -j "$(nproc)"

TSAN_DIR="${OCCL_TSAN_BUILD_DIR:-build-tsan}"
# Without UCX: its libucm replaces madvise, which glibc calls as a thread exits, after
# ThreadSanitizer has torn the thread's state down (a crash in every test). The simt suites
# need no NET connector.
cmake -S . -B "$TSAN_DIR" -DCMAKE_BUILD_TYPE=Release -DOCCL_ENABLE_CUDA=OFF -DOCCL_BUILD_BENCH=OFF -DOCCL_ENABLE_UCX=OFF \
  -DOCCL_SANITIZE=thread "-DOCCL_SIMT_LANE_COUNTS=2;3;7" -DOCCL_SIMT_TORTURE_ITERS=4
cmake --build "$TSAN_DIR" -j "$(nproc)" --target occl_simt_suites occl_tsan_suites
TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1 \
  ctest --test-dir "$TSAN_DIR" -L 'simt|tsan' --output-on-failure --timeout 900 -j "$(nproc)"

if [ -x tests/fuzz/run_fuzz.sh ] || [ -f tests/fuzz/run_fuzz.sh ]; then
  bash tests/fuzz/run_fuzz.sh "${OCCL_FUZZ_SECONDS:-60}"
fi
