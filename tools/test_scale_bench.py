#!/usr/bin/python3
"""Tests of tools/scale_bench.py against a stand-in lcsim that prints known timing tables."""
import json
import os
import stat
import subprocess
import sys
import tempfile
import unittest

TOOL = os.path.join(os.path.dirname(os.path.abspath(__file__)), "scale_bench.py")

# A stand-in for `lcsim simulate SCENARIO`: the table's timing columns, per scenario size and call. The 1024-GPU
# deepspeed run is slower on its first call: the benchmark must keep the best round.
FAKE_LCSIM = r"""#!/usr/bin/python3
import os, sys
gpus = int(sys.argv[2].rsplit("sim-", 1)[1].split("gpu")[0])
calls = os.path.join(os.environ["FAKE_DIR"], f"calls-{gpus}")
n = int(open(calls).read()) if os.path.exists(calls) else 0
open(calls, "w").write(str(n + 1))
assert sys.argv[3:5] == ["--samples", "1"], sys.argv  # the sampled worlds are not the simulator's cost
ds = {32: 1.0, 64: 2.0, 256: 8.4, 1024: 33.6, 4096: 134.4}[gpus] * (3 if gpus == 1024 and n == 0 else 1)
ds *= 10 if "--all-flows" in sys.argv[5:] else 1  # flows everywhere: slower
if "-n" in sys.argv[5:]:  # more iterations share the first one's first touch of memory: cheaper per iteration
    ds /= int(sys.argv[sys.argv.index("-n") + 1])
print("policy  mean s  wall ms/iter  cpu ms/iter  build ms/iter")
print(f"deepspeed  2.2  {ds:.2f}  {ds:.2f}  {ds / 2:.2f}")
print(f"skrull  1.1  {gpus / 256:.2f}  {gpus / 256:.2f}  0.00")
"""


