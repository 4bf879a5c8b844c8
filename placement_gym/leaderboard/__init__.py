"""The leaderboard: versioned task suites, submission files, validation and rendering.

``evaluate(agent, budget=N, algorithm=...)`` runs any agent over a suite (default: the current suite)
and writes a submission; `validate_file` re-evaluates one (raising `SuiteMismatchError` when the cost
model no longer reproduces the suite's fingerprint, `check_suite`); `render` validates every submission,
then writes each suite's page, chart and curves (several seeds of an algorithm as one entry, the median
seed per task, ranked by a per-task score no task can dominate) or raises `RenderRefused`; `get_split`
gives a suite's generalisation split (training graphs and held-out graphs). Every suite is a file of
``placement_gym/leaderboard/suites/`` (`registry`): the README ranks the current suite (`CURRENT_SUITE`);
the other accepted suites are ranked on pages of their own.
"""

from typing import Any

from placement_gym.leaderboard.generalisation import Split, get_split, splits
from placement_gym.leaderboard.harness import evaluate, task_digest
from placement_gym.leaderboard.registry import suite_registry
from placement_gym.leaderboard.render import (
    RenderRefused,
    checked_submissions,
    load_submissions,
    median_run,
    render,
    render_chart,
    render_markdown,
    task_score,
)
from placement_gym.leaderboard.submission import (
    SubmissionError,
    check_schema,
    load_submission,
    parse_submission,
    save_submission,
    submission_filename,
)
from placement_gym.leaderboard.suite import (
    Suite,
    SuiteMismatchError,
    SuiteTask,
    check_suite,
    get_suite,
    require_suite,
    suite_mismatch,
)
from placement_gym.leaderboard.validate import SubmissionCheck, TaskCheck, validate_file, validate_submission


def __getattr__(name: str) -> Any:
    """`CURRENT_SUITE` (the current suite's version), `SUITES` (every suite by version) and `SPLITS`
    (every generalisation split by suite), read from the suite registry in use when asked."""
    if name == "CURRENT_SUITE":
        return suite_registry().current().version
    if name == "SUITES":
        return dict(suite_registry().suites)
    if name == "SPLITS":
        return splits()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "CURRENT_SUITE", "SPLITS", "SUITES", "RenderRefused", "Split", "SubmissionCheck", "SubmissionError",
    "Suite", "SuiteMismatchError", "SuiteTask", "TaskCheck", "check_schema", "check_suite",
    "checked_submissions", "evaluate", "get_split", "get_suite", "load_submission", "load_submissions",
    "median_run", "parse_submission", "render", "render_chart", "render_markdown", "require_suite",
    "save_submission", "submission_filename", "suite_mismatch", "task_digest", "task_score", "validate_file",
    "validate_submission",
]
