"""A corpus of hostile submission files: every one must get exit 1 and a one-line reason from
`placement-gym leaderboard validate`, quickly, and leave everything outside its folder as it was.

Cases are built from a good submission (`good_submission`) so that each breaks exactly one thing:
``MALFORMED`` changes its parsed JSON, ``UNREADABLE`` is raw bytes, ``INCONSISTENT`` breaks a cross-field
rule of the schema (issue 23, point 7), and `write_corpus` adds the cases that are not plain files
(a link to /dev/zero, a link outside the folder, a folder, a FIFO)."""

from __future__ import annotations

import copy
import json
import os
from collections.abc import Callable
from pathlib import Path

from placement_gym.evaluation.placements import single_placement
from placement_gym.leaderboard import evaluate, get_suite

TASK_ID = "cifar10_cnn/k80x2/train"
# The suite of the good submission: v1 writes placements as {op name: device name}, which cases edit.
SUITE = "v1"
EVIL = "evil | <img src=x onerror=alert(1)> [click](javascript:alert(1))"
Change = Callable[[dict, dict], None]


def good_submission() -> dict:
    """A valid one-task submission: every op on the last device (0 evaluations)."""
    return evaluate(lambda task, seed, budget: single_placement(task, task.n_devices - 1),
                    get_suite(SUITE).subset([TASK_ID]), algorithm="last-device", authors=["tests"],
                    description="every op on the last device")


def mutated(good: dict, change: Change) -> dict:
    """A deep copy of ``good`` with ``change(data, result of TASK_ID)`` applied."""
    data = copy.deepcopy(good)
    change(data, data["results"][TASK_ID])
    return data


def _set(key, value, where="top") -> Change:
    def change(data, result):
        (data if where == "top" else result)[key] = value
    return change


def _delete(key, where="top") -> Change:
    def change(data, result):
        del (data if where == "top" else result)[key]
    return change


def _all(*changes: Change) -> Change:
    def change(data, result):
        for each in changes:
            each(data, result)
    return change


def _drop_first_op(data, result):
    result["placement"].pop(sorted(result["placement"])[0])


def _extra_op(data, result):
    result["placement"]["not_an_op"] = "gpu:0"


def _unknown_task(data, result):
    data["results"]["cifar10_cnn/k80x99/train"] = data["results"].pop(TASK_ID)


def _trace(*points: tuple[int, float], scale_by_runtime: bool = True) -> Change:
    """A trace of (evaluations, runtime as a multiple of the result's runtime), with the evaluations
    the trace needs."""
    def change(data, result):
        result["trace"] = [[n, r * result["runtime"] if scale_by_runtime else r] for n, r in points]
        result["evaluations"] = max(n for n, _ in points)
        result["trained_on_task"] = True
        result["wall_s"] = 1.0
    return change


def _below_bound(data, result):
    bound = get_suite(SUITE).get(TASK_ID).lower_bound
    _trace((1, 0.5 * bound), scale_by_runtime=False)(data, result)


_EVALUATED = _all(_set("evaluations", 5, "task"), _set("trained_on_task", True, "task"),
                  _set("wall_s", 1.0, "task"))

