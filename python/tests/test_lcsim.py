"""The Python package against the command line: the same scenario gives the same results document, bad input
raises Python exceptions naming the key, and simulations run one after another in one interpreter."""
import json
import os
import subprocess
import sys

import pytest

import lcsim

SOURCE = os.environ.get("LCSIM_SOURCE_DIR", os.path.join(os.path.dirname(__file__), "..", ".."))
BINARY = os.environ.get("LCSIM_BINARY", os.path.join(SOURCE, "build", "bin", "lcsim"))
DEFAULT = os.path.join(SOURCE, "scenarios", "default.json")


def cli_results(tmp_path, command, *args):
    out = tmp_path / f"{command}.json"
    subprocess.run([BINARY, command, DEFAULT, "--json", str(out), "-q", *args], check=True)
    return json.loads(out.read_text())


def test_lists_name_the_registries():
    assert "skrull" in lcsim.policies() and "hydraulis" in lcsim.policies()
    assert lcsim.topologies() == ["fat-tree", "rail-optimized", "nvlink-domain"]
    assert "H100-SXM" in lcsim.gpus()
    assert "Qwen2.5-0.5B" in lcsim.models()
    assert "wikipedia" in lcsim.distributions()


def test_scenarios_are_data():
    s = lcsim.Scenario.load(DEFAULT)
    d = s.to_dict()
    assert d["model"] == "Qwen2.5-0.5B"
    d["training"]["iterations"] = 99  # a copy: the scenario does not change
    assert s.to_dict()["training"]["iterations"] == 10
    t = s.with_(**{"training.bucket_size_tokens": 26_000, "cluster.topology": "rail-optimized"})
    assert t.to_dict()["training"]["bucket_size_tokens"] == 26_000
    assert t.to_dict()["cluster"]["topology"] == "rail-optimized"
    assert "bucket_size_tokens" not in s.with_(**{"training.bucket_size_tokens": None}).to_dict()["training"]
    # Relative paths resolve against the file's folder, for a dict too.
    again = lcsim.Scenario.from_dict(s.to_dict(), file=DEFAULT)
    assert again.to_dict() == s.to_dict()


def test_bad_input_raises_naming_the_key():
    s = lcsim.Scenario.load(DEFAULT)
    with pytest.raises(lcsim.InputError, match=r"cluster\.pxn"):
        s.with_(**{"cluster.pxn": True})
    with pytest.raises(lcsim.InputError, match=r"training\.recompute"):
        s.with_(**{"training.recompute": "some"})
    with pytest.raises(ValueError):  # InputError is a ValueError
        s.with_(**{"cluster.nodes": 0})
    with pytest.raises(lcsim.InputError, match="no object 'nowhere'"):
        s.with_(**{"nowhere.key": 1})
    with pytest.raises(lcsim.InputError, match="cannot open file"):
        lcsim.Scenario.load(os.path.join(SOURCE, "no-such-scenario.json"))
    with pytest.raises(lcsim.InputError, match="a JSON object"):
        lcsim.Scenario.from_dict([1, 2])
    with pytest.raises(TypeError):
        lcsim.plan(42)


def test_each_policy_may_bring_its_own_layout():
    s = lcsim.Scenario.load(DEFAULT).with_(**{
        "training.iterations": 1,
        "policies": [{"kind": "deepspeed"}, {"kind": "deepspeed", "label": "dp32", "parallel": {"cp": 1}}],
    })
    r = lcsim.plan(s, samples=1, progress=False)
    by_label = {p["name"]: p for p in r.to_dict()["policies"]}
    # Same sequences, other layouts: DP 32 x CP 1 runs no all-to-all, DP 4 x CP 8 does.
    assert by_label["deepspeed"]["metrics"]["cr"] == 1.0
    assert by_label["dp32"]["metrics"]["cr"] == 0.0
    with pytest.raises(lcsim.InputError, match=r"policies\[1\]\.parallel"):
        s.with_(**{"policies": [{"kind": "deepspeed"}, {"kind": "deepspeed", "label": "x", "parallel": {"cp": 3}}]})


def test_plan_gives_the_command_lines_results(tmp_path):
    results = lcsim.plan(DEFAULT, samples=1, iterations=2)
    assert results.to_dict() == cli_results(tmp_path, "plan", "--samples", "1", "-n", "2")
    rows = results.rows()
    # One row per policy and iteration (re-batching policies, packing here, take other iteration counts).
    assert len(rows) == sum(len(p["iterations"]) for p in results.to_dict()["policies"])
    assert sum(r["policy"] == "skrull" for r in rows) == 2
    assert {r["policy"] for r in rows} == {p["name"] for p in results.policies}
    only = lcsim.plan(DEFAULT, samples=1, iterations=2, policies=["skrull"])
    assert [p["name"] for p in only.policies] == ["deepspeed", "skrull"]  # the baseline always runs


