#!/usr/bin/env bash
# The MoE token exchange (moe.hpp) on 8 ranks: occl's AllToAllv as threads and as processes,
# Open MPI's MPI_Alltoallv and gloo::alltoallv as processes, each REPS times (3) interleaved.
# Every table goes to OUTDIR/<run>.r<k>.txt, and OUTDIR/medians.md holds each size's median time
# per runner with occl's divided by Open MPI's. Needs openmpi-bin libopenmpi-dev libgloo-dev (the
# runners whose library is missing are skipped, named on stderr). Measure on a quiet machine.
# Overrides: NRANKS (8), REPS (3), MINTOKENS (4), MAXTOKENS (4096), FACTOR (4), ITERS (20),
# WARMUP (8: every routing once before the clock), TOKEN_BYTES (2048), ZIPF (1.2), BUILD_DIR (build-cpu), JOBS (2),
# SETTLE_ITERS (25000) and GLOO_SETTLE_ITERS (100): untimed steps before the first row, about half
# a second each at 4 tokens (occl and Open MPI ~20 us a step on 2 cores, Gloo ~4 ms), so that the
# scheduler's placement of the ranks settles (--settle-iters).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../baselines/common.sh"
comparison_usage "$0" "$@"
comparison_setup "$1"
NRANKS="${NRANKS:-8}"
REPS="${REPS:-3}"
SWEEP=(-b "${MINTOKENS:-4}" -e "${MAXTOKENS:-4096}" -f "${FACTOR:-4}" -n "${ITERS:-20}" -w "${WARMUP:-8}"
       --token-bytes "${TOKEN_BYTES:-2048}" --zipf "${ZIPF:-1.2}")
if [ ! -f "$BUILD_DIR/CMakeCache.txt" ]; then
  cmake -S . -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE=Release -DOCCL_ENABLE_CUDA=OFF
else
  cmake "$BUILD_DIR" > /dev/null
fi
known="$(cmake --build "$BUILD_DIR" --target help)"
targets=(occl-moe-bench)
for t in mpi-moe-bench gloo-moe-bench; do
  if [[ "$known" == *"$t"* ]]; then targets+=("$t"); else echo "$0: $t is not configured: skipped" >&2; fi
done
cmake --build "$BUILD_DIR" -j "$JOBS" --target "${targets[@]}"
MOE="$BUILD_DIR/bench/moe"
SETTLE=(--settle-iters "${SETTLE_ITERS:-25000}")
GLOO_SETTLE=(--settle-iters "${GLOO_SETTLE_ITERS:-100}")
MPIRUN=(mpirun --oversubscribe --allow-run-as-root -np "$NRANKS")
for k in $(seq 1 "$REPS"); do
  timeout "$RUN_TIMEOUT" "$MOE/occl-moe-bench" -g "$NRANKS" "${SWEEP[@]}" "${SETTLE[@]}" > "$OUT/occl-threads.r$k.txt"
  if command -v mpirun > /dev/null; then
    timeout "$RUN_TIMEOUT" "${MPIRUN[@]}" "$MOE/occl-moe-bench" "${SWEEP[@]}" "${SETTLE[@]}" > "$OUT/occl-processes.r$k.txt"
    if [[ " ${targets[*]} " == *" mpi-moe-bench "* ]]; then
      timeout "$RUN_TIMEOUT" "${MPIRUN[@]}" "$MOE/mpi-moe-bench" "${SWEEP[@]}" "${SETTLE[@]}" > "$OUT/openmpi.r$k.txt"
    fi
    if [[ " ${targets[*]} " == *" gloo-moe-bench "* ]]; then
      store="$(mktemp -d)"
      GLOO_STORE_DIR="$store" timeout "$RUN_TIMEOUT" "${MPIRUN[@]}" -x GLOO_STORE_DIR "$MOE/gloo-moe-bench" "${SWEEP[@]}" "${GLOO_SETTLE[@]}" \
        > "$OUT/gloo-processes.r$k.txt"
      rm -rf "$store"
    fi
  fi
done
python3 - "$OUT" <<'PY'
import collections, glob, os, re, statistics, sys
out = sys.argv[1]
times = collections.defaultdict(lambda: collections.defaultdict(list))  # run -> tokens -> [us]
for path in sorted(glob.glob(os.path.join(out, "*.r*.txt"))):
    run = re.sub(r"\.r\d+\.txt$", "", os.path.basename(path))
    for line in open(path):
        f = line.split()
        if f and f[0].isdigit():
            times[run][int(f[0])].append(float(f[3]))
runs = sorted(times)
sizes = sorted({t for r in runs for t in times[r]})
lines = ["| tokens/rank | " + " | ".join(f"{r} (us)" for r in runs) + " | occl threads / Open MPI | occl processes / Open MPI |",
         "|---:|" + "---:|" * (len(runs) + 2)]
med = lambda r, t: statistics.median(times[r][t]) if times[r].get(t) else None
for t in sizes:
    cells = [f"{med(r, t):.1f}" if med(r, t) is not None else "-" for r in runs]
    ratio = lambda r: f"{med(r, t) / med('openmpi', t):.2f}" if med(r, t) and med("openmpi", t) else "-"
    lines.append(f"| {t} | " + " | ".join(cells) + f" | {ratio('occl-threads')} | {ratio('occl-processes')} |")
open(os.path.join(out, "medians.md"), "w").write("\n".join(lines) + "\n")
print("\n".join(lines))
PY
