"""What a suite file says about its suite besides its tasks' frozen figures: `SuiteSpec`.

Every difference between suites that the leaderboard's code acts on is a field of the suite's file
(``placement_gym/leaderboard/suites/<version>.json``), read here, never a branch on a version name:

* ``status``: ``current`` (the suite its track's main page ranks: for the cost-model track the
  leaderboard's README; at most one per track), ``accepted`` (validated and ranked on a page of its
  own), ``retired`` (its cost model is gone; ``retired_because`` says why and where its files are kept)
  or ``draft`` (tasks not measured yet: ``python -m baselines.leaderboard_fill.classic --write-suite``
  measures them; neither accepted nor listed);
* ``track``: ``cost_model`` (it takes cost-model, real-hardware and, with a ``split``, generalisation
  submissions), ``generalisation`` (its submissions are all of that track) or ``parallel`` (parallel
  plans of large models: its tasks are plan tasks, `plan_suite`, its submissions all of that track);
* ``placement_format``: how its submissions write a placement, ``mapping`` ({op name: device name}),
  ``text`` (one character per op, `placement_gym.evaluation.placements`) or ``plan`` (a plan's id,
  the parallel track's and only its);
* ``page``, ``chart``, ``curves``, ``bounds``: its page, chart, folder of learning curves and bounds
  file in a leaderboard folder (a generalisation suite's page has no chart or curves);
* ``split``: its generalisation split, ``held_out_graphs`` by name and/or every test graph of a
  ``dataset``; ``requires_pretraining``: its submissions state their pre-training compute;
* ``measure``: how its tasks and their frozen figures are made (`Measure`): the tasks of the suite it
  ``inherits`` with their frozen figures, then ``new_tasks`` (or a ``dataset_sample``) measured under
  the current code, each of ``fitted_by``'s tasks placed within memory by the heuristic named;
* ``fill``: the scripts of ``baselines.leaderboard_fill`` that make its baseline entries;
* ``page_text``: a generalisation suite's page text (`PageText`).

`spec_from_dict` checks every field (types, allowed values, lengths, file names that stay inside the
leaderboard folder) and raises `SuiteFileError` naming the field; `spec_to_dict` is its inverse.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from placement_gym.common.untrusted import UntrustedFileError, shown

STATUSES = ("current", "accepted", "retired", "draft")
# A suite's own track; its submissions may also be of the real-hardware track (`submission.TRACKS`).
SUITE_TRACKS = ("cost_model", "generalisation", "parallel")
PLACEMENT_FORMATS = ("mapping", "text", "plan")
# As a submission's ``suite`` field: letters, digits and . _ - (submission.SUITE_PATTERN).
VERSION_PATTERN = r"[A-Za-z0-9][A-Za-z0-9._-]{0,31}"
# Names inside a leaderboard folder: one component each, or a few for the curves folder.
_FILE_PART = r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}"
FILE_PATTERNS = {
    "page": rf"{_FILE_PART}\.md",
    "chart": rf"{_FILE_PART}\.png",
    "bounds": rf"{_FILE_PART}\.json",
    "curves": rf"{_FILE_PART}(/{_FILE_PART}){{0,3}}",
}
# Task ids, graph, agent and dataset names, as a submission's text limits (submission.TEXT_LIMITS).
MAX_NAME = 200
MAX_TEXT = 4000
MAX_LIST = 10_000
FIELDS = ("version", "description", "status", "track", "placement_format", "page", "chart", "curves",
          "bounds", "retired_because", "split", "requires_pretraining", "measure", "fill", "page_text",
          "tasks")


class SuiteFileError(UntrustedFileError):
    """A suite file that cannot be read or does not follow the suite file's format."""


@dataclass(frozen=True)
class DatasetSample:
    """Tasks drawn from a dataset: ``graphs_per_split`` graphs of each of ``splits``, evenly spaced in
    dataset order within each (split, family), each on every cluster of ``clusters``, with
    ``objective`` (`generalisation.dataset_sample_task_ids` lists them)."""

    dataset: str
    splits: tuple[str, ...]
    graphs_per_split: int
    clusters: tuple[str, ...]
    objective: str


