#!/usr/bin/env bash
# CUDA compiler launcher (src/CMakeLists.txt): runs the compiler command given after the log's
# path, passes its output through, and keeps ptxas's resource lines (--resource-usage: registers,
# stack frame and spills of each function per architecture) in the log, where
# tests/policy/kernel_resources_test.cpp compares them with tools/gpu/daemon_kernel_resources.txt.
# The log is written only by a compile that succeeded and printed resource lines.
set -uo pipefail
log="$1"
shift
out="$(mktemp)"
"$@" >"$out" 2>&1
status=$?
cat "$out"
if [ "$status" -eq 0 ] && grep -q "bytes stack frame" "$out"; then
  grep -E "Compiling entry function|Function properties for|bytes stack frame|Used [0-9]+ registers" "$out" >"$log.tmp" &&
    mv "$log.tmp" "$log"
fi
rm -f "$out"
exit "$status"
