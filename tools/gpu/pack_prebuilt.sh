#!/usr/bin/env bash
# Packs a CUDA build of occl for a GPU machine that cannot build it (no Abseil, pugixml, UCX or
# GoogleTest there, and no package registry to fetch them from):
#
#   tools/gpu/pack_prebuilt.sh BUILD_DIR DEST [NAME=VARIANT_BUILD_DIR ...]
#
# DEST/bin gets the GPU test binaries, occl-bench, occl-gpu-copy, occl-gpu-clock and occl-micro;
# DEST/lib every shared library they need
# except the C library's own (libc, libm, libdl, libpthread, librt, the loader), which the target
# machine has in a version at least as new as a build on Debian 12's (glibc 2.36). libnccl is left
# out as well (over 200 MB): run_gpu_suite.sh looks for the target machine's own.
# Each NAME=VARIANT_BUILD_DIR adds that build's occl-bench as DEST/variants/NAME/occl-bench (a
# build with other CMake options, e.g. OCCL_ONLY_DTYPE_MASK=0x80 OCCL_ONLY_OP_MASK=0x1: its
# libraries are the main build's), which the quick run times beside the main one.
# Then, there: OCCL_GPU_PREBUILT=DEST OUT=... tools/gpu/run_gpu_suite.sh quick (or env test sanitize bench)
set -euo pipefail

if [ $# -lt 2 ]; then
  echo "usage: $0 BUILD_DIR DEST [NAME=VARIANT_BUILD_DIR ...]" >&2
  exit 2
fi
build="$1" dest="$2"
shift 2
for v in "$@"; do
  case "$v" in
    *=*) [ -x "${v#*=}/bench/occl-bench" ] || { echo "$0: ${v#*=}/bench/occl-bench is missing (variant ${v%%=*})" >&2; exit 1; } ;;
    *) echo "$0: '$v': expected NAME=VARIANT_BUILD_DIR" >&2; exit 2 ;;
  esac
done
bins=("$build/tests/gpu/gpu_collectives_test" "$build/tests/gpu/gpu_streams_test" "$build/tests/gpu/gpu_vector_test" "$build/tests/gpu/quit_vote_test"
      "$build/bench/occl-bench"
      "$build/bench/occl-gpu-copy" "$build/bench/occl-gpu-clock" "$build/bench/occl-micro")
for b in "${bins[@]}"; do
  [ -x "$b" ] || { echo "$0: $b is missing: build it first (a CUDA build with tests and bench)" >&2; exit 1; }
done

rm -rf "$dest"
mkdir -p "$dest/bin" "$dest/lib"
cp "${bins[@]}" "$dest/bin/"
ldd "${bins[@]}" | awk '$2 == "=>" && $3 ~ /^\// {print $1, $3}' | sort -u |
  while read -r name path; do
    case "$name" in
      libc.so.*|libm.so.*|libdl.so.*|libpthread.so.*|librt.so.*|ld-linux*|libnccl.so.*) ;;
      *) cp -L "$path" "$dest/lib/$name" ;;
    esac
  done
for v in "$@"; do
  mkdir -p "$dest/variants/${v%%=*}"
  cp "${v#*=}/bench/occl-bench" "$dest/variants/${v%%=*}/"
done
git -C "$(dirname "${BASH_SOURCE[0]}")" rev-parse HEAD >"$dest/commit.txt" 2>/dev/null || true
du -sh "$dest"
