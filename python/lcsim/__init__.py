"""lcsim from Python: scenarios as data, `plan` and `simulate` runs, results as dicts and pandas DataFrames.

A thin layer over lcsim's C++ engine (the module ``lcsim._lcsim``): a scenario is checked, planned and simulated by
the same code as the ``lcsim`` command line, and gives the same results.

>>> import lcsim
>>> scenario = lcsim.Scenario.load("scenarios/default.json")
>>> results = lcsim.plan(scenario.with_(**{"training.iterations": 2}), samples=1)
>>> results.to_pandas()  # one row per policy and iteration

Bad input raises :class:`InputError` (a ``ValueError``) naming the file and key; a policy that cannot plan raises
:class:`PlanningError`. Docs: docs/python.md.
"""

import copy
import dataclasses
import json
import math
import os
import sys
import tempfile
from typing import List, Optional

from . import _lcsim

__all__ = ["Scenario", "Results", "plan", "simulate", "sweep", "validate", "tune", "models", "gpus", "distributions",
           "policies", "topologies", "Policy", "register_policy", "Sequence", "PlanningContext", "Placement",
           "IterationPlan", "InputError", "PlanningError", "__version__"]

InputError = _lcsim.InputError
PlanningError = _lcsim.PlanningError
__version__ = _lcsim.__version__

Sequence = _lcsim.Sequence
PlanningContext = _lcsim.PlanningContext


@dataclasses.dataclass
class Placement:
    """One sequence in a micro-batch: whole on CP rank ``cp_rank`` (Skrull's "local"), or, with ``cp_rank=None``,
    spread over the replica's CP group (Ulysses)."""
    sequence_id: int
    tokens: int
    cp_rank: Optional[int] = None


@dataclasses.dataclass
class IterationPlan:
    """One iteration of a policy's plan: ``replicas[r]`` is DP rank r's micro-batches in order, each a list of
    :class:`Placement`. Every replica runs the scenario's layout (CP, TP, PP and recomputation)."""
    replicas: List[List[List[Placement]]]
    label: str = ""


class Policy:
    """A policy written in Python. Subclass it, implement :meth:`plan`, and register the class with
    :func:`register_policy`; scenarios then name it as any built-in policy, and ``options`` in the scenario's entry
    become the constructor's keyword arguments.

    >>> class RoundRobin(lcsim.Policy):
    ...     def plan(self, context, batches):
    ...         plans = []
    ...         for batch in batches:
    ...             replicas = [[] for _ in range(context.dp)]
    ...             for k, s in enumerate(batch):
    ...                 replicas[k % context.dp].append([lcsim.Placement(s.id, s.tokens)])
    ...             plans.append(lcsim.IterationPlan(replicas))
    ...         return plans
    >>> lcsim.register_policy("round-robin", RoundRobin)
    """

    def plan(self, context, batches):
        """Plans every global batch: ``batches`` is a list of lists of :class:`Sequence` (``.id``, ``.tokens``);
        ``context`` a :class:`PlanningContext` (the layout, the model, ``sequence_seconds(tokens, cp=None)``), valid
        inside this call only. Returns one :class:`IterationPlan` per batch, holding exactly its sequences: the
        validator checks them as it checks any policy's plan and raises :class:`PlanningError` naming the rule."""
        raise NotImplementedError(f"{type(self).__name__}.plan is not implemented")


def register_policy(kind, cls):
    """Makes ``kind`` a policy kind of this process, planned by instances of ``cls`` (a :class:`Policy` subclass).
    It plans and simulates beside the built-in policies in :func:`plan`, :func:`simulate`, :func:`sweep` and
    :func:`tune`. A kind can be registered once."""
    if not (isinstance(cls, type) and issubclass(cls, Policy)):
        raise TypeError(f"register_policy: expected a subclass of lcsim.Policy, got {cls!r}")
    _lcsim.register_policy(str(kind), cls)


def models():
    """Built-in model names, usable as a scenario's ``model``."""
    return list(_lcsim.models())


