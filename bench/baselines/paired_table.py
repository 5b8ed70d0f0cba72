#!/usr/bin/python3
"""Paired comparison of runners measured round by round, for run_host_comparison.sh's small sizes.

    paired_table.py OUTDIR REFERENCE RUN...

Reads OUTDIR/<name>.p<k>.txt for every round k and every runner (REFERENCE and each RUN), each an
occl-bench-format table. A round ran every runner back to back, so all of them met the same
stretch of a machine whose speed drifts (on a shared VM by up to 2x from one minute to the next):
the ratio of two runners within a round keeps what a median over separate repetitions loses.

Prints a Markdown table: per size, each runner's median time (us; the better of out of place and
in place, the issue's measure) over the rounds, and for each RUN the median over the rounds of
its time divided by REFERENCE's in the same round, with that ratio's lowest and highest. Only
rounds in which every runner has the size count. Last line: the rounds used, and how many rows of
all tables reported a wrong element. Exit status 1 when no round has every runner.
"""
import glob
import os
import re
import statistics
import sys

ROW = re.compile(r"^\s*\d")
ROUND = re.compile(r"\.p(\d+)\.txt$")


def read_table(path):
    """({size: best of oop/ip time us}, rows with a wrong element) of one runner's round."""
    times, wrong = {}, 0
    with open(path) as f:
        for line in f:
            col = line.split()
            if not ROW.match(line) or len(col) < 13:
                continue
            try:
                times[int(col[0])] = min(float(col[5]), float(col[9]))
            except ValueError:
                continue  # a size the runner could not run prints words instead of numbers
            wrong += int(any(c.isdigit() and c != "0" for c in (col[8], col[12])))
    return times, wrong


def rounds_of(outdir, name):
    """{round: path} of one runner."""
    found = {}
    for path in glob.glob(os.path.join(outdir, name + ".p*.txt")):
        m = ROUND.search(path)
        if m:
            found[int(m.group(1))] = path
    return found


def size_name(size):
    for unit, k in (("MiB", 1 << 20), ("KiB", 1 << 10)):
        if size >= k and size % k == 0:
            return f"{size // k} {unit}"
    return f"{size} B"


def main(argv):
    if len(argv) < 4:
        print(__doc__.strip().splitlines()[2].strip(), file=sys.stderr)
        return 2
    outdir, names = argv[1], argv[2:]
    reference, runs = names[0], names[1:]
    per_runner = {n: rounds_of(outdir, n) for n in names}
    common = sorted(set.intersection(*(set(r) for r in per_runner.values())))
    if not common:
        print(f"paired_table.py: no round in {outdir} has every one of {' '.join(names)}", file=sys.stderr)
        return 1
    tables, wrong = {}, 0
    for n in names:
        for k in common:
            tables[(n, k)], w = read_table(per_runner[n][k])
            wrong += w
    sizes = sorted(set.intersection(*(set(t) for t in tables.values())))

    head = ["bytes"] + [f"{n} us" for n in names] + [f"{r} / {reference}" for r in runs] + [
        f"{r} / {reference} min-max" for r in runs]
    print("| " + " | ".join(head) + " |")
    print("|" + "---:|" * (1 + len(names) + len(runs)) + "---|" * len(runs))
    for s in sizes:
        cells = [size_name(s)]
        cells += [f"{statistics.median(tables[(n, k)][s] for k in common):.2f}" for n in names]
        ratios = {r: [tables[(r, k)][s] / tables[(reference, k)][s] for k in common] for r in runs}
        cells += [f"{statistics.median(ratios[r]):.2f}" for r in runs]
        cells += [f"{min(ratios[r]):.2f}-{max(ratios[r]):.2f}" for r in runs]
        print("| " + " | ".join(cells) + " |")
    print(f"\nRounds: {len(common)}. Rows with a wrong element, all runners and rounds: {wrong}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
