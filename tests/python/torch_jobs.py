"""What the ranks of the torch.distributed tests run (module-level, so spawned ranks import it)."""

import datetime
import os
import random
import signal
import time

import torch
import torch.distributed as dist

import occl.torch

DTYPES = [torch.float32, torch.float64, torch.int32, torch.int64, torch.bfloat16, torch.float16, torch.int8,
          torch.uint8]
COUNT = 37


def init(rank, size, store, timeout_s=60):
    dist.init_process_group("occl", init_method=f"file://{store}", rank=rank, world_size=size,
                            timeout=datetime.timedelta(seconds=timeout_s))


def pattern(rank, n, dtype, scale=1):
    """Small integers: exact in every dtype, whatever order a reduction adds them in."""
    return ((torch.arange(n) % 5 + rank + 1) * scale).to(dtype)


def check(failures, what, got, want):
    if got.dtype != want.dtype or not torch.equal(got, want):
        failures.append(f"{what}: got {got.tolist()[:8]}..., want {want.tolist()[:8]}...")


class Ops:
    """Every backend call on one dtype; issue() starts them, verify() checks the results."""

    def __init__(self, rank, size, dtype):
        self.rank, self.size, self.dtype = rank, size, dtype
        self.checks = []  # (what, tensor, expected)

    def expect(self, what, tensor, want):
        self.checks.append((what, tensor, want))

    def issue(self, async_op):
        r, n, dt, c = self.rank, self.size, self.dtype, COUNT
        works = []
        everyone = [pattern(q, c, dt) for q in range(n)]
        total = sum(x.to(torch.float64) for x in everyone).to(dt)

        def go(work):
            if async_op:
                works.append(work)

        t = pattern(r, c, dt)
        go(dist.all_reduce(t, async_op=async_op))
        self.expect("all_reduce sum", t, total)
        for op, fn in [(dist.ReduceOp.MAX, torch.maximum), (dist.ReduceOp.MIN, torch.minimum)]:
            t = pattern(r, c, dt)
            go(dist.all_reduce(t, op=op, async_op=async_op))
            want = everyone[0]
            for x in everyone[1:]:
                want = fn(want, x)
            self.expect(f"all_reduce {op}", t, want)
        t = (torch.arange(c) % 2 + 1).to(dt)
        go(dist.all_reduce(t, op=dist.ReduceOp.PRODUCT, async_op=async_op))
        self.expect("all_reduce product", t, ((torch.arange(c) % 2 + 1) ** n).to(dt))
        if dt.is_floating_point:
            t = pattern(r, c, dt, scale=2)
            go(dist.all_reduce(t, op=dist.ReduceOp.AVG, async_op=async_op))
            self.expect("all_reduce avg", t, (sum(pattern(q, c, torch.float64, 2) for q in range(n)) / n).to(dt))
        root = n - 1
        t = pattern(r, c, dt) if r == root else torch.zeros(c, dtype=dt)
        go(dist.broadcast(t, src=root, async_op=async_op))
        self.expect("broadcast", t, pattern(root, c, dt))
        t = pattern(r, c, dt)
        go(dist.reduce(t, dst=1, async_op=async_op))
        self.expect("reduce", t, total if r == 1 else pattern(r, c, dt))
        outs = [torch.zeros(c, dtype=dt) for _ in range(n)]
        go(dist.all_gather(outs, pattern(r, c, dt), async_op=async_op))
        for q in range(n):
            self.expect(f"all_gather[{q}]", outs[q], everyone[q])
        flat = torch.zeros(n * c, dtype=dt)
        go(dist.all_gather_into_tensor(flat, pattern(r, c, dt), async_op=async_op))
        self.expect("all_gather_into_tensor (_allgather_base)", flat, torch.cat(everyone))
        gathered = [torch.zeros(c, dtype=dt) for _ in range(n)] if r == 0 else None
        go(dist.gather(pattern(r, c, dt), gather_list=gathered, dst=0, async_op=async_op))
        for q in range(n if r == 0 else 0):
            self.expect(f"gather[{q}]", gathered[q], everyone[q])
        out = torch.zeros(c, dtype=dt)
        pieces = [pattern(q, c, dt, scale=3) for q in range(n)] if r == n - 1 else None
        go(dist.scatter(out, scatter_list=pieces, src=n - 1, async_op=async_op))
        self.expect("scatter", out, pattern(r, c, dt, scale=3))
        ins = [pattern(r, c, dt, scale=q + 1) for q in range(n)]
        out = torch.zeros(c, dtype=dt)
        go(dist.reduce_scatter(out, ins, async_op=async_op))
        self.expect("reduce_scatter", out, sum(pattern(q, c, torch.float64, r + 1) for q in range(n)).to(dt))
        big = torch.cat([pattern(r, c, dt, scale=q + 1) for q in range(n)])
        out = torch.zeros(c, dtype=dt)
        go(dist.reduce_scatter_tensor(out, big, async_op=async_op))
        self.expect("reduce_scatter_tensor (_reduce_scatter_base)", out, sum(pattern(q, c, torch.float64, r + 1) for q in range(n)).to(dt))
        src = torch.cat([pattern(r, c, dt, scale=q + 1) for q in range(n)])
        out = torch.zeros(n * c, dtype=dt)
        go(dist.all_to_all_single(out, src, async_op=async_op))
        self.expect("all_to_all_single", out, torch.cat([pattern(q, c, dt, scale=r + 1) for q in range(n)]))
        # A ring of point-to-point messages: to the next rank, from the previous one.
        recv = torch.zeros(c, dtype=dt)
        sent = pattern(r, c, dt, scale=2)
        if async_op:
            works.append(dist.isend(sent, (r + 1) % n))
            works.append(dist.irecv(recv, (r - 1) % n))
        elif r % 2 == 0:
            dist.send(sent, (r + 1) % n)
            dist.recv(recv, (r - 1) % n)
        else:
            dist.recv(recv, (r - 1) % n)
            dist.send(sent, (r + 1) % n)
        self.expect("send/recv ring", recv, pattern((r - 1) % n, c, dt, scale=2))
        go(dist.barrier(async_op=async_op))
        return works

    def verify(self, failures, prefix):
        for what, got, want in self.checks:
            check(failures, f"{prefix} {what}", got, want)


