"""The submission file: one JSON file per algorithm run over (part of) a suite.

Schema (``schema`` = 1)::

    {
      "schema": 1,
      "suite": "<version>",               # suite version the runtimes were computed under
      "package_version": "0.1.0",         # placement_gym.__version__ of the run
      "algorithm": "heft",                # short name shown in the tables
      "authors": ["..."],
      "description": "...",
      "link": null,                       # optional http(s) URL (paper, code)
      "seed": 0,
      "budget": null,                     # evaluations allowed per task (null: the agent's default)
      "track": "cost_model",              # optional: "cost_model" (default) | "real" | "generalisation"
                                          # | "parallel" (a parallel-plan suite's, required there)
      "hardware": null,                   # optional, track "real": the machine measured on
      "trained_on": [],                   # task ids trained on; required (non-empty) for track
                                          # "generalisation", whose results are held-out tasks only
                                          # (a dataset suite also takes its splits: "synthetic-v1:train")
      "pretraining": {                    # required where the suite file says requires_pretraining:
        "evaluations": 0,                 # the compute spent before the scored run (evaluations of
        "wall_s": 0.0,                    # training tasks, wall seconds, the machine), "counted":
        "machine": "...",                 # "harness" when the leaderboard harness ran the
        "counted": "declared"             # pre-training and counted it, "declared" when the
      },                                  # submitter states it
      "results": {
        "<task id>": {
          "graph_sha256": "...",          # of the graph the placement was made for
          "placement": {"<op name>": "<device name>", ...},  # or, where the suite file's
                                          # placement_format is text: a device index (0-9a-z) per
                                          # op in the graph's op order; plan: the plan's id
                                          # ("tp8-pp4-vp5-dp2-gb128-sp-zero1")
          "runtime": 0.0123,              # claimed cost-model runtime (s); re-checked by validate
          "feasible": true,               # claimed feasibility (fits in every device's memory)
          "evaluations": 100,             # evaluations of this task the harness counted for the agent
          "wall_s": 1.5,                  # the algorithm's wall-clock seconds on this task
          "trained_on_task": false,       # whether the agent evaluated this very task (evaluations > 0)
          "measured_runtime": null,       # optional, track "real": measured step time (s)
          "trace": [[1, 0.02], [40, 0.015]]  # optional: best feasible runtime so far after that many
                                          # evaluations, recorded by the harness (learning curves)
        }
      }
    }

A submission comes from a stranger's pull request, so it is read as untrusted input:

* the file is a regular file (never read through a symbolic link, so a link to ``/dev/zero`` or to a file
  outside the leaderboard folder is refused) of at most `MAX_FILE_BYTES` bytes of UTF-8 JSON, nested at
  most `MAX_NESTING` levels deep (checked, in linear time, before parsing, which recurses), with no
  duplicate keys, no NaN or infinite numbers and no integer of more than `MAX_INT_DIGITS` digits, read
  by `placement_gym.common.untrusted` (the project's one reader of files from users);
* ``algorithm`` matches `NAME_PATTERN` (letters, digits and ``. _ -``, at most 64 characters, starting
  with a letter or digit: already in the form `submission_filename` writes, so that two names never map
  to one file name), ``suite`` `SUITE_PATTERN` and ``package_version`` `VERSION_PATTERN`;
* free text (authors, description, hardware, task ids, op and device names) is length-limited
  (`TEXT_LIMITS`) and printable (Python's `str.isprintable`: no control, format, private-use or
  unassigned character; line breaks and tabs only in ``description``); it is escaped wherever it is
  rendered;
* ``link`` is null or an ``http://`` / ``https://`` URL with no spaces, quotes or angle brackets;
* ``seed`` is an integer from 0 to 2**63 - 1; evaluation counts (``budget``, ``evaluations``,
  ``pretraining.evaluations``) from 0 to `MAX_EVALUATIONS`; ``runtime`` and ``measured_runtime`` are
  finite and positive, wall times (``wall_s``, ``pretraining.wall_s``) from 0 to `MAX_WALL_S` seconds,
  and a declared pre-training of E evaluations took at least E x `MIN_SECONDS_PER_EVALUATION` seconds
  (what the harness can count: no simulation is faster);
* ``trace`` has at most `MAX_TRACE_POINTS` ``[evaluations, runtime]`` pairs, evaluations rising from 1
  to at most the result's ``evaluations``, runtimes finite, positive and falling.

Every violation is a `SubmissionError` naming the field and what is allowed; untrusted values are
quoted with `shown` (ASCII, shortened) in messages, so that a message never carries markup or terminal
control sequences.
"""

