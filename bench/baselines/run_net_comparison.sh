#!/usr/bin/env bash
# occl across two hosts against Open MPI and Gloo over TCP, and the link's own ceiling: AllReduce
# (float sum) on 2 hosts x 2 ranks, where the two "hosts" are network namespaces of this machine
# joined by a veth pair (10.99.0.1 and 10.99.0.2 on interface occl0, as tests/net makes them).
# Needs root (namespaces); every table is measured by occl-bench's loop (bench/baselines).
#
#   bench/baselines/run_net_comparison.sh OUTDIR
#
# Runs, each REPS times interleaved (run 1 of every runner, then run 2, ...) to
# OUTDIR/<run>.r<k>.txt (stderr to .err, command line to .cmd), a line per run in
# OUTDIR/summary.txt, and the medians over the repetitions side by side in OUTDIR/medians.md
# (median_table.py):
#   ceiling         ucx_perftest tag_bw host 0 -> host 1 over UCX's TCP transport, at MAXBYTES
#   ceiling2        the same with a second stream host 1 -> host 0 at once (both directions, as a
#                   ring AllReduce uses the link)
#   occl-torchrun   occl-bench, one process per rank with torchrun's variables, ranks 0,1 on host 0
#                   and 2,3 on host 1 (NET connector between hosts, shared memory within one)
#   occl-mpirun     the same under mpirun (-x passes the variables), started on host 0 and
#                   reaching host 1 through its remote-shell launcher (an agent that enters the
#                   namespace where ssh would log in)
#   mpi             mpi-allreduce-bench under that mpirun, --mca pml ob1 --mca btl self,tcp on
#                   occl0 (every pair over TCP: Open MPI's shared memory would cross the "hosts"
#                   through the /dev/shm they share)
#   gloo            gloo-allreduce-bench, one process per rank, GLOO_SOCKET_IFNAME=occl0
# A baseline whose program or launcher is missing is skipped (Debian: openmpi-bin libopenmpi-dev
# libgloo-dev ucx-utils).
#
# UCX is forced to TCP on occl0 (UCX_TLS=tcp): /dev/shm is shared between the namespaces, and UCX
# would otherwise take shared memory between the "hosts".
#
# Environment: BUILD_DIR (build-cpu), JOBS (2), MINBYTES (8), MAXBYTES (64M), FACTOR (2),
# ITERS (20), WARMUP (5), RUN_TIMEOUT seconds per run (1800), REPS (3; single runs on a small
# machine swing by a third).
set -euo pipefail

source "$(dirname "$0")/common.sh"
comparison_usage "$0" "$@"
if [ "$(id -u)" -ne 0 ]; then
  echo "run_net_comparison: network namespaces need root" >&2
  exit 2
fi
comparison_setup "$1"
NRANKS=4
RANKS_PER_HOST=2
DEV=occl0
ADDR=(10.99.0.1 10.99.0.2)
NS=("occlbench-$$-a" "occlbench-$$-b")

build_baselines run_net_comparison

# The two hosts; removed (with the veth pair) on exit.
cleanup() { for n in "${NS[@]}"; do ip netns delete "$n" 2> /dev/null || true; done; }
trap cleanup EXIT
ip netns add "${NS[0]}"
ip netns add "${NS[1]}"
ip link add "ocb$$a" type veth peer name "ocb$$b"
for k in 0 1; do
  end="ocb$$$([ $k -eq 0 ] && echo a || echo b)"
  ip link set "$end" netns "${NS[$k]}"
  ip -n "${NS[$k]}" link set "$end" name "$DEV"
  ip -n "${NS[$k]}" addr add "${ADDR[$k]}/24" dev "$DEV"
  ip -n "${NS[$k]}" link set "$DEV" up
  ip -n "${NS[$k]}" link set lo up
done
inhost() { local k=$1; shift; ip netns exec "${NS[$k]}" "$@"; }

UCX_ENV=(UCX_TLS=tcp "UCX_NET_DEVICES=$DEV" UCX_WARN_UNUSED_ENV_VARS=n)

