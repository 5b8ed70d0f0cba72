#!/usr/bin/env bash
# Rewrites the emitted fixtures of this folder with occl-ir emit (README.md lists them):
#   tests/data/msccl-ir/regenerate.sh [BUILD_DIR]   (default build)
# ir_emit_test fails when a committed file differs from what the generators write today.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
ir="$(cd "$here/../../.." && pwd)/${1:-build}/tools/occl-ir"
emit() {
  local file="$1"
  shift
  "$ir" emit "$@" > "$here/$file"
}
emit ring_allreduce_4r.xml allreduce --ranks 4
emit ring_allreduce_3r_2ch.xml allreduce --ranks 3 --channels 2
emit ring_allgather_4r.xml allgather --ranks 4
emit ring_reduce_scatter_4r.xml reduce_scatter --ranks 4
emit chain_reduce_4r_root1.xml reduce --ranks 4 --root 1
emit chain_broadcast_4r_root2.xml broadcast --ranks 4 --root 2
emit direct_alltoall_4r.xml alltoall --ranks 4
emit allpairs_allreduce_4r.xml allreduce --ranks 4 --algo allpairs
emit allpairs_allreduce_8r.xml allreduce --ranks 8 --algo allpairs