from __future__ import annotations

import json
import math
import re
import unicodedata
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from placement_gym.common.untrusted import (
    UntrustedFileError,
    parse_json,
    path_text,
    read_bytes,
    shown,
    write_inside,
)
from placement_gym.leaderboard.registry import suite_registry

SCHEMA_VERSION = 1
TRACKS = ("cost_model", "real", "generalisation", "parallel")
PRETRAINING_COUNTED = ("harness", "declared")
# The largest committed submission (13 tasks as {op: device} mappings) is about 0.3 MB; 16 MiB leaves room for
# suites of much larger graphs and still parses in well under a second.
MAX_FILE_BYTES = 16 * 2**20
# The schema nests 4 levels (submission > results > task > placement); 8 leaves room for new fields
# while staying far below the depth at which Python's JSON parser runs out of recursion.
MAX_NESTING = 8
# Every integer of the schema is a count of at most 2**63 - 1, which has 19 digits.
MAX_INT_DIGITS = 19
# The characters `submission_filename` keeps as they are: a name in this form is its own file name.
NAME_PATTERN = r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}"
SUITE_PATTERN = r"[A-Za-z0-9][A-Za-z0-9._-]{0,31}"
VERSION_PATTERN = r"[A-Za-z0-9][A-Za-z0-9.+_-]{0,63}"
TEXT_LIMITS = {
    "description": 4000, "author": 200, "hardware": 200, "link": 500, "trained_on": 200,
    "task id": 200, "op name": 1000, "device name": 200, "graph_sha256": 128, "machine": 200,
}
MAX_AUTHORS = 32
MAX_LIST = 1000  # tasks in ``results`` or ``trained_on``
MAX_COUNT = 2**63 - 1
# The longest committed run took 14,120 s on one task and the largest budget is 10**6 evaluations per
# task: 10**7 s (116 days) and 10**12 evaluations leave a wide margin and keep every figure short.
MAX_WALL_S = 1e7
MAX_EVALUATIONS = 10**12
# The fastest committed entry spends 55 us per evaluation and the fastest simulation of a suite task takes
# a few us: a wall time under 1 us per evaluation is not a measurement.
MIN_SECONDS_PER_EVALUATION = 1e-6
# A trace is thinned to the last improvement per 1/50 of a decade of evaluations (`thin_trace`): at most
# 50 points per decade, 350 up to 10**7 evaluations.
MAX_TRACE_POINTS = 1000
TRACE_POINTS_PER_DECADE = 50
REQUIRED_FIELDS = {
    "schema": int, "suite": str, "package_version": str, "algorithm": str, "authors": list,
    "description": str, "seed": int, "results": dict,
}
REQUIRED_RESULT_FIELDS = {
    "graph_sha256": str, "placement": (dict, str), "runtime": (int, float), "feasible": bool,
    "evaluations": int, "wall_s": (int, float), "trained_on_task": bool,
}
_JSON_TYPES = {dict: "object", list: "array", str: "string", int: "integer", float: "number",
               bool: "true/false", type(None): "null"}
_PLACEMENT_TEXT = re.compile(r"[0-9a-z]+")
# A plan's id (`placement_gym.plans.plan.Plan.suffix`): tokens of lowercase letters, digits and dots.
_PLAN_ID = re.compile(r"[0-9a-z.]{1,64}(-[0-9a-z.]{1,1000}){0,31}")
MAX_PLAN_ID = 2000
_LINK = re.compile(r"https?://[^\s<>\"'`\\]+", re.IGNORECASE)


class SubmissionError(UntrustedFileError):
    """A submission file that cannot be read or does not follow the schema."""


