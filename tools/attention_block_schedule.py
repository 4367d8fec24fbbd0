#!/usr/bin/env python3
"""How long the busiest SM runs an attention call's blocks, simulated, against the cost model's closed form.

The cost model (model/attention_blocks.hpp) bounds a call by max(work / SMs, the blocks of ranks 0, SMs, ...
on the first SM). This script schedules the blocks one by one instead: launched longest first to the first SM with
a free slot (up to `per_sm` resident), each SM sharing a constant throughput among its resident blocks. It prints
both for the backward calls of the 2026-11-26 H200 runs (docs/measurements/h200-2026-11-26.md): Ulysses shards of
2 heads (a KV head walking 2 query heads) and whole Qwen2.5-0.5B sequences (2 KV heads walking 7).

    python3 tools/attention_block_schedule.py
"""


def simulate(sizes, sms, per_sm):
    sizes = sorted(sizes, reverse=True)
    resident = [[] for _ in range(sms)]
    launched = 0
    for _ in range(per_sm):
        for i in range(sms):
            if launched < len(sizes):
                resident[i].append(sizes[launched])
                launched += 1
    t = 0.0
    while any(resident):
        step = min(min(r) * len(r) for r in resident if r)
        t += step
        for i, r in enumerate(resident):
            if r:
                done = step / len(r)
                resident[i] = [x - done for x in r if x - done > 1e-9]
        for i in range(sms):
            while len(resident[i]) < per_sm and launched < len(sizes):
                resident[i].append(sizes[launched])
                launched += 1
    return t


def main():
    sms, per_sm = 132, 2
    print("%6s %5s %7s %10s %8s %10s %10s %6s" % ("tiles", "walk", "blocks", "work/SMs", "first SM", "bound",
                                                 "simulated", "ratio"))
    for tiles, walk, kv_heads in [(128, 2, 1), (256, 2, 1), (512, 2, 1), (1024, 2, 1), (128, 7, 2), (256, 7, 2)]:
        sizes = [walk * j for j in range(1, tiles + 1)] * kv_heads
        ordered = sorted(sizes, reverse=True)
        first = sum(ordered[k * sms] for k in range(per_sm) if k * sms < len(ordered))
        bound = max(sum(sizes) / sms, first)
        simulated = simulate(sizes, sms, per_sm)
        print("%6d %5d %7d %10.0f %8.0f %10.0f %10.0f %6.3f" % (tiles, walk, len(sizes), sum(sizes) / sms, first, bound,
                                                               simulated, simulated / bound))


if __name__ == "__main__":
    main()
