#!/usr/bin/env bash
# The sweeps of bench/results/gpu-2026-11-27.md beyond run_gpu_suite.sh, run from a packed build
# (tools/gpu/pack_prebuilt.sh) whose bin/ also held occl-bench-old (b46273c), occl-bench-head
# (c9db153) and occl-bench-fix (c9db153 with arrivals every 8th tile):
#   sweeps.sh PACKED_DIR OUT_DIR extra|ab|slots
# (the session ran each as a script of its own in PACKED_DIR, one call each).
set -u
P="$(cd "$1" && pwd)"
D="$2"
mkdir -p "$D"
nccl=""
for c in /usr/local/cuda/lib64 /usr/local/cuda/lib /usr/lib/x86_64-linux-gnu /opt/torch/.venv/lib/python3*/site-packages/nvidia/nccl/lib; do
  [ -e "$c/libnccl.so.2" ] && { nccl="$c"; break; }
done
export LD_LIBRARY_PATH="$P/lib${nccl:+:$nccl}"

# bench LABEL BINARY RANKS SIZES... [-- ENV...]: one AllReduce sweep on GPU 0.
bench() {
  local label="$1" bin="$2" g="$3" dev
  shift 3
  dev=$(printf '0,%.0s' $(seq 1 "$g"))
  dev=${dev%,}
  echo "=== $label -g $g"
  timeout 120 "$P/bin/$bin" allreduce --backend cuda -n 20 -w 2 -g "$g" --devlist "$dev" "$@" | grep -v "^# [A-Z]"
}

case "${3:-}" in
  extra)  # 4 daemon blocks on 1 and 4 ranks, and 2 ranks (as the first GPU run's extra/)
    {
      bench "allreduce --blocks 4" occl-bench 1 -b 8 -e 64M -f 4 --blocks 4 --json "$D/allreduce-g1-blocks4.json"
      bench "allreduce --blocks 4" occl-bench 4 -b 8 -e 64M -f 4 --blocks 4 --json "$D/allreduce-g4-blocks4.json"
      bench "allreduce" occl-bench 2 -b 8 -e 64M -f 4 --json "$D/allreduce-g2.json"
    } >"$D/extra.log" 2>&1 ;;
  ab)  # old, head and fix side by side; head with 1 MiB slots
    {
      for round in 1 2; do
        bench old occl-bench-old 1 -b 256K -e 64M -f 4
        bench head occl-bench-head 1 -b 256K -e 64M -f 4
        bench fix occl-bench-fix 1 -b 256K -e 64M -f 4
        OCCL_CONN_SLOT_BYTES=1048576 bench "head-slot1M OCCL_CONN_SLOT_BYTES=1048576" occl-bench-head 1 -b 256K -e 64M -f 4
      done
      for b in head fix old; do bench "$b" "occl-bench-$b" 4 -b 256K -e 64M -f 4; done
    } >"$D/ab.log" 2>&1 ;;
  slots)  # the fix build with 128 KiB, 512 KiB and 1 MiB slots
    {
      for round in 1 2; do
        for s in 131072 524288 1048576; do
          for g in 1 4; do OCCL_CONN_SLOT_BYTES=$s bench "slot $s" occl-bench-fix "$g" -b 8 -e 64M -f 4; done
        done
      done
    } >"$D/slots.log" 2>&1 ;;
  *) echo "usage: $0 PACKED_DIR OUT_DIR extra|ab|slots" >&2; exit 2 ;;
esac
