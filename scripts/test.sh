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

# ctest over a build directory (first argument), then the rest of the arguments. A skipped test
# fails the run unless it is labelled gpu (those skip where no GPU is present): a skip must never
# count as a pass. Tests are told apart by number, which ctest prints in both lists.
run_ctest() {
  local dir="$1" log status=0
  shift
  log="$(mktemp)"
  ctest --test-dir "$dir" "$@" --output-on-failure --timeout 900 -j "$(nproc)" 2>&1 | tee "$log" || status=$?
  local skipped gpu
  skipped="$(sed -n 's/^[[:space:]]*\([0-9][0-9]*\) - \(.*\) (Skipped)$/\1 \2/p' "$log" | sort)"
  rm -f "$log"
  [ "$status" -eq 0 ] || return "$status"
  [ -z "$skipped" ] && return 0
  gpu="$(ctest --test-dir "$dir" -N -L gpu | sed -n 's/^[[:space:]]*Test *#\([0-9][0-9]*\): .*/\1/p' | sort)"
  skipped="$(echo "$skipped" | awk 'NR == FNR { gpu[$1] = 1; next } !($1 in gpu)' <(echo "$gpu") -)"
  [ -z "$skipped" ] && return 0
  echo "error: these tests skipped in $dir (only tests labelled gpu may skip):" >&2
  echo "$skipped" >&2
  return 1
}

# The package as users install it: a virtual environment of its own with a current torch from
# PyPI and this tree pip-installed into it; the main ctest runs the Python tests against it too
# (label python-installed) beside Debian's torch 1.13. OCCL_PIP_TESTS=0 leaves it out (no PyPI).
INSTALLED_PYTHON=""
if [ "${OCCL_PIP_TESTS:-1}" != 0 ]; then
  VENV_DIR="${OCCL_VENV_DIR:-build-venv}"
  occl_pip_env "$VENV_DIR"
  INSTALLED_PYTHON="$(cd "$VENV_DIR" && pwd)/bin/python"
fi

BUILD_DIR="${OCCL_BUILD_DIR:-build}"
occl_build "$BUILD_DIR" "-DOCCL_INSTALLED_PYTHON=$INSTALLED_PYTHON" -DOCCL_PYTHON_INSTALL_DIR=lib/python3/dist-packages
run_ctest "$BUILD_DIR"

# -O1 with assertions: sanitizer reports with usable stacks, at about half Release's speed.
SANITIZER_FLAGS=(-DCMAKE_BUILD_TYPE=RelWithDebInfo "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O1 -g"
                 "-DCMAKE_C_FLAGS_RELWITHDEBINFO=-O1 -g" -DOCCL_ENABLE_CUDA=OFF -DOCCL_BUILD_BENCH=OFF)

ASAN_DIR="${OCCL_ASAN_BUILD_DIR:-build-asan}"
cmake -S . -B "$ASAN_DIR" "${SANITIZER_FLAGS[@]}" -DOCCL_SANITIZE=address,undefined
cmake --build "$ASAN_DIR" -j "$(nproc)"
# The installed-package test builds a consumer without the sanitizer runtime; the main build runs it.
ASAN_OPTIONS=detect_leaks=1:abort_on_error=0 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
  run_ctest "$ASAN_DIR" -LE simt -E '^install_'

TSAN_DIR="${OCCL_TSAN_BUILD_DIR:-build-tsan}"
# Without UCX: its libucm replaces madvise, which glibc calls as a thread exits, after
# ThreadSanitizer has torn the thread's state down (a crash in every test). The simt suites
# need no NET connector.
cmake -S . -B "$TSAN_DIR" -DCMAKE_BUILD_TYPE=Release -DOCCL_ENABLE_CUDA=OFF -DOCCL_BUILD_BENCH=OFF -DOCCL_ENABLE_UCX=OFF \
  -DOCCL_SANITIZE=thread "-DOCCL_SIMT_LANE_COUNTS=2;3;7" -DOCCL_SIMT_TORTURE_ITERS=4
cmake --build "$TSAN_DIR" -j "$(nproc)" --target occl_simt_suites occl_tsan_suites
TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1 \
  run_ctest "$TSAN_DIR" -L 'simt|tsan'

if [ -x tests/fuzz/run_fuzz.sh ] || [ -f tests/fuzz/run_fuzz.sh ]; then
  bash tests/fuzz/run_fuzz.sh "${OCCL_FUZZ_SECONDS:-60}"
fi
