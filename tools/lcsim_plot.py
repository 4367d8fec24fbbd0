#!/usr/bin/python3
"""Plots from the files lcsim writes.

  lcsim_plot.py timeline TRACE.json --out timeline.png [--policy LABEL] [--iteration K]
      per-GPU Gantt chart of one iteration from a Chrome trace (`lcsim simulate --trace`): one row per GPU,
      compute / communication / idle spans coloured, micro-batch labels on the spans wide enough to hold them; time
      runs from the iteration's own start (0 s), whichever policy ran before it in the simulation
  lcsim_plot.py speedup RESULTS.json --out speedup.png
      one bar per policy (speedup over the baseline) from a results file (`lcsim plan|simulate --json`), with the
      scenario's declared paper figures drawn beside the simulated bars; a run with sampled worlds (--samples N,
      lcsim-results/2) draws each bar's 80% interval (p10-p90) as an error bar; a policy that runs out of GPU
      memory is a hatched bar marked OOM
  lcsim_plot.py scaling SWEEP.json --out scaling.png [--x AXIS] [--y speedup_vs_baseline|tokens_per_s|...] [--by AXIS]
      one line per policy over the sweep's own axis (the first whose value changes between points; --x another),
      from `lcsim sweep --json`: speedup by default; a sweep run with sampled worlds (its "samples") draws each
      line's p10-p90 interval as a band; points where a policy runs out of GPU memory are red crosses
  lcsim_plot.py tune TUNE.json --out tune.png
      the search landscape of `lcsim tune --json`: one row per policy, every estimated candidate's tokens/s over
      its CP degree (accepted dots, out-of-memory crosses), the best ringed; pruned candidates have no estimate

Every figure's caption repeats the results' profile and dataset labels, so a plot of uncalibrated or synthetic
numbers says so. Uses Debian's python3-matplotlib with the headless Agg backend.
"""
import argparse
import json
import os
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import matplotlib.ticker  # noqa: E402

COLOURS = {"compute": "#4C72B0", "comm": "#DD8452", "idle": "#D9D9D9", "other": "#8C8C8C"}


class PlotError(Exception):
    """Bad input file: the message names the file and what is wrong."""


def save_figure(fig, out):
    """Writes the figure to a temporary file beside `out`, then renames it over `out`, as lcsim writes its outputs:
    a plot that fails half-way leaves the previous file as it was. A special file (/dev/stdout) is written in place."""
    if os.path.exists(out) and not os.path.isfile(out):
        fig.savefig(out, dpi=110)
        return
    folder, name = os.path.split(out)
    temporary = os.path.join(folder, f".{name}.tmp.{os.getpid()}")
    fmt = os.path.splitext(name)[1][1:].lower() or None  # savefig cannot see the extension of the temporary name
    try:
        fig.savefig(temporary, dpi=110, format=fmt)
        os.replace(temporary, out)
    except BaseException:
        if os.path.exists(temporary):
            os.remove(temporary)
        raise


def load_json(path):
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except OSError as e:
        raise PlotError(f"{path}: cannot read: {e.strerror}") from e
    except json.JSONDecodeError as e:
        raise PlotError(f"{path}: not valid JSON: {e}") from e


def span_class(event):
    """compute / comm / idle from the event's category (falling back to its name)."""
    text = (event.get("cat", "") + " " + event.get("name", "")).lower()
    for key in ("idle", "comm", "compute"):
        if key in text:
            return key
    return "other"


def read_trace(trace, path):
    """GPU rows and iteration windows from `lcsim simulate --trace` (one process per GPU, threads for compute and
    communication, plus an "iterations" process whose spans carry the policy and iteration label)."""
    events = trace.get("traceEvents") if isinstance(trace, dict) else trace
    if not isinstance(events, list):
        raise PlotError(f"{path}: expected a Chrome trace (an object with traceEvents, or an array of events)")
    names, rows, iterations = {}, {}, []
    for i, event in enumerate(events):
        if not isinstance(event, dict) or "ph" not in event:
            raise PlotError(f"{path}: traceEvents[{i}]: not a trace event")
        if event["ph"] == "M" and event.get("name") == "process_name":
            names[event.get("pid", 0)] = event.get("args", {}).get("name", "")
        elif event["ph"] == "X":
            for field in ("ts", "dur"):
                if not isinstance(event.get(field), (int, float)):
                    raise PlotError(f"{path}: traceEvents[{i}].{field}: expected a number")
            start, dur = event["ts"] * 1e-6, event["dur"] * 1e-6
            if event.get("cat") == "iteration":
                iterations.append((start, dur, event.get("args", {}).get("policy", ""), event.get("name", "")))
            else:
                rows.setdefault(event.get("pid", 0), []).append((start, dur, span_class(event), event.get("name", "")))
    if not rows:
        raise PlotError(f"{path}: no compute or communication spans to draw")
    return names, rows, iterations