def gpus():
    """Built-in GPU kinds, usable as ``cluster.gpu``."""
    return list(_lcsim.gpus())


def distributions():
    """Built-in sequence length distributions, usable as ``dataset.distribution``."""
    return list(_lcsim.distributions())


def policies():
    """Registered policy kinds, usable as ``policies[].kind``."""
    return list(_lcsim.policies())


def topologies():
    """Registered cluster topologies, usable as ``cluster.topology``."""
    return list(_lcsim.topologies())


#: What messages and results call a scenario made from a dict without a file: no file of that name exists.
DICT_NAME = "<dict>"

#: The deepest nesting a document from Python may have (a scenario is four levels deep).
_MAX_DEPTH = 64


def _input_error(message):
    """InputError with ``message`` as the engine words its own: long echoed values cut, control bytes escaped."""
    return InputError(_lcsim.terminal_text(message))


def _key_path(path, key):
    return f"{path}.{key}" if path else str(key)


def _json_text(document, name):
    """``document`` (a dict from Python) as JSON text, checked as a file's text is: every value JSON can hold (a
    dict with string keys, a list or tuple, a string, an int, a finite float, a bool or None), at most _MAX_DEPTH
    deep. InputError names ``name`` and the key path (``cluster.ib_GBps``) of the first value that is not."""
    pending = [(document, "", 1)]
    while pending:
        value, path, depth = pending.pop()
        where = path or "(top level)"
        if depth > _MAX_DEPTH:
            raise _input_error(f"{name}: {where}: nested deeper than {_MAX_DEPTH} levels")
        if isinstance(value, dict):
            for key, item in value.items():
                if not isinstance(key, str):
                    raise _input_error(f"{name}: {where}: key {key!r} is not a string")
                pending.append((item, _key_path(path, key), depth + 1))
        elif isinstance(value, (list, tuple)):
            pending.extend((item, f"{path}[{i}]", depth + 1) for i, item in enumerate(value))
        elif isinstance(value, float):
            if not math.isfinite(value):
                raise _input_error(f"{name}: {where}: must be a finite number, got {value!r} (JSON has no NaN or "
                                   "infinity)")
        elif value is not None and not isinstance(value, (str, int)):  # bool is an int
            raise _input_error(f"{name}: {where}: expected a JSON value (object, array, string, number, true, false "
                               f"or null), got {type(value).__name__}")
    return json.dumps(document, allow_nan=False)


def _path_text(path, what="path"):
    """A file argument as a str (a str, bytes or os.PathLike); TypeError for anything else."""
    try:
        path = os.fspath(path)
    except TypeError:
        raise TypeError(f"{what}: expected a path (str or os.PathLike), got {type(path).__name__}") from None
    return os.fsdecode(path) if isinstance(path, bytes) else path


def _read_json_file(path):
    """The JSON document in ``path``, read by the command line's reader: a regular file of at most 64 MiB (a device,
    a pipe or a directory is refused before anything is read), parsed strictly (duplicate keys, numbers beyond a
    double, NaN). InputError otherwise."""
    return json.loads(_lcsim.read_json_file(path))


