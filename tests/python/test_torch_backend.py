"""torch.distributed with backend "occl": every call, every dtype torch 1.13 has on CPU that
occl supports, synchronous and asynchronous, on 2 and 4 processes; refusals with a clear error."""

import unittest

import torch

import occl.torch
import support
import torch_jobs


class Backend(unittest.TestCase):
    def run_all_ops(self, size):
        results = support.run(torch_jobs.all_ops, size, support.store_path(), timeout=240)
        for rank, (failures, transport, registered) in enumerate(results):
            self.assertEqual(failures, [], f"rank {rank}")
            self.assertEqual(transport, "shm")
            # One registration per distinct signature, reused by the synchronous and asynchronous
            # rounds: per dtype sum, max, min, product, broadcast, reduce, allgather (the list and
            # _base forms share it), reduce_scatter (likewise), alltoall, send, recv, gather and
            # scatter, plus avg for the 4 floating types; and one barrier: 8 * 13 + 4 + 1.
            self.assertEqual(registered, 109)

    def test_every_call_and_dtype_on_2_processes(self):
        self.run_all_ops(2)

    def test_every_call_and_dtype_on_4_processes(self):
        self.run_all_ops(4)

    def test_what_occl_lacks_is_refused_by_name(self):
        for got in support.run(torch_jobs.errors, 2, support.store_path(), timeout=120):
            self.assertIn("reduce op BAND is not supported", got["band"])
            self.assertIn("reduce op BOR is not supported", got["bor"])
            self.assertIn("dtype Bool is not supported", got["bool"])
            self.assertIsNone(got["complex"])  # torch passes complex tensors on as float pairs
            self.assertEqual(got["complex value"], [[2.0, 4.0]] * 4)
            self.assertIn("dtype Short is not supported", got["int16"])
            self.assertIn("input split sizes [3, 2] add up to 5 rows; the input has 4", got["splits"])
            self.assertIn("takes one tensor per process, got 2", got["two tensors"])
            self.assertIn("not contiguous", got["strided"])
            self.assertIn("does not support recvAnysource", got["recv any"])
            self.assertIn("_allgather_base: the output has 3 elements, expected 2 x 2", got["gather size"])
            self.assertIn("broadcast: root 5 is not a rank of this group of 2", got["root"])
            self.assertEqual(got["after"], [2.0] * 8)


class PreMulSum(unittest.TestCase):
    def test_premul_sum_factors_scale_each_rank_before_the_sum(self):
        for rank, (failures, refused) in enumerate(support.run(torch_jobs.premul_sum, 2, support.store_path(),
                                                               timeout=120)):
            self.assertEqual(failures, [], f"rank {rank}")
            self.assertIn("PREMUL_SUM with a tensor factor is not supported", refused or "", f"rank {rank}")


@unittest.skipUnless(hasattr(torch, "float8_e5m2"), "torch before 2.1 has no float8 types")
class Float8(unittest.TestCase):
    def test_float8_types_reduce_bit_exact_on_2_and_3_processes(self):
        for size in (2, 3):
            for rank, failures in enumerate(support.run(torch_jobs.float8, size, support.store_path(), timeout=120)):
                self.assertEqual(failures, [], f"{size} processes, rank {rank}")


class AnyOrder(unittest.TestCase):
    def test_two_ranks_issue_tagged_all_reduces_in_opposite_orders(self):
        results = support.run(torch_jobs.any_order, 2, support.store_path(), 0, timeout=120)
        self.assertNotEqual(results[0][0], results[1][0])
        for order, wrong in results:
            self.assertEqual(wrong, [])

    def test_four_ranks_issue_tagged_all_reduces_in_random_orders(self):
        results = support.run(torch_jobs.any_order, 4, support.store_path(), 1, timeout=180)
        self.assertGreater(len({tuple(order) for order, _ in results}), 1)
        for order, wrong in results:
            self.assertEqual(wrong, [])


    def test_pair_groups_beside_the_world_in_any_order(self):
        results = support.run(torch_jobs.subgroups, 4, support.store_path(), timeout=180)
        for rank, (wrong, group_rank) in enumerate(results):
            self.assertEqual(wrong, [], f"rank {rank}")
            self.assertEqual(group_rank, rank % 2)


