"""The occl module over numpy arrays: every collective kind and element type, futures, callbacks
(once each, on the poller thread or in wait_all, allowed to submit again, never deadlocking with the GIL), the
buffers' lifetime, errors that name the argument, and ranks in separate processes."""

import functools
import gc
import os
import re
import signal
import threading
import time
import unittest
import weakref

import numpy as np

import occl
import support

NUMPY_DTYPES = ["int8", "uint8", "int32", "uint32", "int64", "uint64", "float16", "float32", "float64"]
COUNT = 37  # odd, so that no algorithm gets evenly sized chunks by luck


def pattern(rank, n, dtype):
    """Small integers: every reduction order gives the same exact answer, in every dtype."""
    return ((np.arange(n) % 5) + rank + 1).astype(dtype)


class Ranks:
    """n ranks as threads of this process."""

    def __init__(self, n, **config):
        self.comms = occl.Comm.all(n, **config)
        self.n = n

    def __enter__(self):
        return self

    def __exit__(self, exc_type, *exc):
        # After a failure, ranks may hold submissions no peer will match: abort, do not wait.
        for c in self.comms:
            c.abort() if exc_type else c.close()


def expected_and_buffers(kind, n, dtype, root):
    """The send/recv arrays of every rank and what each rank's recv must hold afterwards."""
    c = COUNT
    sends, recvs, want = [], [], []
    for r in range(n):
        if kind == "allreduce":
            s, rv = pattern(r, c, dtype), np.zeros(c, dtype)
            w = sum(pattern(q, c, dtype).astype(np.float64) for q in range(n)).astype(dtype)
        elif kind == "allgather":
            s, rv = pattern(r, c, dtype), np.zeros(n * c, dtype)
            w = np.concatenate([pattern(q, c, dtype) for q in range(n)])
        elif kind == "reducescatter":
            s, rv = pattern(r, n * c, dtype), np.zeros(c, dtype)
            w = sum(pattern(q, n * c, dtype).astype(np.float64) for q in range(n))[r * c:(r + 1) * c].astype(dtype)
        elif kind == "reduce":
            s = pattern(r, c, dtype)
            rv = np.zeros(c, dtype) if r == root else None
            w = sum(pattern(q, c, dtype).astype(np.float64) for q in range(n)).astype(dtype) if r == root else None
        elif kind == "broadcast":
            s = pattern(r, c, dtype) if r == root else None
            rv, w = np.zeros(c, dtype), pattern(root, c, dtype)
        elif kind == "alltoall":
            s, rv = pattern(r, n * c, dtype) * (1 if r % 2 else 1), np.zeros(n * c, dtype)
            w = np.concatenate([pattern(q, n * c, dtype)[r * c:(r + 1) * c] for q in range(n)])
        elif kind == "gather":
            s = pattern(r, c, dtype)
            rv = np.zeros(n * c, dtype) if r == root else None
            w = np.concatenate([pattern(q, c, dtype) for q in range(n)]) if r == root else None
        elif kind == "scatter":
            s = pattern(r, n * c, dtype) if r == root else None
            rv, w = np.zeros(c, dtype), pattern(root, n * c, dtype)[r * c:(r + 1) * c]
        sends.append(s)
        recvs.append(rv)
        want.append(w)
    return sends, recvs, want


