#!/usr/bin/env python3
"""The longest-first balancer of examples/custom-policy, written in Python.

Each DP rank gets whole sequences, longest first, always to the rank with the least work so far (the lowest rank on
ties): work is the sequence's compute time under the cost model (``balance_by="time"``, the default) or its tokens.
Each sequence is a micro-batch of its own, spread over the replica's CP group. Run from the repository root:

    PYTHONPATH=build/python python3 examples/python-policy/longest_first.py [SCENARIO]

It plans examples/custom-policy/scenario.json (or SCENARIO) and prints the table ``lcsim plan --samples 1`` prints:
the same, byte for byte, as the C++ example's (tests: PythonPolicyExample).
"""
import heapq
import sys

import lcsim


class LongestFirst(lcsim.Policy):
    def __init__(self, balance_by="time"):
        if balance_by not in ("time", "tokens"):
            raise ValueError(f'balance_by: expected "time" or "tokens", got "{balance_by}"')
        self.by_time = balance_by == "time"

    def plan(self, context, batches):
        def work(sequence):
            return context.sequence_seconds(sequence.tokens) if self.by_time else float(sequence.tokens)

        plans = []
        for index, batch in enumerate(batches):
            replicas = [[] for _ in range(context.dp)]
            loads = [(0.0, rank) for rank in range(context.dp)]  # (work so far, rank): a heap, least loaded first
            for sequence in sorted(batch, key=lambda s: -s.tokens):  # stable: equal lengths keep batch order
                load, rank = heapq.heappop(loads)
                replicas[rank].append([lcsim.Placement(sequence.id, sequence.tokens)])
                heapq.heappush(loads, (load + work(sequence), rank))
            plans.append(lcsim.IterationPlan(replicas, label=f"batch {index}"))
        return plans


def main(argv):
    lcsim.register_policy("longest-first", LongestFirst)
    scenario = argv[1] if len(argv) > 1 else "examples/custom-policy/scenario.json"
    print(lcsim.plan(scenario, samples=1).table(), end="")


if __name__ == "__main__":
    main(sys.argv)
