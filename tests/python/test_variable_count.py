"""occl.Comm.register(variable_count=True) and submit(count=...): one registration, a different count
for every run (the same on every rank), every element checked; the counts a collective does not
take are refused by name; ranks that pass different counts fail that run, both counts named."""

import random
import unittest

import numpy as np

import occl
from test_module import Ranks, pattern


class VariableCount(unittest.TestCase):
    def test_random_counts_under_one_registration(self):
        n, most = 3, 500
        with Ranks(n) as ranks:
            for c in ranks.comms:
                c.register(1, "allreduce", most, "int32", variable_count=True)
                c.register(2, "allgather", most, "float32", variable_count=True)
            rng = random.Random(7)
            for run in range(40):
                count = rng.choice([0, most, rng.randrange(most + 1)])
                sends = [pattern(r, count, "int32") * (run + 1) for r in range(n)]
                recvs = [np.full(most, -1, np.int32) for _ in range(n)]
                gsends = [pattern(r, count, "float32") for r in range(n)]
                grecvs = [np.full(n * count + 1, -1, np.float32) for _ in range(n)]
                futures = []
                for r, c in enumerate(ranks.comms):
                    # A different order of the two collectives on each rank.
                    runs = [(1, sends[r], recvs[r]), (2, gsends[r], grecvs[r])]
                    for coll, s, d in runs if (r + run) % 2 else reversed(runs):
                        futures.append(c.submit(coll, s, d, count=count))
                for f in futures:
                    f.result(timeout=60)
                want = sum(pattern(q, count, "int32") for q in range(n)) * (run + 1)
                for r in range(n):
                    np.testing.assert_array_equal(recvs[r][:count], want, err_msg=f"run {run} rank {r}")
                    np.testing.assert_array_equal(recvs[r][count:], -1, err_msg=f"run {run} rank {r}: past count")
                    np.testing.assert_array_equal(grecvs[r][: n * count], np.concatenate(gsends))
                    self.assertEqual(grecvs[r][n * count], -1, f"run {run} rank {r}: past count")

    def test_small_counts_take_the_small_form(self):
        # Thread ranks: the maximum runs "peer", counts up to direct's bound run "direct".
        n, most = 3, 1 << 14
        with Ranks(n) as ranks:
            for c in ranks.comms:
                c.register(5, "allreduce", most, "float32", variable_count=True)
            bound, algorithm = ranks.comms[0].small_form(5)
            self.assertEqual(algorithm, "direct")
            self.assertEqual(bound, (32 << 10) // (n - 1) // 4)
            for run, count in enumerate([3, most, bound, bound + 1, 0, 100]):
                sends = [np.full(count, r + run, np.float32) for r in range(n)]
                recvs = [np.full(most, -1, np.float32) for _ in range(n)]
                futures = [c.submit(5, sends[r], recvs[r], count=count) for r, c in enumerate(ranks.comms)]
                for f in futures:
                    f.result(timeout=60)
                for r in range(n):
                    np.testing.assert_array_equal(recvs[r][:count], sum(q + run for q in range(n)), err_msg=f"count {count}")
                    np.testing.assert_array_equal(recvs[r][count:], -1, err_msg=f"count {count}: past it")
            c = ranks.comms[0]
            c.register(6, "allreduce", 8, "float32", variable_count=True)
            self.assertEqual(c.small_form(6), (0, None))

    def test_a_group_of_counts(self):
        with Ranks(2) as ranks:
            for c in ranks.comms:
                c.register(4, "allreduce", 100, "float32", variable_count=True)
            bufs = {(r, n): np.full(n, r + 1, np.float32) for r in range(2) for n in (0, 3, 100, 57)}
            futures = []
            for r, c in enumerate(ranks.comms):
                futures += c.submit_group([(4, bufs[(r, n)], bufs[(r, n)], None, n) for n in (0, 3, 100, 57)])
            for f in futures:
                f.result(timeout=60)
            for (r, n), b in bufs.items():
                np.testing.assert_array_equal(b, 3, err_msg=f"rank {r} count {n}")

    def test_counts_it_does_not_take_are_refused(self):
        with Ranks(1) as ranks:
            c = ranks.comms[0]
            c.register(1, "allreduce", 8, "float32", variable_count=True)
            c.register(2, "allreduce", 8, "float32")
            x = np.ones(8, np.float32)
            with self.assertRaisesRegex(occl.OcclError, "count = 9: collId 0x1 takes at most the count it was registered with, 8"):
                c.submit(1, x, x, count=9)
            with self.assertRaisesRegex(occl.OcclError, "collId 0x2 was registered with count 8 and no desc.variableCount"):
                c.submit(2, x, x, count=4)
            with self.assertRaisesRegex(ValueError, "recvbuf: 8 bytes"):
                c.submit(1, x, x[:2], count=4)
            with self.assertRaisesRegex(ValueError, "count: a gated or stream submission has its registered count"):
                c.submit(1, x, x, gated=True, count=4)
            c.submit(1, x[:2], x[:2], count=2).result(timeout=60)
            np.testing.assert_array_equal(x, 1)

    def test_different_counts_fail_naming_both(self):
        with Ranks(2) as ranks:
            for c in ranks.comms:
                c.register(3, "allreduce", 64, "float32", variable_count=True, algorithm="ring")
            bufs = [np.ones(64, np.float32) for _ in range(2)]
            fs = [ranks.comms[0].submit(3, bufs[0], bufs[0], count=10), ranks.comms[1].submit(3, bufs[1], bufs[1], count=20)]
            messages = []
            for f in fs:
                with self.assertRaises(occl.OcclError) as failed:
                    f.result(timeout=60)
                messages.append(str(failed.exception))
            # Each rank received from the other; one may have seen the other's poison first.
            self.assertTrue(any("this rank submitted count 10 and rank 1 count 20" in m or
                                "this rank submitted count 20 and rank 0 count 10" in m for m in messages), messages)


if __name__ == "__main__":
    unittest.main()
