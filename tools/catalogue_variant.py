#!/usr/bin/env python3
"""Runs `lcsim validate --samples 1` on a variant of the framework family, to judge a mechanism before adopting it:
the catalogue, its scenarios and the profiles are copied to a temporary tree, the framework scenarios are changed as
the options say, and the summary lines are printed. The repository is left as it is.

  python3 tools/catalogue_variant.py --lcsim build/bin/lcsim --peak-tflops 835
  python3 tools/catalogue_variant.py --lcsim build/bin/lcsim --overlap-sync torchtitan nemo

--peak-tflops sets cluster.peak_tflops where a framework scenario sets it (torchtitan's 500 W parts); --overlap-sync
sets training.overlap_gradient_sync on the framework scenarios whose file name starts with one of the prefixes.
"""
import argparse
import json
import pathlib
import shutil
import subprocess
import sys
import tempfile

ROOT = pathlib.Path(__file__).resolve().parent.parent
SUMMARY = ("held out:", "measured:", "framework:", "  tolerance;", "  framework trend factors")


def vary(scenario, name, args):
    if args.peak_tflops is not None and "peak_tflops" in scenario["cluster"]:
        scenario["cluster"]["peak_tflops"] = args.peak_tflops
    if any(name.startswith(prefix) for prefix in args.overlap_sync):
        scenario["training"]["overlap_gradient_sync"] = True
    return scenario


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--lcsim", required=True, help="the lcsim binary")
    parser.add_argument("--peak-tflops", type=float, help="cluster.peak_tflops where a framework scenario sets it")
    parser.add_argument("--overlap-sync", nargs="*", default=[], metavar="PREFIX",
                        help="overlap the gradient sync on framework scenarios whose name starts so")
    args = parser.parse_args()
    lcsim = pathlib.Path(args.lcsim).resolve()
    with tempfile.TemporaryDirectory(prefix="lcsim-variant-") as tmp:
        tree = pathlib.Path(tmp)
        shutil.copytree(ROOT / "scenarios", tree / "scenarios")
        shutil.copytree(ROOT / "calibrate" / "profiles", tree / "calibrate" / "profiles")
        (tree / "measurements").symlink_to(ROOT / "measurements")
        for path in sorted((tree / "scenarios" / "framework").glob("*.json")):
            scenario = vary(json.loads(path.read_text()), path.name, args)
            path.write_text(json.dumps(scenario, indent=2) + "\n")
        run = subprocess.run([str(lcsim), "validate", "--jobs", "2", "--samples", "1", "--catalogue",
                              str(tree / "scenarios" / "validation" / "catalogue.json")],
                             capture_output=True, text=True)
        if run.returncode != 0:
            sys.stderr.write(run.stderr)
            return run.returncode
        for line in run.stdout.splitlines():
            if line.startswith(SUMMARY):
                print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
