"""bench/baselines/paired_table.py: each runner is set against the reference within its own round,
so a round in which the whole machine ran slower moves neither ratio; rounds or sizes that a runner
lacks are left out; a wrong element is counted."""

import os
import subprocess
import tempfile
import unittest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PAIRED = os.path.join(ROOT, "bench", "baselines", "paired_table.py")


def table(rows):
    """An occl-bench table: rows of (size, oop us, ip us, #wrong)."""
    lines = ["#       size         count      type   redop    root     time   algbw   busbw #wrong"]
    for size, oop, ip, wrong in rows:
        lines.append(f"{size:12d} {size // 4:13d}     float     sum      -1  {oop:7.2f}    0.00    0.00 {wrong:6d}"
                     f"  {ip:7.2f}    0.00    0.00 {wrong:6d}")
    return "\n".join(lines) + "\n# loadavg before: 1 1 1 after: 1 1 1\n"


def write(d, name, rows):
    with open(os.path.join(d, name), "w") as f:
        f.write(table(rows))


def paired(d, *names):
    return subprocess.run(["/usr/bin/python3", PAIRED, d, *names], capture_output=True, text=True)


class Paired(unittest.TestCase):
    def test_ratios_are_taken_within_rounds(self):
        with tempfile.TemporaryDirectory() as d:
            # The machine's speed differs from round to round. At 8 B the median of the per-round
            # ratios (1.2, 0.9, 1.0) is 1.0 where the ratio of the medians (18 / 20) would be 0.9.
            for k, ref8, a8, scale in ((1, 10, 12, 1.0), (2, 20, 18, 2.0), (3, 30, 30, 1.0)):
                write(d, f"ref.p{k}.txt", [(8, ref8, ref8 + 1, 0), (16, 20 * scale, 20 * scale, 0)])
                write(d, f"a.p{k}.txt", [(8, a8 + 2, a8, 0), (16, 30 * scale, 25 * scale, 0)])
            write(d, "a.p4.txt", [(8, 1.0, 1.0, 0)])  # no reference in round 4: not a round
            write(d, "a.r1.txt", [(8, 1.0, 1.0, 0)])  # a repetition of the sweep, not a round
            r = paired(d, "ref", "a")
            self.assertEqual(r.returncode, 0, r.stderr)
            rows = [l for l in r.stdout.splitlines() if l.startswith("| ") and l[2].isdigit()]
            # Per size: median times over rounds (the better placement), then a/ref and its range.
            self.assertEqual(rows, ["| 8 B | 20.00 | 18.00 | 1.00 | 0.90-1.20 |",
                                    "| 16 B | 20.00 | 25.00 | 1.25 | 1.25-1.25 |"])
            self.assertIn("Rounds: 3. Rows with a wrong element, all runners and rounds: 0", r.stdout)

    def test_sizes_every_runner_has_and_wrong_rows(self):
        with tempfile.TemporaryDirectory() as d:
            write(d, "ref.p1.txt", [(8, 10, 10, 0), (1024, 50, 50, 0)])
            write(d, "a.p1.txt", [(8, 5, 5, 2), (2048, 60, 60, 0)])
            write(d, "b.p1.txt", [(8, 20, 30, 0), (1024, 40, 40, 0)])
            r = paired(d, "ref", "a", "b")
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertIn("| 8 B | 10.00 | 5.00 | 20.00 | 0.50 | 2.00 | 0.50-0.50 | 2.00-2.00 |", r.stdout)
            self.assertNotIn("1 KiB", r.stdout)
            self.assertIn("Rows with a wrong element, all runners and rounds: 1", r.stdout)

    def test_no_common_round_fails(self):
        with tempfile.TemporaryDirectory() as d:
            write(d, "ref.p1.txt", [(8, 10, 10, 0)])
            write(d, "a.p2.txt", [(8, 10, 10, 0)])
            r = paired(d, "ref", "a")
            self.assertEqual(r.returncode, 1)
            self.assertIn("no round", r.stderr)


if __name__ == "__main__":
    unittest.main()