# Files that parse as JSON but break the schema: (change, words of the reason).
MALFORMED: dict[str, tuple[Change, str]] = {
    "evil algorithm name": (_set("algorithm", EVIL), "'algorithm'"),
    "algorithm too long": (_set("algorithm", "a" * 65), "'algorithm'"),
    "suite with markup": (_set("suite", "v0<b>"), "'suite'"),
    "wrong type: seed": (_set("seed", "zero"), "'seed' has the wrong type"),
    "wrong type: authors": (_set("authors", "me"), "'authors' has the wrong type"),
    "wrong type: runtime as true": (_set("runtime", True, "task"), "'runtime' has the wrong type"),
    "wrong type: runtime as text": (_set("runtime", "fast", "task"), "'runtime' has the wrong type"),
    "wrong type: placement as list": (_set("placement", [0, 1], "task"), "'placement' has the wrong type"),
    "wrong type: evaluations as float": (_set("evaluations", 1.5, "task"),
                                         "'evaluations' has the wrong type"),
    "wrong type: device as number": (lambda d, r: r["placement"].update({next(iter(r["placement"])): 0}),
                                     "expected a device name"),
    "wrong type: result as list": (lambda d, r: d["results"].update({TASK_ID: [1]}), "must be a JSON object"),
    "missing field: algorithm": (_delete("algorithm"), "missing field 'algorithm'"),
    "missing field: runtime": (_delete("runtime", "task"), "missing field 'runtime'"),
    "negative evaluations": (_set("evaluations", -1, "task"), "'evaluations' is -1"),
    "negative seed": (_set("seed", -3), "'seed' is -3"),
    "zero runtime": (_set("runtime", 0, "task"), "'runtime' is 0"),
    "negative wall time": (_set("wall_s", -0.5, "task"), "'wall_s' is -0.5"),
    "unknown task id": (_unknown_task, "unknown task"),
    "placement one op short": (_drop_first_op, "ops missing"),
    "placement with an unknown op": (_extra_op, "unknown op names"),
    "description too long": (_set("description", "x" * 4001), "'description' has 4001 characters"),
    "author with a terminal escape": (_set("authors", ["\x1b[2Jme"]), "'\\x1b'"),
    "author with a right-to-left override": (_set("authors", ["me\u202etxt.exe"]), "'\\u202e'"),
    "javascript link": (_set("link", "javascript:alert(1)"), "'link'"),
    "link with markup": (_set("link", 'https://x.org/"><img src=x>'), "'link'"),
    "hardware on two lines": (_set("hardware", "K80\n| fake | row |"), "'hardware'"),
    "op name with rich markup": (lambda d, r: r["placement"].update({"[/evil]": "gpu:0"}), "'[/evil]'"),
    "runtime claimed twice as fast": (lambda d, r: r.update(runtime=r["runtime"] / 2), "claimed runtime"),
    "feasibility claimed wrongly": (_set("feasible", False, "task"), "claimed infeasible"),
    "retired suite v0": (_set("suite", "v0"), "suite v0 is retired"),
    "unknown suite": (_set("suite", "v7"), "unknown suite version"),
    # Issue 62, point 7: names that would share a file name, and figures no run can reach.
    "algorithm a+b, whose file name is a_b's": (_set("algorithm", "a+b"), "'algorithm'"),
    "algorithm with a space": (_set("algorithm", "a b"), "'algorithm'"),
    "wall time of 1e300 s": (_set("wall_s", 1e300, "task"), "'wall_s'"),
    "2**63 - 1 evaluations": (_all(_EVALUATED, _set("evaluations", 2**63 - 1, "task")), "'evaluations'"),
    "budget of 2**63 - 1": (_set("budget", 2**63 - 1), "'budget'"),
    "gen-v2: 10**12 pre-training evaluations in 0 s counted by the harness": (
        _all(_set("suite", "gen-v2"), _set("track", "generalisation"),
             _set("trained_on", ["synthetic-v1:train"]),
             _set("pretraining", {"evaluations": 10**12, "wall_s": 0, "machine": "m", "counted": "harness"})),
        "'pretraining.wall_s'"),
    "pre-training of 2**63 - 1 evaluations": (
        _set("pretraining", {"evaluations": 2**63 - 1, "wall_s": 1e7, "machine": "m", "counted": "declared"}),
        "'pretraining.evaluations'"),
    "pre-training of 1e300 s": (
        _set("pretraining", {"evaluations": 1, "wall_s": 1e300, "machine": "m", "counted": "declared"}),
        "'pretraining.wall_s'"),
}