def test_the_winner_and_the_speedups_reference_fit_in_memory():
    results = lcsim.plan(DEFAULT, samples=2, iterations=2, progress=False)
    assert results.out_of_memory == []
    assert results.speedup_reference == "deepspeed"  # the baseline fits: it is the reference
    assert results.winner in [p["name"] for p in results.policies]
    assert results.winner not in results.out_of_memory


def test_sampled_worlds_on_threads_give_the_same_results():
    one = lcsim.plan(DEFAULT, samples=4, iterations=2, policies=["skrull"], jobs=1, progress=False)
    three = lcsim.plan(DEFAULT, samples=4, iterations=2, policies=["skrull"], jobs=3, progress=False)
    assert three.to_dict() == one.to_dict()
    simulated = lcsim.simulate(DEFAULT, samples=3, iterations=1, policies=["skrull"], jobs=2, progress=False)
    assert simulated.to_dict() == lcsim.simulate(DEFAULT, samples=3, iterations=1, policies=["skrull"],
                                                 progress=False).to_dict()
    with pytest.raises(lcsim.InputError, match="jobs"):
        lcsim.plan(DEFAULT, samples=2, jobs=0)
    with pytest.raises(lcsim.InputError, match="jobs"):
        lcsim.simulate(DEFAULT, samples=2, jobs=0)


def test_simulate_runs_again_and_again_and_matches_the_command_line(tmp_path):
    first = lcsim.simulate(DEFAULT, samples=1, iterations=2)
    second = lcsim.simulate(lcsim.Scenario.load(DEFAULT), samples=1, iterations=2)
    assert first.to_dict() == second.to_dict()
    assert first.to_dict() == cli_results(tmp_path, "simulate", "--samples", "1", "-n", "2")
    trace = tmp_path / "t.json"
    lcsim.simulate(DEFAULT, samples=1, iterations=1, policies=["skrull"], trace=trace)
    assert json.loads(trace.read_text())["traceEvents"]
    with pytest.raises(lcsim.InputError, match=r"cluster\.topology"):
        lcsim.simulate(lcsim.Scenario.load(DEFAULT).to_dict() | {"cluster": {"gpu": "H100-SXM", "nodes": 4,
                                                                             "topology": "torus"}})


def test_sampled_worlds_give_intervals():
    results = lcsim.plan(DEFAULT, samples=4, iterations=2)
    skrull = next(p for p in results.policies if p["name"] == "skrull")
    interval = skrull["interval"]["speedup"]
    assert interval["p10"] <= interval["p50"] <= interval["p90"]


def test_summary_has_one_row_per_policy():
    pandas = pytest.importorskip("pandas")
    results = lcsim.plan(DEFAULT, samples=4, iterations=2)
    frame = results.summary()
    assert isinstance(frame, pandas.DataFrame)
    names = [p["name"] for p in results.policies]
    assert list(frame.index) == names
    assert frame.loc["skrull", "speedup_p10"] <= frame.loc["skrull", "speedup_p90"]
    assert frame.loc["skrull", "iterations"] == 2
    assert list(frame.index[frame["winner"]]) == [results.winner]
    by_name = {p["name"]: p for p in results.policies}
    for name, row in frame.iterrows():
        assert row["tokens_per_s"] == by_name[name]["tokens_per_s"]
        assert row["fits"] == (by_name[name]["oom_iterations"] == 0)
        assert row["speedup_p10"] == by_name[name]["interval"]["speedup"]["p10"]


def test_to_pandas_has_a_row_per_policy_and_iteration():
    pandas = pytest.importorskip("pandas")
    results = lcsim.plan(DEFAULT, samples=1, iterations=2)
    frame = results.to_pandas()
    assert isinstance(frame, pandas.DataFrame)
    assert len(frame) == len(results.rows())
    assert list(frame[frame["policy"] == "skrull"]["iteration"]) == [0, 1]
    assert set(frame.columns) >= {"policy", "iteration", "seconds", "tokens", "speedup_vs_baseline"}


