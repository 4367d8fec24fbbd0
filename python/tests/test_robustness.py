"""The Python door as strict as the command line (issue #55): files read by the command line's reader (no hang on
a device or a pipe, the 64 MiB limit, strict JSON), dicts checked as files are (NaN and infinity refused by key),
messages bounded, and Ctrl-C during a Python policy's plan() raising KeyboardInterrupt at once, with no child process
and no temporary file left. Anything that could hang runs in a child interpreter with a timeout."""
import json
import os
import subprocess
import sys
import textwrap
import time

import pytest

import lcsim

SOURCE = os.environ.get("LCSIM_SOURCE_DIR", os.path.join(os.path.dirname(__file__), "..", ".."))
DEFAULT = os.path.join(SOURCE, "scenarios", "default.json")


def python(code, cwd=None, timeout=60):
    """Runs `code` in a fresh interpreter that imports this lcsim; fails the test if it runs past `timeout`."""
    package_folder = os.path.dirname(os.path.dirname(os.path.abspath(lcsim.__file__)))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([package_folder, os.environ.get("PYTHONPATH", "")]))
    start = time.monotonic()
    run = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, cwd=cwd,
                         env=env, timeout=timeout)
    return run, time.monotonic() - start


def quick_dict():
    d = lcsim.Scenario.load(DEFAULT).to_dict()
    d["training"]["iterations"] = 1
    d["policies"] = [{"kind": "deepspeed"}]
    d["profile"] = os.path.join(os.path.dirname(DEFAULT), d["profile"])  # a dict's relative paths: the working folder's
    return d


@pytest.mark.parametrize("call", ["lcsim.Scenario.load", "lcsim.plan", "lcsim.simulate"])
def test_a_device_is_refused_at_once(call):
    run, seconds = python(f"""
        import lcsim
        try:
            {call}("/dev/zero")
        except lcsim.InputError as e:
            print("InputError:", e)
        """, timeout=30)
    assert "InputError: /dev/zero: is a device, not a regular file" in run.stdout, run.stderr
    assert seconds < 20


def test_a_pipe_is_refused_without_blocking(tmp_path):
    os.mkfifo(tmp_path / "f.json")
    run, _ = python("""
        import lcsim
        for call in (lcsim.Scenario.load, lcsim.plan):
            try:
                call("f.json")
            except lcsim.InputError as e:
                print("InputError:", e)
        """, cwd=tmp_path, timeout=30)
    assert run.stdout.count("InputError: f.json: is a pipe, not a regular file") == 2, run.stderr


def test_the_size_limit_is_the_command_lines(tmp_path):
    big = tmp_path / "big.json"
    with open(big, "w") as f:
        f.write('{"name": "' + "a" * (70 << 20) + '"}')
    with pytest.raises(lcsim.InputError, match=r"big\.json: is 7340033\d bytes, more than the 64 MiB"):
        lcsim.Scenario.load(big)
    with pytest.raises(lcsim.InputError, match="more than the 64 MiB"):
        lcsim.Scenario.from_dict(quick_dict() | {"name": "a" * (70 << 20)})


def test_a_files_json_is_read_strictly(tmp_path):
    duplicate = tmp_path / "dup.json"
    duplicate.write_text('{"seed": 1, "seed": 2}')
    with pytest.raises(lcsim.InputError, match=r"dup\.json: seed: duplicate key"):
        lcsim.Scenario.load(duplicate)
    nan = tmp_path / "nan.json"
    nan.write_text(json.dumps(quick_dict()).replace('"ib_GBps": 50', '"ib_GBps": NaN'))
    with pytest.raises(lcsim.InputError, match=r"nan\.json: not valid JSON: parse error") as error:
        lcsim.Scenario.load(nan)
    assert "json.exception" not in str(error.value) and "parse_error" not in str(error.value)
    with pytest.raises(lcsim.InputError, match="the file name is empty|cannot open file"):
        lcsim.Scenario.load("")
    with pytest.raises(lcsim.InputError, match="cannot open file"):
        lcsim.Scenario.load(tmp_path / "missing.json")


def test_profiles_and_traces_go_through_the_same_reader(tmp_path):
    os.mkfifo(tmp_path / "t.txt")
    d = quick_dict()
    with pytest.raises(lcsim.InputError, match="/dev/zero: is a device"):
        lcsim.plan(d | {"profile": "/dev/zero"}, samples=1, progress=False)
    d["dataset"] = {"trace": "t.txt"}
    with pytest.raises(lcsim.InputError, match=r"t\.txt: is a pipe"):
        lcsim.plan(lcsim.Scenario.from_dict(d, file=tmp_path / "s.json"), samples=1, progress=False)


@pytest.mark.parametrize("value", [float("nan"), float("inf"), -float("inf")])
def test_a_dict_with_a_non_finite_number_names_the_key(value):
    d = quick_dict()
    d["cluster"]["ib_GBps"] = value
    with pytest.raises(lcsim.InputError) as error:
        lcsim.plan(d, samples=1, progress=False)
    message = str(error.value)
    assert message.startswith("<dict>: cluster.ib_GBps: must be a finite number"), message
    for never in ("json.exception", "parse_error", "scenario.json", "not JSON"):
        assert never not in message
    d = quick_dict()
    d["policies"] = [{"kind": "deepspeed", "options": {"x": [1.0, value]}}]
    with pytest.raises(lcsim.InputError, match=r"<dict>: policies\[0\]\.options\.x\[1\]: must be a finite"):
        lcsim.Scenario.from_dict(d)