def _type_name(value: Any) -> str:
    return _JSON_TYPES.get(type(value), type(value).__name__)


def _expected(kind: type | tuple) -> str:
    kinds = kind if isinstance(kind, tuple) else (kind,)
    return " or ".join(dict.fromkeys(_JSON_TYPES.get(k, k.__name__) for k in kinds))


# --- reading the file ----------------------------------------------------------------------------------

def parse_submission(raw: bytes, where: str = "submission") -> Any:
    """Parse the bytes of a submission file with every bound of this module's docstring checked
    before or while parsing; raises `SubmissionError` naming the problem (never another error)."""
    try:
        return parse_json(raw, where, max_depth=MAX_NESTING, max_int_digits=MAX_INT_DIGITS,
                          max_bytes=MAX_FILE_BYTES)
    except UntrustedFileError as error:
        raise SubmissionError(str(error)) from None


# --- checking fields -----------------------------------------------------------------------------------

def _check_type(value: Any, kind: type | tuple, where: str, name: str) -> None:
    # bool is an int in Python; a count, seed or runtime given as true/false is a mistake.
    if not isinstance(value, kind) or (isinstance(value, bool) and kind is not bool):
        raise SubmissionError(f"{where}: field {name!r} has the wrong type ({_type_name(value)}); "
                              f"expected {_expected(kind)}")


def _check_fields(data: dict, required: dict, where: str) -> None:
    for name, kind in required.items():
        if name not in data:
            raise SubmissionError(f"{where}: missing field {name!r}; required: {', '.join(required)}")
        _check_type(data[name], kind, where, name)


def _check_count(value: Any, where: str, name: str, limit: int = MAX_COUNT) -> None:
    _check_type(value, int, where, name)
    if not 0 <= value <= limit:
        most = "2**63 - 1" if limit == MAX_COUNT else f"{limit:.0e}".replace("e+", "e")
        raise SubmissionError(f"{where}: field {name!r} is {value}; allowed: an integer from 0 to {most}")


def _check_evaluations(value: Any, where: str, name: str) -> None:
    _check_count(value, where, name, MAX_EVALUATIONS)


def _check_seconds(value: Any, where: str, name: str, positive: bool, limit: float = math.inf) -> None:
    _check_type(value, (int, float), where, name)
    if not math.isfinite(value) or value < 0 or (positive and value == 0) or value > limit:
        allowed = "a finite number > 0" if positive else "a finite number >= 0"
        allowed += "" if limit == math.inf else f" and at most {limit:g}"
        raise SubmissionError(f"{where}: field {name!r} is {value!r}; allowed: {allowed}")


def _check_wall(value: Any, where: str, name: str) -> None:
    _check_seconds(value, where, name, positive=False, limit=MAX_WALL_S)


def _check_pattern(value: Any, where: str, name: str, pattern: str, description: str) -> None:
    _check_type(value, str, where, name)
    if not re.fullmatch(pattern, value):
        raise SubmissionError(f"{where}: field {name!r} is {shown(value)}; allowed: {description}")


def _unprintable(text: str, multiline: bool) -> str | None:
    """The first character of ``text`` that is not printable (`str.isprintable`: no control, format,
    private-use or unassigned character, no separator but the space), line breaks and tabs allowed
    when ``multiline``; None when there is none."""
    plain = text.replace("\n", "").replace("\t", "") if multiline else text
    if plain.isprintable():  # the common case, at C speed
        return None
    return next(char for char in plain if not char.isprintable())


def check_text(value: Any, where: str, name: str, limit_key: str, multiline: bool = False) -> None:
    """Raise `SubmissionError` unless ``value`` is a string of at most ``TEXT_LIMITS[limit_key]``
    printable characters (line breaks and tabs also allowed if ``multiline``)."""
    _check_type(value, str, where, name)
    limit = TEXT_LIMITS[limit_key]
    if len(value) > limit:
        raise SubmissionError(f"{where}: field {name!r} has {len(value)} characters; at most {limit} allowed")
    char = _unprintable(value, multiline)
    if char is not None:
        raise SubmissionError(
            f"{where}: field {name!r} holds the character {ascii(char)} ({unicodedata.category(char)}); "
            f"allowed: printable text{' with line breaks and tabs' if multiline else ' on one line'}")


