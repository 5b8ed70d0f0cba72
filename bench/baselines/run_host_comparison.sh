#!/usr/bin/env bash
# occl against Open MPI and Gloo: AllReduce (float sum) on 4 ranks of this machine, every table
# measured by the same loop (see bench/baselines/baseline.hpp) and printed in occl-bench's format.
#
#   bench/baselines/run_host_comparison.sh OUTDIR
#
# Every runner runs REPS times, interleaved (repetition 1 of every runner, then 2, ...), each to
# OUTDIR/<run>.r<k>.txt (the table, then a "# loadavg" line), .err and .json (occl-bench's
# --json, which the baselines write too). Then OUTDIR/summary.txt: the smallest size's time and
# the largest size's busbw of every run side by side, with /proc/loadavg before and after each
# run (a run on a loaded machine says little: compare the load columns before the numbers);
# OUTDIR/medians.md: the median over the repetitions of every size and runner (median_table.py),
# and the machine's memcpy bandwidth at 64 MiB measured once per repetition (memcpy.txt);
# OUTDIR/latency.png and busbw.png: the medians as charts, one line per runner (bench/plot.py,
# where python3-matplotlib is installed).
#
# Runs: occl-threads (occl-bench -g 4), occl-processes (one rank per process), mpi
# (mpi-allreduce-bench under mpirun), gloo-threads (-g 4, in-memory store) and gloo-processes
# (file store). occl's processes start under mpirun where it is installed, else as background
# processes with torchrun's variables, as gloo's always do. A baseline whose library is missing is skipped
# (Debian: openmpi-bin libopenmpi-dev libgloo-dev).
#
# Sizes up to SMALL_MAX run SMALL_ITERS timed iterations (occl-bench --small-iters) in occl's and
# Open MPI's runs: at ITERS = 20 a 6 us row spans 120 us, and one descheduled rank decides it; a
# 1 MiB row (0.3-1 ms a run) spans a few milliseconds, and one stretch with three of the 4 ranks
# on one core decides that (the 1 MiB processes row of host-2026-11-27b.md was bimodal: 271-278
# us in two repetitions, 452-509 in three), and at 2-4 MiB 20 iterations spread processes over
# 243-683 us and threads over 202-767 (host-2026-11-27d.md), where 300 put them within 30% of each
# other. 2000 runs up to 4 MiB add about a minute a repetition.
# Gloo's small rows take 0.3-6 ms each, so its 20 iterations already span milliseconds, and 2000
# would add minutes per run: Gloo runs ITERS at every size.
# occl's and Open MPI's runs (and the paired ones below) also settle first: SETTLE_ITERS untimed
# iterations at the smallest size before the first row (--settle-iters). 4 ranks on 2 unbound
# cores start in an uneven placement the scheduler keeps for 50-200 ms, in which a small AllReduce
# takes 6-8 us against 3.4 after (occl) and 6.2 against 4.0 (Open MPI); the same runs with two
# ranks bound to each core never do. A 2000-iteration row lasts 8-15 ms, so the first rows of a
# run measured the placement, one mode or the other, rather than the library.
#
# Then the sizes up to PAIRED_MAX once more, paired: PAIRED_ROUNDS rounds, each running occl's
# threads, occl's processes and Open MPI back to back with PAIRED_ITERS timed iterations, to
# OUTDIR/<runner>.p<k>.txt. A run takes a second or two, so the three of a round meet one stretch
# of the machine, where the repetitions above are minutes apart: on the development VM the medians
# of 5 repetitions at 8-256 B put occl's threads at 0.93-1.03 of Open MPI in one sweep and
# 1.16-1.40 in the next. OUTDIR/paired.md (paired_table.py) gives, per size, the median over the
# rounds of each occl runner's time divided by Open MPI's in the same round.
#
# Environment: BUILD_DIR (build-cpu), JOBS (2), NRANKS (4), MINBYTES (8), MAXBYTES (64M),
# FACTOR (2), ITERS (20), WARMUP (5), SMALL_ITERS (2000; 0 = ITERS everywhere), SMALL_MAX (4M),
# SETTLE_ITERS (50000; 0 = none),
# RUN_TIMEOUT seconds per run (1800), REPS (5), PAIRED_ROUNDS (12; 0 = none), PAIRED_MAX (256),
# PAIRED_ITERS (20000).
set -euo pipefail

