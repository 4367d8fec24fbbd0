"""Policies written in Python: the longest-first example equals the C++ example of examples/custom-policy (its
table byte for byte, its simulation figure for figure), and whatever a Python policy does wrong -- raise, return the
wrong type, break the validator's rules, refuse its options, keep its context -- becomes a Python exception."""
import json
import os
import re
import subprocess
import sys

import pytest

import lcsim

SOURCE = os.environ.get("LCSIM_SOURCE_DIR", os.path.join(os.path.dirname(__file__), "..", ".."))
CUSTOM = os.environ.get("LCSIM_CUSTOM_BINARY", os.path.join(SOURCE, "build", "examples", "custom-policy",
                                                            "lcsim-custom"))
EXAMPLE = os.path.join(SOURCE, "examples", "custom-policy", "scenario.json")
sys.path.insert(0, os.path.join(SOURCE, "examples", "python-policy"))
from longest_first import LongestFirst  # noqa: E402


def masked(table):
    """The golden tests' mask: a policy row's trailing planning milliseconds vary from run to run."""
    return re.sub(r" +[0-9]+\.[0-9]\n", " <ms>\n", table)


def example_document(policies):
    """The C++ example's scenario (whose "longest-first" this process does not know) with other policies."""
    with open(EXAMPLE, encoding="utf-8") as f:
        return json.load(f) | {"policies": policies}


def example(kind, **entry):
    """The example scenario with DeepSpeed and one policy of `kind`, one iteration."""
    scenario = lcsim.Scenario.from_dict(example_document([{"kind": "deepspeed"}, {"kind": kind, **entry}]),
                                        file=EXAMPLE)
    return scenario.with_(**{"training.iterations": 1})


def test_the_example_prints_the_cpp_examples_table():
    run = subprocess.run([sys.executable, os.path.join(SOURCE, "examples", "python-policy", "longest_first.py")],
                         cwd=SOURCE, capture_output=True, text=True, check=True)
    with open(os.path.join(SOURCE, "examples", "custom-policy", "expected-plan.txt"), encoding="utf-8") as f:
        assert masked(run.stdout) == f.read()


def test_it_simulates_beside_skrull_as_the_cpp_example(tmp_path):
    lcsim.register_policy("longest-first-sim", LongestFirst)
    scenario = lcsim.Scenario.from_dict(example_document([
        {"kind": "deepspeed"}, {"kind": "skrull"}, {"kind": "longest-first-sim", "label": "longest-first"}]),
        file=EXAMPLE)
    python = lcsim.simulate(scenario, samples=1).to_dict()
    cpp_scenario = tmp_path / "s.json"
    cpp_scenario.write_text(json.dumps(scenario.to_dict() | {"profile": os.path.join(
        SOURCE, "calibrate", "profiles", "h100-sxm-default.json")} | {"policies": [
            {"kind": "deepspeed"}, {"kind": "skrull"}, {"kind": "longest-first", "label": "longest-first"}]}))
    out = tmp_path / "cpp.json"
    subprocess.run([CUSTOM, "simulate", str(cpp_scenario), "--samples", "1", "-q", "--json", str(out)], check=True)
    cpp = json.loads(out.read_text())
    assert [p["name"] for p in python["policies"]] == ["deepspeed", "skrull", "longest-first"]
    for mine, theirs in zip(python["policies"], cpp["policies"]):
        assert mine["name"] == theirs["name"]
        assert mine["iterations"] == theirs["iterations"]
        assert mine["tokens_per_s"] == theirs["tokens_per_s"]


class Raises(lcsim.Policy):
    def plan(self, context, batches):
        raise KeyError("no such rank")


class ReturnsANumber(lcsim.Policy):
    def plan(self, context, batches):
        return 42


class ReturnsTuples(lcsim.Policy):
    def plan(self, context, batches):
        return [lcsim.IterationPlan([[[(s.id, s.tokens)] for s in batch]] + [[]] * (context.dp - 1))
                for batch in batches]


