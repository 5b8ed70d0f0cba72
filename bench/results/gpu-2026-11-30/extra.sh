#!/usr/bin/env bash
# The measurements of 2026-11-30 that ran after the prepared suite (tools/gpu/run_gpu_suite.sh
# quick), in the same call: extra.sh PREBUILT_DIR OUT_DIR. Each step is bounded by `timeout`.
set -u
P=${1:?the packed build (tools/gpu/pack_prebuilt.sh)}
O=${2:?the folder that receives the logs}
export LD_LIBRARY_PATH=$P/lib:/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
B=$P/bin
run() {
  local name=$1
  shift
  echo "== $name: $*"
  timeout -k 5 60 "$@" >"$O/$name.log" 2>&1
  echo "   $name: rc=$?"
}
# A count per submission (issue 45): every size registered for 1 MiB (desc.variableCount) and
# submitted with its own count, beside the same sizes registered at their own counts.
run varcount-g1 "$B/occl-bench" allreduce --backend cuda -b 8 -e 1M -f 16 -g 1 -n 100 -w 10 --max-count 1M
run plain-g4 "$B/occl-bench" allreduce --backend cuda -b 8 -e 1M -f 16 -g 4 --devlist 0,0,0,0 -n 50 -w 5
run varcount-g4 "$B/occl-bench" allreduce --backend cuda -b 8 -e 1M -f 16 -g 4 --devlist 0,0,0,0 -n 50 -w 5 --max-count 1M
# Native Gather and Scatter, and AllToAll, on four ranks of the GPU.
for coll in gather scatter alltoall; do
  run "$coll-g4" "$B/occl-bench" "$coll" --backend cuda -b 8 -e 16M -f 16 -g 4 --devlist 0,0,0,0 -n 10 -w 3
done
# Where a one-rank 8 B AllReduce's ~22 us go between the try's start and its first data: one
# daemon block against the default.
OCCL_DAEMON_BLOCKS=1 run timeline-g1-1block "$B/occl-bench" allreduce --backend cuda -b 8 -e 32K -f 64 -g 1 -n 100 -w 10 --timeline
OCCL_DAEMON_BLOCKS=1 run allreduce-g1-1block "$B/occl-bench" allreduce --backend cuda -b 8 -e 64M -f 8 -g 1 -n 20 -w 3