class Scenario:
    """A scenario document, checked as the command line checks it.

    Relative paths inside it (``profile``, ``dataset.trace``) resolve against the folder of ``file``: the file it
    was loaded from, or for :meth:`from_dict` the file given (default: the current directory). Messages and results
    name ``file``; a dict without one is named ``"<dict>"``.
    """

    def __init__(self, document, file, *, _anchor=None):
        self.file = _path_text(file, "file")
        if not isinstance(document, dict):
            raise _input_error(f"{self.file}: a scenario is a JSON object, got {type(document).__name__}")
        text = _json_text(document, self.file)
        # A copy through JSON: the scenario holds data only, and a later change to `document` does not reach it.
        self._document = json.loads(text)
        # Its relative paths are resolved now, so a later change of directory does not move them.
        self._anchor = os.path.abspath(self.file if _anchor is None else _anchor)
        self._engine_text = _lcsim.with_absolute_paths(text, self.file, self._anchor)
        _lcsim.check_scenario(self._engine_text, self.file)

    @classmethod
    def load(cls, path):
        """The scenario in the JSON file ``path``, read as the command line reads it (docs/robustness.md)."""
        path = _path_text(path)
        return cls(_read_json_file(path), path)

    @classmethod
    def from_dict(cls, document, file=None):
        """A scenario from a dict, checked as a file is (a NaN or an infinity is refused, naming its key). With
        ``file``, relative paths resolve against its folder and messages and results name it; without, they resolve
        against the current directory and the scenario is named ``"<dict>"``."""
        if file is None:
            return cls(document, DICT_NAME, _anchor=os.path.join(os.getcwd(), "scenario.json"))
        return cls(document, file)

    def to_dict(self):
        """The scenario document (a copy)."""
        return copy.deepcopy(self._document)

    def with_(self, **overrides):
        """A new scenario with dotted keys replaced, e.g. ``with_(**{"training.bucket_size_tokens": 26_000})``; a
        value of ``None`` removes the key."""
        document = self.to_dict()
        for path, value in overrides.items():
            node = document
            keys = path.split(".")
            for key in keys[:-1]:
                if not isinstance(node.get(key), dict):
                    raise _input_error(f"{self.file}: '{path}': the scenario has no object '{key}'")
                node = node[key]
            if value is None:
                node.pop(keys[-1], None)
            else:
                node[keys[-1]] = value
        return Scenario(document, self.file, _anchor=self._anchor)

    def _text(self):
        return self._engine_text

    def __repr__(self):
        return f"Scenario({self._document.get('name', '?')!r}, file={self.file!r})"


def _pandas():
    """pandas, imported only when a DataFrame is asked for: the package itself does not need it."""
    try:
        import pandas
    except ImportError as e:
        raise ImportError(f"lcsim: DataFrames need pandas, which {sys.executable} cannot import: "
                          "`pip install pandas` in this environment, or create the venv with "
                          "--system-site-packages to use Debian's python3-pandas (docs/python.md)") from e
    return pandas


class Results:
    """The results of a run: the ``lcsim-results`` document as ``to_dict()``, per-iteration rows as ``to_pandas()``."""

    def __init__(self, document, table=""):
        self._document = document
        self._table = table

    def table(self):
        """The table ``lcsim plan`` or ``lcsim simulate`` prints for these results, as text."""
        return self._table

    def to_dict(self):
        """The results document, as ``lcsim plan|simulate --json`` writes it (a copy)."""
        return copy.deepcopy(self._document)

    @property
    def winner(self):
        """The winning policy's label: the highest tokens/s among the policies that fit in GPU memory (``None``
        when none fits). A policy with an out-of-memory iteration is never the winner."""
        return self._document.get("uncertainty", {}).get("winner")

    @property
    def speedup_reference(self):
        """The policy the speedups are over: the baseline, or the fastest policy that fits when the baseline runs
        out of GPU memory."""
        return self._document.get("speedup_reference", self._document.get("baseline"))

    @property
    def out_of_memory(self):
        """Labels of the policies with an out-of-memory iteration: they cannot run as planned, nor win."""
        return [p["name"] for p in self._document["policies"] if p.get("oom_iterations", 0) > 0]

    @property
    def policies(self):
        """Per policy: its summary (mean iteration time, tokens/s, speedup, interval), without its iterations."""
        return [{k: v for k, v in p.items() if k != "iterations"} for p in self._document["policies"]]

    def rows(self):
        """One dict per policy and iteration: policy, kind, iteration, seconds, tokens, sequences, oom, peak_GiB."""
        out = []
        for p in self._document["policies"]:
            for it in p["iterations"]:
                out.append({"policy": p["name"], "kind": p["kind"], "iteration": it["index"],
                            "seconds": it["seconds"], "tokens": it["tokens"], "sequences": it["sequences"],
                            "oom": it["oom"], "peak_GiB": it["peak_GiB"],
                            "speedup_vs_baseline": p["speedup_vs_baseline"]})
        return out

    def to_pandas(self):
        """A DataFrame of :meth:`rows` (pandas is imported here, only when asked for)."""
        return _pandas().DataFrame(self.rows())

    def summary_rows(self):
        """One dict per policy, in the table's order: its figures, its 80% intervals (``None`` without sampled
        worlds), whether it fits in GPU memory and whether it is the winner. Speedups are over
        :attr:`speedup_reference`."""
        out = []
        for p in self._document["policies"]:
            interval = p.get("interval", {})
            quantile = lambda field, q: interval.get(field, {}).get(q)  # noqa: E731
            out.append({"policy": p["name"], "kind": p["kind"], "mean_iteration_s": p["mean_iteration_s"],
                        "p50_iteration_s": p["p50_iteration_s"], "p99_iteration_s": p["p99_iteration_s"],
                        "tokens_per_s": p["tokens_per_s"], "speedup": p["speedup_vs_baseline"],
                        "iteration_s_p10": quantile("iteration_s", "p10"),
                        "iteration_s_p90": quantile("iteration_s", "p90"),
                        "speedup_p10": quantile("speedup", "p10"), "speedup_p90": quantile("speedup", "p90"),
                        "p_beats_baseline": interval.get("p_beats_baseline"),
                        "oom_iterations": p["oom_iterations"], "iterations": len(p["iterations"]),
                        "fits": p["oom_iterations"] == 0, "winner": p["name"] == self.winner})
        return out

    def summary(self):
        """A DataFrame of :meth:`summary_rows`: one row per policy, indexed by its label."""
        return _pandas().DataFrame(self.summary_rows()).set_index("policy")

    def __repr__(self):
        summary = ", ".join(f"{p['name']} {p['speedup_vs_baseline']:.2f}x" for p in self._document["policies"])
        return f"Results({self._document.get('mode', '?')}: {summary})"