class ScaleBenchTest(unittest.TestCase):
    def run_bench(self, script, *args):
        with tempfile.TemporaryDirectory() as scratch:
            fake = os.path.join(scratch, "lcsim")
            with open(fake, "w") as out:
                out.write(script)
            os.chmod(fake, os.stat(fake).st_mode | stat.S_IEXEC)
            figures = os.path.join(scratch, "figures.json")
            proc = subprocess.run([sys.executable, TOOL, "--lcsim", fake, "--json", figures, *args],
                                  capture_output=True, text=True, env={**os.environ, "FAKE_DIR": scratch})
            data = json.load(open(figures)) if proc.returncode == 0 else None
            return proc, data

    def test_keeps_the_best_round_and_prints_growth(self):
        proc, data = self.run_bench(FAKE_LCSIM, "--rounds", "2")
        self.assertEqual(proc.returncode, 0, proc.stderr)
        ds = {row["gpus"]: row for row in data["figures"] if row["policy"] == "deepspeed"}
        self.assertEqual(ds[1024]["cpu_ms_per_iteration"], 33.6)  # not the slow first round's 100.8
        self.assertEqual(ds[256]["build_ms_per_iteration"], 4.2)
        lines = [line.split() for line in proc.stdout.splitlines()]
        deepspeed_1024 = next(f for f in lines if f[:2] == ["deepspeed", "1024"])
        self.assertEqual(deepspeed_1024[3], "4.00")  # 33.6 / 8.4
        skrull_256 = next(f for f in lines if f[:2] == ["skrull", "256"])
        self.assertEqual(skrull_256[3], "4.00")

    def test_all_flows_is_passed_to_lcsim_and_recorded(self):
        proc, data = self.run_bench(FAKE_LCSIM, "--rounds", "1", "--all-flows")
        self.assertEqual(proc.returncode, 0, proc.stderr)
        self.assertTrue(data["all_flows"])
        ds = {row["gpus"]: row for row in data["figures"] if row["policy"] == "deepspeed"}
        self.assertEqual(ds[256]["cpu_ms_per_iteration"], 84.0)
        self.assertIn("every collective as flows", proc.stdout)

    def test_iterations_are_passed_to_lcsim_at_every_size_and_recorded(self):
        proc, data = self.run_bench(FAKE_LCSIM, "--rounds", "1", "--iterations", "4")
        self.assertEqual(proc.returncode, 0, proc.stderr)
        self.assertEqual(data["iterations"], 4)
        ds = {row["gpus"]: row for row in data["figures"] if row["policy"] == "deepspeed"}
        self.assertEqual(ds[256]["cpu_ms_per_iteration"], 2.1)  # 8.4 / 4
        self.assertEqual(ds[64]["cpu_ms_per_iteration"], 0.5)
        self.assertIn("4 iterations at every size", proc.stdout)
        proc, data = self.run_bench(FAKE_LCSIM, "--rounds", "1")
        self.assertIsNone(data["iterations"])
        ds = {row["gpus"]: row for row in data["figures"] if row["policy"] == "deepspeed"}
        self.assertEqual(ds[256]["cpu_ms_per_iteration"], 8.4)  # each scenario's own iterations: no -n

    def test_refuses_fewer_than_one_iteration(self):
        proc, _ = self.run_bench(FAKE_LCSIM, "--iterations", "0")
        self.assertNotEqual(proc.returncode, 0)
        self.assertIn("--iterations must be at least 1", proc.stderr)

    def test_plot_without_matplotlib_is_refused_before_any_run(self):
        with tempfile.TemporaryDirectory() as shadow:
            os.makedirs(os.path.join(shadow, "matplotlib"))
            with open(os.path.join(shadow, "matplotlib", "__init__.py"), "w") as out:
                out.write("raise ImportError('no matplotlib here')\n")
            with tempfile.TemporaryDirectory() as scratch:
                fake = os.path.join(scratch, "lcsim")
                with open(fake, "w") as out:
                    out.write(FAKE_LCSIM)
                os.chmod(fake, os.stat(fake).st_mode | stat.S_IEXEC)
                proc = subprocess.run([sys.executable, TOOL, "--lcsim", fake, "--plot", os.path.join(scratch, "x.png")],
                                      capture_output=True, text=True,
                                      env={**os.environ, "FAKE_DIR": scratch, "PYTHONPATH": shadow})
                self.assertEqual(proc.returncode, 2, proc.stderr)
                self.assertIn("--plot needs matplotlib", proc.stderr)
                self.assertFalse(any(name.startswith("calls-") for name in os.listdir(scratch)))  # nothing ran

    def test_sizes_and_whole_process_figures(self):
        proc, data = self.run_bench(FAKE_LCSIM, "--rounds", "1", "--sizes", "4096", "32")
        self.assertEqual(proc.returncode, 0, proc.stderr)
        self.assertEqual(data["schema"], "lcsim-scale-bench/2")
        self.assertEqual(sorted({row["gpus"] for row in data["figures"]}), [32, 4096])
        ds = {row["gpus"]: row for row in data["figures"] if row["policy"] == "deepspeed"}
        lines = [line.split() for line in proc.stdout.splitlines()]
        self.assertEqual(next(f for f in lines if f[:2] == ["deepspeed", "4096"])[3], "134.40")  # x128 GPUs
        self.assertEqual(ds[4096]["cpu_ms_per_iteration"], 134.4)
        self.assertEqual([p["gpus"] for p in data["process"]], [32, 4096])
        for p in data["process"]:
            self.assertGreater(p["wall_s"], 0)
            self.assertGreater(p["peak_rss_mib"], 1)  # the child's own, a Python interpreter's worth

    def test_refuses_a_size_without_a_scenario(self):
        proc, _ = self.run_bench(FAKE_LCSIM, "--rounds", "1", "--sizes", "48")
        self.assertNotEqual(proc.returncode, 0)
        self.assertIn("sim-48gpu.json", proc.stderr)

    def test_refuses_output_without_the_timing_columns(self):
        proc, _ = self.run_bench("#!/bin/sh\necho 'policy mean s'\necho 'deepspeed 1.0'\n", "--rounds", "1")
        self.assertNotEqual(proc.returncode, 0)
        self.assertIn("no timing columns", proc.stderr)

    def test_refuses_zero_rounds(self):
        proc, _ = self.run_bench(FAKE_LCSIM, "--rounds", "0")
        self.assertNotEqual(proc.returncode, 0)
        self.assertIn("--rounds", proc.stderr)


if __name__ == "__main__":
    unittest.main()
