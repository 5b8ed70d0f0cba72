#!/usr/bin/env bash
# Same-machine A/B of occl-bench builds: old (b46273c), head (c9db153), fix (arrivalEveryTiles 8 on CUDA).
set -u
P="$(cd "$(dirname "$0")" && pwd)"
D="$1"
mkdir -p "$D"
nccl=""
for c in /usr/local/cuda/lib64 /usr/local/cuda/lib /usr/lib/x86_64-linux-gnu /opt/torch/.venv/lib/python3*/site-packages/nvidia/nccl/lib; do
  [ -e "$c/libnccl.so.2" ] && { nccl="$c"; break; }
done
export LD_LIBRARY_PATH="$P/lib${nccl:+:$nccl}"
one() {  # label binary ranks extra-env...
  local label="$1" bin="$2" g="$3"; shift 3
  local dev=0; [ "$g" = 4 ] && dev=0,0,0,0
  echo "=== $label -g $g $*"
  env "$@" timeout 60 "$P/bin/$bin" allreduce --backend cuda -b 256K -e 64M -f 4 -n 20 -w 2 -g "$g" --devlist "$dev" | grep -v "^# [A-Z]"
}
{
  for round in 1 2; do
    one old occl-bench-old 1
    one head occl-bench-head 1
    one fix occl-bench-fix 1
    one head-slot1M occl-bench-head 1 OCCL_CONN_SLOT_BYTES=1048576
  done
  one head occl-bench-head 4
  one fix occl-bench-fix 4
  one old occl-bench-old 4
} > "$D/ab.log" 2>&1
