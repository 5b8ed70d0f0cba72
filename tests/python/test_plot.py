"""bench/plot.py: occl-bench's --json of real runs becomes two PNG charts; repetitions plot their
median and their spread; a run with a wrong element says so in its label; NCCL's times beside
occl's and a torch run's backends become lines of their own."""

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
    def test_repetitions_plot_their_median_and_spread_and_wrong_results_are_named(self):
        with tempfile.TemporaryDirectory() as d:
            for k, t in enumerate([10.0, 30.0, 20.0]):
                with open(os.path.join(d, f"a.r{k}.json"), "w") as f:
                    json.dump(run_json([row(8, t, t + 1), row(64, 2 * t, 2 * t - 1)]), f)
            with open(os.path.join(d, "b.json"), "w") as f:
                json.dump(dict(run_json([row(8, 5.0, 6.0, wrong=3)], nranks=4), commit="abc1234"), f)
            [a], commits = plot.load(f"mine={d}/a.r*.json")
            self.assertEqual(a.label, "mine (2 ranks, median of 3)")
            self.assertEqual(commits, set())
            self.assertEqual(a.sizes, [8, 64])
            self.assertEqual(a.times, [20.0, 39.0])  # the better placement, then the median
            self.assertEqual((a.low, a.high), ([10.0, 19.0], [30.0, 59.0]))
            self.assertEqual(a.busbw, [8 / 20.0 / 1e3, 64 / 39.0 / 1e3])  # the file's factor: 1 here
            self.assertEqual(a.busbw_low, [8 / 30.0 / 1e3, 64 / 59.0 / 1e3])
            [b], commits = plot.load(f"{d}/b.json")
            self.assertEqual(b.label, "b (4 ranks) (WRONG RESULTS)")
            self.assertEqual(commits, {"abc1234"})
            self.assertEqual(b.low, b.high)  # one file: no band
            with self.assertRaisesRegex(SystemExit, "no such file"):
                plot.load(f"{d}/missing*.json")

    def test_nccl_beside_occl_and_torch_backends_are_lines_of_their_own(self):
        with tempfile.TemporaryDirectory() as d:
            rows = [dict(row(8, 25.0, 24.0), nccl={"time_us": 10.0, "algbw_gbps": 0, "busbw_gbps": 0, "wrong": None})]
            with open(os.path.join(d, "gpu.json"), "w") as f:
                json.dump(run_json(rows, nranks=1), f)
            occl, nccl = plot.load(f"{d}/gpu.json")[0]
            self.assertEqual((occl.times, nccl.times), ([24.0], [10.0]))
            self.assertEqual(nccl.label, "NCCL beside gpu (1 rank)")
            torch_run = {"ranks": 4, "reps": 5, "torch": "2.15.0", "commit": "def5678",
                         "rows": [{"bytes": 8, "gloo_us": 1400.0, "occl_us": 290.0},
                                  {"bytes": 64, "gloo_us": 4800.0, "occl_us": 300.0}]}
            with open(os.path.join(d, "torch.json"), "w") as f:
                json.dump(torch_run, f)
            (gloo, occl_t), commits = plot.load(f"{d}/torch.json")
            self.assertEqual(gloo.label, "gloo (torch 2.15.0, 4 ranks)")
            self.assertEqual((gloo.times, occl_t.times), ([1400.0, 4800.0], [290.0, 300.0]))
            self.assertEqual(occl_t.busbw[0], 8 / 290.0 / 1e3 * 1.5)  # AllReduce's 2(n-1)/n
            self.assertEqual(commits, {"def5678"})
            subprocess.run(["/usr/bin/python3", PLOT, d, f"{d}/torch.json", "--prefix", "t-"], check=True,
                           stdout=subprocess.DEVNULL)
            for name in ("t-latency.png", "t-busbw.png"):
                with open(os.path.join(d, name), "rb") as f:
                    self.assertEqual(f.read(8), b"\x89PNG\r\n\x1a\n", name)

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