def check_link(value: Any, where: str) -> None:
    """Raise `SubmissionError` unless ``value`` is null or an http(s) URL (no spaces, quotes, angle
    brackets or backslashes) of at most ``TEXT_LIMITS["link"]`` characters."""
    if value is None:
        return
    check_text(value, where, "link", "link")
    if not _LINK.fullmatch(value) or not urlsplit(value).netloc:
        raise SubmissionError(f"{where}: field 'link' is {shown(value)}; allowed: null or an http:// or "
                              "https:// URL without spaces, quotes, angle brackets or backslashes")


def check_schema(data: Any, where: str = "submission") -> dict:
    """Return ``data`` if it follows the schema, else raise `SubmissionError` naming the problem.
    Per-task results are only checked for being objects here; `validate` checks each one's fields
    (`check_result`) and content, so that one bad task does not hide the verdict on the others."""
    check_header(data, where)
    if not data["results"]:
        raise SubmissionError(f"{where}: 'results' holds no task")
    if len(data["results"]) > MAX_LIST:
        raise SubmissionError(f"{where}: 'results' holds {len(data['results'])} tasks; at most {MAX_LIST}")
    for task_id in data["results"]:
        check_text(task_id, where, "results (a task id)", "task id")
    return data


def check_header(data: Any, where: str = "submission") -> None:
    """Raise `SubmissionError` unless every field of ``data`` but the results follows the schema (the
    harness checks them before it runs an agent, so that a bad name does not waste a run)."""
    if not isinstance(data, dict):
        raise SubmissionError(f"{where}: a submission is a JSON object, got {_type_name(data)}")
    _check_fields(data, REQUIRED_FIELDS, where)
    if data["schema"] != SCHEMA_VERSION:
        raise SubmissionError(f"{where}: schema {data['schema']} is not supported; expected {SCHEMA_VERSION}")
    _check_pattern(data["suite"], where, "suite", SUITE_PATTERN,
                   "letters, digits and . _ - (at most 32 characters), such as v0")
    _check_pattern(data["package_version"], where, "package_version", VERSION_PATTERN,
                   "a version such as 0.1.0 (letters, digits and . + _ -, at most 64 characters)")
    _check_pattern(data["algorithm"], where, "algorithm", NAME_PATTERN,
                   "letters, digits and . _ - (at most 64 characters, starting with a letter or digit; "
                   "the name is its file name's)")
    if len(data["authors"]) > MAX_AUTHORS:
        raise SubmissionError(f"{where}: 'authors' lists {len(data['authors'])} names; at most {MAX_AUTHORS}")
    for i, author in enumerate(data["authors"]):
        check_text(author, where, f"authors[{i}]", "author")
    check_text(data["description"], where, "description", "description", multiline=True)
    check_link(data.get("link"), where)
    _check_count(data["seed"], where, "seed")
    if data.get("budget") is not None:
        _check_evaluations(data["budget"], where, "budget")
    track = data.get("track", "cost_model")
    if track not in TRACKS:
        raise SubmissionError(f"{where}: unknown track {shown(track)}; allowed: {', '.join(TRACKS)}")
    if data.get("hardware") is not None:
        check_text(data["hardware"], where, "hardware", "hardware")
    trained_on = data.get("trained_on", [])
    if not isinstance(trained_on, list) or len(trained_on) > MAX_LIST:
        raise SubmissionError(f"{where}: 'trained_on' must be a list of task ids (strings), at most "
                              f"{MAX_LIST}")
    for i, task_id in enumerate(trained_on):
        check_text(task_id, where, f"trained_on[{i}]", "trained_on")
    if track == "generalisation" and not trained_on:
        raise SubmissionError(
            f"{where}: a generalisation submission must state 'trained_on' (the task ids it trained on)"
        )
    if data.get("pretraining") is not None or data["suite"] in suite_registry().requiring_pretraining():
        check_pretraining(data.get("pretraining"), where)