def _as_scenario(scenario):
    if isinstance(scenario, Scenario):
        return scenario
    if isinstance(scenario, (str, os.PathLike)):
        return Scenario.load(scenario)
    if isinstance(scenario, dict):
        return Scenario.from_dict(scenario)
    raise TypeError(f"expected a Scenario, a path or a dict, got {type(scenario).__name__}")


def _bar(done, total, what):
    """The command line's progress bar, on ``sys.stderr`` (a notebook shows it below the cell)."""
    if total <= 0:
        return
    filled = 40 * done // total
    sys.stderr.write(f"\r[{'#' * filled}{'.' * (40 - filled)}] {done}/{total} {what}" + ("\n" if done == total else ""))
    sys.stderr.flush()


def _progress(progress):
    if progress is True:
        return _bar
    if progress is False or progress is None:
        return None
    if not callable(progress):
        raise TypeError(f"progress: expected True, False or a callable (done, total, what), got {progress!r}")
    return progress


def plan(scenario, *, samples=32, iterations=None, policies=(), fixed_data=False, jobs=1, progress=True):
    """``lcsim plan``: every policy plans the same batches, each plan replayed without contention.

    ``samples`` worlds give each policy p10-p90 intervals (1: the nominal figures only); ``policies`` limits the run
    to those labels (the baseline is always run); ``fixed_data`` keeps the scenario's data in sampled worlds;
    ``jobs`` sampled worlds are evaluated at a time, on threads (the results are the same for any ``jobs``; a
    policy written in Python then runs under the GIL, one call at a time).
    ``progress``: the command line's bar on ``sys.stderr`` (True), none (False), or a callable ``(done, total,
    what)``. The GIL is released while it runs.
    """
    s = _as_scenario(scenario)
    document, table = _lcsim.plan(s._text(), s.file, int(samples), iterations, list(policies), not fixed_data,
                                  int(jobs), _progress(progress))
    return Results(json.loads(document), table)


def simulate(scenario, *, samples=32, iterations=None, policies=(), fixed_data=False, trace=None, jobs=1,
             progress=True):
    """``lcsim simulate``: the same plans in a SimGrid simulation of the cluster (in a child process); ``trace``
    writes a Perfetto timeline there. ``jobs`` and ``progress`` as for :func:`plan`."""
    s = _as_scenario(scenario)
    document, table = _lcsim.simulate(s._text(), s.file, int(samples), iterations, list(policies), not fixed_data,
                                      int(jobs), "" if trace is None else os.fspath(trace), _progress(progress))
    return Results(json.loads(document), table)


