"""occl.Comm.premul_sum: NCCL's PreMulSum from Python. Each rank's input is multiplied by that
rank's own scalar before the sum; checked exactly (small integers and scalars), and the op's
datatype must be the registration's."""

import unittest

import numpy as np

import occl
from test_module import Ranks, pattern


class PreMulSum(unittest.TestCase):
    def test_each_rank_scales_its_own_input(self):
        n, count = 3, 1000
        scalars = [2.0, -1.0, 0.5]
        for dtype in ("float32", "float64", "float16", "int32"):
            with Ranks(n) as ranks:
                for r, c in enumerate(ranks.comms):
                    s = scalars[r] if dtype != "int32" else [2, -1, 3][r]
                    c.register(1, "allreduce", count, dtype, op=c.premul_sum(s, dtype))
                sends = [pattern(r, count, dtype) for r in range(n)]
                recvs = [np.zeros(count, dtype) for _ in range(n)]
                for f in [c.submit(1, sends[r], recvs[r]) for r, c in enumerate(ranks.comms)]:
                    f.result(timeout=60)
                factors = scalars if dtype != "int32" else [2, -1, 3]
                want = sum(sends[q].astype(np.float64) * factors[q] for q in range(n)).astype(dtype)
                for r in range(n):
                    np.testing.assert_array_equal(recvs[r], want, err_msg=f"{dtype} rank {r}")

    def test_an_op_of_another_dtype_is_refused(self):
        with Ranks(1) as ranks:
            c = ranks.comms[0]
            op = c.premul_sum(2.0, "float32")
            with self.assertRaisesRegex(occl.OcclError, "a PreMulSum op of datatype float; desc.datatype is double"):
                c.register(1, "allreduce", 8, "float64", op=op)
            with self.assertRaisesRegex(occl.OcclError, "live PreMulSum op"):
                c.register(2, "allreduce", 8, "float32", op=op + 1)


if __name__ == "__main__":
    unittest.main()
