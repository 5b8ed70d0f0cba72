"""bench/plot.py: occl-bench's --json of real runs becomes two PNG charts; repetitions plot their
median; a run with a wrong element says so in its label."""

import importlib.util
import json
import os
import subprocess
import tempfile
import unittest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PLOT = os.path.join(ROOT, "bench", "plot.py")
BENCH = os.environ.get("OCCL_BENCH_BIN", "")

spec = importlib.util.spec_from_file_location("plot", PLOT)
plot = importlib.util.module_from_spec(spec)
spec.loader.exec_module(plot)


def run_json(results, nranks=2):
    return {"collective": "allreduce", "nranks": nranks, "backend": "host", "results": results}


def row(size, oop_us, ip_us, wrong=0):
    place = lambda t: {"time_us": t, "algbw_gbps": size / t / 1e3, "busbw_gbps": size / t / 1e3, "wrong": wrong}
    return {"size": size, "count": size // 4, "type": "float", "redop": "sum", "root": 0,
            "out_of_place": place(oop_us), "in_place": place(ip_us)}


class Plot(unittest.TestCase):
    def test_repetitions_plot_their_median_and_wrong_results_are_named(self):
        with tempfile.TemporaryDirectory() as d:
            for k, t in enumerate([10.0, 30.0, 20.0]):
                with open(os.path.join(d, f"a.r{k}.json"), "w") as f:
                    json.dump(run_json([row(8, t, t + 1), row(64, 2 * t, 2 * t - 1)]), f)
            with open(os.path.join(d, "b.json"), "w") as f:
                json.dump(run_json([row(8, 5.0, 6.0, wrong=3)], nranks=4), f)
            label, _, sizes, times, _ = plot.load(f"mine={d}/a.r*.json")
            self.assertEqual(label, "mine (2 ranks, median of 3)")
            self.assertEqual(sizes, [8, 64])
            self.assertEqual(times, [20.0, 39.0])  # the better placement, then the median
            label, _, _, _, _ = plot.load(f"{d}/b.json")
            self.assertEqual(label, "b (4 ranks) (WRONG RESULTS)")
            with self.assertRaisesRegex(SystemExit, "no such file"):
                plot.load(f"{d}/missing*.json")

    def test_charts_of_a_real_run(self):
        self.assertTrue(os.access(BENCH, os.X_OK), f"OCCL_BENCH_BIN={BENCH!r} is not occl-bench")
        with tempfile.TemporaryDirectory() as d:
            for k in range(2):
                subprocess.run([BENCH, "allreduce", "-g", "2", "-b", "8", "-e", "64K", "-f", "8", "-n", "3", "-w", "1",
                                "--json", os.path.join(d, f"occl.r{k}.json")], check=True, stdout=subprocess.DEVNULL)
            subprocess.run(["/usr/bin/python3", PLOT, d, f"occl={d}/occl.r*.json"], check=True, stdout=subprocess.DEVNULL)
            for name in ("latency.png", "busbw.png"):
                with open(os.path.join(d, name), "rb") as f:
                    self.assertEqual(f.read(8), b"\x89PNG\r\n\x1a\n", name)


if __name__ == "__main__":
    unittest.main()