source "$(dirname "$0")/common.sh"
comparison_usage "$0" "$@"
comparison_setup "$1"
NRANKS="${NRANKS:-4}"
SMALL=(--small-iters "${SMALL_ITERS:-2000}" --small-max "${SMALL_MAX:-4M}" --settle-iters "${SETTLE_ITERS:-50000}")
build_baselines run_host_comparison
# The machine's copy bandwidth (occl-micro BM_Memcpy at 64 MiB), once per repetition beside the
# sweep: the bound a host AllReduce's busbw is compared with. Needs Google Benchmark.
HAVE_MICRO=0
! cmake --build "$BUILD_DIR" -j "$JOBS" --target occl-micro > /dev/null 2>&1 || HAVE_MICRO=1

MPIRUN=()
if command -v mpirun > /dev/null; then
  # Binding off: 4 ranks may share fewer cores, and threads (occl -g 4, gloo -g 4) are not bound
  # either. Root is refused without the flag (containers).
  MPIRUN=(mpirun -np "$NRANKS" --oversubscribe --bind-to none)
  [ "$(id -u)" -ne 0 ] || MPIRUN+=(--allow-run-as-root)
fi

# One process per rank with torchrun's variables (occl-bench's and gloo-allreduce-bench's other
# launcher); only rank 0 prints the table.
env_ranks() {
  local pids=() rc=0 store port=$((29500 + RANDOM % 1000))
  store="$(mktemp -d)"  # gloo's file store must start empty
  for ((r = 0; r < NRANKS; r++)); do
    RANK=$r WORLD_SIZE=$NRANKS MASTER_ADDR=127.0.0.1 MASTER_PORT=$port GLOO_STORE_DIR="$store" \
      timeout "$RUN_TIMEOUT" "$@" &
    pids+=($!)
  done
  for p in "${pids[@]}"; do wait "$p" || rc=$?; done
  rm -rf "$store"
  return "$rc"
}

summary_line() {  # NAME RC LOAD_BEFORE LOAD_AFTER
  local n
  read -r -a n <<< "$(row_numbers "$OUT/$1.txt")"
  local status=ok
  [ "$2" -eq 0 ] || status="FAILED(rc=$2)"
  printf "%-15s %9s %9s %9s %9s %6s  %-14s -> %-14s %s\n" "$1" "${n[0]}" "${n[1]}" "${n[2]}" "${n[3]}" "${n[4]}" \
    "$3" "$4" "$status" >> "$OUT/summary.txt"
}

failed=0
run() {  # NAME COMMAND...: the table to OUTDIR/NAME.txt, stderr to NAME.err
  local name=$1 rc=0 before after
  shift
  echo "run_host_comparison: $name: $*" >&2
  before="$(cut -d' ' -f1-3 /proc/loadavg)"
  "$@" > "$OUT/$name.txt" 2> "$OUT/$name.err" || rc=$?
  after="$(cut -d' ' -f1-3 /proc/loadavg)"
  echo "# loadavg before: $before after: $after" >> "$OUT/$name.txt"
  summary_line "$name" "$rc" "$before" "$after"
  [ "$rc" -eq 0 ] || failed=1
}

{
  echo "# AllReduce float sum, $NRANKS ranks on $(hostname) ($(nproc) cores), ${SWEEP[*]} (occl, MPI: ${SMALL[*]}), $(date -u +%FT%TZ)"
  echo "# first size: time (us); last size: busbw (GB/s); oop = out of place, ip = in place"
  printf "%-15s %9s %9s %9s %9s %6s  %-14s    %-14s\n" "# run" "t.oop" "t.ip" "bw.oop" "bw.ip" "#wrong" \
    "load before" "load after"
} > "$OUT/summary.txt"