def test_a_dict_holds_json_values_only():
    with pytest.raises(lcsim.InputError, match=r"<dict>: cluster: key 1 is not a string"):
        lcsim.Scenario.from_dict(quick_dict() | {"cluster": {1: 2}})
    with pytest.raises(lcsim.InputError, match=r"<dict>: training\.iterations: expected a JSON value .* got set"):
        lcsim.Scenario.from_dict(quick_dict() | {"training": {"iterations": {1}}})
    deep = []
    for _ in range(100_000):
        deep = [deep]
    with pytest.raises(lcsim.InputError, match="nested deeper than 64 levels"):
        lcsim.Scenario.from_dict(quick_dict() | {"deep": deep})
    # An unknown key in a dict is named as in a file, with the dict's name rather than a file's.
    with pytest.raises(lcsim.InputError, match=r"^<dict>: cluster\.pxn: unknown key"):
        lcsim.Scenario.from_dict(quick_dict() | {"cluster": quick_dict()["cluster"] | {"pxn": True}})
    # With a file, the file is named, as before.
    with pytest.raises(lcsim.InputError, match=r"default\.json: cluster\.pxn: unknown key"):
        lcsim.Scenario.from_dict(quick_dict() | {"cluster": quick_dict()["cluster"] | {"pxn": True}}, file=DEFAULT)


def test_echoed_values_are_cut_with_an_ellipsis(tmp_path):
    name = "a" * 300 + ".json"
    with pytest.raises(lcsim.InputError) as error:
        lcsim.Scenario.load(tmp_path / name)
    message = str(error.value)
    assert "\u2026" in message and "a" * 81 not in message, message
    assert message.split("\u2026")[1].startswith("a" * 20) and ".json" in message  # its end, the name, is shown
    key = "k" * 100_000
    with pytest.raises(lcsim.InputError) as error:
        lcsim.Scenario.from_dict(quick_dict() | {"cluster": quick_dict()["cluster"] | {key: 1}})
    assert len(str(error.value)) < 300, str(error.value)
    with pytest.raises(lcsim.InputError) as error:
        lcsim.plan(quick_dict(), samples=1, policies=["p" * 100_000], progress=False)
    assert len(str(error.value)) < 400 and "\u2026" in str(error.value), str(error.value)[:2000]


SLEEPY = """
    import os, signal, sys, threading, time
    import lcsim

    class Sleepy(lcsim.Policy):
        def plan(self, context, batches):
            time.sleep(30)
            return []

    lcsim.register_policy("sleepy", Sleepy)
    scenario = lcsim.Scenario.load({default!r}).with_(**{{"training.iterations": 1,
        "policies": [{{"kind": "deepspeed"}}, {{"kind": "sleepy"}}]}})
    sent = []
    def interrupt():
        sent.append(time.monotonic())
        os.kill(os.getpid(), signal.SIGINT)
    threading.Timer(1.0, interrupt).start()
    try:
        lcsim.{call}(scenario, samples=1, progress=False{extra})
        print("returned")
    except KeyboardInterrupt:
        print("KeyboardInterrupt after %.1f s" % (time.monotonic() - sent[0]))
    except BaseException as e:
        print("raised", type(e).__name__, e)
    with open("/proc/%d/task/%d/children" % (os.getpid(), os.getpid())) as f:
        print("children:", len(f.read().split()))
    print("temporaries:", len([n for n in os.listdir(".") if n.startswith(".lcsim-tmp.")]))
"""


@pytest.mark.parametrize("call,extra", [("plan", ""), ("simulate", ", trace='t.json'")])
def test_ctrl_c_in_a_python_policy_raises_keyboard_interrupt_at_once(tmp_path, call, extra):
    run, seconds = python(SLEEPY.format(default=DEFAULT, call=call, extra=extra), cwd=tmp_path, timeout=60)
    lines = run.stdout.splitlines()
    assert lines and lines[0].startswith("KeyboardInterrupt after"), run.stdout + run.stderr
    assert float(lines[0].split()[2]) < 1.5, lines[0]
    assert "children: 0" in lines and "temporaries: 0" in lines, run.stdout
    assert seconds < 20


def test_ctrl_c_while_a_simulation_writes_its_trace_leaves_no_temporary_file(tmp_path):
    """The signal lands in the progress callback while the child writes the trace: the child is killed, and the
    temporary trace it could not remove is removed for it."""
    run, _ = python(f"""
        import os, signal
        import lcsim
        def progress(done, total, what):
            if what.startswith("iterations simulated") and done == 1:
                os.kill(os.getpid(), signal.SIGINT)
        try:
            lcsim.simulate({DEFAULT!r}, samples=1, iterations=3, trace="t.json", progress=progress)
            print("returned")
        except KeyboardInterrupt:
            print("KeyboardInterrupt")
        with open("/proc/%d/task/%d/children" % (os.getpid(), os.getpid())) as f:
            print("children:", len(f.read().split()))
        print("left:", sorted(os.listdir(".")))
        """, cwd=tmp_path, timeout=120)
    assert run.stdout.splitlines() == ["KeyboardInterrupt", "children: 0", "left: []"], run.stdout + run.stderr


def test_a_keyboard_interrupt_raised_in_plan_is_not_a_planning_error():
    class Raises(lcsim.Policy):
        def plan(self, context, batches):
            raise KeyboardInterrupt

    lcsim.register_policy("raises-keyboard-interrupt", Raises)
    d = quick_dict() | {"policies": [{"kind": "deepspeed"}, {"kind": "raises-keyboard-interrupt"}]}
    with pytest.raises(KeyboardInterrupt):
        lcsim.plan(d, samples=1, progress=False)
