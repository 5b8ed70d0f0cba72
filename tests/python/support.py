"""Ranks as processes for the Python tests: run(fn, nranks, *args) starts fn(rank, nranks, *args)
in `nranks` fresh interpreters (spawn), bounds them by a timeout, and returns what each returned,
or fails with the tracebacks of the ranks that raised (a rank that hangs is killed and named)."""

import multiprocessing as mp
import os
import queue
import tempfile
import time
import traceback

_CTX = mp.get_context("spawn")


def _child(fn, rank, nranks, args, results):
    try:
        results.put((rank, True, fn(rank, nranks, *args)))
    except BaseException:  # noqa: BLE001 - reported to the parent, which fails the test
        results.put((rank, False, traceback.format_exc()))


def run(fn, nranks, *args, timeout=120, expect_killed=()):
    """Runs fn in nranks processes; ranks listed in expect_killed may die without reporting."""
    results = _CTX.Queue()
    procs = [_CTX.Process(target=_child, args=(fn, r, nranks, args, results), daemon=True) for r in range(nranks)]
    for p in procs:
        p.start()
    deadline = time.monotonic() + timeout
    got = {}
    waiting = set(range(nranks)) - set(expect_killed)
    while waiting:
        try:
            rank, ok, value = results.get(timeout=max(0.0, deadline - time.monotonic()))
        except queue.Empty:
            break
        got[rank] = (ok, value)
        waiting.discard(rank)
    for p in procs:
        p.join(timeout=max(1.0, deadline - time.monotonic()))
        if p.is_alive():
            p.kill()
            p.join()
    errors = [f"rank {r}:\n{v}" for r, (ok, v) in sorted(got.items()) if not ok]
    if waiting:
        errors.append(f"ranks {sorted(waiting)} reported nothing within {timeout} s (hung or crashed)")
    if errors:
        raise AssertionError("\n".join(errors))
    return [got[r][1] if r in got else None for r in range(nranks)]


def store_path():
    """A fresh path for a torch FileStore (file:// init method) shared by one job's ranks."""
    fd, path = tempfile.mkstemp(prefix="occl-store-")
    os.close(fd)
    os.unlink(path)
    return path