# Fields that are each well-formed but disagree with each other or with the task (point 7).
INCONSISTENT: dict[str, tuple[Change, str]] = {
    "trace below the proven lower bound": (_below_bound, "below the task's proven lower bound"),
    "trace that rises": (_trace((1, 1.0), (2, 1.5)), "no improvement"),
    "trace that ends above the runtime": (_trace((1, 2.0), (3, 1.5)), "trace ends at"),
    "trace past the evaluations": (_all(_trace((1, 1.0)), _set("evaluations", 0, "task"),
                                        _set("trained_on_task", False, "task")), "counts must rise"),
    "trained on the task with 0 evaluations": (_set("trained_on_task", True, "task"),
                                               "trained_on_task is true with 0 evaluations"),
    "evaluated but not trained on the task": (_all(_EVALUATED, _set("trained_on_task", False, "task")),
                                              "trained_on_task is false with 5 evaluations"),
    "budget below the evaluations": (_all(_EVALUATED, _set("budget", 1)), "exceed the declared budget of 1"),
    "100,000 evaluations in a microsecond": (
        _all(_EVALUATED, _set("evaluations", 100_000, "task"), _set("wall_s", 1e-6, "task")),
        "not a measured time"),
    "real track measured in a nanosecond": (
        _all(_set("track", "real"), _set("hardware", "a machine"), _set("measured_runtime", 1e-9, "task")),
        "measured_runtime"),
}

# Files that are not a readable submission at all: (bytes, words of the reason).
UNREADABLE: dict[str, tuple[bytes, str]] = {
    "not JSON": (b"{not json", "not valid JSON"),
    "not UTF-8": (b'{"algorithm": "caf\xe9"}', "not UTF-8"),
    "nested 100,000 levels deep": (b"[" * 100_000 + b"]" * 100_000, "nests 100000 levels deep"),
    "NaN runtime": (b'{"runtime": NaN}', "NaN is not allowed"),
    "Infinity runtime": (b'{"runtime": Infinity}', "Infinity is not allowed"),
    "runtime overflowing to infinity": (b'{"runtime": 1e999}', "out of range"),
    "integer of 5,000 digits": (b'{"seed": ' + b"9" * 5000 + b"}", "more than 19 digits"),
    "duplicate key": (b'{"seed": 0, "seed": 1}', "duplicate key 'seed'"),
    "a list, not an object": (b"[]", "a submission is a JSON object"),
    "100 KB of escaped quotes in an open string": (b'{"a": "' + b'\\"' * 50_000, "not valid JSON"),
    "100 KB of open brackets in a string": (b'{"a": "' + b"[" * 100_000 + b'"}', "missing field"),
}


def file_name(case: str) -> str:
    """A plain file name for a case (letters, digits and - only)."""
    return "".join(c if c.isalnum() else "-" for c in case.lower()).strip("-") + ".json"


def write_corpus(folder: Path, good: dict, outside: Path) -> dict[str, str | None]:
    """Write every case into ``folder`` (file name: `file_name` of the case); ``outside`` is a file
    outside the folder that one case links to. Returns {file name: words of the reason, or None where
    only the refusal is checked}."""
    folder.mkdir(parents=True, exist_ok=True)
    expected: dict[str, str | None] = {}
    for case, (change, words) in {**MALFORMED, **INCONSISTENT}.items():
        (folder / file_name(case)).write_text(json.dumps(mutated(good, change)))
        expected[file_name(case)] = words
    for case, (raw, words) in UNREADABLE.items():
        (folder / file_name(case)).write_bytes(raw)
        expected[file_name(case)] = words
    os.symlink("/dev/zero", folder / "link-to-dev-zero.json")
    os.symlink(outside, folder / "link-outside-the-folder.json")
    (folder / "a-folder.json").mkdir()
    os.mkfifo(folder / "a-fifo.json")
    expected.update({name: None for name in ("link-to-dev-zero.json", "link-outside-the-folder.json",
                                             "a-folder.json", "a-fifo.json")})
    return expected