# One process per rank with torchrun's variables, each in its host's namespace; rank 0 prints.
torchrun_ranks() {
  local pids=() rc=0 store port=$((29500 + RANDOM % 1000))
  store="$(mktemp -d)"  # gloo's file store must start empty
  for ((r = 0; r < NRANKS; r++)); do
    inhost $((r / RANKS_PER_HOST)) env RANK=$r WORLD_SIZE=$NRANKS LOCAL_RANK=$((r % RANKS_PER_HOST)) \
      MASTER_ADDR="${ADDR[0]}" MASTER_PORT=$port OCCL_SOCKET_IFNAME=$DEV GLOO_SOCKET_IFNAME=$DEV \
      GLOO_STORE_DIR="$store" "${UCX_ENV[@]}" timeout "$RUN_TIMEOUT" "$@" &
    pids+=($!)
  done
  for p in "${pids[@]}"; do wait "$p" || rc=$?; done
  rm -rf "$store"
  return "$rc"
}

# mpirun runs on host 0 and reaches host 1 as it would reach another machine, through its
# remote-shell launcher: the agent below enters host 1's namespace instead of ssh-ing there, and
# host 1's orted calls mpirun back over the veth.
MPIRUN=()
AGENT="$OUT/netns_rsh.sh"
cat > "$AGENT" << EOF
#!/bin/sh
# mpirun's rsh agent: "\$1" is the host (10.99.0.2), the rest the command to run there.
shift
exec ip netns exec ${NS[1]} sh -c "\$*"
EOF
chmod +x "$AGENT"
if command -v mpirun > /dev/null; then
  MPIRUN=(ip netns exec "${NS[0]}" mpirun -np "$NRANKS" -H "${ADDR[0]}:$RANKS_PER_HOST,${ADDR[1]}:$RANKS_PER_HOST" --bind-to none
          --allow-run-as-root --mca plm_rsh_agent "$AGENT" --mca oob_tcp_if_include $DEV)
fi

failed=0
run() {  # NAME COMMAND...
  local name=$1 rc=0 before after n status=ok
  shift
  echo "run_net_comparison: $name: $*" >&2
  echo "# command: $*" > "$OUT/$name.cmd"
  before="$(cut -d' ' -f1-3 /proc/loadavg)"
  "$@" > "$OUT/$name.txt" 2> "$OUT/$name.err" || rc=$?
  after="$(cut -d' ' -f1-3 /proc/loadavg)"
  echo "# loadavg before: $before after: $after" >> "$OUT/$name.txt"
  read -r -a n <<< "$(row_numbers "$OUT/$name.txt")"
  [ "$rc" -eq 0 ] || { status="FAILED(rc=$rc)"; failed=1; }
  printf "%-15s %9s %9s %9s %9s %6s  %-14s -> %-14s %s\n" "$name" "${n[0]}" "${n[1]}" "${n[2]}" "${n[3]}" "${n[4]}" \
    "$before" "$after" "$status" >> "$OUT/summary.txt"
}

{
  echo "# AllReduce float sum, 2 hosts (network namespaces, veth) x 2 ranks on $(hostname) ($(nproc) cores), ${SWEEP[*]}, $(date -u +%FT%TZ)"
  echo "# first size: time (us); last size: busbw (GB/s); oop = out of place, ip = in place"
  printf "%-15s %9s %9s %9s %9s %6s  %-14s    %-14s\n" "# run" "t.oop" "t.ip" "bw.oop" "bw.ip" "#wrong" \
    "load before" "load after"
} > "$OUT/summary.txt"