for ((rep = 1; rep <= ${REPS:-5}; rep++)); do
  run "occl-threads.r$rep" timeout "$RUN_TIMEOUT" "$BIN/occl-bench" allreduce --backend host -g "$NRANKS" "${SWEEP[@]}" \
    "${SMALL[@]}" --json "$OUT/occl-threads.r$rep.json"
  if [ ${#MPIRUN[@]} -gt 0 ]; then
    run "occl-processes.r$rep" timeout "$RUN_TIMEOUT" "${MPIRUN[@]}" "$BIN/occl-bench" allreduce --backend host \
      "${SWEEP[@]}" "${SMALL[@]}" --json "$OUT/occl-processes.r$rep.json"
  else
    run "occl-processes.r$rep" env_ranks "$BIN/occl-bench" allreduce --backend host "${SWEEP[@]}" "${SMALL[@]}" \
      --json "$OUT/occl-processes.r$rep.json"
  fi
  if has mpi-allreduce-bench && [ ${#MPIRUN[@]} -gt 0 ]; then
    run "mpi.r$rep" timeout "$RUN_TIMEOUT" "${MPIRUN[@]}" "$BIN/baselines/mpi-allreduce-bench" "${SWEEP[@]}" \
      "${SMALL[@]}" --json "$OUT/mpi.r$rep.json"
  fi
  if has gloo-allreduce-bench; then
    run "gloo-threads.r$rep" timeout "$RUN_TIMEOUT" "$BIN/baselines/gloo-allreduce-bench" -g "$NRANKS" "${SWEEP[@]}" \
      --json "$OUT/gloo-threads.r$rep.json"
    run "gloo-processes.r$rep" env_ranks "$BIN/baselines/gloo-allreduce-bench" "${SWEEP[@]}" \
      --json "$OUT/gloo-processes.r$rep.json"
  fi
  if [ "$HAVE_MICRO" -eq 1 ]; then
    "$BIN/occl-micro" --benchmark_filter='^BM_Memcpy/' --benchmark_format=csv 2> /dev/null |
      awk -F, '/^"?BM_Memcpy/ { printf "%.2f\n", $6 / 1e9 }' >> "$OUT/memcpy.txt" || failed=1
  fi
done

# The small sizes once more, paired (see the top of the file).
PAIRED_ROUNDS="${PAIRED_ROUNDS:-12}"
if [ "$PAIRED_ROUNDS" -gt 0 ] && has mpi-allreduce-bench && [ ${#MPIRUN[@]} -gt 0 ]; then
  PAIRED=(-b "${MINBYTES:-8}" -e "${PAIRED_MAX:-256}" -f "${FACTOR:-2}" -n "${ITERS:-20}" -w "${WARMUP:-5}" -c 1
    --small-iters "${PAIRED_ITERS:-20000}" --small-max "${PAIRED_MAX:-256}" --settle-iters "${SETTLE_ITERS:-50000}")
  for ((round = 1; round <= PAIRED_ROUNDS; round++)); do
    run "occl-threads.p$round" timeout "$RUN_TIMEOUT" "$BIN/occl-bench" allreduce --backend host -g "$NRANKS" \
      "${PAIRED[@]}"
    run "occl-processes.p$round" timeout "$RUN_TIMEOUT" "${MPIRUN[@]}" "$BIN/occl-bench" allreduce --backend host \
      "${PAIRED[@]}"
    run "mpi.p$round" timeout "$RUN_TIMEOUT" "${MPIRUN[@]}" "$BIN/baselines/mpi-allreduce-bench" "${PAIRED[@]}"
  done
  bench/baselines/paired_table.py "$OUT" mpi occl-threads occl-processes > "$OUT/paired.md" || failed=1
else
  echo "run_host_comparison: no paired small sizes (PAIRED_ROUNDS=0, or no Open MPI)" >&2
fi

RUNNERS=(occl-threads occl-processes mpi gloo-threads gloo-processes)
bench/baselines/median_table.py "$OUT" "${RUNNERS[@]}" > "$OUT/medians.md" || failed=1
if [ -s "$OUT/memcpy.txt" ]; then
  printf "\nmemcpy 64 MiB (occl-micro BM_Memcpy), GB/s: median %s of %s\n" \
    "$(sort -n "$OUT/memcpy.txt" | awk '{v[NR] = $1} END {print v[int((NR + 1) / 2)]}')" \
    "$(paste -sd' ' "$OUT/memcpy.txt")" >> "$OUT/medians.md"
fi
if /usr/bin/python3 -c "import matplotlib" 2> /dev/null; then
  charts=()
  for r in "${RUNNERS[@]}"; do
    ! compgen -G "$OUT/$r.r*.json" > /dev/null || charts+=("$r=$OUT/$r.r*.json")
  done
  /usr/bin/python3 bench/plot.py "$OUT" "${charts[@]}" --title "AllReduce float sum, $NRANKS ranks, $(nproc) cores" \
    --commit "$(git rev-parse --short HEAD 2> /dev/null || echo unknown)" \
    || failed=1
else
  echo "run_host_comparison: no charts: install python3-matplotlib" >&2
fi

cat "$OUT/summary.txt" "$OUT/medians.md"
[ ! -s "$OUT/paired.md" ] || cat "$OUT/paired.md"
exit $failed