def all_ops(rank, size, store):
    """Every call, every dtype, synchronous then asynchronous; returns the mismatches."""
    init(rank, size, store)
    failures = []
    for async_op in (False, True):
        for dt in DTYPES:
            ops = Ops(rank, size, dt)
            works = ops.issue(async_op)
            for w in works:
                w.wait()
                if not w.is_completed():
                    failures.append(f"{dt}: a Work not completed after wait()")
            ops.verify(failures, f"{dt} {'async' if async_op else 'sync'}")
    # get_future() completes with the output tensors.
    t = pattern(rank, COUNT, torch.float32)
    fut = dist.all_reduce(t, async_op=True).get_future()
    value = fut.then(lambda f: f.value()[0] * 2).wait()
    check(failures, "future.then", value, 2 * sum(pattern(q, COUNT, torch.float32) for q in range(size)))
    transport = occl.torch.peer_transport((rank + 1) % size)
    registered = occl.torch.registered_count()
    dist.destroy_process_group()
    return failures, transport, registered


def float8(rank, size, store):
    """float8_e4m3fn and float8_e5m2 (torch 2.1 and later) through every reducing call and a copy;
    returns the mismatches. Inputs are integers within +-2 whose partial sums on up to 4 ranks stay
    exact in both formats; results are compared bit for bit (torch compares float8 as bytes)."""
    init(rank, size, store)
    failures = []

    def same(what, got, want):
        if not torch.equal(got.view(torch.uint8), want.view(torch.uint8)):
            failures.append(f"{what}: got {got.float().tolist()[:8]}..., want {want.float().tolist()[:8]}...")

    def small(q, n):
        return (torch.arange(n) + q) % 5 - 2  # int64 in -2..2

    for dt in (torch.float8_e4m3fn, torch.float8_e5m2):
        c = 1000
        everyone = [small(q, c) for q in range(size)]
        for op, combine in [(dist.ReduceOp.SUM, lambda a, b: a + b), (dist.ReduceOp.MAX, torch.maximum),
                            (dist.ReduceOp.MIN, torch.minimum)]:
            t = small(rank, c).to(dt)
            dist.all_reduce(t, op=op)
            want = everyone[0]
            for x in everyone[1:]:
                want = combine(want, x)
            same(f"{dt} all_reduce {op}", t, want.float().to(dt))
        # avg rounds the quotient once: 3 / 2 and 1 / 4 are exact, 1 / 3 rounds.
        t = small(rank, c).to(dt)
        dist.all_reduce(t, op=dist.ReduceOp.AVG)
        same(f"{dt} all_reduce avg", t, (sum(everyone).float() / size).to(dt))
        flat = torch.zeros(size * c, dtype=dt)
        dist.all_gather_into_tensor(flat, small(rank, c).to(dt))
        same(f"{dt} all_gather_into_tensor", flat, torch.cat(everyone).float().to(dt))
        out = torch.zeros(c, dtype=dt)
        dist.reduce_scatter_tensor(out, torch.cat([small(rank + q, c) for q in range(size)]).to(dt))
        same(f"{dt} reduce_scatter_tensor", out, sum(small(q + rank, c) for q in range(size)).float().to(dt))
    dist.destroy_process_group()
    return failures