@dataclass(frozen=True)
class Measure:
    """How a suite's tasks and frozen figures are made: those of the suite it ``inherits`` (frozen, the
    code must still reproduce them), then ``new_tasks`` or ``dataset_sample``'s tasks measured now;
    ``fitted_by`` pairs (task id, heuristic) whose placement must fit every device's memory."""

    inherits: str | None = None
    new_tasks: tuple[str, ...] = ()
    fitted_by: tuple[tuple[str, str], ...] = ()
    dataset_sample: DatasetSample | None = None


@dataclass(frozen=True)
class PageText:
    """The text of a generalisation suite's page: its ``title``, how other pages name it
    (``listed_as``), what its tasks are (``tasks_are``), the paragraph ``about`` what entries train
    on and are scored on, the ``budgets`` of its tracks and a title per test split (``split_titles``)."""

    title: str
    listed_as: str
    tasks_are: str
    about: str
    budgets: tuple[int, ...]
    split_titles: tuple[tuple[str, str], ...]


@dataclass(frozen=True)
class SuiteSpec:
    """Everything a suite file says but its tasks (module docstring). The defaults are those of a
    suite made in memory (`Suite.subset` keeps its suite's spec): accepted, cost-model track, text
    placements, no page."""

    status: str = "accepted"
    track: str = "cost_model"
    placement_format: str = "text"
    page: str | None = None
    chart: str | None = None
    curves: str | None = None
    bounds: str | None = None
    retired_because: str = ""
    held_out_graphs: tuple[str, ...] = ()
    split_dataset: str | None = None
    requires_pretraining: bool = False
    measure: Measure = field(default_factory=Measure)
    fill: tuple[str, ...] = ()
    page_text: PageText | None = None

    @property
    def has_split(self) -> bool:
        return bool(self.held_out_graphs) or self.split_dataset is not None

    @property
    def submission_tracks(self) -> tuple[str, ...]:
        """The tracks its submissions may state: a cost-model suite's, the cost-model, real-hardware
        and generalisation tracks; a parallel suite's, its own and, with a split, the generalisation
        track; a generalisation suite's, its own."""
        if self.track == "cost_model":
            return ("cost_model", "real", "generalisation")
        with_split = self.track == "parallel" and self.has_split
        return (self.track, "generalisation") if with_split else (self.track,)

    @property
    def accepted(self) -> bool:
        """Whether submissions of the suite are accepted (current or accepted)."""
        return self.status in ("current", "accepted")


# --- reading -----------------------------------------------------------------------------------------

def _fail(where: str, name: str, allowed: str, value: Any) -> SuiteFileError:
    return SuiteFileError(f"{where}: field {name!r} is {shown(value)}; allowed: {allowed}")


def _text(data: dict, name: str, where: str, limit: int = MAX_TEXT, default: str | None = None) -> str:
    value = data.get(name, default)
    if not (isinstance(value, str) and len(value) <= limit and value.isprintable()):
        raise _fail(where, name, f"printable text on one line, at most {limit} characters", value)
    return value


def _name(value: Any, where: str, name: str, pattern: str | None = None) -> str:
    ok = isinstance(value, str) and 0 < len(value) <= MAX_NAME and value.isprintable() and " " not in value
    if not ok or (pattern is not None and not re.fullmatch(pattern, value)):
        raise _fail(where, name, "a name without spaces" + (f" matching {pattern}" if pattern else ""), value)
    return value


def _names(value: Any, where: str, name: str) -> tuple[str, ...]:
    if not isinstance(value, list) or len(value) > MAX_LIST:
        raise _fail(where, name, f"a list of at most {MAX_LIST} names", value)
    return tuple(_name(item, where, f"{name}[{i}]") for i, item in enumerate(value))


def _choice(data: dict, name: str, where: str, allowed: tuple[str, ...], default: str | None = None) -> str:
    value = data.get(name, default)
    if value not in allowed:
        raise _fail(where, name, ", ".join(allowed), value)
    return value