class DropsASequence(lcsim.Policy):
    def plan(self, context, batches):
        plans = LongestFirst().plan(context, batches)
        for plan in plans:
            plan.replicas[0].pop()
        return plans


class PlacesOutsideTheGroup(lcsim.Policy):
    def plan(self, context, batches):
        plans = LongestFirst().plan(context, batches)
        plans[0].replicas[1][0][0].cp_rank = context.cp  # CP ranks are 0 .. cp - 1
        return plans


class KeepsItsContext(lcsim.Policy):
    kept = None

    def plan(self, context, batches):
        KeepsItsContext.kept = context
        return LongestFirst().plan(context, batches)


@pytest.mark.parametrize("cls, message", [
    (Raises, r"plan\(\) raised KeyError: 'no such rank'"),
    (ReturnsANumber, r"plan\(\) returned int where a list of lcsim.IterationPlan was expected at the top level"),
    (ReturnsTuples, r"without 'sequence_id'"),
    (DropsASequence, r"invalid plan for iteration 0: sequence \d+ \(\d+ tokens\) is not placed"),
    (PlacesOutsideTheGroup, r"invalid plan for iteration 0: replica 1, micro-batch 0: .*on cp_rank 8"),
])
def test_a_broken_policy_raises_planning_error(cls, message):
    kind = "broken-" + cls.__name__.lower()
    lcsim.register_policy(kind, cls)
    with pytest.raises(lcsim.PlanningError, match=f"policy {kind}: .*{message}|policy {kind} .*{message}"):
        lcsim.plan(example(kind), samples=1)
    with pytest.raises(lcsim.PlanningError):  # in the simulation's child process too
        lcsim.simulate(example(kind), samples=1)


def test_the_context_answers_inside_plan_only():
    lcsim.register_policy("keeps-context", KeepsItsContext)
    lcsim.plan(example("keeps-context"), samples=1)
    with pytest.raises(RuntimeError, match="valid only inside plan"):
        KeepsItsContext.kept.sequence_seconds(1024)


def test_options_are_keyword_arguments_and_refusals_name_the_key():
    lcsim.register_policy("longest-first-options", LongestFirst)
    by_tokens = lcsim.plan(example("longest-first-options", options={"balance_by": "tokens"}), samples=1)
    assert by_tokens.policies[1]["name"] == "longest-first-options"
    with pytest.raises(lcsim.InputError, match=r"policies\[1\]\.options: .*balance_by"):
        lcsim.plan(example("longest-first-options", options={"balance_by": "weight"}), samples=1)
    with pytest.raises(lcsim.InputError, match=r"policies\[1\]\.options: .*unexpected keyword argument 'unknown'"):
        lcsim.plan(example("longest-first-options", options={"unknown": 1}), samples=1)


def test_registration_takes_a_policy_class_once():
    with pytest.raises(TypeError, match="subclass of lcsim.Policy"):
        lcsim.register_policy("not-a-policy", object)
    with pytest.raises(ValueError, match="already taken"):
        lcsim.register_policy("skrull", LongestFirst)
    lcsim.register_policy("longest-first-once", LongestFirst)
    assert "longest-first-once" in lcsim.policies()
    with pytest.raises(ValueError, match="already taken"):
        lcsim.register_policy("longest-first-once", LongestFirst)


