#!/usr/bin/python3
"""Simulator scale benchmark: how the time to simulate one iteration, and the whole process, grow with GPUs.

Runs `lcsim simulate --samples 1` on scenarios/scale/sim-{N}gpu.json for each size N of --sizes (default 64 256
1024; shipped: 32 to 16,384. Skrull's default setting weak-scaled: CP 8, DP N / 8, deepspeed and skrull; 10
iterations each, 2 at 16,384 GPUs) in interleaved rounds -- every size, then again -- so that a slow spell of a
shared machine falls on every size alike, and keeps each size's best round: noise on a busy machine only ever adds
time. The figures are lcsim's own `cpu ms/iter` (CPU time to simulate one iteration: build its program from the
plan, then run it; planning is the policy's and not counted) and `build ms/iter` (the building part), and the
whole process: wall seconds and peak resident memory (planning, platform, every iteration, the no-contention
estimate, results). Synthetic data and the uncalibrated default profile: for timing the simulator only.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SIZES = (64, 256, 1024)
POLICIES = ("deepspeed", "skrull")


def scenario_of(gpus):
    return os.path.join(ROOT, "scenarios", "scale", f"sim-{gpus}gpu.json")


def scenario_iterations(gpus):
    with open(scenario_of(gpus)) as f:
        return json.load(f)["training"]["iterations"]


def run_once(binary, gpus, extra):
    """({policy: (cpu ms/iter, build ms/iter)}, (wall s, peak RSS MiB)) of one `lcsim simulate` run."""
    scenario = scenario_of(gpus)
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        start = time.monotonic()
        child = subprocess.Popen([binary, "simulate", scenario, "--samples", "1"] + extra, stdout=out, stderr=err)
        # wait4 gives this child's own peak memory (the resource usage of children is the largest of them all).
        _, status, usage = os.wait4(child.pid, 0)
        wall = time.monotonic() - start
        child.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        stdout, stderr = out.read(), err.read()
    rss_mib = usage.ru_maxrss / 1024.0  # KiB on Linux
    if child.returncode != 0:
        sys.exit(f"scale_bench: {binary} simulate {scenario} failed ({child.returncode}):\n{stderr}")
    lines = stdout.splitlines()
    header = next((line.split() for line in lines if line.startswith("policy ")), None)
    if header is None or header[-3:] != ["ms/iter", "build", "ms/iter"]:
        sys.exit(f"scale_bench: no timing columns in the output of {scenario}")
    figures = {}
    for line in lines:
        fields = line.split()
        if fields and fields[0] in POLICIES:
            figures[fields[0]] = (float(fields[-2]), float(fields[-1]))
    missing = [p for p in POLICIES if p not in figures]
    if missing:
        sys.exit(f"scale_bench: {scenario} printed no row for {', '.join(missing)}")
    return figures, (wall, rss_mib)


def plot(path, sizes, best, process, iterations_run=None):
    """Whole process and per-iteration CPU time against GPUs, log-log, one line per policy."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 4))
    left.plot(sizes, [process[g][0] for g in sizes], marker="o", color="black")
    iterations = {g: iterations_run or scenario_iterations(g) for g in sizes}
    left.set_title("whole `lcsim simulate` process")
    for g in sizes:
        left.annotate(f"{iterations[g]} it.", (g, process[g][0]), textcoords="offset points", xytext=(4, -10),
                      fontsize=7)
    left.set_ylabel("wall seconds")
    for policy in POLICIES:
        right.plot(sizes, [best[(g, policy)][0] for g in sizes], marker="o", label=policy)
    ideal = [best[(sizes[0], POLICIES[0])][0] * g / sizes[0] for g in sizes]
    right.plot(sizes, ideal, linestyle=":", color="grey", label="linear in GPUs")
    right.set_title("simulating one iteration")
    right.set_ylabel("CPU ms per iteration")
    right.legend()
    for axis in (left, right):
        axis.set_xscale("log", base=2)
        axis.set_yscale("log")
        axis.set_xlabel("GPUs")
        axis.grid(True, which="both", alpha=0.3)
    fig.suptitle("lcsim simulate, Skrull's setting weak-scaled (synthetic lengths, uncalibrated profile)", fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=5, help="interleaved rounds; the best of each size is kept")
    parser.add_argument("--sizes", type=int, nargs="+", default=list(SIZES), metavar="GPUS",
                        help="GPU counts, each with a scenarios/scale/sim-GPUSgpu.json (default: 64 256 1024)")
    parser.add_argument("--lcsim", default=os.path.join(ROOT, "build", "sim", "lcsim"), help="the lcsim binary")
    parser.add_argument("--json", metavar="FILE", help="also write the figures as JSON")
    parser.add_argument("--plot", metavar="PNG", help="also draw whole-process and per-iteration cost (matplotlib)")
    parser.add_argument("--iterations", type=int, metavar="N",
                        help="simulate N iterations at every size (lcsim simulate -n N) instead of each scenario's "
                             "own (10, and 2 at 16,384 GPUs): the first iteration also touches its program's memory "
                             "for the first time, so per-iteration growth compares like with like only at one N")
    parser.add_argument("--all-flows", action="store_true",
                        help="simulate every collective as flows (lcsim simulate --all-flows): these scenarios have "
                             "no contention, so by default every collective is timed in closed form")
    args = parser.parse_args()
    if args.rounds < 1:
        parser.error("--rounds must be at least 1")
    if args.iterations is not None and args.iterations < 1:
        parser.error("--iterations must be at least 1")
    sizes = sorted(set(args.sizes))
    for gpus in sizes:
        if not os.path.exists(scenario_of(gpus)):
            parser.error(f"--sizes {gpus}: no scenario {scenario_of(gpus)}")
    if args.plot:
        try:
            import matplotlib  # noqa: F401  (checked before the runs, not after them)
        except ImportError:
            parser.error("--plot needs matplotlib (Debian: python3-matplotlib), which this Python lacks")
    if not os.access(args.lcsim, os.X_OK):
        parser.error(f"no lcsim binary at {args.lcsim} (build it first: tools/setup.sh)")

    best = {(gpus, policy): None for gpus in sizes for policy in POLICIES}
    process = {gpus: None for gpus in sizes}  # (wall s, peak RSS MiB) of the fastest round
    for round_index in range(args.rounds):
        for gpus in sizes:
            print(f"\rround {round_index + 1}/{args.rounds}, {gpus} GPUs   ", end="", file=sys.stderr, flush=True)
            extra = ["--all-flows"] if args.all_flows else []
            if args.iterations is not None:
                extra += ["-n", str(args.iterations)]
            figures, whole = run_once(args.lcsim, gpus, extra)
            for policy, figure in figures.items():
                key = (gpus, policy)
                if best[key] is None or figure[0] < best[key][0]:
                    best[key] = figure
            if process[gpus] is None or whole[0] < process[gpus][0]:
                process[gpus] = whole
    print(file=sys.stderr)

    rows = []
    mode = ", every collective as flows" if args.all_flows else ""
    if args.iterations is not None:
        mode += f", {args.iterations} iterations at every size"
    print(f"best of {args.rounds} interleaved rounds{mode}; cpu ms/iter = build + run of one iteration")
    print(f"{'policy':<10} {'GPUs':>5} {'cpu ms/iter':>12} {'x prev':>7} {'build ms':>9} {'run ms':>8} "
          f"{'x prev':>7} {'us/GPU':>7}")
    for policy in POLICIES:
        previous = None
        for gpus in sizes:
            total, build = best[(gpus, policy)]
            run = total - build
            growth = f"{total / previous[0]:.2f}" if previous else "-"
            run_growth = f"{run / previous[1]:.2f}" if previous and previous[1] > 0 else "-"
            print(f"{policy:<10} {gpus:>5} {total:>12.3f} {growth:>7} {build:>9.3f} {run:>8.3f} {run_growth:>7} "
                  f"{1e3 * total / gpus:>7.2f}")
            rows.append({"policy": policy, "gpus": gpus, "cpu_ms_per_iteration": total, "build_ms_per_iteration": build})
            previous = (total, run)
    print("x prev: growth over the previous size (4.00 is linear when the sizes grow x4)")
    print(f"{'GPUs':>5} {'process s':>10} {'peak MiB':>9}")
    for gpus in sizes:
        print(f"{gpus:>5} {process[gpus][0]:>10.2f} {process[gpus][1]:>9.0f}")
    if args.json:
        with open(args.json, "w") as out:
            json.dump({"schema": "lcsim-scale-bench/2", "rounds": args.rounds, "all_flows": args.all_flows,
                       "iterations": args.iterations,
                       "figures": rows,
                       "process": [{"gpus": g, "wall_s": process[g][0], "peak_rss_mib": process[g][1]}
                                   for g in sizes]}, out, indent=2)
            out.write("\n")
    if args.plot:
        plot(args.plot, sizes, best, process, args.iterations)


if __name__ == "__main__":
    main()