def premul_sum(rank, size, store):
    """dist._make_nccl_premul_sum(factor): every rank's input times the factor, then summed; exact
    (small integers, factors that are powers of two). A tensor factor is refused by name."""
    init(rank, size, store)
    failures = []
    c = 1000
    for dt in (torch.float32, torch.float64, torch.bfloat16, torch.float16):
        for factor in (0.5, 2.0):
            everyone = [pattern(q, c, dt) for q in range(size)]
            t = pattern(rank, c, dt)
            dist.all_reduce(t, op=dist._make_nccl_premul_sum(factor))
            check(failures, f"{dt} all_reduce premul {factor}", t,
                  sum(x.to(torch.float64) * factor for x in everyone).to(dt))
        out = torch.zeros(c, dtype=dt)
        big = torch.cat([pattern(rank, c, dt, scale=q + 1) for q in range(size)])
        dist.reduce_scatter_tensor(out, big, op=dist._make_nccl_premul_sum(0.25))
        check(failures, f"{dt} reduce_scatter_tensor premul", out,
              sum(pattern(q, c, torch.float64, rank + 1) * 0.25 for q in range(size)).to(dt))
    refused = None
    try:
        tensor_op = dist._make_nccl_premul_sum(torch.tensor([2.0]))
    except TypeError:  # torch 1.13 takes a list of tensors
        tensor_op = dist._make_nccl_premul_sum([torch.tensor([2.0])])
    try:
        dist.all_reduce(torch.ones(4), op=tensor_op)
    except RuntimeError as e:
        refused = str(e)
    dist.destroy_process_group()
    return failures, refused


def errors(rank, size, store):
    """What occl lacks raises RuntimeError naming it; the group still works afterwards."""
    init(rank, size, store)
    got = {}

    def expect_error(name, fn):
        try:
            fn()
            got[name] = None
        except RuntimeError as e:
            got[name] = str(e)

    t = torch.ones(8)
    expect_error("band", lambda: dist.all_reduce(torch.ones(8, dtype=torch.int32), op=dist.ReduceOp.BAND))
    expect_error("bor", lambda: dist.all_reduce(torch.ones(8, dtype=torch.int32), op=dist.ReduceOp.BOR))
    expect_error("bool", lambda: dist.all_reduce(torch.ones(8, dtype=torch.bool)))
    c = torch.full((4,), 1 + 2j, dtype=torch.complex64)
    expect_error("complex", lambda: dist.all_reduce(c))
    got["complex value"] = torch.view_as_real(c).tolist()
    expect_error("int16", lambda: dist.broadcast(torch.ones(8, dtype=torch.int16), src=0))
    expect_error("splits", lambda: dist.all_to_all_single(torch.zeros(4), torch.ones(4), [1, 3], [3, 2]))
    world = dist.distributed_c10d._get_default_group()  # a list of tensors (all_reduce_multigpu in 1.13)
    expect_error("two tensors", lambda: world.allreduce([torch.ones(2), torch.ones(2)]).wait())
    expect_error("strided", lambda: dist.all_reduce(torch.ones(8, 2)[:, 0]))
    expect_error("recv any", lambda: dist.recv(torch.ones(2)))
    expect_error("gather size", lambda: dist.all_gather_into_tensor(torch.zeros(3), torch.ones(2)))
    expect_error("root", lambda: dist.broadcast(torch.ones(2), src=size + 3))
    dist.all_reduce(t)  # nothing was submitted by the refused calls: this still pairs up
    got["after"] = t.tolist()
    dist.destroy_process_group()
    return got


