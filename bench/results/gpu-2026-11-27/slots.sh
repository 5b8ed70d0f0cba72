#!/usr/bin/env bash
# Tile (connector slot) size on the GPU: the fix build with 128 KiB (default), 512 KiB and 1 MiB slots.
set -u
P="$(cd "$(dirname "$0")" && pwd)"
D="$1"
mkdir -p "$D"
nccl=""
for c in /usr/local/cuda/lib64 /usr/local/cuda/lib /usr/lib/x86_64-linux-gnu /opt/torch/.venv/lib/python3*/site-packages/nvidia/nccl/lib; do
  [ -e "$c/libnccl.so.2" ] && { nccl="$c"; break; }
done
export LD_LIBRARY_PATH="$P/lib${nccl:+:$nccl}"
one() {  # slotBytes ranks
  local s="$1" g="$2" dev=0
  [ "$g" = 4 ] && dev=0,0,0,0
  echo "=== slot $s -g $g"
  OCCL_CONN_SLOT_BYTES=$s timeout 60 "$P/bin/occl-bench-fix" allreduce --backend cuda -b 8 -e 64M -f 4 -n 20 -w 2 -g "$g" --devlist "$dev" | grep -v "^# [A-Z]"
}
{
  for round in 1 2; do
    for s in 131072 524288 1048576; do one $s 1; one $s 4; done
  done
} > "$D/slots.log" 2>&1