class EveryKind(unittest.TestCase):
    def test_every_kind_and_dtype_is_exact(self):
        for n in (2, 3):
            with Ranks(n) as ranks:
                coll_id = 0
                for kind in ["allreduce", "allgather", "reducescatter", "reduce", "broadcast", "alltoall", "gather",
                             "scatter"]:
                    for dtype in NUMPY_DTYPES:
                        coll_id += 1
                        root = n - 1
                        for c in ranks.comms:
                            c.register(coll_id, kind, COUNT, dtype, op="sum", root=root)
                        sends, recvs, want = expected_and_buffers(kind, n, dtype, root)
                        futures = [c.submit(coll_id, s, r) for c, s, r in zip(ranks.comms, sends, recvs)]
                        for f in futures:
                            f.result(timeout=30)
                        for r in range(n):
                            with self.subTest(n=n, kind=kind, dtype=dtype, rank=r):
                                if want[r] is None:
                                    self.assertIsNone(recvs[r])
                                else:
                                    np.testing.assert_array_equal(recvs[r], want[r])

    def test_send_recv_and_other_ops(self):
        with Ranks(2) as ranks:
            a, b = ranks.comms
            a.register(1, "send", 10, "float64", root=1)
            b.register(1, "recv", 10, "float64", root=0)
            src, dst = np.arange(10, dtype=np.float64), np.zeros(10)
            fs = [a.submit(1, src, None), b.submit(1, None, dst)]
            for f in fs:
                f.result(timeout=30)
            np.testing.assert_array_equal(dst, src)
            for op, fn in [("max", np.maximum), ("min", np.minimum), ("prod", np.multiply)]:
                cid = {"max": 2, "min": 3, "prod": 4}[op]
                xs = [pattern(r, COUNT, "int32") for r in range(2)]
                want = fn(xs[0], xs[1])
                for c in ranks.comms:
                    c.register(cid, "allreduce", COUNT, np.int32, op=op)
                for f in [c.submit(cid, x, x) for c, x in zip(ranks.comms, xs)]:
                    f.result(timeout=30)
                for x in xs:
                    np.testing.assert_array_equal(x, want)

    def test_bytes_like_buffers(self):
        with Ranks(2) as ranks:
            for c in ranks.comms:
                c.register(1, "allgather", 4, "uint8")
            sends = [bytes([r] * 4) for r in range(2)]
            recvs = [bytearray(8) for _ in range(2)]
            for f in [c.submit(1, s, memoryview(r)) for c, s, r in zip(ranks.comms, sends, recvs)]:
                f.result(timeout=30)
            self.assertEqual([bytes(r) for r in recvs], [bytes([0] * 4 + [1] * 4)] * 2)


class Callbacks(unittest.TestCase):
    def test_each_callback_fires_once_on_the_poller_thread_or_in_wait_all(self):
        calls = []
        lock = threading.Lock()
        in_wait_all = threading.Event()  # set while the main thread sits in wait_all

        def cb(future):
            with lock:
                on_main = threading.get_ident() == threading.main_thread().ident
                calls.append((future.coll_id, on_main and not in_wait_all.is_set(), future.done(), future.status))

        def wait_all(comm):
            in_wait_all.set()
            try:
                comm.wait_all(timeout=30)
            finally:
                in_wait_all.clear()

        with Ranks(2) as ranks:
            for c in ranks.comms:
                c.register(5, "allreduce", COUNT, "float32")
            xs = [[pattern(r, COUNT, "float32") for _ in range(20)] for r in range(2)]
            futures = []
            for i in range(20):
                if i == 10:  # at most maxInflightPerColl (16) submissions of one id in flight
                    for c in ranks.comms:
                        wait_all(c)
                futures += [c.submit(5, x, x, callback=cb) for c, x in zip(ranks.comms, [xs[0][i], xs[1][i]])]
            for c in ranks.comms:
                wait_all(c)
            self.assertTrue(all(f.done() for f in futures))
        self.assertEqual(len(calls), 40)
        self.assertTrue(all(cid == 5 and done and status is None for cid, _, done, status in calls))
        # Never on the submitting thread outside wait_all (say, inside submit).
        self.assertFalse(any(outside for _, outside, _, _ in calls))
        for r in range(2):
            for x in xs[r]:
                np.testing.assert_array_equal(x, pattern(0, COUNT, "float32") + pattern(1, COUNT, "float32"))

    def test_a_callback_may_submit_again(self):
        rounds = 6
        done = threading.Event()
        counts = [0, 0]
        x = [np.ones(COUNT, np.float32) for _ in range(2)]

        with Ranks(2) as ranks:
            for c in ranks.comms:
                c.register(9, "allreduce", COUNT, "float32")

            def resubmit(rank):
                def cb(future):
                    future.result()
                    counts[rank] += 1
                    if counts[rank] < rounds:
                        ranks.comms[rank].submit(9, x[rank], x[rank], callback=cb)
                    elif all(n == rounds for n in counts):
                        done.set()
                return cb

            for r, c in enumerate(ranks.comms):
                c.submit(9, x[r], x[r], callback=resubmit(r))
            self.assertTrue(done.wait(30), f"rounds completed: {counts}")
        for v in x:
            np.testing.assert_array_equal(v, np.full(COUNT, 2.0**rounds, np.float32))

    def test_callbacks_that_need_the_gil_while_the_caller_waits(self):
        # Callbacks do Python work while the main thread sits in wait_all (which releases the GIL).
        seen = []
        with Ranks(3) as ranks:
            for c in ranks.comms:
                c.register(3, "allgather", 256, "int64")
            bufs = [(np.full(256, r, np.int64), np.zeros(768, np.int64)) for r in range(3)]
            for batch in range(3):  # at most maxInflightPerColl (16) submissions of one id in flight
                for _ in range(10):
                    for c, (s, r) in zip(ranks.comms, bufs):
                        c.submit(3, s, r, callback=lambda f: seen.append(sum(range(1000))))
                for c in ranks.comms:
                    c.wait_all(timeout=60)
        self.assertEqual(seen, [499500] * 90)

    def test_buffers_live_until_the_callback_even_when_dropped(self):
        results = []
        with Ranks(2) as ranks:
            for c in ranks.comms:
                c.register(4, "allreduce", 1 << 16, "float64")
            for r, c in enumerate(ranks.comms):
                recv = np.zeros(1 << 16)
                alive = weakref.ref(recv)
                c.submit(4, np.full(1 << 16, r + 1.0), recv,
                         callback=lambda f, alive=alive: results.append(alive() is not None and alive()[0]))
                del recv  # the caller keeps neither the buffers nor the future
            gc.collect()
            for c in ranks.comms:
                c.wait_all(timeout=30)
        self.assertEqual(results, [3.0, 3.0])


