#!/usr/bin/python3
"""Median table of repeated benchmark runs, for the comparison scripts of bench/baselines.

    median_table.py OUTDIR RUN...

Reads OUTDIR/RUN.r<k>.txt (every repetition k of RUN; RUN.txt when it ran once), each an
occl-bench-format table (occl-bench and the baselines print the same columns), and prints a
Markdown table: per size and RUN, the median out-of-place time (us) and bus bandwidth (GB/s) over
the repetitions, with the fastest and slowest time beside the median. Last line: how many rows
of all runs reported a wrong element (0 unless a result was wrong). A RUN with no file is left
out of the table, and named on stderr.
"""
import glob
import os
import re
import statistics
import sys

ROW = re.compile(r"^\s*\d")


def read_table(path):
    """{size: (oop time us, oop busbw, #wrong oop + in place)} of one run's file."""
    rows = {}
    with open(path) as f:
        for line in f:
            if not ROW.match(line):
                continue
            col = line.split()
            if len(col) < 13:
                continue
            try:
                rows[int(col[0])] = (float(col[5]), float(col[7]), int(col[8]) + int(col[12]))
            except ValueError:
                continue  # a size the runner could not run prints words instead of numbers
    return rows


def repetitions(outdir, run):
    paths = sorted(glob.glob(os.path.join(outdir, run + ".r*.txt")))
    if not paths and os.path.exists(os.path.join(outdir, run + ".txt")):
        paths = [os.path.join(outdir, run + ".txt")]
    return [read_table(p) for p in paths]


def main(argv):
    if len(argv) < 3:
        sys.stderr.write("usage: median_table.py OUTDIR RUN...\n")
        return 2
    outdir, runs = argv[1], []
    for run in argv[2:]:
        reps = repetitions(outdir, run)
        if reps:
            runs.append((run, reps))
        else:
            sys.stderr.write("median_table: no %s.r*.txt or %s.txt in %s: left out\n" % (run, run, outdir))
    if not runs:
        return 1
    sizes = sorted({s for _, reps in runs for rep in reps for s in rep})
    head = "| bytes |" + "".join(" %s us (n=%d) | min-max | GB/s |" % (run, len(reps)) for run, reps in runs)
    print(head)
    print("|---:|" + "---:|---|---:|" * len(runs))
    wrong = 0
    for size in sizes:
        cells = []
        for _, reps in runs:
            got = [rep[size] for rep in reps if size in rep]
            if not got:
                cells.append(" - | - | - |")
                continue
            times = [g[0] for g in got]
            wrong += sum(g[2] for g in got)
            cells.append(" %.1f | %.0f-%.0f | %.2f |" % (statistics.median(times), min(times), max(times),
                                                         statistics.median(g[1] for g in got)))
        print("| %d |%s" % (size, "".join(cells)))
    print()
    print("Rows with a wrong element, all runs and repetitions: %d" % wrong)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
