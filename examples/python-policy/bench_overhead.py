#!/usr/bin/env python3
"""What a policy written in Python costs per planned global batch, against the same policy in C++.

Plans examples/custom-policy/scenario.json (256 sequences a global batch, DP 4) for ITERATIONS batches with the
longest-first balancer twice: the C++ example (`lcsim-custom plan`) and examples/python-policy/longest_first.py
(`lcsim.plan`), REPEAT times each, interleaved. Prints each one's planning milliseconds per batch (the `plan ms`
column of lcsim's table: the policy's plan() call, with the Python side's conversions, without validation) as the
median over the runs, and the ratio. Not a test: a measurement, to rerun on the machine in question.

    PYTHONPATH=build/python python3 examples/python-policy/bench_overhead.py \\
        --custom build/examples/custom-policy/lcsim-custom [--iterations 64] [--repeat 5]
"""
import argparse
import os
import statistics
import subprocess
import sys

import lcsim

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from longest_first import LongestFirst  # noqa: E402

SCENARIO = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "custom-policy", "scenario.json")
LABELS = ("longest-first", "longest-first-tokens")


def plan_ms(table):
    """The plan ms column of the table's longest-first rows."""
    out = {}
    for line in table.splitlines():
        fields = line.split()
        if fields and fields[0] in LABELS:
            out[fields[0]] = float(fields[-1])
    if set(out) != set(LABELS):
        raise RuntimeError(f"no plan ms for {LABELS} in:\n{table}")
    return out


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--custom", required=True, help="the C++ example's binary (lcsim-custom)")
    parser.add_argument("--iterations", type=int, default=64)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args(argv)
    lcsim.register_policy("longest-first", LongestFirst)
    scenario = lcsim.Scenario.load(SCENARIO)
    runs = {"C++": [], "Python": []}
    for _ in range(args.repeat):
        cpp = subprocess.run([args.custom, "plan", SCENARIO, "--samples", "1", "-n", str(args.iterations)],
                             capture_output=True, text=True, check=True)
        runs["C++"].append(plan_ms(cpp.stdout))
        runs["Python"].append(plan_ms(lcsim.plan(scenario, samples=1, iterations=args.iterations).table()))
    print(f"longest-first, {args.iterations} global batches of 256 sequences, DP 4; median of {args.repeat} runs")
    print(f"{'policy':22s} {'C++ ms/batch':>13s} {'Python ms/batch':>16s} {'ratio':>7s}")
    for label in LABELS:
        cpp = statistics.median(r[label] for r in runs["C++"]) / args.iterations
        python = statistics.median(r[label] for r in runs["Python"]) / args.iterations
        print(f"{label:22s} {cpp:13.3f} {python:16.3f} {python / cpp:6.1f}x")


if __name__ == "__main__":
    main(sys.argv[1:])