class Version(unittest.TestCase):
    def test_the_package_reports_the_version_occl_h_defines(self):
        header = os.path.join(os.path.dirname(__file__), "..", "..", "include", "occl", "occl.h")
        with open(header) as f:
            parts = dict(re.findall(r"^#define OCCL_(MAJOR|MINOR|PATCH) (\d+)$", f.read(), re.M))
        self.assertEqual(occl.__version__, f"{parts['MAJOR']}.{parts['MINOR']}.{parts['PATCH']}")


class Errors(unittest.TestCase):
    def test_bad_arguments_name_what_was_expected(self):
        with Ranks(2) as ranks:
            c = ranks.comms[0]
            with self.assertRaisesRegex(ValueError, "kind 'allreduc': expected one of allreduce"):
                c.register(1, "allreduc", 4, "float32")
            with self.assertRaisesRegex(ValueError, "dtype 'complex64': expected one of int8"):
                c.register(1, "allreduce", 4, "complex64")
            with self.assertRaisesRegex(ValueError, "op 'avgx'"):
                c.register(1, "allreduce", 4, "float32", op="avgx")
            c.register(1, "allreduce", 4, "float32")
            with self.assertRaises(occl.OcclError) as e:
                c.register(1, "allreduce", 4, "float32")
            self.assertEqual(e.exception.code, 5)  # occlInvalidUsage
            self.assertIn("already registered", str(e.exception))
            with self.assertRaisesRegex(occl.OcclError, "collId 2 is not registered"):
                c.submit(2, np.zeros(4, np.float32), np.zeros(4, np.float32))
            with self.assertRaisesRegex(ValueError, "recvbuf: 8 bytes; collId 1 .* needs 16"):
                c.submit(1, np.zeros(4, np.float32), np.zeros(2, np.float32))
            with self.assertRaisesRegex(TypeError, "sendbuf: elements of type int32, but collId 1 was registered with float32"):
                c.submit(1, np.zeros(4, np.int32), np.zeros(4, np.float32))
            with self.assertRaisesRegex(ValueError, "recvbuf: expected a writable"):
                c.submit(1, np.zeros(4, np.float32), bytes(16))
            with self.assertRaisesRegex(ValueError, "sendbuf: expected a C-contiguous buffer"):
                c.submit(1, np.zeros(8, np.float32)[::2], np.zeros(4, np.float32))
            with self.assertRaisesRegex(TypeError, "sendbuf: expected a torch tensor or an object with the buffer protocol"):
                c.submit(1, [1.0, 2.0], np.zeros(4, np.float32))
            with self.assertRaisesRegex(TypeError, "callback: expected a callable"):
                c.submit(1, np.zeros(4, np.float32), np.zeros(4, np.float32), callback=3)
            with self.assertRaisesRegex(occl.OcclError, "sendbuf is NULL"):
                c.submit(1, None, np.zeros(4, np.float32))
            self.assertEqual(c.stats(1)["submissions"], 0)  # nothing refused reached occl

    def test_config_and_ids(self):
        with self.assertRaisesRegex(TypeError, "unknown config field 'daemon_block'"):
            occl.Comm.all(2, daemon_block=2)
        with self.assertRaisesRegex(TypeError, "expected one of backend, daemon_blocks, threads_per_block"):
            occl.Comm.all(2, daemon_block=2)
        with self.assertRaisesRegex(occl.OcclError, "daemonBlocks = 65"):
            occl.Comm.all(2, daemon_blocks=65)
        with self.assertRaisesRegex(ValueError, 'config field orderPolicy="sideways" must be one of fifo|priority|agreed'):
            occl.Comm.all(2, order_policy="sideways")
        with self.assertRaisesRegex(TypeError, "config field 'sq_depth' = 1.5: expected an integer or a word"):
            occl.Comm.all(2, sq_depth=1.5)
        # Every field the OCCL_* table has, simt_* included, words for the choices.
        comms = occl.Comm.all(2, simt_sm_slots=0, simt_jitter_seed=0, timeline_depth=4, order_policy="fifo",
                              transport="auto", backend="host", force_preempt=False)
        self.assertEqual([c.size for c in comms], [2, 2])
        for c in comms:
            c.close()
        with self.assertRaisesRegex(ValueError, "unique_id: 3 bytes"):
            occl.Comm(2, b"abc", 0)
        with self.assertRaisesRegex(ValueError, "n = 0"):
            occl.Comm.all(0)

    def test_more_than_max_inflight_of_one_id_is_refused_until_a_callback(self):
        with Ranks(2, max_inflight_per_coll=2) as ranks:
            a, b = ranks.comms
            for c in ranks.comms:
                c.register(1, "allreduce", 4, "float32")
            xs = [np.ones(4, np.float32) for _ in range(3)]
            a.submit(1, xs[0], xs[0])
            a.submit(1, xs[1], xs[1])
            with self.assertRaises(occl.OcclError) as e:
                a.submit(1, xs[2], xs[2])
            self.assertEqual(e.exception.code, 7)  # occlInProgress: submit again after a callback
            ys = [np.ones(4, np.float32) for _ in range(2)]
            for y in ys:
                b.submit(1, y, y)
            for c in ranks.comms:
                c.wait_all(timeout=30)
            a.submit(1, xs[2], xs[2])
            b.submit(1, ys[0], ys[0])
        self.assertEqual([x[0] for x in xs], [2.0, 2.0, 3.0])

    def test_a_closed_comm_refuses_calls(self):
        comms = occl.Comm.all(2, daemon_blocks=1)
        for c in comms:
            c.close()
            c.close()  # idempotent
            self.assertTrue(c.closed)
            with self.assertRaisesRegex(occl.OcclError, "closed"):
                c.register(1, "allreduce", 4, "float32")

    def test_abort_fails_what_is_pending(self):
        comms = occl.Comm.all(2)
        comms[0].register(1, "allreduce", 4, "float32")
        f = comms[0].submit(1, np.zeros(4, np.float32), np.zeros(4, np.float32))  # rank 1 never joins
        comms[0].abort()
        with self.assertRaises(occl.OcclError) as e:
            f.result(timeout=30)
        self.assertEqual(e.exception.code, 9)  # occlAborted
        comms[1].close()


