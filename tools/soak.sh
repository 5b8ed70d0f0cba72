#!/usr/bin/env bash
# The release soak: tests/deadlock/soak_test (8 ranks in the world, halves and pairs, every
# collective type in random per-rank orders, every byte checked) for an hour instead of the
# suite's 10,000 collectives. Prints the seed first: OCCL_SOAK_SEED=<seed> replays a failure.
#
# usage: tools/soak.sh [SECONDS] [BUILD_DIR]     (default 3600, build)
# env:   OCCL_SOAK_SEED  seed (default: the time)
#        OCCL_BACKEND    host (default) or simt: the CUDA daemon's device code on emulated blocks
set -euo pipefail
cd "$(dirname "$0")/.."
seconds="${1:-3600}"
build="${2:-build}"
if ! [[ "$seconds" =~ ^[1-9][0-9]*$ ]]; then
  echo "usage: tools/soak.sh [SECONDS] [BUILD_DIR]: SECONDS '$seconds' is not a positive integer" >&2
  exit 2
fi
if [ ! -d "$build" ]; then
  source scripts/deps.sh
  occl_install_deps
  occl_build "$build"
fi
cmake --build "$build" --target soak_test -j "$(nproc)"
seed="${OCCL_SOAK_SEED:-$(date +%s)}"
echo "soak: ${seconds} s, seed ${seed}, backend ${OCCL_BACKEND:-host}"
# ctest's own timeout does not apply here; the test bounds every round (60 s) itself.
OCCL_SOAK_SECONDS="$seconds" OCCL_SOAK_SEED="$seed" "$build/tests/deadlock/soak_test" --gtest_brief=0