class Subgroups(unittest.TestCase):
    """Groups made by dist.new_group and dist.split_group beside the world, in use at once."""

    def check(self, results, expect_origins):
        for rank, (origins, wrong, group_ranks) in enumerate(results):
            self.assertEqual(wrong, [], f"rank {rank}")
            want = {name: origin for name, origin in expect_origins.items()
                    if name != "local" or rank in (0, 1)}
            self.assertEqual(origins, want, f"rank {rank}")
            self.assertEqual(group_ranks["world"], rank)
            self.assertEqual(group_ranks["copy"], rank)
            self.assertEqual(group_ranks["pair"], rank % 2)
            if "half" in group_ranks:
                self.assertEqual(group_ranks["half"], rank % 2)

    def test_new_group_and_split_group_split_the_world(self):
        if not hasattr(occl.torch._C, "ProcessGroupOccl"):
            self.skipTest(f"torch {torch.__version__} does not split a backend's groups (2.8 and later do)")
        results = support.run(torch_jobs.split_groups, 4, support.store_path(), 3, True, timeout=180)
        self.check(results, {"world": "rendezvous", "pair": "split", "copy": "split", "half": "split",
                             "local": "rendezvous"})

    def test_a_world_made_without_a_device_has_groups_meet_through_the_store(self):
        results = support.run(torch_jobs.split_groups, 4, support.store_path(), 4, False, timeout=180)
        self.check(results, {"world": "rendezvous", "pair": "rendezvous", "copy": "rendezvous"})


class SizeClasses(unittest.TestCase):
    def test_two_thousand_random_shapes_register_a_bounded_set(self):
        results = support.run(torch_jobs.shape_loop, 2, support.store_path(), 2000, timeout=300)
        for rank, (wrong, seen) in enumerate(results):
            self.assertEqual(wrong, [], f"rank {rank}")
            (early, count_early, bytes_early), (end, count_end, bytes_end) = seen
            print(f"rank {rank}: registered after {early} steps: {count_early} collectives, {bytes_early} bytes; "
                  f"after {end}: {count_end} collectives, {bytes_end} bytes")
            # all_reduce lengths 1..16383 fall in 15 classes, all_gather lengths 1..1023 in 11.
            self.assertLessEqual(count_end, 15 + 11)
            self.assertLessEqual(bytes_end, 2 * bytes_early)


class Uneven(unittest.TestCase):
    def test_uneven_all_to_all_single_and_all_gather_are_exact_under_one_registration_each(self):
        for rank, (failures, registered) in enumerate(support.run(torch_jobs.uneven, 3, support.store_path(), 60,
                                                                  timeout=240)):
            self.assertEqual(failures, [], f"rank {rank}")
            # all_to_all_single and all_to_all (one AllToAllv) and all_gather, three dtypes each,
            # whatever the splits.
            self.assertLessEqual(registered, 6, f"rank {rank}")


class Diagnostics(unittest.TestCase):
    def test_mismatched_sizes_time_out_naming_the_peer_and_what_it_ran(self):
        for rank, why in enumerate(support.run(torch_jobs.mismatched_sizes, 2, support.store_path(), timeout=120)):
            other = 1 - rank
            self.assertIn("did not complete within", why, f"rank {rank}")
            self.assertIn(f"rank {other} has not registered collId", why, f"rank {rank}")
            self.assertIn("its last change: collId", why, f"rank {rank}")


class KilledPeer(unittest.TestCase):
    def check_survivors(self, victim):
        results = support.run(torch_jobs.killed_peer, 3, support.store_path(), victim, timeout=120,
                              expect_killed=(victim,))
        for rank, result in enumerate(results):
            if rank == victim:
                continue
            outcome, elapsed, later = result
            self.assertIn("failed", outcome, f"rank {rank}'s wait() returned instead of raising")
            self.assertLess(elapsed, 30.0, f"rank {rank} waited {elapsed:.1f} s for a dead peer")
            self.assertIsNotNone(later, f"rank {rank}: a call after the death did not raise")

    def test_a_killed_rank_fails_the_others_wait(self):
        self.check_survivors(victim=2)

    def test_a_killed_bootstrap_root_fails_the_others_wait(self):
        self.check_survivors(victim=0)

    def test_survivors_shrink_and_go_on_with_the_same_calls(self):
        for victim in (2, 0):
            results = support.run(torch_jobs.shrink_after_kill, 3, support.store_path(), victim, timeout=120,
                                  expect_killed=(victim,))
            for rank, result in enumerate(results):
                if rank == victim:
                    continue
                failed, size, new_rank, wrong, carried = result
                self.assertIsNotNone(failed, f"victim {victim}, rank {rank}: the call after the death did not raise")
                self.assertEqual((size, new_rank), (2, rank if rank < victim else rank - 1))
                self.assertEqual(wrong, [], f"victim {victim}, rank {rank}: wrong sums")
                self.assertGreaterEqual(carried, 1, "the all_reduce's registration was not carried")


if __name__ == "__main__":
    unittest.main()