def _unique_id(rank, nranks, ids):
    """Rank 0 makes the job's id and hands it to the others through `ids`."""
    if rank == 0:
        uid = occl.get_unique_id()
        for _ in range(nranks - 1):
            ids.put(uid)
        return uid
    return ids.get(timeout=60)


def _process_rank(rank, nranks, ids, **config):
    uid = _unique_id(rank, nranks, ids)
    got = []
    with occl.Comm(nranks, uid, rank, init_timeout_ms=60000, **config) as comm:
        comm.register(11, "allreduce", 1000, "int64")
        comm.register(12, "broadcast", 1000, "float32", root=0)
        x = np.full(1000, rank + 1, np.int64)
        y = np.arange(1000, dtype=np.float32) if rank == 0 else np.zeros(1000, np.float32)
        # Ranks submit the two collectives in opposite orders: occl still matches them.
        order = [(11, x, x), (12, y, y)] if rank % 2 == 0 else [(12, y, y), (11, x, x)]
        futures = [comm.submit(cid, s, r, callback=lambda f: got.append(f.coll_id)) for cid, s, r in order]
        for f in futures:
            f.result(timeout=60)
        comm.wait_all(timeout=60)
        transport = comm.peer_transport((rank + 1) % nranks)
    return transport, int(x.sum()), bool((y == np.arange(1000, dtype=np.float32)).all()), sorted(got)


