"""occl.Comm.register(vector_counts=True) and submit_v: AllToAllv, AllGatherv, ReduceScatterv,
Gatherv and Scatterv with random per-rank counts (zeros among them) under one registration each, packed and with
displacements of one's own, every element checked; bad arrays are refused by name; ranks whose
counts disagree fail that run, both lengths named."""

import random
import unittest

import numpy as np

import occl
from test_module import Ranks


class VectorCounts(unittest.TestCase):
    def test_alltoallv_allgatherv_reducescatterv(self):
        n, most = 3, 40
        with Ranks(n) as ranks:
            for c in ranks.comms:
                c.register(1, "alltoall", most, "int32", vector_counts=True)
                c.register(2, "allgather", most, "float32", vector_counts=True)
                c.register(3, "reducescatter", most, "int64", vector_counts=True)
            rng = random.Random(11)
            for run in range(20):
                # counts[r][q]: what rank r sends rank q (AllToAllv); row 0 is the others' counts.
                counts = [[rng.choice([0, most, rng.randrange(most + 1)]) for _ in range(n)] for _ in range(n)]
                row = counts[0]
                sends = [np.concatenate([np.arange(counts[r][q], dtype=np.int32) + 1000 * r + 100 * q
                                         for q in range(n)]) for r in range(n)]
                recvs = [np.full(sum(counts[q][r] for q in range(n)) + 2, -1, np.int32) for r in range(n)]
                gsends = [np.arange(row[r], dtype=np.float32) + 10 * r for r in range(n)]
                # AllGatherv with gaps of 2 before each block, in reverse rank order.
                gdispls = []
                at = 0
                for q in reversed(range(n)):
                    at += 2
                    gdispls.insert(0, at)
                    at += row[q]
                grecvs = [np.full(at, -1, np.float32) for _ in range(n)]
                rsends = [np.concatenate([np.full(row[q], r + q, np.int64) for q in range(n)]) for r in range(n)]
                rrecvs = [np.full(row[r], -1, np.int64) for r in range(n)]
                futures = []
                for r, c in enumerate(ranks.comms):
                    runs = [
                        lambda c=c, r=r: c.submit_v(1, sends[r], recvs[r], send_counts=counts[r],
                                                    recv_counts=[counts[q][r] for q in range(n)]),
                        lambda c=c, r=r: c.submit_v(2, gsends[r], grecvs[r], recv_counts=row, recv_displs=gdispls),
                        lambda c=c, r=r: c.submit_v(3, rsends[r], rrecvs[r], send_counts=row),
                    ]
                    rng2 = random.Random(run * n + r)
                    rng2.shuffle(runs)
                    futures += [submit() for submit in runs]
                for f in futures:
                    f.result(timeout=60)
                for r in range(n):
                    want = np.concatenate([np.arange(counts[q][r], dtype=np.int32) + 1000 * q + 100 * r
                                           for q in range(n)])
                    np.testing.assert_array_equal(recvs[r][: len(want)], want, err_msg=f"run {run} rank {r}")
                    np.testing.assert_array_equal(recvs[r][len(want):], -1, err_msg=f"run {run} rank {r}: past")
                    gwant = np.full(at, -1, np.float32)
                    for q in range(n):
                        gwant[gdispls[q]: gdispls[q] + row[q]] = gsends[q]
                    np.testing.assert_array_equal(grecvs[r], gwant, err_msg=f"run {run} rank {r}: allgatherv")
                    np.testing.assert_array_equal(rrecvs[r], sum(q + r for q in range(n)),
                                                  err_msg=f"run {run} rank {r}: reducescatterv")

    def test_gatherv_and_scatterv(self):
        n, most, groot, sroot = 3, 30, 1, 2
        with Ranks(n) as ranks:
            for c in ranks.comms:
                c.register(4, "gather", most, "float64", root=groot, vector_counts=True)
                c.register(5, "scatter", most, "uint8", root=sroot, vector_counts=True)
            rng = random.Random(5)
            for run in range(15):
                row = [rng.choice([0, most, rng.randrange(most + 1)]) for _ in range(n)]
                # The roots' blocks in reverse rank order with a gap of 1 before each.
                displs, at = [0] * n, 0
                for q in reversed(range(n)):
                    at += 1
                    displs[q] = at
                    at += row[q]
                gsends = [np.arange(row[r], dtype=np.float64) + 100 * r for r in range(n)]
                grecvs = [np.full(at if r == groot else 1, -1, np.float64) for r in range(n)]
                ssends = [np.full(at if r == sroot else 1, 255, np.uint8) for r in range(n)]
                for q in range(n):
                    ssends[sroot][displs[q]: displs[q] + row[q]] = np.arange(row[q], dtype=np.uint8) + 7 * q
                srecvs = [np.full(row[r] + 1, 255, np.uint8) for r in range(n)]
                futures = []
                for r, c in enumerate(ranks.comms):
                    runs = [
                        lambda c=c, r=r: c.submit_v(4, gsends[r], grecvs[r], recv_counts=row,
                                                    recv_displs=displs if r == groot else None),
                        lambda c=c, r=r: c.submit_v(5, ssends[r], srecvs[r], send_counts=row,
                                                    send_displs=displs if r == sroot else None),
                    ]
                    random.Random(run * n + r).shuffle(runs)
                    futures += [submit() for submit in runs]
                for f in futures:
                    f.result(timeout=60)
                gwant = np.full(at, -1, np.float64)
                for q in range(n):
                    gwant[displs[q]: displs[q] + row[q]] = gsends[q]
                for r in range(n):
                    want = gwant if r == groot else np.full(1, -1, np.float64)
                    np.testing.assert_array_equal(grecvs[r], want, err_msg=f"run {run} rank {r}: gatherv")
                    swant = np.concatenate([np.arange(row[r], dtype=np.uint8) + 7 * r, np.full(1, 255, np.uint8)])
                    np.testing.assert_array_equal(srecvs[r], swant, err_msg=f"run {run} rank {r}: scatterv")

    def test_bad_arrays_are_refused_by_name(self):
        with Ranks(2) as ranks:
            c = ranks.comms[0]
            c.register(1, "alltoall", 8, "float32", vector_counts=True)
            c.register(2, "allreduce", 8, "float32")
            a, b = np.zeros(16, np.float32), np.zeros(16, np.float32)
            with self.assertRaisesRegex(ValueError, "send_counts: 3 entries; expected one per rank, 2"):
                c.submit_v(1, a, b, send_counts=[1, 1, 1], recv_counts=[1, 1])
            with self.assertRaisesRegex(occl.OcclError, r"sendCounts\[1\] = 9: a block of AllToAllv holds at most"):
                c.submit_v(1, a, b, send_counts=[1, 9], recv_counts=[1, 1])
            with self.assertRaisesRegex(ValueError, "recvbuf: 64 bytes; collId 1 .alltoallv: its blocks"):
                c.submit_v(1, a, b, send_counts=[1, 1], recv_counts=[8, 8], recv_displs=[0, 9])
            with self.assertRaisesRegex(ValueError, "registered without vector_counts=True"):
                c.submit_v(2, a, b, send_counts=[1, 1], recv_counts=[1, 1])
            with self.assertRaisesRegex(occl.OcclError, "is a v-collective"):
                c.submit(1, a, b)

    def test_counts_that_disagree_fail_naming_both(self):
        with Ranks(2) as ranks:
            for c in ranks.comms:
                c.register(1, "allgather", 16, "int32", vector_counts=True)
            sends = [np.arange(5, dtype=np.int32), np.arange(5, dtype=np.int32)]
            recvs = [np.full(10, -1, np.int32), np.full(10, -1, np.int32)]
            f0 = ranks.comms[0].submit_v(1, sends[0][:5], recvs[0], recv_counts=[5, 5])
            f1 = ranks.comms[1].submit_v(1, sends[1][:4], recvs[1], recv_counts=[5, 4])
            # Rank 0 receives rank 1's 4 where its counts say 5; rank 1 receives what it expects and
            # may complete (its data is exact) or see rank 0's failure.
            with self.assertRaisesRegex(occl.OcclError, "rank 1 sent 4 elements where this rank's blocks expect 5"):
                f0.result(timeout=60)
            try:
                f1.result(timeout=60)
                np.testing.assert_array_equal(recvs[1][:9], np.concatenate([sends[0], sends[1][:4]]))
            except occl.OcclError:
                pass


if __name__ == "__main__":
    unittest.main()
