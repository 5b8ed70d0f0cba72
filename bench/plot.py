#!/usr/bin/python3
"""Charts of benchmark runs: latency and bus bandwidth against message size, one line per run.

    bench/plot.py OUTDIR RUN.json... [--title TEXT] [--commit REV] [--prefix NAME-]
    bench/plot.py OUTDIR 'name=RUN.r*.json' ...

Reads occl-bench's --json files (the baselines under bench/baselines write the same format) and
bench/torch/allreduce.py's --json, and writes OUTDIR/PREFIXlatency.png (time per collective,
log-log) and OUTDIR/PREFIXbusbw.png (nccl-tests' bus bandwidth, log-x).

- A run is named by `name=` or by its file name without .json. A pattern matching several files
  (repetitions of one run) plots the median over them at each size, with the spread from the
  least to the most as a band.
- Each size plots the better of out-of-place and in-place; a run any of whose rows reported a
  wrong element is marked "(WRONG RESULTS)" in the legend.
- An occl-bench run made with --compare nccl adds NCCL's line beside occl's.
- A torch run adds one line per backend it timed (gloo, occl).
- Every chart names the commit it measured: --commit, else the files' "commit" field, else this
  checkout's HEAD marked "(plotted at)".

Needs Debian's python3-matplotlib.
"""

import argparse
import glob
import json
import os
import statistics
import subprocess
import sys

import matplotlib

matplotlib.use("Agg")  # files only, no display
import matplotlib.pyplot as plt  # noqa: E402


class Series:
    """One line of a chart: per size, the median and the least and most over repetitions."""

    def __init__(self, label, samples, factor):
        """`samples`: size -> times (µs); `factor`: nccl-tests' bus-bandwidth factor (busbw / algbw)."""
        self.label = label
        self.sizes = sorted(samples)
        self.times = [statistics.median(samples[s]) for s in self.sizes]
        self.low = [min(samples[s]) for s in self.sizes]
        self.high = [max(samples[s]) for s in self.sizes]
        self.busbw = [s / t / 1e3 * factor for s, t in zip(self.sizes, self.times)]
        # More time is less bandwidth: the band's ends swap.
        self.busbw_low = [s / t / 1e3 * factor for s, t in zip(self.sizes, self.high)]
        self.busbw_high = [s / t / 1e3 * factor for s, t in zip(self.sizes, self.low)]


def ranks(n):
    return f"{n} rank" if n == 1 else f"{n} ranks"


def paths_of(spec):
    name, _, pattern = spec.partition("=") if "=" in spec else ("", "", spec)
    paths = sorted(glob.glob(pattern))
    if not paths:
        raise SystemExit(f"plot.py: {pattern}: no such file")
    return name or os.path.splitext(os.path.basename(paths[0]))[0], paths


def load(spec):
    """The series of one run spec, and the commits its files name."""
    name, paths = paths_of(spec)
    runs = []
    for path in paths:
        with open(path) as f:
            runs.append(json.load(f))
    commits = {r["commit"] for r in runs if r.get("commit")}
    reps = f", median of {len(paths)}" if len(paths) > 1 else ""
    if "rows" in runs[0]:  # bench/torch/allreduce.py
        series = []
        n = runs[0]["ranks"]
        for backend in ("gloo", "occl"):
            samples = {}
            for r in runs:
                for row in r["rows"]:
                    if row.get(f"{backend}_us") is not None:
                        samples.setdefault(row["bytes"], []).append(row[f"{backend}_us"])
            if samples:
                factor = 2 * (n - 1) / n  # AllReduce's
                series.append(Series(f"{backend} (torch {runs[0]['torch']}, {ranks(n)}{reps})", samples, factor))
        return series, commits
    occl, nccl, wrong, factor = {}, {}, 0, 0.0
    for r in runs:
        for row in r["results"]:
            places = [p for p in (row.get("out_of_place"), row.get("in_place")) if p]
            for p in places:
                if p["algbw_gbps"] > 0 and not factor:
                    factor = p["busbw_gbps"] / p["algbw_gbps"]  # the collective's, as the file computed it
            if places:
                occl.setdefault(row["size"], []).append(min(p["time_us"] for p in places))
                wrong += sum(p["wrong"] or 0 for p in places)
            if row.get("nccl"):
                nccl.setdefault(row["size"], []).append(row["nccl"]["time_us"])
    n = runs[0]["nranks"]
    label = f"{name} ({ranks(n)}{reps})" + (" (WRONG RESULTS)" if wrong else "")
    series = [Series(label, occl, factor)]
    if nccl:
        series.append(Series(f"NCCL beside {name} ({ranks(n)}{reps})", nccl, factor))
    return series, commits


def head_commit():
    try:
        rev = subprocess.run(["git", "-C", os.path.dirname(os.path.abspath(__file__)), "rev-parse", "--short", "HEAD"],
                             capture_output=True, text=True, check=True).stdout.strip()
        return f"{rev} (plotted at)"
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def size_label(n):
    for unit, div in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= div:
            return f"{n // div} {unit}"
    return f"{n} B"


def chart(series, column, ylabel, path, title, commit, logy):
    fig, ax = plt.subplots(figsize=(8, 5), dpi=110)
    ticks = set()
    for s in series:
        y, lo, hi = (s.times, s.low, s.high) if column == "time" else (s.busbw, s.busbw_low, s.busbw_high)
        (line,) = ax.plot(s.sizes, y, marker="o", markersize=3, label=s.label)
        if lo != hi:
            ax.fill_between(s.sizes, lo, hi, color=line.get_color(), alpha=0.2, linewidth=0)
        ticks.update(s.sizes)
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
    fig.text(0.99, 0.01, f"commit {commit}; bands: least to most of the repetitions", ha="right", va="bottom",
             fontsize=7, alpha=0.7)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def main(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("outdir")
    p.add_argument("runs", nargs="+", help="RUN.json or name=RUN.json")
    p.add_argument("--title", default="")
    p.add_argument("--commit", default="", help="the commit the runs measured (default: their files', else HEAD)")
    p.add_argument("--prefix", default="", help="prepended to the chart file names")
    args = p.parse_args(argv)
    series, commits = [], set()
    for spec in args.runs:
        s, c = load(spec)
        series += s
        commits |= c
    commit = args.commit or ", ".join(sorted(commits)) or head_commit()
    title = args.title or "AllReduce"
    os.makedirs(args.outdir, exist_ok=True)
    latency = os.path.join(args.outdir, f"{args.prefix}latency.png")
    busbw = os.path.join(args.outdir, f"{args.prefix}busbw.png")
    chart(series, "time", "time per collective (µs)", latency, f"{title}: latency", commit, logy=True)
    chart(series, "busbw", "bus bandwidth (GB/s)", busbw, f"{title}: bus bandwidth", commit, logy=False)
    print(f"plot.py: wrote {latency} and {busbw} ({len(series)} lines, commit {commit})")


if __name__ == "__main__":
    main(sys.argv[1:])