def _late_rank(rank, nranks, ids, barrier):
    """Rank 1 submits only after rank 0's submission timed out (the issue's case: rank 1 used to
    complete with rank 0's data, x = 1 + 10, while rank 0 reported the timeout)."""
    if rank == 0:
        uid = occl.get_unique_id()
        ids.put(uid)
    else:
        uid = ids.get(timeout=60)
    with occl.Comm(nranks, uid, rank, init_timeout_ms=60000, coll_timeout_ms=500) as comm:
        comm.register(1, "allreduce", 4, "float32")
        x = np.full(4, 10.0 if rank == 0 else 1.0, np.float32)
        if rank == 1:
            barrier.wait(timeout=60)  # rank 0's submission has failed
        f = comm.submit(1, x, x)
        why = ""
        try:
            f.result(timeout=30)
            outcome = "success"
        except occl.OcclError as e:
            outcome, why = e.code, str(e)
        if rank == 0:
            barrier.wait(timeout=60)
        return outcome, x.tolist(), why


def _pending_names_the_late_rank(rank, nranks, ids, barrier):
    """Rank 0 submits; until rank 1 does, Comm.pending() on rank 0 names rank 1 as 'not
    submitted'; then both complete and nothing is pending."""
    uid = _unique_id(rank, nranks, ids)
    with occl.Comm(nranks, uid, rank, init_timeout_ms=60000, coll_timeout_ms=60000) as comm:
        comm.register(7, "allreduce", 8, "float32")
        x = pattern(rank, 8, "float32")
        seen = []
        if rank == 0:
            f = comm.submit(7, x, x)
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline:
                seen = comm.pending()
                if [(w["peer"], w["reason"]) for w in seen] == [(1, "not submitted")]:
                    break
                time.sleep(0.02)
            barrier.wait(timeout=60)
        else:
            barrier.wait(timeout=60)
            f = comm.submit(7, x, x)
        f.result(timeout=60)
        return seen, comm.pending(), x.tolist()


def _shrink_after_a_kill(rank, nranks, ids, barrier):
    """Rank 2 dies (SIGKILL) once every rank has its first AllReduce; the others see it, shrink
    without it and go on on the same id with occlSubmit alone; returns what each survivor saw."""
    uid = _unique_id(rank, nranks, ids)
    comm = occl.Comm(nranks, uid, rank, init_timeout_ms=60000, coll_timeout_ms=20000)
    comm.register(3, "allreduce", 64, "float32")
    x = pattern(rank, 64, "float32")
    comm.submit(3, x, x).result(timeout=60)
    # Without this, a loaded survivor may still be finishing the first AllReduce when rank 2 dies,
    # and then fails it (a dead peer fails what is in flight), which is not what this test is about.
    barrier.wait(timeout=60)
    if rank == 2:
        os.kill(os.getpid(), signal.SIGKILL)
    with self_assert_raises(occl.OcclError) as failed:
        comm.submit(3, x, x).result(timeout=60)
    shrunk = comm.shrink([2], abort=True)
    y = pattern(rank, 64, "float32")
    shrunk.submit(3, y, y).result(timeout=60)
    comm.close()
    size, new_rank = shrunk.size, shrunk.rank
    shrunk.close()
    return failed[0], size, new_rank, y.tolist()