class Document:
    """A command's JSON document: ``to_dict()``, and ``to_pandas()`` of its ``rows()``."""

    def __init__(self, document):
        self._document = document

    def to_dict(self):
        """The document, as the command's ``--json`` writes it (a copy)."""
        return copy.deepcopy(self._document)

    def rows(self):
        raise NotImplementedError

    def to_pandas(self):
        """A DataFrame of :meth:`rows` (pandas is imported here, only when asked for)."""
        return _pandas().DataFrame(self.rows())


class SweepResults(Document):
    """``lcsim sweep``'s merged document (schema lcsim-sweep/1)."""

    def rows(self):
        """One dict per point and policy: the point's axis values (a cluster axis by its label), the policy, its
        mean iteration time, tokens/s and speedup."""
        out = []
        for point in self._document["points"]:
            coordinates = {axis: value["label"] if isinstance(value, dict) and "label" in value else value
                           for axis, value in point.get("coordinates", {}).items()}
            for policy in point["results"]["policies"]:
                out.append({"point": point["index"], **coordinates, "policy": policy["name"],
                            "mean_iteration_s": policy["mean_iteration_s"], "tokens_per_s": policy["tokens_per_s"],
                            "speedup_vs_baseline": policy["speedup_vs_baseline"]})
        return out


class ValidationResults(Document):
    """``lcsim validate``'s document (schema lcsim-validation/4): every entry and the summary."""

    def rows(self):
        """One dict per catalogue entry, as the document gives it, without its points; a trend with published
        values carries ``series_factor``: how far it goes (its end points' ratio the way it runs), published and
        predicted, and the predicted factor's error."""
        return [{k: v for k, v in entry.items() if k != "points"} for entry in self._document["entries"]]


class TuneResults(Document):
    """``lcsim tune``'s document (schema lcsim-tune/1): every candidate and the verdict."""

    def rows(self):
        """One dict per candidate."""
        return [dict(candidate) for candidate in self._document["candidates"]]


def sweep(sweep_file, *, jobs=2, out=None, progress=True):
    """``lcsim sweep SWEEP_FILE``: every point of the sweep, ``jobs`` at a time, in this process (simulations in
    child processes of it), policies registered from Python included. Writes each point's scenario, results and log
    into ``out`` (a temporary folder by default, removed afterwards) and returns the merged document.
    ``progress`` as for :func:`plan`."""
    sweep_file = os.fspath(sweep_file)
    progress = _progress(progress)
    if out is not None:
        return SweepResults(json.loads(_lcsim.sweep(sweep_file, os.fspath(out), int(jobs), progress)))
    with tempfile.TemporaryDirectory(prefix="lcsim-sweep-") as folder:
        return SweepResults(json.loads(_lcsim.sweep(sweep_file, folder, int(jobs), progress)))


def validate(*, catalogue=None, only=(), samples=8, jobs=2, progress=True):
    """``lcsim validate``: the catalogue's published and measured figures against lcsim's predictions, in this
    process (simulations in child processes of it). ``progress`` as for :func:`plan`."""
    document = _lcsim.validate(None if catalogue is None else os.fspath(catalogue), [str(e) for e in only],
                               int(samples), int(jobs), _progress(progress))
    return ValidationResults(json.loads(document))


def tune(scenario, *, jobs=2, budget_s=None, progress=True):
    """``lcsim tune``: each policy's best settings and layout for the scenario (a Scenario, path or dict), in this
    process: candidates estimated on ``jobs`` threads, the most promising simulated in child processes of it,
    policies registered from Python included. ``progress`` as for :func:`plan`."""
    s = _as_scenario(scenario)
    document = _lcsim.tune(s._text(), s.file, int(jobs), None if budget_s is None else float(budget_s),
                           _progress(progress))
    return TuneResults(json.loads(document))