def any_order(rank, size, store, seed):
    """Tagged all_reduces of one signature, issued in a different order on every rank."""
    init(rank, size, store)
    tags = list(range(100, 108))
    order = tags[:]
    random.Random(seed * 1000 + rank).shuffle(order)
    if size == 2 and rank == 1:
        order = list(reversed(sorted(tags)))  # the two-rank case: 0 issues ascending, 1 descending
    elif size == 2:
        order = sorted(tags)
    tensors = {tag: torch.full((1000,), float(tag * (rank + 1))) for tag in tags}
    works = []
    for tag in order:
        with occl.torch.coll_id(tag):
            works.append(dist.all_reduce(tensors[tag], async_op=True))
    # Untagged calls of different signatures, in opposite orders on odd and even ranks.
    a, b = torch.ones(10), torch.ones(20, dtype=torch.float64)
    pair = [(a, None), (b, None)] if rank % 2 == 0 else [(b, None), (a, None)]
    works += [dist.all_reduce(x, async_op=True) for x, _ in pair]
    for w in works:
        w.wait()
    ranks_sum = size * (size + 1) // 2
    wrong = [tag for tag in tags if not torch.equal(tensors[tag], torch.full((1000,), float(tag * ranks_sum)))]
    if not (torch.equal(a, torch.full((10,), float(size))) and torch.equal(b, torch.full((20,), float(size), dtype=torch.float64))):
        wrong.append("untagged")
    dist.destroy_process_group()
    return order, wrong