class self_assert_raises:
    """assertRaises for a rank in a child process: records the exception's message."""

    def __init__(self, kind):
        self.kind, self.seen = kind, [None]

    def __enter__(self):
        return self.seen

    def __exit__(self, exc_type, exc, tb):
        if exc_type is None or not issubclass(exc_type, self.kind):
            raise AssertionError(f"expected {self.kind.__name__}, got {exc_type}")
        self.seen[0] = str(exc)
        return True


class Processes(unittest.TestCase):
    def test_survivors_shrink_after_a_rank_is_killed_and_go_on(self):
        ids, barrier = support._CTX.Queue(), support._CTX.Barrier(3)
        results = support.run(_shrink_after_a_kill, 3, ids, barrier, timeout=120, expect_killed=(2,))
        want = (pattern(0, 64, "float32") + pattern(1, 64, "float32")).tolist()
        for rank, (why, size, new_rank, y) in enumerate(results[:2]):
            # Either the death was known when the submission came (refused at once, naming rank 2),
            # or it failed in flight; then the survivor that noticed first may have poisoned its
            # connectors, so the other learns it from that survivor ("a peer failed it: rank 1 ...").
            self.assertIn("remote process error", why)
            self.assertRegex(why, r"rank 2 failed|a peer failed it")
            self.assertEqual((size, new_rank), (2, rank))
            self.assertEqual(y, want)

    def test_pending_names_the_rank_that_has_not_submitted(self):
        ids = support._CTX.Queue()
        barrier = support._CTX.Barrier(2)
        (seen, after0, y0), (_, after1, y1) = support.run(_pending_names_the_late_rank, 2, ids, barrier, timeout=120)
        self.assertEqual(len(seen), 1, seen)
        self.assertEqual((seen[0]["coll_id"], seen[0]["seq"], seen[0]["peer"]), (7, 0, 1))
        self.assertEqual(seen[0]["reason"], "not submitted")
        self.assertEqual(seen[0]["peer_submitted"], 0)
        self.assertGreaterEqual(seen[0]["peer_silent_ms"], 0)  # processes are tracked
        self.assertEqual((after0, after1), ([], []))
        want = (pattern(0, 8, "float32") + pattern(1, 8, "float32")).tolist()
        self.assertEqual((y0, y1), (want, want))

    def test_a_rank_that_submits_after_its_peer_timed_out_fails_too(self):
        ids = support._CTX.Queue()
        barrier = support._CTX.Barrier(2)
        results = support.run(_late_rank, 2, ids, barrier, timeout=120)
        (early, x0, why), (late, x1, _) = results
        self.assertIn("rank 1 has not submitted it", why)
        self.assertEqual(early, 8)  # occlTimeout
        self.assertEqual(late, 8, "the late rank must fail what its peer failed")
        self.assertEqual(x1, [1.0] * 4, "the late rank's buffer must be untouched")
        self.assertEqual(x0, [10.0] * 4)

    def test_ranks_in_processes_submit_in_opposite_orders(self):
        self._opposite_orders("shm", backend="host")

    def test_simt_ranks_in_processes_share_device_memory_unless_told_shm(self):
        self._opposite_orders("simt-ipc", backend="simt")
        self._opposite_orders("shm", backend="simt", transport="shm")

    def _opposite_orders(self, expected_transport, **config):
        ids = support._CTX.Queue()
        results = support.run(functools.partial(_process_rank, **config), 3, ids, timeout=120)
        for transport, total, bcast_ok, got in results:
            self.assertEqual(transport, expected_transport)
            self.assertEqual(total, 1000 * 6)
            self.assertTrue(bcast_ok)
            self.assertEqual(got, [11, 12])


