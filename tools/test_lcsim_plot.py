#!/usr/bin/python3
"""Headless tests of tools/lcsim_plot.py: each plot is written, is a PNG, and holds what it should."""
import json
import os
import subprocess
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import lcsim_plot  # noqa: E402
import matplotlib.collections  # noqa: E402
import matplotlib.container  # noqa: E402

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def chrome_trace(gpus):
    """The layout `lcsim simulate --trace` writes: an "iterations" process, then one process per GPU."""
    events = [{"ph": "M", "name": "process_name", "pid": 0, "args": {"name": "iterations"}}]
    for policy, t0 in (("deepspeed", 0), ("skrull", 2000)):
        events.append({"ph": "X", "name": f"{policy} iteration 0", "cat": "iteration", "pid": 0, "tid": 0, "ts": t0,
                       "dur": 1500, "args": {"policy": policy}})
    for g in range(gpus):
        pid = g + 1
        events.append({"ph": "M", "name": "process_name", "pid": pid, "args": {"name": f"GPU {g} (node 0)"}})
        for t0 in (0, 2000):
            events.append({"ph": "X", "name": "compute mb 0", "cat": "compute", "pid": pid, "tid": 0, "ts": t0,
                           "dur": 500})
            events.append({"ph": "X", "name": "CP all-to-all mb 0", "cat": "communication", "pid": pid, "tid": 1,
                           "ts": t0 + 500, "dur": 200})
            events.append({"ph": "X", "name": "idle", "cat": "idle", "pid": pid, "tid": 0, "ts": t0 + 700,
                           "dur": 100 * (g + 1)})
    return {"metadata": {"scenario": "t", "mode": "simulate", "profile": "uncalibrated (derived from public figures)",
                         "dataset": "synthetic wikipedia"}, "traceEvents": events}


def results(speedups, paper=None, spread=None):
    """A results document; with `spread`, lcsim-results/2 intervals of +-spread around each speedup."""
    doc = {
        "schema": "lcsim-results/1", "mode": "simulate", "scenario": "t", "dataset": "synthetic wikipedia",
        "profile": {"label": "uncalibrated (derived from public figures)", "calibrated": False},
        "baseline": "deepspeed",
        "policies": [{"name": n, "kind": n, "speedup_vs_baseline": s, "tokens_per_s": 1000 * s,
                      "mean_iteration_s": 1 / s} for n, s in speedups.items()],
        "paper_figures": paper or [],
    }
    if spread is not None:
        doc["schema"] = "lcsim-results/2"
        doc["uncertainty"] = {"samples": 16, "sources": [], "winner": "skrull", "p_winner": 0.9}
        for p in doc["policies"]:
            s = p["speedup_vs_baseline"]
            p["interval"] = {"samples": 16, "speedup": {"p10": s - spread, "p50": s, "p90": s + 2 * spread},
                             "tokens_per_s": {"p10": 1000 * (s - spread), "p50": 1000 * s,
                                              "p90": 1000 * (s + 2 * spread)},
                             "iteration_s": {"p10": 1 / s, "p50": 1 / s, "p90": 1 / s}}
    return doc


class PlotTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()

    def tearDown(self):
        self.dir.cleanup()

    def path(self, name):
        return os.path.join(self.dir.name, name)

    def write(self, name, doc):
        with open(self.path(name), "w", encoding="utf-8") as f:
            json.dump(doc, f)
        return self.path(name)

    def assert_png(self, path):
        with open(path, "rb") as f:
            self.assertEqual(f.read(8), PNG_MAGIC)
        self.assertGreater(os.path.getsize(path), 1000)

    def test_timeline_has_one_track_per_gpu(self):
        trace = self.write("trace.json", chrome_trace(6))
        fig, ax = lcsim_plot.plot_timeline(trace, self.path("t.png"), policy="skrull")
        self.assert_png(self.path("t.png"))
        self.assertEqual([t.get_text() for t in ax.get_yticklabels()], [f"GPU {g} (node 0)" for g in range(6)])
        self.assertEqual(len(ax.collections), 18)  # compute, communication and idle on every GPU row
        self.assertEqual(ax.get_xlim(), (0.0, 0.0015))  # skrull's iteration from its own start, not deepspeed's
        self.assertEqual(min(x for c in ax.collections for x, _ in c.get_paths()[0].vertices), 0.0)
        self.assertIn("synthetic wikipedia | uncalibrated", ax.get_title())  # the caption the module promises
        self.assertIn("start of the iteration", ax.get_xlabel())
        with self.assertRaises(lcsim_plot.PlotError):
            lcsim_plot.plot_timeline(trace, self.path("u.png"), policy="hydraulis")

    def test_speedup_has_one_bar_per_policy_and_the_paper_figures(self):
        doc = results({"deepspeed": 1.0, "sorted": 1.5, "skrull": 3.0},
                      [{"policy": "skrull", "speedup": 3.76, "source": "Skrull Sec. 5"}])
        fig, ax = lcsim_plot.plot_speedup(self.write("r.json", doc), self.path("s.png"))
        self.assert_png(self.path("s.png"))
        heights = sorted(round(p.get_height(), 2) for p in ax.patches)
        self.assertEqual(heights, [1.0, 1.5, 3.0, 3.76])
        self.assertIn("uncalibrated", ax.get_title())

    def test_scaling_has_one_line_per_policy(self):
        points = []
        for i, gpus in enumerate([64, 256, 1024]):
            points.append({"index": i, "coordinates": {"gpus": gpus}, "gpus": gpus,
                           "results": results({"deepspeed": 1.0, "skrull": 2.0 + i})})
        sweep = {"schema": "lcsim-sweep/1", "sweep": "scale", "points": points}
        fig, ax = lcsim_plot.plot_scaling(self.write("sw.json", sweep), self.path("c.png"), y="speedup_vs_baseline")
        self.assert_png(self.path("c.png"))
        lines = {line.get_label(): list(line.get_ydata()) for line in ax.get_lines() if line.get_label()[0] != "_"}
        self.assertEqual(lines, {"deepspeed": [1.0, 1.0, 1.0], "skrull": [2.0, 3.0, 4.0]})

    def test_scaling_by_an_axis_has_a_panel_per_value(self):
        points = []
        for i, (cluster, gpus) in enumerate([(c, g) for c in ("fat-tree", "rail") for g in (72, 144)]):
            points.append({"index": i, "gpus": gpus,
                           "coordinates": {"cluster": {"label": cluster, "topology": cluster}, "gpus": gpus},
                           "results": results({"a": 1.0, "b": 2.0 + i})})
        sweep = {"schema": "lcsim-sweep/1", "sweep": "whatif", "points": points}
        fig, axes = lcsim_plot.plot_scaling(self.write("sw.json", sweep), self.path("p.png"), y="speedup_vs_baseline",
                                            by="cluster")
        self.assert_png(self.path("p.png"))
        self.assertEqual([ax.get_title() for ax in axes], ["cluster=fat-tree", "cluster=rail"])
        lines = {line.get_label(): list(line.get_ydata()) for line in axes[1].get_lines()
                 if line.get_label()[0] != "_"}
        self.assertEqual(lines, {"a": [1.0, 1.0], "b": [4.0, 5.0]})
        with self.assertRaises(lcsim_plot.PlotError):
            lcsim_plot.plot_scaling(self.write("sw.json", sweep), self.path("q.png"), by="dataset")

    def test_speedup_bars_carry_the_p10_p90_interval(self):
        doc = results({"deepspeed": 1.0, "skrull": 3.0}, spread=0.25)
        fig, ax = lcsim_plot.plot_speedup(self.write("r.json", doc), self.path("s.png"))
        self.assert_png(self.path("s.png"))
        errorbar = next(c for c in ax.containers if isinstance(c, matplotlib.container.ErrorbarContainer))
        caps = errorbar.lines[2][0].get_segments()
        # Error bar of skrull: from p10 2.75 to p90 3.5 (asymmetric, around the nominal 3.0).
        self.assertEqual([(round(s[0][1], 6), round(s[1][1], 6)) for s in caps], [(0.75, 1.5), (2.75, 3.5)])
        self.assertIn("p10-p90, 16 worlds", [t.get_text() for t in ax.get_legend().get_texts()][0])

    def test_scaling_draws_speedup_with_interval_bands_and_a_readable_label(self):
        points = []
        for i, gpus in enumerate([64, 256]):
            points.append({"index": i, "coordinates": {"gpus": gpus}, "gpus": gpus,
                           "results": results({"deepspeed": 1.0, "skrull": 2.0 + i}, spread=0.5)})
        sweep = {"schema": "lcsim-sweep/1", "sweep": "scale", "axes": ["gpus"], "points": points}
        fig, ax = lcsim_plot.plot_scaling(self.write("sw.json", sweep), self.path("c.png"))
        self.assert_png(self.path("c.png"))
        self.assertEqual(ax.get_ylabel(), "speedup over deepspeed (tokens/s ratio)")
        self.assertEqual(ax.get_xlabel(), "GPUs")
        bands = [c for c in ax.collections if isinstance(c, matplotlib.collections.PolyCollection)]
        self.assertEqual(len(bands), 2)
        ys = sorted({round(v[1], 6) for v in bands[1].get_paths()[0].vertices})
        self.assertEqual(ys[0], 1.5)  # skrull's p10 at 64 GPUs
        self.assertEqual(ys[-1], 4.0)  # its p90 at 256
        self.assertIn("p10-p90 over 16 sampled worlds", ax.get_title())

    def test_scaling_picks_the_axis_the_sweep_varies_and_refuses_stacked_points(self):
        points = []
        for i, batch in enumerate([8, 16, 32, 64]):
            doc = results({"deepspeed": 1.0, "skrull": 1.0 + 0.2 * i})
            doc["policies"][1]["oom_iterations"] = 1 if batch == 64 else 0
            points.append({"index": i, "coordinates": {"gpus": 32, "batch_size_per_dp": batch}, "gpus": 32,
                           "results": doc})
        sweep = {"schema": "lcsim-sweep/1", "sweep": "batch", "axes": ["gpus", "batch_size_per_dp"],
                 "points": points}
        fig, ax = lcsim_plot.plot_scaling(self.write("sw.json", sweep), self.path("b.png"))
        self.assertEqual(ax.get_xlabel(), "batch_size_per_dp")
        skrull = next(line for line in ax.get_lines() if line.get_label() == "skrull")
        self.assertEqual(list(skrull.get_xdata()), [8, 16, 32, 64])
        crosses = [c for c in ax.collections if c.get_label() == "out of GPU memory"]
        self.assertEqual([list(p) for p in crosses[0].get_offsets()], [[64, 1.6]])
        with self.assertRaises(lcsim_plot.PlotError) as caught:
            lcsim_plot.plot_scaling(self.write("sw.json", sweep), self.path("g.png"), x="gpus")
        self.assertIn("varies 'batch_size_per_dp'", str(caught.exception))

    def test_speedup_marks_a_policy_out_of_memory(self):
        doc = results({"deepspeed": 1.0, "wlb-llm": 2.0})
        doc["policies"][1]["oom_iterations"] = 3
        fig, ax = lcsim_plot.plot_speedup(self.write("r.json", doc), self.path("o.png"))
        self.assertEqual([p.get_hatch() for p in ax.patches], [None, "//"])
        self.assertTrue(any("OOM 3/" in t.get_text() for t in ax.texts))

    def test_tune_has_one_row_per_policy_and_rings_the_best(self):
        def candidate(i, policy, cp, tokens, oom=0):
            return {"index": i, "policy": policy, "layout": {"dp": 8 // cp, "cp": cp, "tp": 1, "pp": 1},
                    "estimated": True, "failed": "", "estimate_tokens_per_s": tokens, "oom_iterations": oom}
        doc = {"schema": "lcsim-tune/1", "scenario": "t", "dataset": "synthetic wikipedia",
               "profile": {"label": "uncalibrated (derived from public figures)"},
               "candidates": [candidate(0, "a", 1, 100), candidate(1, "a", 2, 300, oom=1), candidate(2, "a", 4, 200),
                              candidate(3, "b", 8, 50)],
               "policies": [{"policy": "a", "best": 2}, {"policy": "b", "best": 3}]}
        fig, axes = lcsim_plot.plot_tune(self.write("tune.json", doc), self.path("u.png"))
        self.assert_png(self.path("u.png"))
        self.assertEqual(len(axes), 2)
        fits, oom, best = axes[0, 0].collections
        self.assertEqual([list(p) for p in fits.get_offsets()], [[1, 100], [4, 200]])
        self.assertEqual([list(p) for p in oom.get_offsets()], [[2, 300]])
        self.assertEqual([list(p) for p in best.get_offsets()], [[4, 200]])
        self.assertIn("uncalibrated", fig._suptitle.get_text())

    def test_bad_input_names_the_file_and_exits_two(self):
        bad = self.write("bad.json", {"policies": []})
        run = subprocess.run([sys.executable, lcsim_plot.__file__, "speedup", bad, "--out", self.path("x.png")],
                             capture_output=True, text=True)
        self.assertEqual(run.returncode, 2)
        self.assertIn(bad + ": policies", run.stderr)
        self.assertFalse(os.path.exists(self.path("x.png")))

    def test_a_failed_plot_leaves_the_previous_file(self):
        out = self.path("speedup.png")
        with open(out, "wb") as f:
            f.write(b"previous plot")

        class FailingFigure:
            def savefig(self, path, **kwargs):
                with open(path, "wb") as f:
                    f.write(b"half a PNG")
                raise OSError("disk full")

        with self.assertRaises(OSError):
            lcsim_plot.save_figure(FailingFigure(), out)
        with open(out, "rb") as f:
            self.assertEqual(f.read(), b"previous plot")
        self.assertEqual(os.listdir(self.dir.name), ["speedup.png"])


class FiguresTest(unittest.TestCase):
    """tools/regenerate_figures.py: every docs/ picture lcsim's results draw, from the committed results."""

    def test_every_docs_picture_is_drawn_from_committed_results(self):
        sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
        import regenerate_figures
        root = regenerate_figures.ROOT
        pictures = {p for p in os.listdir(os.path.join(root, "docs")) if p.endswith(".png")}
        drawn = {os.path.basename(f[0]) for f in regenerate_figures.FIGURES.values()}
        self.assertEqual(pictures - drawn, {"scale.png"})  # a timing measurement (tools/scale_bench.py)
        with tempfile.TemporaryDirectory() as out:
            run = subprocess.run([sys.executable, regenerate_figures.__file__, "--out-dir", out], capture_output=True,
                                 text=True)
            self.assertEqual(run.returncode, 0, run.stderr)
            self.assertEqual(set(os.listdir(out)), drawn)
            for name in drawn:
                with open(os.path.join(out, name), "rb") as f:
                    self.assertEqual(f.read(8), PNG_MAGIC)


if __name__ == "__main__":
    unittest.main()