def test_it_tunes_as_the_cpp_example(tmp_path):
    """lcsim.tune runs in this process for a Python policy (the command cannot load it): every candidate's estimate
    and simulation, and the verdict, are the C++ example's under `lcsim-custom tune`."""
    lcsim.register_policy("longest-first-tune", LongestFirst)
    tune = {"layout": {"tp": [1], "pp": [1]}, "simulate_top": 1}
    document = example_document([{"kind": "deepspeed"}, {"kind": "longest-first-tune", "label": "longest-first"}])
    document["profile"] = os.path.join(SOURCE, "calibrate", "profiles", "h100-sxm-default.json")
    document["training"]["iterations"] = 1
    document["tune"] = tune
    python = lcsim.tune(lcsim.Scenario.from_dict(document, file=EXAMPLE)).to_dict()
    document["policies"][1]["kind"] = "longest-first"
    (tmp_path / "s.json").write_text(json.dumps(document))
    subprocess.run([CUSTOM, "tune", str(tmp_path / "s.json"), "--quiet", "--json", str(tmp_path / "t.json")],
                   check=True)
    cpp = json.loads((tmp_path / "t.json").read_text())
    fields = ("policy", "layout", "settings", "estimate_tokens_per_s", "simulated_tokens_per_s", "pruned", "failed")
    assert [{k: c[k] for k in fields} for c in python["candidates"]] == \
        [{k: c[k] for k in fields} for c in cpp["candidates"]]
    assert any(c["simulated"] for c in python["candidates"])  # its simulate step ran here too
    assert python["winner"] == cpp["winner"] and python["policies"] == cpp["policies"]


def test_the_context_prices_as_the_cost_model():
    seen = {}

    class Looks(lcsim.Policy):
        def plan(self, context, batches):
            seen.update(dp=context.dp, cp=context.cp, vpp=context.virtual_pp, model=context.model,
                        layers=context.layers, short=context.sequence_seconds(1024),
                        long=context.sequence_seconds(65536), spread=context.sequence_seconds(65536, cp=1),
                        capacity=context.capacity_bytes(), per_token=context.activation_bytes_per_token())
            return LongestFirst().plan(context, batches)

    lcsim.register_policy("looks", Looks)
    lcsim.plan(example("looks"), samples=1)
    scenario = example_document([])
    assert seen["dp"] * seen["cp"] == scenario["cluster"]["nodes"] * scenario["cluster"]["gpus_per_node"]
    assert seen["model"] == scenario["model"] and seen["layers"] > 0
    assert seen["vpp"] == 1  # no interleaving unless parallel.virtual_pp says so
    assert 0 < seen["short"] < seen["long"]
    assert seen["spread"] > seen["long"]  # one GPU does what cp GPUs share
    assert seen["capacity"] > 1e9 and seen["per_token"] > 0


def write_sweep(folder, base_document, mode):
    """A two-point sweep (GPUs 16 and 32) over `base_document`, written with its base beside it."""
    (folder / "base.json").write_text(json.dumps(base_document))
    (folder / "sweep.json").write_text(json.dumps({
        "name": "python-policy-sweep", "base": "base.json", "mode": mode, "iterations": 2,
        "axes": [{"name": "gpus", "values": [16, 32]}]}))
    return folder / "sweep.json"


@pytest.mark.parametrize("mode", ["plan", "simulate"])
def test_a_sweep_in_process_writes_what_the_command_writes(tmp_path, mode):
    base = example_document([{"kind": "deepspeed"}, {"kind": "skrull"}])
    base["profile"] = os.path.join(SOURCE, "calibrate", "profiles", "h100-sxm-default.json")
    sweep_file = write_sweep(tmp_path, base, mode)
    subprocess.run([CUSTOM, "sweep", str(sweep_file), "--out", str(tmp_path / "out"), "--quiet"], check=True)
    command = json.loads((tmp_path / "out" / "sweep.json").read_text())
    here = lcsim.sweep(sweep_file, out=tmp_path / "out", progress=False).to_dict()
    assert here == command  # the same folder, so the same point files; the same merged document


def test_a_python_policy_sweeps_beside_the_built_in_ones(tmp_path):
    lcsim.register_policy("longest-first-sweep", LongestFirst)
    base = example_document([{"kind": "deepspeed"}, {"kind": "longest-first-sweep"}])
    base["profile"] = os.path.join(SOURCE, "calibrate", "profiles", "h100-sxm-default.json")
    results = lcsim.sweep(write_sweep(tmp_path, base, "plan"), progress=False)
    rows = results.rows()
    assert [(r["gpus"], r["policy"]) for r in rows] == [(16, "deepspeed"), (16, "longest-first-sweep"),
                                                        (32, "deepspeed"), (32, "longest-first-sweep")]