def test_sweep_validate_and_tune_run_the_command_line(tmp_path):
    sweep_file = tmp_path / "sweep.json"
    sweep_file.write_text(json.dumps({"name": "t", "base": DEFAULT, "mode": "plan", "iterations": 1,
                                      "axes": [{"name": "gpus", "values": [8, 16]},
                                               {"name": "cluster", "values": [{"label": "fat"},
                                                                              {"label": "rail",
                                                                               "topology": "rail-optimized"}]}]}))
    swept = lcsim.sweep(sweep_file)
    assert swept.to_dict()["schema"] == "lcsim-sweep/1"
    rows = swept.rows()
    assert {(r["gpus"], r["cluster"]) for r in rows} == {(8, "fat"), (8, "rail"), (16, "fat"), (16, "rail")}
    with pytest.raises(lcsim.InputError, match="no-such-sweep.json"):
        lcsim.sweep(tmp_path / "no-such-sweep.json")

    entry = "h200-live-wikipedia-skrull-vs-deepspeed"
    seen = []
    validated = lcsim.validate(only=[entry], samples=1, progress=lambda *update: seen.append(update))
    assert [r["id"] for r in validated.rows()] == [entry]
    assert seen and seen[-1][0] == seen[-1][1]  # the command's progress, through the pipe, to the end
    with pytest.raises(lcsim.InputError, match="no-such-entry"):
        lcsim.validate(only=["no-such-entry"], samples=1)
    # A falling trend with published values: its factor is first over last point, published and predicted.
    trend = "torchtitan-t1-t3-8b-gpus-trend-fsdp"
    trended = lcsim.validate(only=[trend], samples=1, progress=False)
    [row], [entry] = trended.rows(), trended.to_dict()["entries"]
    first, last = entry["points"][0], entry["points"][-1]
    factor = row["series_factor"]
    assert factor["published"] == pytest.approx(first["published"] / last["published"])
    assert factor["predicted"] == pytest.approx(first["predicted"] / last["predicted"])
    assert factor["error"] == pytest.approx(factor["predicted"] / factor["published"] - 1)
    assert "series_factor" not in validated.rows()[0]

    scenario = lcsim.Scenario.load(DEFAULT).with_(**{"training.iterations": 1, "cluster.nodes": 1,
                                                     "parallel.dp": 1, "policies": [{"kind": "deepspeed"}],
                                                     "baseline": "deepspeed"})
    tuned = lcsim.tune(scenario, budget_s=30)
    assert tuned.to_dict()["schema"] == "lcsim-tune/1"
    assert all(r["policy"] == "deepspeed" for r in tuned.rows())


def test_the_package_starts_no_process_of_its_own():
    """Sweeps, validation and tuning run in this process through the engine's Runner: no subprocess module."""
    source = open(os.path.join(SOURCE, "python", "lcsim", "__init__.py"), encoding="utf-8").read()
    assert "subprocess" not in source and "Popen" not in source


def test_progress_reports_like_the_command_line_and_can_be_silenced(capfd):
    seen = []
    lcsim.simulate(DEFAULT, samples=3, iterations=2, progress=lambda done, total, what: seen.append((done, total, what)))
    simulated = [s for s in seen if s[2].startswith("iterations simulated")]
    assert simulated[-1][0] == simulated[-1][1] > 0  # every iteration of every policy
    assert [s[0] for s in simulated] == sorted(s[0] for s in simulated)
    assert seen[-1][2] == "sampled worlds" and seen[-1][0] == seen[-1][1]
    seen.clear()
    lcsim.plan(DEFAULT, samples=1, iterations=2, progress=lambda *a: seen.append(a))
    assert seen[-1][0] == seen[-1][1] == len(lcsim.Scenario.load(DEFAULT).to_dict()["policies"])
    capfd.readouterr()
    lcsim.plan(DEFAULT, samples=1, iterations=2, progress=False)
    assert capfd.readouterr().err == ""
    lcsim.plan(DEFAULT, samples=1, iterations=2)
    assert "policies planned" in capfd.readouterr().err
    with pytest.raises(TypeError, match="progress"):
        lcsim.plan(DEFAULT, samples=1, progress="yes")

    class Stop(Exception):
        pass

    def stop(done, total, what):
        raise Stop()

    with pytest.raises(Stop):  # the caller's exception comes through, and the child process is ended
        lcsim.simulate(DEFAULT, samples=1, iterations=2, progress=stop)
    with pytest.raises(Stop):
        lcsim.plan(DEFAULT, samples=1, iterations=2, progress=stop)


def test_the_notebook_runs(tmp_path):
    runner = os.path.join(SOURCE, "tools", "run_notebook.py")
    notebook = os.path.join(SOURCE, "examples", "notebooks", "compare-policies.ipynb")
    # As docs/python.md runs it: from the repository root, without LCSIM_SOURCE_DIR; and from its own folder.
    env = {k: v for k, v in os.environ.items() if k != "LCSIM_SOURCE_DIR"}
    for cwd in (SOURCE, os.path.dirname(notebook)):
        run = subprocess.run([sys.executable, runner, notebook], capture_output=True, text=True, cwd=cwd, env=env)
        assert run.returncode == 0, run.stderr
    assert "code cells ran" in run.stdout
    broken = json.loads(open(notebook, encoding="utf-8").read())
    broken["cells"].append({"cell_type": "code", "metadata": {}, "execution_count": None, "outputs": [],
                            "source": ["lcsim.plan('no-such-scenario.json')\n"]})
    (tmp_path / "broken.ipynb").write_text(json.dumps(broken))
    run = subprocess.run([sys.executable, runner, str(tmp_path / "broken.ipynb")], capture_output=True, text=True)
    assert run.returncode == 1
    assert "InputError" in run.stderr and "cannot open file" in run.stderr