def _object(value: Any, where: str, name: str, keys: tuple[str, ...]) -> dict:
    if not isinstance(value, dict) or not set(value) <= set(keys):
        raise _fail(where, name, f"an object with {', '.join(keys)}", value)
    return value


def _count(value: Any, where: str, name: str) -> int:
    if type(value) is not int or not 0 < value <= 10**12:
        raise _fail(where, name, "a whole number from 1 to 10**12", value)
    return value


def _dataset_sample(value: Any, where: str) -> DatasetSample:
    keys = ("dataset", "splits", "graphs_per_split", "clusters", "objective")
    data = _object(value, where, "measure.dataset_sample", keys)
    if set(data) != set(keys):
        raise _fail(where, "measure.dataset_sample", f"an object with {', '.join(keys)}", value)
    return DatasetSample(
        _name(data["dataset"], where, "measure.dataset_sample.dataset"),
        _names(data["splits"], where, "measure.dataset_sample.splits"),
        _count(data["graphs_per_split"], where, "measure.dataset_sample.graphs_per_split"),
        _names(data["clusters"], where, "measure.dataset_sample.clusters"),
        _name(data["objective"], where, "measure.dataset_sample.objective"),
    )


def _measure(value: Any, where: str) -> Measure:
    data = _object(value, where, "measure", ("inherits", "new_tasks", "fitted_by", "dataset_sample"))
    inherits = data.get("inherits")
    if inherits is not None:
        _name(inherits, where, "measure.inherits", VERSION_PATTERN)
    new_tasks = _names(data.get("new_tasks", []), where, "measure.new_tasks")
    fitted = data.get("fitted_by", {})
    if not isinstance(fitted, dict) or not set(fitted) <= set(new_tasks):
        raise _fail(where, "measure.fitted_by", "an object {task id of new_tasks: heuristic name}", fitted)
    fitted_by = tuple((task_id, _name(agent, where, f"measure.fitted_by[{task_id}]"))
                      for task_id, agent in fitted.items())
    sample = data.get("dataset_sample")
    if sample is not None and new_tasks:
        raise _fail(where, "measure", "new_tasks or dataset_sample, not both", sorted(data))
    return Measure(inherits, new_tasks, fitted_by, None if sample is None else _dataset_sample(sample, where))


def _page_text(value: Any, where: str) -> PageText:
    keys = ("title", "listed_as", "tasks_are", "about", "budgets", "split_titles")
    data = _object(value, where, "page_text", keys)
    if set(data) != set(keys):
        raise _fail(where, "page_text", f"an object with {', '.join(keys)}", value)
    budgets = data["budgets"]
    if not isinstance(budgets, list) or not 0 < len(budgets) <= 16:
        raise _fail(where, "page_text.budgets", "a list of 1 to 16 budgets", budgets)
    titles = data["split_titles"]
    if not isinstance(titles, dict) or len(titles) > 64:
        raise _fail(where, "page_text.split_titles", "an object {split: title}", titles)
    return PageText(
        _text(data, "title", where, 200), _text(data, "listed_as", where, 500),
        _text(data, "tasks_are", where, 200), _text(data, "about", where),
        tuple(_count(b, where, f"page_text.budgets[{i}]") for i, b in enumerate(budgets)),
        tuple((_name(split, where, "page_text.split_titles"), _text(titles, split, where, 200))
              for split in titles),
    )


def _file(data: dict, name: str, where: str) -> str | None:
    value = data.get(name)
    if value is None:
        return None
    if not (isinstance(value, str) and re.fullmatch(FILE_PATTERNS[name], value)):
        raise _fail(where, name, f"null or a name in the leaderboard folder matching {FILE_PATTERNS[name]}",
                    value)
    return value


