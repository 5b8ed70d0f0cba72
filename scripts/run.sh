#!/usr/bin/env bash
# The main job: builds occl and runs occl-bench AllReduce on 4 ranks (8 B .. 64 MiB), then the
# deadlock torture demo (8 ranks submitting collectives in different orders), on the host backend.
# OCCL_BACKEND=cuda is passed through to occl-bench: its ranks then run on the GPU with device
# buffers (rank r on CUDA device r % device count), and without a GPU it stops with its
# "no CUDA device" error instead of a host run that looks like a GPU one (its table's first line
# names the backend that ran).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/deps.sh
occl_install_deps
BUILD_DIR="${OCCL_BUILD_DIR:-build}"
occl_build "$BUILD_DIR"
BACKEND="${OCCL_BACKEND:-host}"
"$BUILD_DIR/bench/occl-bench" allreduce --backend "$BACKEND" -b 8 -e 64M -f 2 -g 4 -n 20 -w 5
"$BUILD_DIR/tools/occl-torture" --ranks 8 --colls 8 --min-bytes 256 --max-bytes 1M --iters 50 --order shuffled