def plot_timeline(trace_path, out, policy=None, iteration=0):
    """One row per GPU; compute in the upper half, communication in the lower half (they overlap under Skrull's
    DACP), idle grey behind. The window is one iteration of one policy when the trace marks iterations."""
    trace = load_json(trace_path)
    names, rows, iterations = read_trace(trace, trace_path)
    chosen = [it for it in iterations if policy is None or it[2] == policy]
    if policy is not None and not chosen:
        raise PlotError(f"{trace_path}: no iteration of policy '{policy}' (policies: "
                        f"{', '.join(sorted(set(it[2] for it in iterations)))})")
    if chosen:
        if not 0 <= iteration < len(chosen):
            raise PlotError(f"{trace_path}: iteration {iteration} out of range (0..{len(chosen) - 1})")
        lo, dur, policy_name, title = chosen[iteration]
        hi = lo + dur
    else:
        lo = min(s[0] for spans in rows.values() for s in spans)
        hi = max(s[0] + s[1] for spans in rows.values() for s in spans)
        title = trace_path
    pids = sorted(rows)
    fig, ax = plt.subplots(figsize=(12, 0.4 * len(pids) + 1.6))
    lanes = {"compute": (-0.4, 0.45), "comm": (0.05, 0.35), "idle": (-0.4, 0.8), "other": (-0.4, 0.8)}
    for row, pid in enumerate(pids):
        for cls in ("idle", "other", "compute", "comm"):
            spans = [(s0, dur) for s0, dur, c, _ in rows[pid] if c == cls and s0 < hi and s0 + dur > lo]
            if spans:
                offset, height = lanes[cls]
                ax.broken_barh([(s0 - lo, dur) for s0, dur in spans], (row + offset, height), facecolors=COLOURS[cls],
                               edgecolor="none")
        for s0, dur, cls, label in rows[pid]:
            if cls == "compute" and s0 < hi and s0 + dur > lo and dur > (hi - lo) / 25:
                short = label.split(" [")[0].removeprefix("compute ")  # "distributed mb 3", "local mb 4"
                ax.text(max(s0, lo) - lo + min(dur, hi - max(s0, lo)) / 2, row - 0.18, short, ha="center", va="center",
                        fontsize=6, clip_on=True)
    ax.set_yticks(range(len(pids)))
    ax.set_yticklabels([names.get(pid) or f"pid {pid}" for pid in pids], fontsize=7)
    ax.invert_yaxis()
    ax.set_xlim(0, hi - lo)  # every policy's iteration from its own start
    ax.set_xlabel("time from the start of the iteration (s)")
    handles = [plt.Rectangle((0, 0), 1, 1, color=COLOURS[c]) for c in ("compute", "comm", "idle")]
    ax.legend(handles, ["compute", "communication", "idle"], loc="lower right", fontsize=7, ncol=3)
    meta = trace.get("metadata", {}) if isinstance(trace, dict) else {}
    # The caption the module promises: what the trace is of (lcsim simulate --trace writes it as "metadata").
    caption = " | ".join(str(meta[k]) for k in ("scenario", "dataset", "profile") if k in meta)
    ax.set_title(f"{title}\n{caption or 'scenario, dataset and profile not recorded in this trace'}", fontsize=8)
    fig.tight_layout()
    save_figure(fig, out)
    return fig, ax


def caption_of(results):
    profile = results.get("profile", {})
    label = profile.get("label", "") if isinstance(profile, dict) else str(profile)
    return f"{results.get('scenario', '')} ({results.get('mode', '')}) | {results.get('dataset', '')} | {label}"


# The interval quantiles of a results field (lcsim-results/2, formats/results_io.hpp).
INTERVAL_OF = {"speedup_vs_baseline": "speedup", "mean_iteration_s": "iteration_s", "tokens_per_s": "tokens_per_s"}


def interval_error(policy, field):
    """(below, above) the nominal value to p10 and p90, or None when the run sampled one world (or lcsim-results/1)."""
    interval = policy.get("interval")
    if not isinstance(interval, dict) or interval.get("samples", 1) <= 1 or field not in INTERVAL_OF:
        return None
    q = interval.get(INTERVAL_OF[field])
    value = policy.get(field)
    if not isinstance(q, dict) or value is None or q.get("p10") is None or q.get("p90") is None:
        return None
    # An interval need not hold the nominal world's value (it is one world of many): clip to zero length.
    return max(0.0, value - q["p10"]), max(0.0, q["p90"] - value)


