#!/usr/bin/python3
"""Every picture in docs/ that lcsim's results draw, from the results committed under docs/figures/.

    tools/regenerate_figures.py                      # draw every docs/*.png from docs/figures/*.json
    tools/regenerate_figures.py --out-dir DIR        # draw them into DIR instead (the tests do)
    tools/regenerate_figures.py --rerun --lcsim build/bin/lcsim [--only NAME]...
                                                     # first rerun lcsim to rewrite docs/figures/, then draw

Each figure names the lcsim command that makes its results (its `make`), run from the repository root; --rerun
runs it and keeps, of the results, what the plot reads (per-iteration per-GPU arrays and per-world lists dropped),
so the committed files stay small and the same run writes the same bytes. docs/scale.png is not here: it is a
timing measurement (tools/scale_bench.py --plot, docs/simulation.md), not a result lcsim computes.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import lcsim_plot  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DATA = os.path.join("docs", "figures")

# name: (picture, committed results, lcsim arguments ({work}: a scratch folder), file of {work} they write, plot)
FIGURES = {
    "scaling": ("docs/scaling.png", "skrull-scaling.sweep.json",
                ["sweep", "scenarios/sweeps/skrull-scaling.json", "--jobs", "2", "--out", "{work}/out", "--quiet"],
                "out/sweep.json", ("scaling", {})),
    "scaling-hydraulis": ("docs/scaling-hydraulis.png", "hydraulis-scaling.sweep.json",
                          ["sweep", "scenarios/sweeps/hydraulis-scaling.json", "--jobs", "2", "--out", "{work}/out",
                           "--quiet"], "out/sweep.json", ("scaling", {})),
    "whatif-topologies": ("docs/whatif-topologies.png", "whatif-topologies.sweep.json",
                          ["sweep", "scenarios/sweeps/whatif-topologies.json", "--jobs", "2", "--out", "{work}/out",
                           "--quiet"], "out/sweep.json", ("scaling", {"by": "cluster"})),
    "timeline": ("docs/timeline.png", "skrull-case-study.trace.json",
                 ["simulate", "scenarios/skrull/case-study-dp1.json", "--iterations", "1", "--policy", "skrull",
                  "--samples", "1", "--trace", "{work}/trace.json", "--quiet"], "trace.json",
                 ("timeline", {"policy": "skrull"})),
    "tune": ("docs/tune.png", "tune-default.json",
             ["tune", "scenarios/default.json", "--jobs", "2", "--no-prune", "--json", "{work}/tune.json", "--quiet"],
             "tune.json", ("tune", {})),
}


def slim(document):
    """The results as the plots read them: per-iteration per-GPU arrays and per-world lists left out."""
    if isinstance(document, dict):
        out = {}
        for key, value in document.items():
            if key in ("busy_s", "idle_s") or key.startswith("world_"):
                continue
            out[key] = slim(value)
        return out
    if isinstance(document, list):
        return [slim(v) for v in document]
    return document


def rerun(name, lcsim):
    picture, data, command, written, _ = FIGURES[name]
    with tempfile.TemporaryDirectory(prefix="lcsim-figure-") as work:
        args = [a.replace("{work}", work) for a in command]
        print(f"regenerate_figures: lcsim {' '.join(command)}", file=sys.stderr)
        subprocess.run([lcsim] + args, check=True, cwd=ROOT, stdout=subprocess.DEVNULL)
        with open(os.path.join(work, written), encoding="utf-8") as f:
            document = json.load(f)
    path = os.path.join(ROOT, DATA, data)
    temporary = path + ".tmp"
    with open(temporary, "w", encoding="utf-8") as f:
        json.dump(slim(document), f, indent=1)
        f.write("\n")
    os.replace(temporary, path)


def draw(name, out_dir):
    picture, data, _, _, (kind, options) = FIGURES[name]
    source = os.path.join(ROOT, DATA, data)
    out = os.path.join(out_dir, os.path.basename(picture)) if out_dir else os.path.join(ROOT, picture)
    if kind == "scaling":
        fig, _ = lcsim_plot.plot_scaling(source, out, **options)
    elif kind == "timeline":
        fig, _ = lcsim_plot.plot_timeline(source, out, **options)
    else:
        fig, _ = lcsim_plot.plot_tune(source, out)
    lcsim_plot.plt.close(fig)
    return out


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out-dir", help="draw into this folder instead of docs/")
    parser.add_argument("--rerun", action="store_true", help="rerun lcsim first, rewriting docs/figures/")
    parser.add_argument("--lcsim", default=os.path.join(ROOT, "build", "bin", "lcsim"))
    parser.add_argument("--only", action="append", choices=sorted(FIGURES), help="this figure only (repeatable)")
    args = parser.parse_args(argv)
    names = args.only or list(FIGURES)
    for name in names:
        if args.rerun:
            rerun(name, os.path.abspath(args.lcsim))
        print(draw(name, args.out_dir))
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv[1:]))
    except lcsim_plot.PlotError as e:
        print(f"regenerate_figures: error: {e}", file=sys.stderr)
        sys.exit(2)