def shape_loop(rank, size, store, steps):
    """`steps` all_reduces and all_gathers of random lengths (the same on every rank) inside
    size_classes(): every result checked, and what was registered (count and bytes) read after
    the first tenth of the steps and at the end."""
    init(rank, size, store)
    rng = random.Random(2024)
    wrong, seen = [], []
    with occl.torch.size_classes():
        for step in range(steps):
            n = rng.randrange(1, 1 << 14)
            t = pattern(rank, n, torch.float32, step % 7 + 1)
            dist.all_reduce(t)
            want = sum(pattern(r, n, torch.float32, step % 7 + 1) for r in range(size))
            if not torch.equal(t, want):
                wrong.append(f"all_reduce step {step} of {n}")
            if step % 4 == 0:
                m = rng.randrange(1, 1 << 10)
                outs = [torch.zeros(m, dtype=torch.int32) for _ in range(size)]
                dist.all_gather(outs, pattern(rank, m, torch.int32, step % 3 + 1))
                if any(not torch.equal(outs[r], pattern(r, m, torch.int32, step % 3 + 1)) for r in range(size)):
                    wrong.append(f"all_gather step {step} of {m}")
            if step + 1 in (steps // 10, steps):
                seen.append((step + 1, occl.torch.registered_count(), occl.torch.registered_bytes()))
    dist.destroy_process_group()
    return wrong, seen


def mismatched_sizes(rank, size, store):
    """Rank r all_reduces 4 * (r + 1) floats: no two ranks issue the same collective, so each
    times out, and its error says what the others registered and ran instead."""
    init(rank, size, store, timeout_s=8)
    try:
        dist.all_reduce(torch.ones(4 * (rank + 1)))
        outcome = "completed"
    except RuntimeError as e:
        outcome = str(e)
    dist.destroy_process_group()
    return outcome


def killed_peer(rank, size, store, victim):
    """`victim` dies by SIGKILL while the others wait on an all_reduce: their wait() raises."""
    init(rank, size, store, timeout_s=60)
    t = torch.ones(1 << 16)
    dist.all_reduce(t)
    dist.barrier()
    if rank == victim:
        time.sleep(0.5)
        os.kill(os.getpid(), signal.SIGKILL)
    t = torch.ones(1 << 16)
    work = dist.all_reduce(t, async_op=True)
    start = time.monotonic()
    try:
        work.wait()
        outcome = "completed"
    except RuntimeError as e:
        outcome = str(e)
    elapsed = time.monotonic() - start
    later = None
    try:
        dist.all_reduce(torch.ones(4))
    except RuntimeError as e:
        later = str(e)
    dist.destroy_process_group()
    return outcome, elapsed, later


def shrink_after_kill(rank, size, store, victim):
    """`victim` dies (SIGKILL) after one all_reduce; the others' next one raises, they shrink
    without it and go on with the same call on the survivors' group, every result exact."""
    init(rank, size, store, timeout_s=60)
    t = torch.ones(1000)
    dist.all_reduce(t)
    dist.barrier()
    if rank == victim:
        time.sleep(0.5)
        os.kill(os.getpid(), signal.SIGKILL)
    failed = None
    try:
        dist.all_reduce(torch.ones(1000))
    except RuntimeError as e:
        failed = str(e)
    group = occl.torch.shrink([victim])
    survivors = [r for r in range(size) if r != victim]
    wrong = []
    for i in range(100):
        x = torch.full((1000,), float(rank + 1 + i))
        dist.all_reduce(x, group=group)
        if not torch.equal(x, torch.full((1000,), float(sum(r + 1 + i for r in survivors)))):
            wrong.append(i)
    carried = occl.torch.registered_count(group)
    dist.destroy_process_group()
    return failed, group.size(), group.rank(), wrong, carried


def subgroups(rank, size, store):
    """Groups of pairs beside the world: each group its own communicator, calls in any order."""
    init(rank, size, store)
    pairs = [dist.new_group([p, p + 1], backend="occl") for p in range(0, size, 2)]
    mine = pairs[rank // 2]
    in_pair = torch.full((100,), float(rank + 1))
    in_world = torch.full((100,), float(rank + 1))
    calls = [(in_pair, mine), (in_world, None)]
    if rank % 2:
        calls.reverse()
    works = [dist.all_reduce(t, group=g, async_op=True) for t, g in calls]
    gathered = [torch.zeros(3, dtype=torch.int64) for _ in range(2)]
    works.append(dist.all_gather(gathered, torch.full((3,), rank, dtype=torch.int64), group=mine, async_op=True))
    for w in works:
        w.wait()
    first = rank - rank % 2
    wrong = []
    if not torch.equal(in_pair, torch.full((100,), float(2 * first + 3))):
        wrong.append(f"pair all_reduce {in_pair[0].item()}")
    if not torch.equal(in_world, torch.full((100,), float(size * (size + 1) // 2))):
        wrong.append(f"world all_reduce {in_world[0].item()}")
    if [g[0].item() for g in gathered] != [first, first + 1]:
        wrong.append(f"pair all_gather {[g.tolist() for g in gathered]}")
    group_rank = dist.get_rank(mine)
    dist.destroy_process_group()
    return wrong, group_rank


def split_groups(rank, size, store, seed, device_bound):
    """Pairs (dist.new_group each), halves (dist.split_group where torch has it) and a copy of the
    world beside the world, all_reduces and all_gathers across all of them in a random order per
    rank, every element checked. device_bound: the world is made with device_id=cpu:0, which is
    what lets torch 2.8+ split; then a group of use_local_synchronization=True (its members alone
    call new_group) is made last. Returns ({group: origin}, wrong, {group: group rank})."""
    kwargs = {"device_id": torch.device("cpu", 0)} if device_bound else {}
    dist.init_process_group("occl", init_method=f"file://{store}", rank=rank, world_size=size,
                            timeout=datetime.timedelta(seconds=60), **kwargs)
    groups = {"world": (None, list(range(size)))}
    for p in range(0, size, 2):
        g = dist.new_group([p, p + 1], backend="occl")
        if rank in (p, p + 1):
            groups["pair"] = (g, [p, p + 1])
    groups["copy"] = (dist.new_group(list(range(size)), backend="occl"), list(range(size)))
    half = size // 2
    halves = [list(range(half)), list(range(half, size))]
    if device_bound and hasattr(dist, "split_group"):
        groups["half"] = (dist.split_group(split_ranks=halves), halves[rank // half])
    if device_bound:
        local = [0, 1]
        if rank in local:
            groups["local"] = (dist.new_group(local, backend="occl", use_local_synchronization=True), local)
    calls = [(name, op) for name in groups for op in ("all_reduce", "all_gather")]
    random.Random(seed * 100 + rank).shuffle(calls)
    works, checks = [], []
    for name, op in calls:
        group, members = groups[name]
        if op == "all_reduce":
            t = torch.full((1000,), float(rank + 1) * (1 + len(name)))
            works.append(dist.all_reduce(t, group=group, async_op=True))
            checks.append((f"{name} all_reduce", [t], [torch.full((1000,), float(sum(members) + len(members)) * (1 + len(name)))]))
        else:
            outs = [torch.zeros(3, dtype=torch.int64) for _ in members]
            works.append(dist.all_gather(outs, torch.full((3,), rank * 10 + len(name), dtype=torch.int64), group=group,
                                         async_op=True))
            checks.append((f"{name} all_gather", outs,
                           [torch.full((3,), m * 10 + len(name), dtype=torch.int64) for m in members]))
    for w in works:
        w.wait()
    wrong = [what for what, got, want in checks if not all(torch.equal(g, w) for g, w in zip(got, want))]
    origins = {name: occl.torch.origin(g) for name, (g, _) in groups.items()}
    group_ranks = {name: g.rank() if g is not None else dist.get_rank() for name, (g, _) in groups.items()}
    dist.destroy_process_group()
    return origins, wrong, group_ranks


def uneven(rank, size, store, steps):
    """MoE-shaped all_to_all_single with random split sizes (every rank draws the same matrix of
    row counts; zeros among them), all_gather into tensors of random sizes and all_to_all's list
    form with tensors of several sizes, `steps` of each in a different order on every rank, every
    element checked; then how many collectives were registered (one per call and dtype, whatever
    the splits)."""
    init(rank, size, store)
    failures = []
    hidden = 3
    for step in range(steps):
        rng = random.Random(step)
        rows = [[rng.choice([0, rng.randrange(1, 40)]) for _ in range(size)] for _ in range(size)]  # [sender][receiver]
        dt = (torch.float32, torch.int64, torch.bfloat16)[step % 3]
        send = torch.cat([torch.full((rows[rank][q], hidden), rank * 100 + q, dtype=dt) for q in range(size)])
        recv = torch.full((sum(rows[q][rank] for q in range(size)), hidden), -1, dtype=dt)
        sizes = [rng.randrange(0, 50) for _ in range(size)]
        outs = [torch.full((n,), -1, dtype=dt) for n in sizes]
        mine = torch.arange(sizes[rank]).to(dt) + rank

        def a2a():
            return dist.all_to_all_single(recv, send, output_split_sizes=[rows[q][rank] for q in range(size)],
                                          input_split_sizes=rows[rank], async_op=True)

        def ag():
            return dist.all_gather(outs, mine, async_op=True)

        # all_to_all's list form: rank r sends rank q a tensor of (r + q + step) % 4 elements.
        lin = [torch.full(((rank + q + step) % 4,), rank * 10 + q, dtype=dt) for q in range(size)]
        lout = [torch.full(((q + rank + step) % 4,), -1, dtype=dt) for q in range(size)]

        def a2a_list():
            return dist.all_to_all(lout, lin, async_op=True)

        # all_to_all_single and all_to_all share a signature (an AllToAllv of dt), so like any two
        # calls of one signature they keep one order on every rank; all_gather moves freely.
        calls = (a2a, ag, a2a_list) if (step + rank) % 2 else (ag, a2a, a2a_list)
        for work in [call() for call in calls]:
            work.wait()
        for q in range(size):
            check(failures, f"step {step} all_to_all from {q}", lout[q],
                  torch.full(((q + rank + step) % 4,), q * 10 + rank, dtype=dt))
        want = torch.cat([torch.full((rows[q][rank], hidden), q * 100 + rank, dtype=dt) for q in range(size)])
        check(failures, f"step {step} all_to_all_single", recv, want)
        for q in range(size):
            check(failures, f"step {step} all_gather from {q}", outs[q], torch.arange(sizes[q]).to(dt) + q)
    registered = occl.torch.registered_count()
    dist.destroy_process_group()
    return failures, registered
