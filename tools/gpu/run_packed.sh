#!/usr/bin/env bash
# On a lent GPU: unpacks what tools/gpu/prepare_pack.sh packed and runs the quick GPU run from it,
# leaving its results under $OUT (the device tool's folder that comes back):
#
#   OUT=... tools/gpu/run_packed.sh [PACK]     (PACK: default build-gpu-pack/prebuilt.tar.xz)
#
# The archive is opened with Python's tarfile (the machine need not have xz); the quick run's
# folder is copied into $OUT/quick as plain files (it holds the MPS daemon's pipes, which the
# device tool does not bring back), with its summary at $OUT/quick/summary.txt.
set -u
: "${OUT:?set OUT to the folder that receives the results}"
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
PACK="${1:-$ROOT/build-gpu-pack/prebuilt.tar.xz}"
[ -f "$PACK" ] || { echo "run_packed: $PACK is missing: run tools/gpu/prepare_pack.sh here and carry it" >&2; exit 2; }
work="$(mktemp -d)"
python3 -c 'import sys, tarfile; tarfile.open(sys.argv[1]).extractall(sys.argv[2])' "$PACK" "$work" || exit 2
export LD_LIBRARY_PATH="/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
OCCL_GPU_PREBUILT="$work/prebuilt" OUT="$work/quick" timeout 330 bash "$ROOT/tools/gpu/run_gpu_suite.sh" quick
rc=$?
mkdir -p "$OUT/quick"
(cd "$work/quick" && find . -type f -exec cp --parents {} "$OUT/quick/" \;)
echo "run_packed: quick run rc=$rc; results in $OUT/quick"
exit "$rc"
