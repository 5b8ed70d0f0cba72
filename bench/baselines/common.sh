# Shared by run_host_comparison.sh and run_net_comparison.sh (sourced before either changes
# directory).

# $1: the calling script's path; the rest: its arguments, which must be one OUTDIR.
comparison_usage() {
  if [ $# -ne 2 ]; then
    echo "usage: $1 OUTDIR" >&2
    exit 2
  fi
}

# Moves to the repository root, makes OUTDIR ($1), and sets what both scripts read from the
# environment: OUT (OUTDIR, absolute), BUILD_DIR, JOBS, RUN_TIMEOUT, MAXBYTES, SWEEP (the
# sweep flags of occl-bench and the baselines) and BIN.
comparison_setup() {
  cd "$(dirname "${BASH_SOURCE[0]}")/../.."
  mkdir -p "$1"
  OUT="$(cd "$1" && pwd)"
  BUILD_DIR="${BUILD_DIR:-build-cpu}"
  JOBS="${JOBS:-2}"
  RUN_TIMEOUT="${RUN_TIMEOUT:-1800}"
  MAXBYTES="${MAXBYTES:-64M}"
  SWEEP=(-b "${MINBYTES:-8}" -e "$MAXBYTES" -f "${FACTOR:-2}" -n "${ITERS:-20}" -w "${WARMUP:-5}" -c 1)
  BIN="$BUILD_DIR/bench"
}

# Configures BUILD_DIR (CPU only when new; again when it exists, so that a baseline whose library
# was installed since is found) and builds occl-bench and whichever baselines CMake configured.
# Sets `targets` to what was built; a baseline that is missing is named on stderr as skipped.
# $1: the calling script's name, for messages.
build_baselines() {
  if [ ! -f "$BUILD_DIR/CMakeCache.txt" ]; then
    cmake -S . -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE=Release -DOCCL_ENABLE_CUDA=OFF
  else
    cmake "$BUILD_DIR" > /dev/null
  fi
  targets=(occl-bench)
  local known t
  known="$(cmake --build "$BUILD_DIR" --target help)"
  for t in mpi-allreduce-bench gloo-allreduce-bench; do
    if [[ "$known" == *"$t"* ]]; then
      targets+=("$t")
    else
      echo "$1: $t is not configured (library not found): skipped" >&2
    fi
  done
  cmake --build "$BUILD_DIR" -j "$JOBS" --target "${targets[@]}"
}
has() { [[ " ${targets[*]} " == *" $1 "* ]]; }

# The time of a table's first row and the busbw of its last, out of place and in place, and #wrong.
row_numbers() {
  awk '/^ *[0-9]/ { if (!first) first = $6 " " $10; last = $8 " " $12 }
       /Out of bounds values/ { wrong = $7 }
       END { print (first ? first : "- -"), (last ? last : "- -"), (wrong != "" ? wrong : "-") }' "$1"
}
