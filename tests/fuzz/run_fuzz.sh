#!/usr/bin/env bash
# Builds the libFuzzer targets with clang and runs the MSCCL-IR loader fuzzer for a bounded time
# over a corpus seeded from the project's fixtures (tests/data/msccl-ir, valid and invalid) and,
# where it is checked out, ../shared/msccl-ir. Exits non-zero on any crash, leak, or slow input.
#
# usage: tests/fuzz/run_fuzz.sh [SECONDS]        (default 60)
# env:   OCCL_FUZZ_BUILD_DIR  build directory  (default <repo>/build-fuzz: one per checkout)
#        OCCL_SHARED_DIR      shared checkout  (default <repo>/../shared; optional: extra seeds)
#        CLANG_CXX / CLANG_CC compilers        (default clang++ / clang)
#        OCCL_FUZZ_JOBS       build parallelism (default 2)
set -euo pipefail

seconds="${1:-60}"
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
build="${OCCL_FUZZ_BUILD_DIR:-$repo/build-fuzz}"
shared="${OCCL_SHARED_DIR:-$repo/../shared}"
cxx="${CLANG_CXX:-clang++}"
cc="${CLANG_CC:-clang}"

if ! command -v "$cxx" >/dev/null; then
  echo "run_fuzz.sh: $cxx not found (set CLANG_CXX)" >&2
  exit 2
fi

cmake -S "$repo" -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_CXX_COMPILER="$cxx" -DCMAKE_C_COMPILER="$cc" \
  -DOCCL_ENABLE_CUDA=OFF -DOCCL_BUILD_BENCH=OFF -DOCCL_BUILD_TESTS=ON -DOCCL_BUILD_FUZZ=ON >/dev/null
cmake --build "$build" --target ir_loader_fuzz -j "${OCCL_FUZZ_JOBS:-2}"

# libFuzzer adds what it finds to the first corpus directory, so seed a writable copy. A prefix
# per source keeps files of the same name apart.
corpus="$build/fuzz-corpus/ir_loader"
artifacts="$build/fuzz-artifacts/"
mkdir -p "$corpus" "$artifacts"
seed() {  # seed PREFIX DIR: copies DIR/*.xml into the corpus; false when there are none
  compgen -G "$2/*.xml" >/dev/null || return 1
  for f in "$2"/*.xml; do cp -f "$f" "$corpus/$1$(basename "$f")" || exit 1; done
}
data="$repo/tests/data/msccl-ir"
if ! seed "" "$data" || ! seed invalid_ "$data/invalid"; then
  echo "run_fuzz.sh: the project's fixtures are missing from $data" >&2
  exit 2
fi
seed shared_ "$shared/msccl-ir" || echo "run_fuzz.sh: no $shared/msccl-ir; seeding from the project's fixtures only" >&2

"$build/tests/fuzz/ir_loader_fuzz" "$corpus" \
  -dict="$repo/tests/fuzz/ir_loader.dict" \
  -max_total_time="$seconds" -max_len=65536 -timeout=10 -rss_limit_mb=2048 \
  -artifact_prefix="$artifacts" -print_final_stats=1