def plot_speedup(results_path, out):
    results = load_json(results_path)
    policies = results.get("policies")
    if not isinstance(policies, list) or not policies:
        raise PlotError(f"{results_path}: policies: expected a non-empty array (lcsim-results/2)")
    names = [p["name"] for p in policies]
    values = [p.get("speedup_vs_baseline") or 0.0 for p in policies]
    paper = {f["policy"]: f for f in results.get("paper_figures", [])}
    fig, ax = plt.subplots(figsize=(max(4, 1.2 * len(names) + 1), 4))
    width = 0.38 if paper else 0.7
    xs = list(range(len(names)))
    errors = [interval_error(p, "speedup_vs_baseline") for p in policies]
    yerr = None
    if any(e is not None for e in errors):
        yerr = [[e[0] if e else 0.0 for e in errors], [e[1] if e else 0.0 for e in errors]]
    label = "lcsim" if yerr is None else f"lcsim (p10-p90, {policies[0]['interval']['samples']} worlds)"
    oom = [p.get("oom_iterations", 0) > 0 for p in policies]
    bars = ax.bar([x - (width / 2 if paper else 0) for x in xs], values, width, color="#4C72B0", label=label,
                  yerr=yerr, capsize=3, error_kw={"elinewidth": 0.8})
    for i, (bar, value) in enumerate(zip(bars, values)):
        top = value + (yerr[1][i] if yerr else 0.0)
        text = f"{value:.2f}x"
        if oom[i]:  # it could not run as planned: drawn hollow, and said
            bar.set_facecolor("#E0E0E0")
            bar.set_hatch("//")
            bar.set_edgecolor("#C00000")
            text += f"\nOOM {policies[i]['oom_iterations']}/{len(policies[i].get('iterations', [])) or '?'}"
        ax.text(bar.get_x() + bar.get_width() / 2, top, text, ha="center", va="bottom", fontsize=7,
                color="#C00000" if oom[i] else "black")
    if paper:
        px = [x + width / 2 for x, n in zip(xs, names) if n in paper]
        pv = [paper[n]["speedup"] for n in names if n in paper]
        ax.bar(px, pv, width, color="#C44E52", label="paper")
    ax.axhline(1.0, color="black", linewidth=0.6)
    ax.set_xticks(xs)
    ax.set_xticklabels(names, rotation=20, ha="right", fontsize=8)
    reference = results.get("speedup_reference", results.get("baseline", "baseline"))
    ax.set_ylabel(f"speedup over {reference} (tokens/s ratio)")
    if any(oom):
        ax.bar([], [], color="#E0E0E0", hatch="//", edgecolor="#C00000", label="out of GPU memory: cannot win")
    ax.set_title(caption_of(results), fontsize=7)
    ax.legend(fontsize=7)
    fig.tight_layout()
    save_figure(fig, out)
    return fig, ax


def axis_text(value):
    """An axis value as a label: a cluster object by its label, a string as it is."""
    if isinstance(value, dict) and isinstance(value.get("label"), str):
        return value["label"]
    return str(value)


def axis_value(point, name):
    """A sweep point's value on axis `name` (its GPU count for "gpus", which every point records)."""
    if name == "gpus" and "gpus" in point:
        return point["gpus"]
    return point.get("coordinates", {}).get(name)


def sweep_axis(sweep, points, by=None):
    """The axis the sweep varies: the first of its axes (other than `by`) whose value changes between points."""
    names = sweep.get("axes") or list(points[0].get("coordinates", {}))
    for name in names:
        if name != by and len({json.dumps(axis_value(p, name), sort_keys=True) for p in points}) > 1:
            return name
    return "gpus"


def interval_bounds(policy, field):
    """(p10, p90) of a results field, or None without sampled worlds."""
    error = interval_error(policy, field)
    if error is None:
        return None
    return policy[field] - error[0], policy[field] + error[1]


def y_label(field, references):
    if field == "speedup_vs_baseline":
        if len(references) == 1:
            return f"speedup over {next(iter(references))} (tokens/s ratio)"
        return "speedup over each point's baseline (tokens/s ratio)"
    return {"tokens_per_s": "tokens per second (whole cluster)", "mean_iteration_s": "mean iteration time (s)",
            "p50_iteration_s": "median iteration time (s)", "p99_iteration_s": "p99 iteration time (s)"}.get(field, field)


