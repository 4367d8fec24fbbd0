#!/usr/bin/python3
"""Tests of tools/measured_entries.py: a live results file becomes measured catalogue entries, and nothing is
overwritten or duplicated."""
import json
import os
import subprocess
import sys
import tempfile
import unittest

TOOL = os.path.join(os.path.dirname(os.path.abspath(__file__)), "measured_entries.py")


class MeasuredEntriesTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        d = self.dir.name
        os.makedirs(os.path.join(d, "scenarios", "validation"))
        self.catalogue = os.path.join(d, "scenarios", "validation", "catalogue.json")
        self.write(self.catalogue, {"schema": "lcsim-validation-catalogue/1", "entries": [{"id": "old"}]})
        self.scenario = os.path.join(d, "scenarios", "run.json")
        self.write(self.scenario, {"name": "live-run"})
        self.live = os.path.join(d, "out.json")
        self.write(self.live, {"schema": "lcsim-results/1", "mode": "live", "scenario": "live-run",
                               "baseline": "deepspeed",
                               "policies": [{"name": "deepspeed", "mean_iteration_s": 2.0, "speedup_vs_baseline": 1.0,
                                             "iterations": [{"peak_GiB": 20.0}, {"peak_GiB": 21.0}]},
                                            {"name": "skrull", "mean_iteration_s": 0.5, "speedup_vs_baseline": 4.0,
                                             "iterations": [{"peak_GiB": 30.0}, {"peak_GiB": None}]},
                                            {"name": "rr", "mean_iteration_s": None, "speedup_vs_baseline": None}]})
        self.measurements = os.path.join(d, "measurements", "live")

    def tearDown(self):
        self.dir.cleanup()

    def write(self, path, doc):
        with open(path, "w") as f:
            json.dump(doc, f)

    def run_tool(self, *extra):
        return subprocess.run([sys.executable, TOOL, self.live, self.scenario, "--run", "h200-2026-12",
                               "--catalogue", self.catalogue, "--measurements", self.measurements, *extra],
                              capture_output=True, text=True)

    def test_entries_per_measured_policy_and_speedup_over_the_baseline(self):
        result = self.run_tool("--where", "device call 2")
        self.assertEqual(result.returncode, 0, result.stderr)
        copy = os.path.join(self.measurements, "h200-2026-12", "run.live.json")
        with open(copy) as a, open(self.live) as b:
            self.assertEqual(a.read(), b.read())
        with open(self.catalogue) as f:
            entries = json.load(f)["entries"]
        ids = [e["id"] for e in entries]
        # rr ran out of memory: no entry; the baseline has no speedup entry over itself; skrull has an iteration
        # without a measured peak: no peak entry.
        self.assertEqual(ids, ["old", "h200-2026-12-run-deepspeed-seconds", "h200-2026-12-run-deepspeed-peak-gb",
                               "h200-2026-12-run-skrull-seconds", "h200-2026-12-run-skrull-vs-deepspeed"])
        self.assertEqual(entries[2]["quantity"], "peak_GB")
        speedup = entries[4]
        self.assertEqual(speedup["quantity"], "speedup")
        self.assertEqual(speedup["reference"], "deepspeed")
        self.assertEqual(speedup["mode"], "plan")
        self.assertEqual(speedup["source"]["where"], "device call 2")
        # Paths relative to the catalogue, as lcsim validate resolves them.
        folder = os.path.dirname(self.catalogue)
        self.assertEqual(os.path.normpath(os.path.join(folder, speedup["measured"])), copy)
        self.assertEqual(os.path.normpath(os.path.join(folder, speedup["scenario"])), self.scenario)

    def test_twice_is_refused_and_changes_nothing(self):
        self.assertEqual(self.run_tool().returncode, 0)
        with open(self.catalogue) as f:
            before = f.read()
        result = self.run_tool()
        self.assertEqual(result.returncode, 2)
        self.assertIn("in the catalogue already", result.stderr)
        with open(self.catalogue) as f:
            self.assertEqual(f.read(), before)
        # Under another description the same ids are other entries: refused, not replaced.
        result = self.run_tool("--where", "another call")
        self.assertEqual(result.returncode, 2)
        self.assertIn("exists already, with other contents", result.stderr)

    def test_a_rerun_adds_only_the_entries_missing(self):
        # A catalogue from before peak entries existed: the rerun adds them and keeps the others as they are.
        self.assertEqual(self.run_tool().returncode, 0)
        with open(self.catalogue) as f:
            doc = json.load(f)
        doc["entries"] = [e for e in doc["entries"] if e["id"] != "h200-2026-12-run-deepspeed-peak-gb"]
        self.write(self.catalogue, doc)
        result = self.run_tool()
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertIn("added 1 entries: h200-2026-12-run-deepspeed-peak-gb", result.stdout)

    def test_a_different_file_never_replaces_a_committed_run(self):
        self.assertEqual(self.run_tool().returncode, 0)
        with open(self.live) as f:
            doc = json.load(f)
        doc["policies"][1]["mean_iteration_s"] = 0.6
        self.write(self.live, doc)
        result = self.run_tool()
        self.assertEqual(result.returncode, 2)
        self.assertIn("never overwritten", result.stderr)

    def test_bad_inputs_name_the_file(self):
        self.write(self.scenario, {"name": "another"})
        result = self.run_tool()
        self.assertEqual(result.returncode, 2)
        self.assertIn("measured scenario 'live-run'", result.stderr)
        self.write(self.scenario, {"name": "live-run"})
        with open(self.live, "w") as f:
            f.write('{"schema": "lcsim-results/1", "schema": "x"}')
        result = self.run_tool()
        self.assertEqual(result.returncode, 2)
        self.assertIn("duplicate key 'schema'", result.stderr)
        self.write(self.live, {"schema": "lcsim-results/1", "mode": "plan", "scenario": "live-run", "policies": []})
        self.assertIn("mode live", self.run_tool().stderr)


if __name__ == "__main__":
    unittest.main()
