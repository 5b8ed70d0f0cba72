#!/usr/bin/env bash
# Builds, here (no GPU needed), everything the quick GPU run takes, and packs it into one file
# that the device tool carries to a lent GPU, where tools/gpu/run_packed.sh runs it:
#
#   tools/gpu/prepare_pack.sh        (then: carry build-gpu-pack/prebuilt.tar.xz)
#
#   1. build-gpu-pack: the CUDA build for sm_90 (the H200 lent so far) with the GPU tests and the
#      benchmarks;
#   2. build-gpu-small: the same library keeping the (type, op) pairs occl-bench needs only
#      (OCCL_ONLY_DTYPE_MASK=0x190: int64, float32, float64; OCCL_ONLY_OP_MASK=0x5: Sum, Max;
#      bench/results/kernel-size-2026-11-30.md), occl-bench alone, packed as variant small-kernel;
#   3. pack_prebuilt.sh into build-gpu-pack/prebuilt, binaries stripped, then
#      build-gpu-pack/prebuilt.tar.xz (the device tool carries at most 64 MiB).
#
# About 15 minutes on 2 cores. Knobs: OCCL_GPU_ARCH (default 90), OCCL_GPU_JOBS (default nproc).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$ROOT"
source scripts/deps.sh
occl_install_deps
ARCH="${OCCL_GPU_ARCH:-90}"
JOBS="${OCCL_GPU_JOBS:-$(nproc)}"
MAIN=build-gpu-pack SMALL=build-gpu-small
SECONDS=0
mkdir -p "$MAIN" "$SMALL"
cmake -S . -B "$MAIN" -DCMAKE_BUILD_TYPE=Release -DOCCL_ENABLE_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES="$ARCH" \
  -DOCCL_BUILD_PYTHON=OFF > "$MAIN/configure.log"
cmake --build "$MAIN" -j "$JOBS" --target gpu_collectives_test gpu_streams_test gpu_vector_test quit_vote_test \
  occl-bench occl-gpu-copy occl-gpu-clock occl-micro
cmake -S . -B "$SMALL" -DCMAKE_BUILD_TYPE=Release -DOCCL_ENABLE_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES="$ARCH" \
  -DOCCL_BUILD_PYTHON=OFF -DOCCL_BUILD_TESTS=OFF -DOCCL_ONLY_DTYPE_MASK=0x190 -DOCCL_ONLY_OP_MASK=0x5 > "$SMALL/configure.log"
cmake --build "$SMALL" -j "$JOBS" --target occl-bench
bash tools/gpu/pack_prebuilt.sh "$MAIN" "$MAIN/prebuilt" "small-kernel=$SMALL"
find "$MAIN/prebuilt/bin" "$MAIN/prebuilt/variants" -type f -exec strip {} +
tar -C "$MAIN" -cf - prebuilt | xz -9 -T "$JOBS" > "$MAIN/prebuilt.tar.xz"
ls -la "$MAIN/prebuilt.tar.xz"
echo "prepare_pack: built and packed in ${SECONDS} s; carry $MAIN/prebuilt.tar.xz and run tools/gpu/run_packed.sh"