class Gates(unittest.TestCase):
    """submit(gated=True) and open_gate: nothing starts before its gate, gates open from any thread in
    any order, misuse names itself; stream= needs a CUDA rank."""

    def test_gates_opened_from_another_thread_in_the_opposite_order(self):
        n = 2
        with Ranks(n) as ranks:
            for c in ranks.comms:
                c.register(1, "allreduce", COUNT, "float32")
                c.register(2, "allreduce", 3 * COUNT, "float32")
            sends = {(r, i): np.full(i * COUNT if i == 1 else 3 * COUNT, -1, np.float32) for r in range(n) for i in (1, 2)}
            recvs = {k: np.zeros_like(v) for k, v in sends.items()}
            futures = {}
            for r, c in enumerate(ranks.comms):
                order = (1, 2) if r == 0 else (2, 1)
                for i in order:
                    futures[(r, i)] = c.submit(i, sends[(r, i)], recvs[(r, i)], gated=True)
            self.assertEqual(futures[(0, 1)].gate, (1, 0))
            self.assertFalse(futures[(0, 1)].wait(timeout=0.05))  # its input does not exist yet

            def opener(r):
                for i in ((2, 1) if r == 0 else (1, 2)):
                    sends[(r, i)][:] = pattern(r, len(sends[(r, i)]), "float32")
                    ranks.comms[r].open_gate(futures[(r, i)] if i == 1 else futures[(r, i)].gate)

            threads = [threading.Thread(target=opener, args=(r,)) for r in range(n)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            for k, f in futures.items():
                f.result(timeout=60)
                want = sum(pattern(q, len(recvs[k]), "float32") for q in range(n))
                np.testing.assert_array_equal(recvs[k], want)

    def test_misuse_names_itself(self):
        with Ranks(2) as ranks:
            for rc in ranks.comms:
                rc.register(1, "allreduce", 4, "float32")
            c = ranks.comms[0]
            x = np.zeros(4, np.float32)
            with self.assertRaisesRegex(ValueError, "not both"):
                c.submit(1, x, x, gated=True, stream=0)
            with self.assertRaisesRegex(TypeError, "stream: expected a CUDA stream handle"):
                c.submit(1, x, x, stream="s")
            with self.assertRaisesRegex(occl.OcclError, "needs a CUDA rank"):
                c.submit(1, x, x, stream=0)
            with self.assertRaisesRegex(TypeError, "gate: expected"):
                c.open_gate(3)
            with self.assertRaisesRegex(occl.OcclError, "names no outstanding submission"):
                c.open_gate((1, 5))
            futures = [rc.submit(1, np.ones(4, np.float32), np.zeros(4, np.float32)) for rc in ranks.comms]
            with self.assertRaisesRegex(ValueError, "not gated"):
                c.open_gate(futures[0])
            for f in futures:
                f.result(timeout=60)


class Split(unittest.TestCase):
    def test_halves_by_key_and_a_rank_without_color(self):
        """Four thread ranks split at once: colors 0/1 with keys that reverse each half, and rank 3
        sitting out (None); each child's AllReduce sums its own members exactly."""
        with Ranks(4) as ranks:
            children = [None] * 4

            def split(r):
                color = None if r == 3 else r % 2
                children[r] = ranks.comms[r].split(color, key=-r)

            threads = [threading.Thread(target=split, args=(r,)) for r in range(4)]
            for t in threads:
                t.start()
            for t in threads:
                t.join(timeout=60)
            self.assertIsNone(children[3])
            self.assertEqual([c.size for c in children[:3]], [2, 1, 2])
            self.assertEqual([c.rank for c in children[:3]], [1, 0, 0])  # world 2 leads color 0
            for c in children[:3]:
                c.register(5, "allreduce", 8, "float32")
            bufs = [pattern(r, 8, "float32") for r in range(3)]
            futures = [c.submit(5, b, b) for c, b in zip(children[:3], bufs)]
            for f in futures:
                f.result(timeout=60)
            np.testing.assert_array_equal(bufs[0], pattern(0, 8, "float32") + pattern(2, 8, "float32"))
            np.testing.assert_array_equal(bufs[1], pattern(1, 8, "float32"))
            for c in children[:3]:
                c.close()

    def test_a_bad_color_fails_every_rank(self):
        with Ranks(2) as ranks:
            errors = [None, None]

            def split(r):
                try:
                    ranks.comms[r].split(-7 if r == 0 else 0)
                except occl.OcclError as e:
                    errors[r] = str(e)

            threads = [threading.Thread(target=split, args=(r,)) for r in range(2)]
            for t in threads:
                t.start()
            for t in threads:
                t.join(timeout=60)
            self.assertIn("color = -7", errors[0])
            self.assertIn("rank 0 passed an invalid argument", errors[1])


if __name__ == "__main__":
    unittest.main()
