"""AllReduce through torch.distributed, occl against gloo, in one run on the same processes.

    PYTHONPATH=build/python /usr/bin/python3 bench/torch/allreduce.py [--ranks 4] [--reps 5]
        [--min 8] [--max 64M] [--json FILE] [--markdown FILE]

Every rank creates a gloo group and an occl group over the same store, then for each size
(float32, x8 steps, and --max) alternates the backends: per repetition, each backend runs a barrier, then
`iters` blocking dist.all_reduce calls back to back; the time of a call is that loop's duration /
iters, the maximum over ranks (as nccl-tests reports). A row is the median of `--reps`
interleaved repetitions. Results are checked: every element of every run's output must equal the
exact sum.

The Python layer's cost: at the smallest sizes it also times the same all_reduce submitted and
waited for from C++ (occl.Comm._time_loop: occlSubmit plus a condition-variable wait per run, on
an occl communicator of the same configuration), so `torch - C` is what torch.distributed and
the backend add per call.
"""

import argparse
import datetime
import json
import os
import statistics
import subprocess
import tempfile
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

import occl
import occl.torch


def parse_size(text):
    units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    return int(text[:-1]) * units[text[-1].upper()] if text[-1].upper() in units else int(text)


def iters_for(nbytes):
    return max(5, min(1000, (64 << 20) // max(nbytes, 1) // 4))


def time_calls(group, tensor, iters, expected):
    dist.barrier(group=group)
    start = time.perf_counter()
    for _ in range(iters):
        tensor.fill_(1.0)
        dist.all_reduce(tensor, group=group)
    elapsed = time.perf_counter() - start
    if not torch.all(tensor == expected):
        raise SystemExit(f"wrong result on rank {dist.get_rank()}")
    return elapsed / iters


def max_over_ranks(value, group):
    t = torch.tensor([value], dtype=torch.float64)
    dist.all_reduce(t, op=dist.ReduceOp.MAX, group=group)
    return t.item()


def rank_main(rank, size, store_path, args, out_path):
    timeout = datetime.timedelta(seconds=300)
    dist.init_process_group("gloo", init_method=f"file://{store_path}", rank=rank, world_size=size,
                            timeout=timeout)
    gloo = dist.group.WORLD
    occl_group = dist.new_group(backend="occl", timeout=timeout)
    # A plain occl communicator for the C-loop rows; its id travels through the gloo group.
    uid = [occl.get_unique_id() if rank == 0 else None]
    dist.broadcast_object_list(uid, src=0, group=gloo)
    comm = occl.Comm(size, uid[0], rank)

    rows = []
    sizes = []
    nbytes = args.min
    while nbytes < args.max:
        sizes.append(nbytes)
        nbytes *= 8
    sizes.append(args.max)
    for nbytes in sizes:
        count = max(1, nbytes // 4)
        tensor = torch.ones(count)
        expected = float(size)
        iters = iters_for(nbytes)
        per = {"gloo": [], "occl": [], "occl_c": []}
        with_c = nbytes <= args.c_loop_max
        if with_c:
            cid = 1000 + count
            comm.register(cid, "allreduce", count, "float32")
            comm._time_loop(cid, tensor, tensor, 5)
        for group in (gloo, occl_group):
            time_calls(group, tensor, min(iters, 5), expected)  # warm-up (registers occl's collective)
        for _ in range(args.reps):
            for name, group in (("gloo", gloo), ("occl", occl_group)):
                per[name].append(max_over_ranks(time_calls(group, tensor, iters, expected), gloo))
            if with_c:
                dist.barrier(group=gloo)
                per["occl_c"].append(max_over_ranks(comm._time_loop(cid, tensor, tensor, iters) / iters, gloo))
        row = {"bytes": count * 4, "iters": iters}
        for name, values in per.items():
            if values:
                row[name + "_us"] = statistics.median(values) * 1e6
        rows.append(row)
    comm.close()
    dist.destroy_process_group(occl_group)
    dist.destroy_process_group()
    if rank == 0:
        with open(out_path, "w") as f:
            json.dump(rows, f)


def layer_main(args):
    """One process, a group of one: what torch.distributed and the backend cost per call, with no
    peer to wait for (and so none of its scheduling noise), against the same loop from C++."""
    with tempfile.TemporaryDirectory() as tmp:
        dist.init_process_group("gloo", init_method=f"file://{tmp}/store", rank=0, world_size=1)
        group = dist.new_group(backend="occl")
        comm = occl.Comm(1, occl.get_unique_id(), 0)
        comm.register(1, "allreduce", 2, "float32")
        t = torch.ones(2)
        iters = 2000
        torch_us, c_us, module_us = [], [], []
        time_calls(group, t, 100, 1.0)
        comm._time_loop(1, t, t, 100)
        for _ in range(args.reps * 3):
            torch_us.append(time_calls(group, t, iters, 1.0) * 1e6)
            c_us.append(comm._time_loop(1, t, t, iters) / iters * 1e6)
            start = time.perf_counter()
            for _ in range(iters):
                comm.submit(1, t, t).result()
            module_us.append((time.perf_counter() - start) / iters * 1e6)
        comm.close()
        dist.destroy_process_group(group)
        dist.destroy_process_group()
    return {"torch_us": statistics.median(torch_us), "c_us": statistics.median(c_us),
            "module_us": statistics.median(module_us), "reps": len(c_us), "iters": iters,
            "torch_min_us": min(torch_us), "c_min_us": min(c_us), "module_min_us": min(module_us)}


def markdown(rows):
    lines = ["| bytes | gloo µs | occl µs | occl / gloo | occl C loop µs | torch - C µs |",
             "|---|---|---|---|---|---|"]
    for r in rows:
        c = f"{r['occl_c_us']:.1f}" if "occl_c_us" in r else ""
        layer = f"{r['occl_us'] - r['occl_c_us']:.1f}" if "occl_c_us" in r else ""
        lines.append(f"| {r['bytes']} | {r['gloo_us']:.1f} | {r['occl_us']:.1f} | "
                     f"{r['occl_us'] / r['gloo_us']:.2f} | {c} | {layer} |")
    return "\n".join(lines)


def commit():
    """The checkout's commit, for the JSON (bench/plot.py names it on the chart); "" outside git."""
    try:
        return subprocess.run(["git", "-C", os.path.dirname(os.path.abspath(__file__)), "rev-parse", "--short", "HEAD"],
                              capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return ""


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--ranks", type=int, default=4)
    p.add_argument("--reps", type=int, default=5)
    p.add_argument("--min", type=parse_size, default=8)
    p.add_argument("--max", type=parse_size, default=64 << 20)
    p.add_argument("--c-loop-max", type=parse_size, default=4096, help="largest size also timed from C++")
    p.add_argument("--no-layer", dest="layer", action="store_false", help="skip the one-rank layer cost")
    p.add_argument("--json")
    p.add_argument("--markdown")
    args = p.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "rows.json")
        layer = layer_main(args) if args.layer else None
        mp.spawn(rank_main, args=(args.ranks, os.path.join(tmp, "store"), args, out), nprocs=args.ranks)
        with open(out) as f:
            rows = json.load(f)
    table = markdown(rows)
    if layer:
        table += ("\n\nOne rank, 8 B AllReduce, submit to completion, median of "
                  f"{layer['reps']} x {layer['iters']} calls: torch.distributed {layer['torch_us']:.1f} µs, "
                  f"occl module (submit().result()) {layer['module_us']:.1f} µs, C API loop {layer['c_us']:.1f} µs: "
                  f"the torch layer adds {layer['torch_us'] - layer['c_us']:.1f} µs per call, "
                  f"the occl module {layer['module_us'] - layer['c_us']:.1f} µs. Fastest repetitions: "
                  f"{layer['torch_min_us']:.1f}, {layer['module_min_us']:.1f} and {layer['c_min_us']:.1f} µs "
                  f"(layer {layer['torch_min_us'] - layer['c_min_us']:.1f} µs).")
    print(table)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"ranks": args.ranks, "reps": args.reps, "torch": torch.__version__, "commit": commit(),
                       "rows": rows, "one_rank_layer": layer}, f, indent=1)
    if args.markdown:
        with open(args.markdown, "w") as f:
            f.write(table + "\n")


if __name__ == "__main__":
    main()
