#!/usr/bin/env python3
"""Markdown rows of docs/validation.md's results table from `lcsim validate --json FILE`.

    build/bin/lcsim validate --json /tmp/validation.json
    tools/validation_table.py /tmp/validation.json > /tmp/rows.md

One row per entry that has a prediction (not-expressible entries are listed by the command itself): id, source,
status, published, predicted, signed error (and, for a trend with published values, its factor published and
predicted, with the factor's error), ordering. Figures keep three significant digits, collective times are
printed in microseconds and measured iteration times in seconds, as the table has them.
"""
import json
import sys


def number(x):
    return f"{x:.3g}"


def published_text(entry):
    value = entry["published"]
    quantity = entry["quantity"]
    points = entry.get("points") or []
    if quantity == "oom":
        return "OOM" if value == "yes" else "fits"
    if quantity == "collective_seconds":
        return " ".join(f"{p['published'] * 1e6:.0f}" for p in points) + " us"
    if any("published" in p for p in points):
        return " ".join(number(p["published"]) for p in points)
    try:
        return number(float(value)) + (" s" if quantity == "iteration_seconds" else "")
    except (TypeError, ValueError):
        return str(value)


def predicted_text(entry):
    quantity = entry["quantity"]
    points = entry.get("points") or []
    if quantity == "oom":
        return "OOM" if entry["predicted"] else "fits"
    if quantity == "collective_seconds":
        return " ".join(f"{p['predicted'] * 1e6:.0f}" for p in points) + " us"
    if entry["predicted"] is None:
        return " ".join(number(p["predicted"]) for p in points)
    return number(entry["predicted"]) + (" s" if quantity == "iteration_seconds" else "")


def row(entry):
    source = f"{entry['source']['paper']} {entry['source']['where']}"
    status = entry["status"] + (", measured" if entry["kind"] == "measured" else "")
    error = "-" if entry["error"] is None else f"{entry['error'] * 100:+.1f}%"
    factor = entry.get("series_factor")  # lcsim-validation/4: how far a trend with published values goes
    if factor:
        error += f"; trend x{factor['published']:.2f} / x{factor['predicted']:.2f} ({factor['error'] * 100:+.1f}%)"
    ordering = entry["ordering"]
    if ordering == "broken":
        ordering = "**broken**"
    elif ordering == "n/a" and entry["kind"] == "measured":
        ordering = "-"
    cells = [entry["id"], source, status, published_text(entry), predicted_text(entry), error, ordering]
    return "| " + " | ".join(cells) + " |"


def main(argv):
    if len(argv) != 2:
        sys.stderr.write("usage: validation_table.py VALIDATION_JSON\n")
        return 2
    with open(argv[1], encoding="utf-8") as f:
        document = json.load(f)
    print("| entry | source | status | published | predicted | error | ordering |")
    print("|---|---|---|---|---|---|---|")
    for entry in document["entries"]:
        if entry["status"] in ("not expressible", "failed"):
            continue
        print(row(entry))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
