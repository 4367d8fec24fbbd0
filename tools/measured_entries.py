#!/usr/bin/python3
"""Commit an `lcsim-gpu live --json` file as regression data: copy it under measurements/live/RUN/ and add its
`measured` entries to the validation catalogue, so that `lcsim validate` checks every later model change against
that hardware (docs/validation.md, "Measured runs").

    tools/measured_entries.py LIVE.json SCENARIO --run h200-2026-12 [--where "device call 2"] [--tolerance 0.1]

Per policy with a measured mean iteration time: an `iteration_seconds` entry; per policy other than the baseline
with a measured speedup: a `speedup` entry over the baseline; per policy with a measured peak in every iteration:
a `peak_GB` entry. Nothing is overwritten: an existing copy must be the same bytes, and an id already in the
catalogue must hold the very entry this run would add (it is then left as it is, so that rerunning the command
after a new kind of entry adds only that kind); otherwise exit 2, naming it.
"""
import argparse
import json
import math
import os
import shutil
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


class InputError(Exception):
    pass


def read_json(path, what):
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f, object_pairs_hook=no_duplicates(path))
    except OSError as e:
        raise InputError(f"{path}: cannot read {what}: {e.strerror}")
    except json.JSONDecodeError as e:
        raise InputError(f"{path}: line {e.lineno}, column {e.colno}: {e.msg}")


def no_duplicates(path):
    def hook(pairs):
        keys = set()
        for key, _ in pairs:
            if key in keys:
                raise InputError(f"{path}: duplicate key '{key}'")
            keys.add(key)
        return dict(pairs)

    return hook


def measured(value):
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value) and value > 0


def entries_for(live, live_rel, scenario_rel, run, stem, where, tolerance):
    source = {"paper": f"lcsim {run} run", "where": where, "section": live_rel}
    baseline = live.get("baseline", "")
    entries = []
    for policy in live["policies"]:
        name = policy.get("name", "")
        common = {"source": source, "mode": "plan", "measured": live_rel, "scenario": scenario_rel,
                  "policy": name, "tolerance": tolerance}
        if measured(policy.get("mean_iteration_s")):
            entries.append({"id": f"{run}-{stem}-{name}-seconds",
                            "claim": f"{live['scenario']}: {name} iteration time measured by lcsim-gpu live ({run})",
                            "quantity": "iteration_seconds", **common})
        if name != baseline and measured(policy.get("speedup_vs_baseline")):
            entries.append({"id": f"{run}-{stem}-{name}-vs-{baseline}",
                            "claim": f"{live['scenario']}: {name} over {baseline}, measured by lcsim-gpu live ({run})",
                            "quantity": "speedup", "reference": baseline, **common})
        iterations = policy.get("iterations")
        if isinstance(iterations, list) and iterations and all(
                isinstance(it, dict) and measured(it.get("peak_GiB")) for it in iterations):
            entries.append({"id": f"{run}-{stem}-{name}-peak-gb",
                            "claim": f"{live['scenario']}: {name} per-iteration peak memory (mean over iterations), "
                                     f"measured by lcsim-gpu live ({run})",
                            "quantity": "peak_GB", **common})
    return entries


def add(live_file, scenario_file, run, catalogue_file, where, tolerance, measurements_dir):
    live = read_json(live_file, "the live results")
    scenario = read_json(scenario_file, "the scenario")
    schemas = ("lcsim-results/1", "lcsim-results/2")
    if not isinstance(live, dict) or live.get("schema") not in schemas or live.get("mode") != "live":
        raise InputError(f"{live_file}: expected an lcsim-gpu live --json file (schema lcsim-results/2, mode live)")
    if not isinstance(live.get("policies"), list) or not live["policies"]:
        raise InputError(f"{live_file}: policies: expected a non-empty array")
    if live.get("scenario") != scenario.get("name"):
        raise InputError(f"{live_file}: measured scenario '{live.get('scenario')}', but {scenario_file} is "
                         f"'{scenario.get('name')}'")
    if not run or "/" in run or run.startswith("."):
        raise InputError(f"--run: '{run}' is not a folder name (e.g. h200-2026-12)")

    stem = os.path.basename(scenario_file)
    stem = stem[:-5] if stem.endswith(".json") else stem
    target_dir = os.path.join(measurements_dir, run)
    target = os.path.join(target_dir, stem + ".live.json")
    if os.path.exists(target):
        with open(target, "rb") as a, open(live_file, "rb") as b:
            if a.read() != b.read():
                raise InputError(f"{target}: exists with other contents; a measured run is never overwritten")

    catalogue = read_json(catalogue_file, "the catalogue")
    catalogue_dir = os.path.dirname(os.path.abspath(catalogue_file))
    live_rel = os.path.relpath(target, catalogue_dir)
    scenario_rel = os.path.relpath(os.path.abspath(scenario_file), catalogue_dir)
    new = entries_for(live, live_rel, scenario_rel, run, stem, where, tolerance)
    if not new:
        raise InputError(f"{live_file}: no policy has a measured time or speedup (out of memory everywhere?)")
    existing = {e.get("id"): e for e in catalogue.get("entries", [])}
    for e in new:
        if e["id"] in existing and existing[e["id"]] != e:
            raise InputError(f"{catalogue_file}: entry '{e['id']}' exists already, with other contents")
    new = [e for e in new if e["id"] not in existing]
    if not new:
        raise InputError(f"{catalogue_file}: every entry of {live_file} is in the catalogue already")

    os.makedirs(target_dir, exist_ok=True)
    if not os.path.exists(target):
        shutil.copyfile(live_file, target + ".tmp")
        os.replace(target + ".tmp", target)
    catalogue["entries"].extend(new)
    with open(catalogue_file + ".tmp", "w", encoding="utf-8") as f:
        f.write(json.dumps(catalogue, indent=2, ensure_ascii=False) + "\n")
    os.replace(catalogue_file + ".tmp", catalogue_file)
    return target, [e["id"] for e in new]


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("live", help="the lcsim-gpu live --json file")
    parser.add_argument("scenario", help="the scenario it ran (a path)")
    parser.add_argument("--run", required=True, help="device and date, the folder under measurements/live/")
    parser.add_argument("--catalogue", default=os.path.join(ROOT, "scenarios", "validation", "catalogue.json"))
    parser.add_argument("--measurements", default=os.path.join(ROOT, "measurements", "live"),
                        help="where measured runs live (default: measurements/live of this repository)")
    parser.add_argument("--where", default="lcsim-gpu live", help="the run, as the entries' source names it")
    parser.add_argument("--tolerance", type=float, default=0.1)
    args = parser.parse_args(argv)
    try:
        if not (args.tolerance > 0):
            raise InputError(f"--tolerance: must be greater than 0, got {args.tolerance}")
        target, ids = add(args.live, args.scenario, args.run, args.catalogue, args.where, args.tolerance,
                          args.measurements)
    except InputError as e:
        print(f"measured_entries: {e}", file=sys.stderr)
        return 2
    print(f"copied to {target}; added {len(ids)} entries: {', '.join(ids)}")
    print("next: build/bin/lcsim validate, and commit both")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