def plot_scaling(sweep_path, out, x=None, y="speedup_vs_baseline", by=None):
    """One line per policy over the sweep's own axis (or `x`), its 80% interval as a band, OOM points crossed."""
    sweep = load_json(sweep_path)
    points = sweep.get("points")
    if sweep.get("schema") != "lcsim-sweep/1" or not isinstance(points, list) or not points:
        raise PlotError(f"{sweep_path}: expected an lcsim-sweep/1 document with points")
    varied = sweep_axis(sweep, points, by)
    x = x or varied
    panels = {}  # panel label -> policy -> [(x, y, (p10, p90) or None, oom)]
    references = set()
    for i, point in enumerate(points):
        xv = axis_value(point, x)
        if xv is None:
            raise PlotError(f"{sweep_path}: points[{i}]: no value for axis '{x}'")
        panel = ""
        if by is not None:
            if by not in point.get("coordinates", {}):
                raise PlotError(f"{sweep_path}: points[{i}]: no value for axis '{by}'")
            panel = axis_text(point["coordinates"][by])
        results = point["results"]
        references.add(results.get("speedup_reference", results.get("baseline", "baseline")))
        for policy in results["policies"]:
            if y not in policy:
                raise PlotError(f"{sweep_path}: points[{i}].results.policies: no field '{y}'")
            panels.setdefault(panel, {}).setdefault(policy["name"], []).append(
                (xv, policy[y], interval_bounds(policy, y), policy.get("oom_iterations", 0) > 0))
    # Several points of one policy at one x would stack on a vertical line: the sweep varies another axis.
    for panel, lines in panels.items():
        for name, pts in lines.items():
            if len(pts) > 1 and len({json.dumps(p[0], sort_keys=True) for p in pts}) == 1:
                raise PlotError(f"{sweep_path}: every point has {x}={axis_text(pts[0][0])}: the sweep varies "
                                f"'{varied}' (--x {varied})")
    xs_all = [p[0] for lines in panels.values() for pts in lines.values() for p in pts]
    numeric = all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in xs_all)
    categories = [] if numeric else sorted({axis_text(v) for v in xs_all}, key=[axis_text(v) for v in xs_all].index)
    position = (lambda v: v) if numeric else (lambda v: categories.index(axis_text(v)))
    log = numeric and min(xs_all) > 0 and max(xs_all) / min(xs_all) >= 8
    fig, axes = plt.subplots(1, len(panels), figsize=(7.6 if by is None else 3.4 * len(panels) + 1.4, 4.2), squeeze=False,
                             sharey=True)
    sampled = False
    oom_labelled = False
    for (panel, lines), ax in zip(panels.items(), axes[0]):
        for name, pts in lines.items():
            pts.sort(key=lambda p: position(p[0]))
            xs, ys = [position(p[0]) for p in pts], [p[1] for p in pts]
            line, = ax.plot(xs, ys, marker="o", markersize=4, label=name)
            band = [(xv, q) for xv, (_, _, q, _) in zip(xs, pts) if q is not None]
            if band:
                sampled = True
                ax.fill_between([b[0] for b in band], [b[1][0] for b in band], [b[1][1] for b in band],
                                color=line.get_color(), alpha=0.15, linewidth=0)
            oom = [(xv, yv) for xv, yv, p in zip(xs, ys, pts) if p[3]]
            if oom:
                ax.scatter([o[0] for o in oom], [o[1] for o in oom], marker="x", s=70, color="#C00000", zorder=5,
                           label=None if oom_labelled else "out of GPU memory")
                oom_labelled = True
        if y == "speedup_vs_baseline":
            ax.axhline(1.0, color="black", linewidth=0.6)
        if log:
            ax.set_xscale("log", base=2)
        values = sorted({position(v) for v in xs_all})
        ax.set_xticks(values)
        ax.set_xticklabels(categories if not numeric else [axis_text(v) for v in values], fontsize=7)
        ax.minorticks_off()
        ax.set_xlabel("GPUs" if x == "gpus" else x)
        if panel:
            ax.set_title(f"{by}={panel}", fontsize=8)
    axes[0][0].set_ylabel(y_label(y, references))
    first = points[0]["results"]
    profile = first.get("profile", {})
    bands = ""
    if sampled:
        bands = f" | bands: p10-p90 over {first['uncertainty']['samples']} sampled worlds"
    title = (f"{sweep.get('sweep', '')} ({first.get('mode', '')}){bands}\n{first.get('dataset', '')} | "
             f"{profile.get('label', '') if isinstance(profile, dict) else profile}")
    if by is None:
        axes[0][0].set_title(title, fontsize=7)
    else:
        fig.suptitle(title, fontsize=7)
    # Beside the plot, not over the lines and bands.
    axes[0][-1].legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.02, 1.0), borderaxespad=0)
    fig.tight_layout()
    save_figure(fig, out)
    return fig, axes[0][0] if by is None else axes[0]


