#!/usr/bin/env python3
"""`lcsim report` and `lcsim simulate --report`: the page renders in headless Chromium.

Each page is opened with `chromium --headless --dump-dom`; the page's script marks <html data-lcsim-rendered="ok">
only after drawing everything without an error (formats/report/report.js), and the DOM is checked for the table's
rows and the charts' marks. The checker itself is tested on broken pages (a script error, bad data), so that a
page that fails to draw fails this test. Debian's chromium comes with tools/setup.sh (README command 2).

Usage: report_page_test.py --lcsim build/bin/lcsim [--chromium PATH]
"""
import argparse
import copy
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

SOURCE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def render(chromium, page):
    """The DOM after the page's scripts ran, and Chromium's log (console messages, uncaught errors)."""
    run = subprocess.run([chromium, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
                          "--enable-logging=stderr", "--v=0", "--virtual-time-budget=5000", "--dump-dom",
                          "file://" + os.path.abspath(page)],
                         capture_output=True, text=True, timeout=120)
    if run.returncode != 0:
        raise AssertionError(f"chromium exited {run.returncode} on {page}: {run.stderr[-2000:]}")
    return run.stdout, run.stderr


def check_rendered(chromium, page):
    """Raises AssertionError unless the page drew without an error; returns the DOM."""
    dom, log = render(chromium, page)
    marker = re.search(r'<html[^>]*data-lcsim-rendered="(\w+)"', dom)
    if not marker or marker.group(1) != "ok":
        status = re.search(r'<p id="lcsim-status"[^>]*>(.*?)</p>', dom, re.S)
        raise AssertionError(f"{page}: not rendered ({marker.group(1) if marker else 'no marker'}): "
                             f"{status.group(1)[:500] if status else ''}")
    errors = [line for line in log.splitlines() if "Uncaught" in line or ":ERROR:CONSOLE" in line]
    if errors:
        raise AssertionError(f"{page}: script errors: {errors[:3]}")
    return dom


def element(dom, tag, ident):
    match = re.search(rf'<{tag}[^>]*id="{ident}".*?</{tag}>', dom, re.S)
    assert match, f"no <{tag} id={ident}> in the page"
    return match.group(0)


def check_page(dom, policies, timeline, sweep):
    table = element(dom, "table", "comparison-table")
    rows = re.findall(r"<tr[^>]*>", table)
    assert len(rows) == 1 + len(policies), f"table has {len(rows) - 1} policy rows, expected {len(policies)}"
    for name in policies:
        assert f"<td>{name}" in table, f"table lacks policy {name}"
    bars = re.findall(r'class="bar"', element(dom, "svg", "speedup-chart"))
    assert len(bars) == len(policies), f"speedup chart has {len(bars)} bars, expected {len(policies)}"
    breakdowns = re.findall(r'<svg[^>]*class="breakdown-chart".*?</svg>', dom, re.S)
    assert len(breakdowns) == len(policies), f"{len(breakdowns)} breakdown charts for {len(policies)} policies"
    assert all("<rect" in b for b in breakdowns), "a breakdown chart is empty"
    if timeline:
        for i in range(2):
            assert element(dom, "svg", f"timeline-{i}").count("<rect") > 10, f"timeline {i} drew no spans"
        assert "exposed comm" in dom
    else:
        assert 'id="no-timeline"' in dom
    if sweep:
        chart = element(dom, "svg", "scaling-chart")
        assert chart.count('class="series"') == len(policies)
        assert 'class="oom-mark"' in chart, "the OOM point is not marked"
        assert "speedup over" in chart and "gpus" in chart, "the scaling chart's axes are not labelled"


