#!/usr/bin/python3
"""Charts of benchmark runs: latency and bus bandwidth against message size, one line per run.

    bench/plot.py OUTDIR RUN.json... [--title TEXT]
    bench/plot.py OUTDIR 'name=RUN.r*.json' ...

Reads occl-bench's --json files (the baselines under bench/baselines write the same format) and
writes OUTDIR/latency.png (time per collective, log-log) and OUTDIR/busbw.png (nccl-tests' bus
bandwidth, log-x). A run is named by `name=` or by its file name without .json; a pattern
matching several files (repetitions of one run) plots the median over them at each size. Each
size plots the better of out-of-place and in-place; a run any of whose rows reported a wrong
element is marked "(WRONG RESULTS)" in the legend. Needs Debian's python3-matplotlib.
"""

import argparse
import glob
import json
import os
import statistics
import sys

import matplotlib

matplotlib.use("Agg")  # files only, no display
import matplotlib.pyplot as plt  # noqa: E402


def load(spec):
    name, _, pattern = spec.partition("=") if "=" in spec else ("", "", spec)
    paths = sorted(glob.glob(pattern))
    if not paths:
        raise SystemExit(f"plot.py: {pattern}: no such file")
    name = name or os.path.splitext(os.path.basename(paths[0]))[0]
    by_size, wrong = {}, 0
    for path in paths:
        with open(path) as f:
            run = json.load(f)
        for row in run["results"]:
            places = [p for p in (row.get("out_of_place"), row.get("in_place")) if p]
            if not places:
                continue
            best = min(places, key=lambda p: p["time_us"])
            by_size.setdefault(row["size"], []).append((best["time_us"], best["busbw_gbps"]))
            wrong += sum(p["wrong"] or 0 for p in places)
    sizes = sorted(by_size)
    times = [statistics.median(t for t, _ in by_size[s]) for s in sizes]
    busbw = [statistics.median(b for _, b in by_size[s]) for s in sizes]
    reps = f", median of {len(paths)}" if len(paths) > 1 else ""
    label = f"{name} ({run['nranks']} ranks{reps})" + (" (WRONG RESULTS)" if wrong else "")
    return label, run, sizes, times, busbw


def size_label(n):
    for unit, div in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= div:
            return f"{n // div} {unit}"
    return f"{n} B"


def chart(runs, column, ylabel, path, title, logy):
    fig, ax = plt.subplots(figsize=(8, 5), dpi=110)
    ticks = set()
    for label, _, sizes, times, busbw in runs:
        ax.plot(sizes, times if column == "time" else busbw, marker="o", markersize=3, label=label)
        ticks.update(sizes)
    ax.set_xscale("log", base=2)
    if logy:
        ax.set_yscale("log")
    ticks = sorted(ticks)
    step = max(1, len(ticks) // 10)
    ax.set_xticks(ticks[::step])
    ax.set_xticklabels([size_label(t) for t in ticks[::step]], rotation=30)
    ax.set_xlabel("message size")
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def main(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("outdir")
    p.add_argument("runs", nargs="+", help="RUN.json or name=RUN.json")
    p.add_argument("--title", default="")
    args = p.parse_args(argv)
    runs = [load(spec) for spec in args.runs]
    collectives = sorted({run["collective"] for _, run, _, _, _ in runs})
    title = args.title or f"{', '.join(collectives)}"
    os.makedirs(args.outdir, exist_ok=True)
    chart(runs, "time", "time per collective (µs)", os.path.join(args.outdir, "latency.png"),
          f"{title}: latency", logy=True)
    chart(runs, "busbw", "bus bandwidth (GB/s)", os.path.join(args.outdir, "busbw.png"),
          f"{title}: bus bandwidth", logy=False)
    print(f"plot.py: wrote {args.outdir}/latency.png and {args.outdir}/busbw.png ({len(runs)} runs)")


if __name__ == "__main__":
    main(sys.argv[1:])
