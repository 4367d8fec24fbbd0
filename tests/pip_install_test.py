#!/usr/bin/env python3
"""`pip install --no-index --no-build-isolation ./python` into a fresh virtual environment (no system site packages,
no network), then `import lcsim` from outside the repository and a plan run: the package as Python users install it
(docs/python.md). pandas is not in a fresh venv, so DataFrames must say how to get it.

Usage: pip_install_test.py --build-dir build [--python /usr/bin/python3]
"""
import argparse
import os
import shutil
import subprocess
import sys
import tempfile

SOURCE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

CHECK = r"""
import os, sys
import lcsim
assert not os.path.abspath(lcsim.__file__).startswith(sys.argv[1]), lcsim.__file__
results = lcsim.plan(os.path.join(sys.argv[1], "scenarios", "default.json"), samples=2, iterations=1,
                     progress=False)
rows = results.summary_rows()
assert [r["policy"] for r in rows] == [p["name"] for p in results.policies]
assert sum(r["winner"] for r in rows) == 1, rows
try:
    import pandas
except ImportError:
    try:
        results.summary()
    except ImportError as e:
        assert "pip install pandas" in str(e), e
    else:
        raise AssertionError("summary() without pandas did not raise ImportError")
else:
    assert len(results.summary()) == len(rows)
print("winner", results.winner)
"""


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--build-dir", required=True)
    parser.add_argument("--python", default="/usr/bin/python3")
    args = parser.parse_args()
    work = tempfile.mkdtemp(prefix="lcsim-pip-test-")
    try:
        venv = os.path.join(work, "venv")
        subprocess.run([args.python, "-m", "venv", venv], check=True)
        python = os.path.join(venv, "bin", "python")
        env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PIP_INDEX_URL", "PIP_FIND_LINKS")}
        env["LCSIM_BUILD_DIR"] = os.path.abspath(args.build_dir)
        subprocess.run([python, "-m", "pip", "install", "--no-index", "--no-build-isolation", "--no-cache-dir",
                        "--disable-pip-version-check", os.path.join(SOURCE, "python")], check=True, env=env,
                       cwd=work)
        done = subprocess.run([python, "-c", CHECK, SOURCE], env=env, cwd=work, capture_output=True, text=True)
        sys.stdout.write(done.stdout)
        if done.returncode != 0:
            sys.exit(f"pip_install_test: the installed package failed:\n{done.stderr}")
        assert "winner " in done.stdout
    finally:
        shutil.rmtree(work)
    print("pip_install_test: ok")


if __name__ == "__main__":
    main()
