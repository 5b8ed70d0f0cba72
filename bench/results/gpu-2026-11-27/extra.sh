#!/usr/bin/env bash
# Extra sweeps after run_gpu_suite.sh: 4 daemon blocks, 1 and 4 ranks (as the first GPU run's extra/).
set -u
P="$(cd "$(dirname "$0")" && pwd)"
D="$1"
mkdir -p "$D"
nccl=""
for c in /usr/local/cuda/lib64 /usr/local/cuda/lib /usr/lib/x86_64-linux-gnu /opt/torch/.venv/lib/python3*/site-packages/nvidia/nccl/lib; do
  [ -e "$c/libnccl.so.2" ] && { nccl="$c"; break; }
done
export LD_LIBRARY_PATH="$P/lib${nccl:+:$nccl}"
B="$P/bin/occl-bench"
{
  echo "=== allreduce -g 1 --blocks 4"
  timeout 90 "$B" allreduce --backend cuda -b 8 -e 64M -f 4 -n 20 -w 2 -g 1 --blocks 4 --json "$D/allreduce-g1-blocks4.json"
  echo "=== allreduce -g 4 --devlist 0,0,0,0 --blocks 4"
  timeout 120 "$B" allreduce --backend cuda -b 8 -e 64M -f 4 -n 20 -w 2 -g 4 --devlist 0,0,0,0 --blocks 4 --json "$D/allreduce-g4-blocks4.json"
  echo "=== allreduce -g 2 --devlist 0,0"
  timeout 90 "$B" allreduce --backend cuda -b 8 -e 64M -f 4 -n 20 -w 2 -g 2 --devlist 0,0 --json "$D/allreduce-g2.json"
} > "$D/extra.log" 2>&1
