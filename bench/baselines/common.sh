# Shared by run_host_comparison.sh and run_net_comparison.sh (sourced, from the repository root).

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
