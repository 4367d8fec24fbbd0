#!/usr/bin/python3
"""Runs a Jupyter notebook's code cells in order, in one namespace, as a kernel would (without Jupyter): the tests use
it so that examples/notebooks never rot. Figures go to matplotlib's Agg backend; the last expression of a cell is
evaluated, not displayed. Exit 0, or 1 with the failing cell's number and traceback.

    PYTHONPATH=build/python tools/run_notebook.py examples/notebooks/compare-policies.ipynb
"""
import ast
import json
import os
import sys
import traceback


def run(path):
    with open(path, encoding="utf-8") as f:
        notebook = json.load(f)
    if notebook.get("nbformat") != 4:
        raise ValueError(f"{path}: nbformat {notebook.get('nbformat')}, expected 4")
    os.environ.setdefault("MPLBACKEND", "Agg")
    namespace = {"__name__": "__main__"}
    cells = [c for c in notebook["cells"] if c.get("cell_type") == "code"]
    for number, cell in enumerate(cells, start=1):
        source = "".join(cell["source"])
        try:
            exec(compile(ast.parse(source, filename=f"{path} cell {number}"), f"{path} cell {number}", "exec"),
                 namespace)
        except Exception:
            sys.stderr.write(f"{path}: code cell {number} of {len(cells)} failed:\n{traceback.format_exc()}")
            return 1
    print(f"{path}: {len(cells)} code cells ran")
    return 0


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__.split("\n\n")[-1].strip())
    sys.exit(run(sys.argv[1]))
