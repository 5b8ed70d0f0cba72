"""Two ranks issue the same two all_reduces in opposite orders, with torch.distributed on occl.

    PYTHONPATH=build/python /usr/bin/python3 examples/torch_any_order.py

With gloo or NCCL this program deadlocks or mixes the two tensors up: rank 0's first all_reduce
would pair with rank 1's first, which is the other tensor. With occl each call is tagged with
occl.torch.coll_id, and calls pair up by tag whatever the order. Completion callbacks
(Work.get_future().then) run on occl's poller thread. Under torchrun (RANK, WORLD_SIZE,
MASTER_ADDR and MASTER_PORT set) it runs as launched; otherwise it starts 2 local processes.
"""

import os
import tempfile

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

import occl.torch  # registers the "occl" backend


def main(rank, world_size, init_method):
    dist.init_process_group("occl", init_method=init_method, rank=rank, world_size=world_size)
    grads = torch.full((1 << 20,), float(rank + 1))   # tag 1: a gradient bucket
    stats = torch.full((16,), 10.0 * (rank + 1))      # tag 2: some statistics, same dtype

    # Rank 0 issues tag 1 first, the others tag 2 first.
    order = [(1, grads), (2, stats)] if rank == 0 else [(2, stats), (1, grads)]
    futures = []
    for tag, tensor in order:
        with occl.torch.coll_id(tag):
            work = dist.all_reduce(tensor, async_op=True)
        futures.append(work.get_future().then(lambda f, tag=tag: (tag, f.value()[0][0].item())))
    done = [f.wait() for f in futures]

    ranks_sum = world_size * (world_size + 1) / 2
    exact = torch.equal(grads, torch.full_like(grads, ranks_sum)) and \
        torch.equal(stats, torch.full_like(stats, 10.0 * ranks_sum))
    issued = " then ".join(f"tag {tag}" for tag, _ in order)
    print(f"rank {rank}: {issued}, got {done}; {'all results exact' if exact else 'WRONG RESULTS'}", flush=True)
    dist.destroy_process_group()
    if not exact:
        raise SystemExit(1)


if __name__ == "__main__":
    if "RANK" in os.environ:
        main(int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"]), "env://")
    else:
        with tempfile.TemporaryDirectory() as tmp:
            mp.spawn(main, args=(2, f"file://{tmp}/store"), nprocs=2)
