"""occl.Comm.submit_group: a list of submissions in one call, their Futures and callbacks, every element
checked; a bad entry submits nothing and names itself."""

import random
import unittest

import numpy as np

import occl
from test_module import Ranks, pattern


class SubmitGroup(unittest.TestCase):
    def test_groups_in_a_different_order_on_each_rank(self):
        n, ids = 3, [11, 12, 13, 14]
        with Ranks(n) as ranks:
            for c in ranks.comms:
                for i in ids:
                    c.register(i, "allreduce", 10 * i, "int32")
            fired = [[] for _ in range(n)]
            sends = {(r, i, k): pattern(r, 10 * i, "int32") * (k + 1) for r in range(n) for i in ids for k in range(2)}
            recvs = {key: np.zeros_like(v) for key, v in sends.items()}
            futures = {}
            for r, c in enumerate(ranks.comms):
                order = [(i, k) for i in ids for k in range(2)]
                random.Random(r).shuffle(order)
                order.sort(key=lambda e: e[1])  # a collId's first run before its second
                entries = [(i, sends[(r, i, k)], recvs[(r, i, k)], lambda f, r=r: fired[r].append(f.coll_id))
                           for i, k in order]
                for (i, k), f in zip(order, c.submit_group(entries)):
                    futures[(r, i, k)] = f
            for key, f in futures.items():
                f.result(timeout=60)
                r, i, k = key
                want = sum(pattern(q, 10 * i, "int32") for q in range(n)) * (k + 1)
                np.testing.assert_array_equal(recvs[key], want, err_msg=f"rank {r} collId {i} run {k}")
            for c in ranks.comms:
                c.wait_all(timeout=60)
            for r in range(n):
                self.assertEqual(sorted(fired[r]), sorted(ids * 2), f"rank {r}")

    def test_a_bad_entry_submits_nothing_and_names_itself(self):
        with Ranks(2) as ranks:
            for c in ranks.comms:
                c.register(1, "allreduce", 4, "float32")
            x = np.ones(4, np.float32)
            c = ranks.comms[0]
            with self.assertRaisesRegex(occl.OcclError, "collId 2 is not registered"):
                c.submit_group([(1, x, x), (2, x, x)])
            with self.assertRaisesRegex(TypeError, r"entries\[1\]: expected a tuple"):
                c.submit_group([(1, x, x), 5])
            with self.assertRaisesRegex(occl.OcclError, "subs\\[1\\] of 2: count = 2: collId 0x1 was registered with count 4"):
                c.submit_group([(1, x, x, None, None), (1, x, x, None, 2)])
            with self.assertRaisesRegex(ValueError, "recvbuf: 8 bytes"):
                c.submit_group([(1, x, x), (1, x, np.ones(2, np.float32))])
            self.assertEqual(c.stats(1)["submissions"], 0)
            self.assertEqual(c.submit_group([]), [])
            # The entries that were refused, now with the peer: both complete.
            y = np.ones(4, np.float32)
            fs = [c.submit_group([(1, x, x)])[0], ranks.comms[1].submit_group([(1, y, y)])[0]]
            for f in fs:
                f.result(timeout=60)
            np.testing.assert_array_equal(x, np.full(4, 2, np.float32))


if __name__ == "__main__":
    unittest.main()
