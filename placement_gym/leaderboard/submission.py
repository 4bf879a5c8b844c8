"""The submission file: one JSON file per algorithm run over (part of) a suite.

Schema (``schema`` = 1)::

    {
      "schema": 1,
      "suite": "v0",                      # suite version the runtimes were computed under
      "package_version": "0.1.0",         # placement_gym.__version__ of the run
      "algorithm": "heft",                # short name shown in the tables
      "authors": ["..."],
      "description": "...",
      "link": null,                       # optional URL (paper, code)
      "seed": 0,
      "budget": null,                     # evaluations allowed per task (null: the agent's default)
      "track": "cost_model",              # optional: "cost_model" (default) | "real" | "generalisation"
      "hardware": null,                   # optional, track "real": the machine measured on
      "trained_on": [],                   # task ids trained on; required (non-empty) for track
                                          # "generalisation", whose results are held-out tasks only
      "results": {
        "<task id>": {
          "graph_sha256": "...",          # of the graph the placement was made for
          "placement": {"<op name>": "<device name>", ...},
          "runtime": 0.0123,              # claimed cost-model runtime (s); re-checked by validate
          "feasible": true,               # claimed feasibility (fits in every device's memory)
          "evaluations": 100,             # cost-model evaluations the algorithm used on this task
          "wall_s": 1.5,                  # the algorithm's wall-clock seconds on this task
          "trained_on_task": false,       # whether the algorithm was trained on this very task
          "measured_runtime": null        # optional, track "real": measured step time (s)
        }
      }
    }
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

SCHEMA_VERSION = 1
TRACKS = ("cost_model", "real", "generalisation")
REQUIRED_FIELDS = {
    "schema": int, "suite": str, "package_version": str, "algorithm": str, "authors": list,
    "description": str, "seed": int, "results": dict,
}
REQUIRED_RESULT_FIELDS = {
    "graph_sha256": str, "placement": dict, "runtime": (int, float), "feasible": bool,
    "evaluations": int, "wall_s": (int, float), "trained_on_task": bool,
}


class SubmissionError(ValueError):
    """A submission file that cannot be read or does not follow the schema."""


def _check_fields(data: dict, required: dict, where: str) -> None:
    for name, kind in required.items():
        if name not in data:
            raise SubmissionError(f"{where}: missing field {name!r}; required: {', '.join(required)}")
        value = data[name]
        # bool is an int in Python; a count or seed given as true/false is a mistake.
        if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
            raise SubmissionError(f"{where}: field {name!r} has the wrong type ({type(value).__name__})")


def check_schema(data: Any, where: str = "submission") -> dict:
    """Return ``data`` if it follows the schema, else raise `SubmissionError` naming the problem.
    Per-task problems are only checked for their fields here; `validate` checks their content."""
    if not isinstance(data, dict):
        raise SubmissionError(f"{where}: a submission is a JSON object, got {type(data).__name__}")
    _check_fields(data, REQUIRED_FIELDS, where)
    if data["schema"] != SCHEMA_VERSION:
        raise SubmissionError(f"{where}: schema {data['schema']} is not supported; expected {SCHEMA_VERSION}")
    track = data.get("track", "cost_model")
    if track not in TRACKS:
        raise SubmissionError(f"{where}: unknown track {track!r}; allowed: {', '.join(TRACKS)}")
    trained_on = data.get("trained_on", [])
    if not isinstance(trained_on, list) or not all(isinstance(t, str) for t in trained_on):
        raise SubmissionError(f"{where}: 'trained_on' must be a list of task ids (strings)")
    if track == "generalisation" and not trained_on:
        raise SubmissionError(
            f"{where}: a generalisation submission must state 'trained_on' (the task ids it trained on)"
        )
    if not data["results"]:
        raise SubmissionError(f"{where}: 'results' holds no task")
    return data


def load_submission(path: str | Path) -> dict:
    """Read and schema-check one submission file."""
    path = Path(path)
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        raise SubmissionError(f"submission file {path} does not exist") from None
    except json.JSONDecodeError as error:
        raise SubmissionError(f"submission file {path} is not valid JSON: {error}") from None
    return check_schema(data, str(path))


def dump_submission(data: dict) -> str:
    """The canonical text of a submission (sorted keys, so that files diff well)."""
    return json.dumps(data, indent=1, sort_keys=True) + "\n"


def save_submission(data: dict, path: str | Path) -> Path:
    """Schema-check and write a submission; returns the path."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(dump_submission(check_schema(data, str(path))))
    return path


def submission_filename(data: dict) -> str:
    """A file name for a submission: ``<suite>-<algorithm>-seed<seed>.json`` with safe characters."""
    safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in data["algorithm"])
    return f"{data['suite']}-{safe}-seed{data['seed']}.json"