def check_pretraining(value: Any, where: str = "submission") -> None:
    """Raise `SubmissionError` unless ``value`` is the ``pretraining`` object of the schema: evaluations
    (a count up to `MAX_EVALUATIONS`), wall_s (0 to `MAX_WALL_S`, at least `MIN_SECONDS_PER_EVALUATION`
    per evaluation), machine (one line of text) and counted (`PRETRAINING_COUNTED`)."""
    fields = {"evaluations": int, "wall_s": (int, float), "machine": str, "counted": str}
    if not isinstance(value, dict):
        required = suite_registry().requiring_pretraining()
        suites = f"suite{'s' if len(required) > 1 else ''} {', '.join(required)}"
        raise SubmissionError(f"{where}: field 'pretraining' must be an object with {', '.join(fields)} "
                              f"(required for {suites}), got {_type_name(value)}")
    if set(value) != set(fields):
        raise SubmissionError(f"{where}: field 'pretraining' has {', '.join(map(shown, sorted(value)))}; "
                              f"it needs exactly {', '.join(fields)}")
    _check_evaluations(value["evaluations"], where, "pretraining.evaluations")
    _check_wall(value["wall_s"], where, "pretraining.wall_s")
    if value["wall_s"] < value["evaluations"] * MIN_SECONDS_PER_EVALUATION:
        # Counted by the harness or declared, each evaluation is a simulation of some us at least.
        raise SubmissionError(f"{where}: field 'pretraining.wall_s' is {value['wall_s']!r} s for "
                              f"{value['evaluations']} evaluations; allowed: at least "
                              f"{MIN_SECONDS_PER_EVALUATION:g} s per evaluation (no simulation is faster)")
    check_text(value["machine"], where, "pretraining.machine", "machine")
    if value["counted"] not in PRETRAINING_COUNTED:
        raise SubmissionError(f"{where}: field 'pretraining.counted' is {shown(value['counted'])}; allowed: "
                              f"{', '.join(PRETRAINING_COUNTED)}")


def check_result(result: Any, where: str = "result") -> None:
    """Raise `SubmissionError` unless one task's result has every field, of the right type and range:
    a placement {op name: device name}, a finite positive runtime, counts from 0, finite seconds."""
    if not isinstance(result, dict):
        raise SubmissionError(f"{where}: a task's result must be a JSON object, got {_type_name(result)}")
    _check_fields(result, REQUIRED_RESULT_FIELDS, where)
    check_text(result["graph_sha256"], where, "graph_sha256", "graph_sha256")
    _check_seconds(result["runtime"], where, "runtime", positive=True)
    _check_evaluations(result["evaluations"], where, "evaluations")
    _check_wall(result["wall_s"], where, "wall_s")
    if result.get("measured_runtime") is not None:
        _check_seconds(result["measured_runtime"], where, "measured_runtime", positive=True)
    if result.get("trace") is not None:
        check_trace(result["trace"], result["evaluations"], where)
    placement = result["placement"]
    if isinstance(placement, str):
        if not (_PLACEMENT_TEXT.fullmatch(placement)
                or (len(placement) <= MAX_PLAN_ID and _PLAN_ID.fullmatch(placement))):
            raise SubmissionError(f"{where}: a placement as text holds one character per op, each a digit or "
                                  "a lowercase letter (the device's index, 0-9a-z), or is a plan's id "
                                  f"(tokens of 0-9a-z and '.' joined by '-', at most {MAX_PLAN_ID} "
                                  "characters)")
        return
    devices = list(placement.values())
    # One joined check for the thousands of ops of a placement; the loop below only names the culprit.
    if (all(type(device) is str for device in devices) and "".join(placement).isprintable()
            and "".join(devices).isprintable()
            and max(map(len, placement), default=0) <= TEXT_LIMITS["op name"]
            and max(map(len, devices), default=0) <= TEXT_LIMITS["device name"]):
        return
    for op, device in placement.items():
        check_text(op, where, "placement (an op name)", "op name")
        if not isinstance(device, str):
            raise SubmissionError(f"{where}: placement of op {shown(op)} is {_type_name(device)}; "
                                  "expected a device name (string)")
        check_text(device, where, "placement (a device name)", "device name")


