"""The hostile corpus through the Python package (tests/hostile_corpus.txt, run by tests/hostile_corpus_test.cpp).

    hostile_corpus_python.py load|plan|simulate FILE [--samples N] [-n N] [--trace FILE] [--policy LABEL]... [--dict]
                                                    [--set KEY=JSON]...
                                                    [--sleeping-policy SECONDS] [--sigint-after SECONDS]

does with ``import lcsim`` what ``lcsim plan|simulate FILE ...`` does, and ends as the command line would: 0, 2 for
``lcsim.InputError``, 3 for ``lcsim.PlanningError``, 130 for ``KeyboardInterrupt``, and 1 with a traceback for any
other exception (a crash). An error is printed as ``lcsim (python): error: TYPE: MESSAGE``. The runner gives every
``$LCSIM plan|simulate`` case of the corpus to it as well; a command line it has no equivalent for (another option)
prints "lcsim (python): not applicable" and exits 77; the case is left to the command line.

- ``--dict``: the scenario goes in as a dict (read with Python's own json, which takes NaN), not as a path.
- ``--set KEY=JSON``: sets the dotted KEY of that dict (``cluster.ib_GBps=NaN``); implies ``--dict``.
- ``--sleeping-policy S``: the scenario's policies become deepspeed and a Python policy whose ``plan()`` sleeps S
  seconds; ``--sigint-after S`` sends this process SIGINT S seconds after the run starts. The run must end with
  KeyboardInterrupt within 2 s of the signal, leaving no child process and no temporary file in the folder.
"""
import json
import os
import signal
import sys
import threading
import time
import traceback

NOT_APPLICABLE = 77


def not_applicable(why):
    """A command line the package has no counterpart for: the runner leaves the case to the command line."""
    print(f"lcsim (python): not applicable: {why}", file=sys.stderr)
    sys.exit(NOT_APPLICABLE)


def parse(argv):
    if len(argv) < 2 or argv[0] not in ("load", "plan", "simulate"):
        not_applicable("expected load, plan or simulate and a file")
    if argv[1] == "":
        not_applicable("an empty file argument is the command line's own check")
    options = {"command": argv[0], "file": argv[1], "samples": None, "iterations": None, "trace": None,
               "dict": False, "set": [], "policies": [], "sleep": None, "sigint_after": None}
    takes_value = {"--samples": "samples", "-n": "iterations", "--iterations": "iterations", "--trace": "trace",
                   "--set": "set", "--policy": "policies", "--sleeping-policy": "sleep",
                   "--sigint-after": "sigint_after"}
    rest = argv[2:]
    while rest:
        option = rest.pop(0)
        if option == "--dict":
            options["dict"] = True
        elif option in takes_value and rest:
            key = takes_value[option]
            value = rest.pop(0)
            if key in ("set", "policies"):
                options[key].append(value)
            else:
                options[key] = value
        else:
            not_applicable(f"the option {option[:40]!r}")
    return options


def scenario_argument(options):
    """The path, or the dict read from it with Python's json and patched by --set."""
    if not options["dict"] and not options["set"]:
        return options["file"]
    with open(options["file"], encoding="utf-8") as f:
        document = json.load(f)
    for assignment in options["set"]:
        path, _, value = assignment.partition("=")
        node = document
        keys = path.split(".")
        for key in keys[:-1]:
            node = node.setdefault(key, {})
        node[keys[-1]] = json.loads(value)
    return document


def children():
    """This process's children still running or unreaped."""
    try:
        with open(f"/proc/{os.getpid()}/task/{os.getpid()}/children", encoding="utf-8") as f:
            return f.read().split()
    except OSError:
        return []


def run(options):
    import lcsim

    scenario = scenario_argument(options)
    if options["sleep"] is not None:
        seconds = float(options["sleep"])

        class SleepyPolicy(lcsim.Policy):
            def plan(self, context, batches):
                time.sleep(seconds)
                return []

        lcsim.register_policy("sleepy", SleepyPolicy)
        if not isinstance(scenario, dict):
            scenario = lcsim.Scenario.load(scenario).to_dict()
        scenario = lcsim.Scenario.from_dict(scenario | {"policies": [{"kind": "deepspeed"}, {"kind": "sleepy"}]},
                                            file=options["file"])
    if options["command"] == "load":
        loaded = lcsim.Scenario.load(scenario) if not isinstance(scenario, dict) else lcsim.Scenario.from_dict(scenario)
        print(f"loaded {loaded!r}")
        return
    arguments = {"progress": False, "policies": options["policies"]}
    if options["samples"] is not None:
        arguments["samples"] = int(options["samples"])
    if options["iterations"] is not None:
        arguments["iterations"] = int(options["iterations"])
    if options["trace"] is not None:
        if options["command"] != "simulate":
            not_applicable("--trace is simulate's")
        arguments["trace"] = options["trace"]
    results = getattr(lcsim, options["command"])(scenario, **arguments)
    print(results.table(), end="")


def main(argv):
    options = parse(argv)
    signalled = []
    if options["sigint_after"] is not None:
        def interrupt():
            signalled.append(time.monotonic())
            os.kill(os.getpid(), signal.SIGINT)

        threading.Timer(float(options["sigint_after"]), interrupt).start()
    import lcsim

    try:
        run(options)
        return 0
    except KeyboardInterrupt:
        late = time.monotonic() - signalled[0] if signalled else 0.0
        left = children()
        temporaries = [name for name in os.listdir(".") if name.startswith(".lcsim-tmp.")]
        print(f"lcsim (python): KeyboardInterrupt {late:.1f} s after the signal; children left: {len(left)}; "
              f"temporary files left: {len(temporaries)}", file=sys.stderr)
        return 130 if late < 2.0 and not left and not temporaries else 1
    except lcsim.InputError as e:
        print(f"lcsim (python): error: InputError: {e}", file=sys.stderr)
        return 2
    except lcsim.PlanningError as e:
        print(f"lcsim (python): error: PlanningError: {e}", file=sys.stderr)
        return 3
    except Exception:  # a crash: the traceback says where
        traceback.print_exc()
        return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