def plot_tune(tune_path, out):
    tune = load_json(tune_path)
    candidates, policies = tune.get("candidates"), tune.get("policies")
    if tune.get("schema") != "lcsim-tune/1" or not isinstance(candidates, list) or not isinstance(policies, list) \
            or not policies:
        raise PlotError(f"{tune_path}: expected an lcsim-tune/1 document with candidates and policies")
    fig, axes = plt.subplots(len(policies), 1, figsize=(6, 1.9 * len(policies) + 0.6), squeeze=False, sharex=True)
    for ax, verdict in zip(axes[:, 0], policies):
        name = verdict["policy"]
        mine = [c for c in candidates if c["policy"] == name and c["estimated"] and not c["failed"]]
        ok = [c for c in mine if c["oom_iterations"] == 0]
        oom = [c for c in mine if c["oom_iterations"] > 0]
        ax.scatter([c["layout"]["cp"] for c in ok], [c["estimate_tokens_per_s"] for c in ok], s=12,
                   color="#4C72B0", label="fits")
        ax.scatter([c["layout"]["cp"] for c in oom], [c["estimate_tokens_per_s"] for c in oom], s=14, marker="x",
                   color="#C44E52", label="OOM (rejected)")
        if verdict.get("best") is not None:
            best = candidates[verdict["best"]]
            ax.scatter([best["layout"]["cp"]], [best["estimate_tokens_per_s"]], s=90, facecolors="none",
                       edgecolors="black", linewidths=1.2, label="best")
        ax.set_xscale("log", base=2)
        ax.xaxis.set_major_formatter(matplotlib.ticker.FuncFormatter(lambda v, _: f"{v:g}"))
        # Millions on the axis itself: matplotlib's "1e6" offset text would sit on the panel's title.
        ax.yaxis.set_major_formatter(matplotlib.ticker.FuncFormatter(lambda v, _: f"{v / 1e6:.2g}M"))
        ax.set_ylabel("tokens/s", fontsize=7)
        ax.set_title(name, fontsize=8, loc="left")
        ax.tick_params(labelsize=7)
    axes[0, 0].legend(fontsize=6, loc="best")
    axes[-1, 0].set_xlabel("CP degree (estimate; pruned candidates not drawn)")
    profile = tune.get("profile", {})
    fig.suptitle(f"{tune.get('scenario', '')} (tune)\n{tune.get('dataset', '')} | "
                 f"{profile.get('label', '') if isinstance(profile, dict) else profile}", fontsize=7)
    fig.tight_layout(rect=(0, 0, 1, 1 - 0.45 / fig.get_figheight()))  # room for the two-line title
    save_figure(fig, out)
    return fig, axes


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    t = sub.add_parser("timeline", help="per-GPU Gantt chart from a Chrome trace")
    t.add_argument("trace")
    t.add_argument("--out", required=True)
    t.add_argument("--policy", help="policy label whose iteration to draw (default: the first in the trace)")
    t.add_argument("--iteration", type=int, default=0, help="which of that policy's iterations (default 0)")
    s = sub.add_parser("speedup", help="speedup bars from a results file")
    s.add_argument("results")
    s.add_argument("--out", required=True)
    c = sub.add_parser("scaling", help="lines per policy over a sweep axis")
    c.add_argument("sweep")
    c.add_argument("--out", required=True)
    c.add_argument("--x", help="the axis to draw along (default: the one the sweep varies)")
    c.add_argument("--y", default="speedup_vs_baseline",
                   help="speedup_vs_baseline (default), tokens_per_s or mean_iteration_s")
    c.add_argument("--by", help="one panel per value of this axis (e.g. cluster)")
    u = sub.add_parser("tune", help="the search landscape of lcsim tune")
    u.add_argument("tune")
    u.add_argument("--out", required=True)
    args = parser.parse_args(argv)
    try:
        if args.command == "timeline":
            plot_timeline(args.trace, args.out, args.policy, args.iteration)
        elif args.command == "speedup":
            plot_speedup(args.results, args.out)
        elif args.command == "tune":
            plot_tune(args.tune, args.out)
        else:
            plot_scaling(args.sweep, args.out, args.x, args.y, args.by)
    except PlotError as e:
        print(f"lcsim_plot: error: {e}", file=sys.stderr)
        return 2
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