def spec_from_dict(data: dict, where: str = "suite file") -> SuiteSpec:
    """The `SuiteSpec` of a suite file's data (a dict), every field checked: `SuiteFileError` names the
    first that is wrong (an unknown field too, so that a misspelt one is not silently ignored)."""
    unknown = sorted(set(data) - set(FIELDS))
    if unknown:
        raise SuiteFileError(f"{where}: unknown field {shown(unknown[0])}; the fields are "
                             f"{', '.join(FIELDS)}")
    status = _choice(data, "status", where, STATUSES)
    track = _choice(data, "track", where, SUITE_TRACKS)
    split = _object(data.get("split", {}), where, "split", ("held_out_graphs", "dataset"))
    dataset = split.get("dataset")
    requires_pretraining = data.get("requires_pretraining", False)
    if not isinstance(requires_pretraining, bool):
        raise _fail(where, "requires_pretraining", "true or false", requires_pretraining)
    spec = SuiteSpec(
        status=status, track=track,
        placement_format=_choice(data, "placement_format", where, PLACEMENT_FORMATS),
        page=_file(data, "page", where), chart=_file(data, "chart", where),
        curves=_file(data, "curves", where), bounds=_file(data, "bounds", where),
        retired_because=_text(data, "retired_because", where, default=""),
        held_out_graphs=_names(split.get("held_out_graphs", []), where, "split.held_out_graphs"),
        split_dataset=None if dataset is None else _name(dataset, where, "split.dataset"),
        requires_pretraining=requires_pretraining,
        measure=_measure(data.get("measure", {}), where),
        fill=_names(data.get("fill", []), where, "fill"),
        page_text=None if data.get("page_text") is None else _page_text(data["page_text"], where),
    )
    _check_coherent(spec, where)
    return spec


def _check_coherent(spec: SuiteSpec, where: str) -> None:
    """The fields that only make sense together (what the pages and the validation need)."""
    problems = []
    if spec.status == "retired" and not spec.retired_because:
        problems.append("a retired suite says why (retired_because)")
    if spec.page is not None and spec.track in ("cost_model", "parallel") and (
            spec.chart is None or spec.curves is None):
        problems.append(f"a {spec.track} suite's page comes with its chart and curves folder")
    if (spec.track == "parallel") != (spec.placement_format == "plan"):
        problems.append("the parallel track's suites, and only they, write placements as plans")
    if spec.track == "generalisation":
        if spec.chart is not None or spec.curves is not None or spec.bounds is not None:
            problems.append("a generalisation suite's page has no chart, curves or bounds file")
        if not spec.has_split:
            problems.append("a generalisation suite has a split")
        if spec.page is not None and (spec.page_text is None or spec.measure.dataset_sample is None):
            problems.append("a generalisation suite's page needs page_text and measure.dataset_sample")
    if problems:
        raise SuiteFileError(f"{where}: {'; '.join(problems)}")


# --- writing -----------------------------------------------------------------------------------------

def spec_to_dict(spec: SuiteSpec) -> dict:
    """``spec`` as the fields of its suite file (`spec_from_dict`'s inverse), in `FIELDS` order, those
    at their default left out."""
    measure = spec.measure
    sample = measure.dataset_sample
    out: dict[str, Any] = {
        "status": spec.status, "track": spec.track, "placement_format": spec.placement_format,
        "page": spec.page, "chart": spec.chart, "curves": spec.curves, "bounds": spec.bounds,
        "retired_because": spec.retired_because or None,
        "split": {key: value for key, value in (("held_out_graphs", list(spec.held_out_graphs)),
                                                ("dataset", spec.split_dataset)) if value} or None,
        "requires_pretraining": spec.requires_pretraining or None,
        "measure": {key: value for key, value in (
            ("inherits", measure.inherits), ("new_tasks", list(measure.new_tasks)),
            ("fitted_by", dict(measure.fitted_by)),
            ("dataset_sample", None if sample is None else {
                "dataset": sample.dataset, "splits": list(sample.splits),
                "graphs_per_split": sample.graphs_per_split, "clusters": list(sample.clusters),
                "objective": sample.objective})) if value} or None,
        "fill": list(spec.fill) or None,
        "page_text": None if spec.page_text is None else {
            "title": spec.page_text.title, "listed_as": spec.page_text.listed_as,
            "tasks_are": spec.page_text.tasks_are, "about": spec.page_text.about,
            "budgets": list(spec.page_text.budgets), "split_titles": dict(spec.page_text.split_titles)},
    }
    return {key: value for key, value in out.items() if value is not None}