def run_lcsim(lcsim, args, expect=0):
    run = subprocess.run([lcsim] + args, capture_output=True, text=True, cwd=SOURCE, timeout=600)
    assert run.returncode == expect, f"lcsim {' '.join(args)}: exit {run.returncode}, expected {expect}: {run.stderr}"
    return run


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--lcsim", required=True)
    parser.add_argument("--chromium", default=shutil.which("chromium") or shutil.which("chromium-browser"))
    args = parser.parse_args()
    if not args.chromium:
        sys.exit("report_page_test: chromium not found: apt-get install chromium (tools/setup.sh installs it)")
    lcsim = os.path.abspath(args.lcsim)
    work = tempfile.mkdtemp(prefix="lcsim-report-test-")
    try:
        scenario = ["scenarios/default.json", "--iterations", "2", "--samples", "4"]
        page_a, page_b = os.path.join(work, "a.html"), os.path.join(work, "b.html")
        results = os.path.join(work, "results.json")
        run_lcsim(lcsim, ["report"] + scenario + ["--out", page_a, "--quiet"])
        run_lcsim(lcsim, ["simulate"] + scenario + ["--json", results, "--report", page_b, "--quiet"])
        with open(page_a, "rb") as a, open(page_b, "rb") as b:
            assert a.read() == b.read(), "report and simulate --report differ on the same run"
        with open(results) as f:
            document = json.load(f)
        names = [p["name"] for p in document["policies"]]
        html = open(page_a).read()
        assert not re.search(r"\b(src|href)\s*=|url\(|@import", html), "the page loads something"
        check_page(check_rendered(args.chromium, page_a), names, timeline=True, sweep=False)

        page_c = os.path.join(work, "c.html")
        run_lcsim(lcsim, ["report", results, "--out", page_c])
        check_page(check_rendered(args.chromium, page_c), names, timeline=False, sweep=False)

        # A sweep's document: the scaling chart, over the axis that changes (gpus), an OOM point marked.
        points = []
        for i, gpus in enumerate([8, 16, 32]):
            point = copy.deepcopy(document)
            if i == 1:
                point["policies"][1]["oom_iterations"] = 1
            points.append({"index": i, "coordinates": {"gpus": gpus, "batch_size_per_dp": 64}, "gpus": gpus,
                           "scenario_file": "p.json", "results": point})
        sweep = {"schema": "lcsim-sweep/1", "sweep": "t", "sweep_file": "t.json", "mode": "simulate",
                 "axes": ["batch_size_per_dp", "gpus"], "points": points}
        sweep_file, page_d = os.path.join(work, "sweep.json"), os.path.join(work, "d.html")
        with open(sweep_file, "w") as f:
            json.dump(sweep, f)
        run_lcsim(lcsim, ["report", sweep_file, "--out", page_d])
        check_page(check_rendered(args.chromium, page_d), names, timeline=False, sweep=True)

        # The checker catches a page that does not draw: a script error, and data the script cannot draw.
        for broken, (old, new) in [("e.html", ("drawTable(root, d);", "drawTable(root, undefinedName);")),
                                   ("f.html", ('"gpu_busy_s":[', '"gpu_busy_s":7,"was":['))]:
            text = open(page_a).read()
            assert old in text, f"{old} not in the page"
            path = os.path.join(work, broken)
            with open(path, "w") as f:
                f.write(text.replace(old, new, 1))
            try:
                check_rendered(args.chromium, path)
            except AssertionError:
                continue
            raise AssertionError(f"a broken page ({new}) passed the check")

        # Bad input: exit 2, naming the file and the field; the previous page is left as it was.
        bad = copy.deepcopy(document)
        bad["policies"][1]["tokens_per_s"] = "fast"
        bad_file = os.path.join(work, "bad.json")
        with open(bad_file, "w") as f:
            json.dump(bad, f)
        before = open(page_c, "rb").read()
        run = run_lcsim(lcsim, ["report", bad_file, "--out", page_c], expect=2)
        assert bad_file in run.stderr and "policies[1].tokens_per_s" in run.stderr, run.stderr
        assert open(page_c, "rb").read() == before, "a failed report replaced the page"
        run = run_lcsim(lcsim, ["report", results], expect=2)
        assert "--out" in run.stderr, run.stderr
        run = run_lcsim(lcsim, ["report", results, "--out", page_c, "--iterations", "3"], expect=2)
        assert "--iterations" in run.stderr, run.stderr
    finally:
        shutil.rmtree(work)
    print("report_page_test: ok")


if __name__ == "__main__":
    main()