# The ceilings, at the largest size: one UCX tag stream host 0 -> host 1 (the link one way), and
# one stream each way at once (what a ring AllReduce asks of the link: every cross-host edge
# carries 2(n-1)/n of the buffer in each direction, so its busbw is what each direction moves).
# The final line's overall bandwidth (all bytes over all the time; its "average" column is the
# last interval's, which a stall of one stream under the other makes meaningless), MB/s (UCX's
# MB = 2^20 bytes) -> GB/s.
perftest_gbs() {  # FILE
  awk '/^Final:/ { printf "%.2f", $7 * 1048576 / 1e9 }' "$1"
}
ceiling() {  # REP
  command -v ucx_perftest > /dev/null || return 0
  local bytes rc=0 bw back
  bytes="$(numfmt --from=iec "$MAXBYTES")"
  local client=(ucx_perftest -t tag_bw -s "$bytes" -n 50 -w 5)
  inhost 1 env "${UCX_ENV[@]}" ucx_perftest -p 13337 > "$OUT/ceiling.server" 2>&1 &
  sleep 1
  inhost 0 env "${UCX_ENV[@]}" timeout "$RUN_TIMEOUT" "${client[@]}" "${ADDR[1]}" -p 13337 \
    > "$OUT/ceiling.r$1.txt" 2> "$OUT/ceiling.r$1.err" || rc=$?
  wait || true
  bw="$(perftest_gbs "$OUT/ceiling.r$1.txt")"
  printf "%-15s %9s %9s %9s %9s %6s  %s\n" "ceiling.r$1" - - "${bw:--}" - - "ucx_perftest tag_bw ${bytes} B (rc=$rc)" >> "$OUT/summary.txt"

  rc=0
  inhost 1 env "${UCX_ENV[@]}" ucx_perftest -p 13338 >> "$OUT/ceiling.server" 2>&1 &
  inhost 0 env "${UCX_ENV[@]}" ucx_perftest -p 13339 >> "$OUT/ceiling.server" 2>&1 &
  sleep 1
  inhost 1 env "${UCX_ENV[@]}" timeout "$RUN_TIMEOUT" "${client[@]}" "${ADDR[0]}" -p 13339 \
    > "$OUT/ceiling2.r$1.back.txt" 2> "$OUT/ceiling2.r$1.back.err" &
  inhost 0 env "${UCX_ENV[@]}" timeout "$RUN_TIMEOUT" "${client[@]}" "${ADDR[1]}" -p 13338 \
    > "$OUT/ceiling2.r$1.txt" 2> "$OUT/ceiling2.r$1.err" || rc=$?
  wait || true
  bw="$(perftest_gbs "$OUT/ceiling2.r$1.txt")"
  back="$(perftest_gbs "$OUT/ceiling2.r$1.back.txt")"
  printf "%-15s %9s %9s %9s %9s %6s  %s\n" "ceiling2.r$1" - - "${bw:--}" "${back:--}" - \
    "ucx_perftest tag_bw ${bytes} B both ways at once: 0->1, 1->0 (rc=$rc)" >> "$OUT/summary.txt"
}

for ((rep = 1; rep <= ${REPS:-3}; rep++)); do
  ceiling "$rep"
  run "occl-torchrun.r$rep" torchrun_ranks "$BIN/occl-bench" allreduce --backend host "${SWEEP[@]}"
  if [ ${#MPIRUN[@]} -gt 0 ]; then
    run "occl-mpirun.r$rep" timeout "$RUN_TIMEOUT" "${MPIRUN[@]}" -x "OCCL_COMM_ID=${ADDR[0]}:$((29500 + RANDOM % 1000))" \
      -x OCCL_SOCKET_IFNAME=$DEV -x UCX_TLS=tcp -x UCX_NET_DEVICES=$DEV -x UCX_WARN_UNUSED_ENV_VARS=n \
      "$PWD/$BIN/occl-bench" allreduce --backend host "${SWEEP[@]}"
    if has mpi-allreduce-bench; then
      run "mpi.r$rep" timeout "$RUN_TIMEOUT" "${MPIRUN[@]}" --mca pml ob1 --mca btl self,tcp --mca btl_tcp_if_include $DEV \
        "$PWD/$BIN/baselines/mpi-allreduce-bench" "${SWEEP[@]}"
    fi
  fi
  if has gloo-allreduce-bench; then
    run "gloo.r$rep" torchrun_ranks "$BIN/baselines/gloo-allreduce-bench" "${SWEEP[@]}"
  fi
done

bench/baselines/median_table.py "$OUT" occl-torchrun occl-mpirun mpi gloo > "$OUT/medians.md" || failed=1
cat "$OUT/summary.txt" "$OUT/medians.md"
exit $failed