def check_trace(trace: Any, evaluations: int, where: str = "result") -> None:
    """Raise `SubmissionError` unless ``trace`` is a list of at most `MAX_TRACE_POINTS`
    ``[evaluations, runtime]`` pairs with evaluations rising from 1 to at most ``evaluations`` and
    runtimes finite, positive and falling (each point is an improvement)."""
    _check_type(trace, list, where, "trace")
    if len(trace) > MAX_TRACE_POINTS:
        raise SubmissionError(
            f"{where}: trace has {len(trace)} points; at most {MAX_TRACE_POINTS} are allowed"
        )
    last_count, last_runtime = 0, math.inf
    for i, point in enumerate(trace):
        if not (isinstance(point, list) and len(point) == 2):
            raise SubmissionError(f"{where}: trace[{i}] must be a pair [evaluations, runtime], "
                                  f"got {shown(point)}")
        _check_count(point[0], where, f"trace[{i}] evaluations")
        _check_seconds(point[1], where, f"trace[{i}] runtime", positive=True)
        if not last_count < point[0] <= evaluations:
            raise SubmissionError(f"{where}: trace[{i}] is at {point[0]} evaluations; the counts must rise, "
                                  f"from 1 to the result's {evaluations} evaluations")
        if not point[1] < last_runtime:
            raise SubmissionError(f"{where}: trace[{i}] runtime {shown(point[1])} is no improvement on "
                                  f"{shown(last_runtime)}; a trace lists improvements only")
        last_count, last_runtime = point[0], point[1]


def thin_trace(trace: list[tuple[int, float]]) -> list[list]:
    """The submission form of a harness trace: per 1/`TRACE_POINTS_PER_DECADE` of a decade of
    evaluations, only the last improvement (the curve on a log axis looks the same), as JSON pairs."""
    kept: dict[int, tuple[int, float]] = {}
    for count, runtime in trace:
        kept[math.floor(TRACE_POINTS_PER_DECADE * math.log10(count))] = (count, runtime)
    return [[int(count), float(runtime)] for count, runtime in kept.values()][-MAX_TRACE_POINTS:]


def load_submission(path: str | Path) -> dict:
    """Read and schema-check one submission file (bounded, and a regular file that is not a symbolic
    link: see this module's docstring)."""
    return read_submission(path)[1]


def read_submission(path: str | Path) -> tuple[bytes, dict]:
    """The bytes of one submission file and their schema-checked contents (`load_submission`), for a
    caller that copies the very bytes it checked."""
    try:
        raw = read_bytes(path, MAX_FILE_BYTES, "submission file", follow_symlinks=False)
    except UntrustedFileError as error:
        raise SubmissionError(str(error)) from None
    where = path_text(path)
    return raw, check_schema(parse_submission(raw, where), where)


def dump_submission(data: dict) -> str:
    """The canonical text of a submission (sorted keys, so that files diff well)."""
    return json.dumps(data, indent=1, sort_keys=True) + "\n"


def save_submission(data: dict, path: str | Path) -> Path:
    """Schema-check and write a submission; returns the path. The file is replaced atomically
    (`write_inside`), so a run stopped while it writes leaves the file as it was, never half of it."""
    path = Path(path)
    text = dump_submission(check_schema(data, str(path)))
    write_inside(path.parent, path.name, text)
    return path


def budget_label(budget: int | None) -> str:
    """A budget of evaluations as a short label: ``1k``, ``10k``, ``100k``, ``1M``; other numbers as they
    are; ``default`` for None (the agent's own default)."""
    if budget is None:
        return "default"
    for unit, scale in (("M", 1_000_000), ("k", 1_000)):
        if budget >= scale and budget % scale == 0:
            return f"{budget // scale}{unit}"
    return str(budget)


def submission_filename(data: dict) -> str:
    """A file name for a submission: ``<suite>-<algorithm>[-<budget>]-seed<seed>.json`` with safe
    characters; the budget (`budget_label`) is left out when the submission gives none."""
    safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in data["algorithm"])
    budget = "" if data.get("budget") is None else f"-{budget_label(data['budget'])}"
    return f"{data['suite']}-{safe}{budget}-seed{data['seed']}.json"
