"""The leaderboard: versioned task suites, submission files, validation and rendering.

``evaluate(agent, suite="v3", budget=N, algorithm=...)`` runs any agent over a suite and writes a
submission; `validate_file` re-evaluates one (raising `SuiteMismatchError` when the cost model no
longer reproduces the suite's fingerprint, `check_suite`); `render` validates every submission, then
writes the leaderboard README and chart (several seeds of an algorithm as one entry, the median seed
per task, ranked by a per-task score no task can dominate) or raises `RenderRefused`; `get_split`
gives a suite's generalisation split (training graphs and held-out graphs). The README ranks suite v3
(`CURRENT_SUITE`: v1's tasks plus today's workloads); v1 and v2 are accepted and ranked on pages of their own.
"""

from placement_gym.leaderboard.generalisation import SPLITS, Split, get_split
from placement_gym.leaderboard.harness import evaluate, task_digest
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
    CURRENT_SUITE,
    SUITES,
    Suite,
    SuiteMismatchError,
    SuiteTask,
    check_suite,
    get_suite,
    require_suite,
    suite_mismatch,
)
from placement_gym.leaderboard.validate import SubmissionCheck, TaskCheck, validate_file, validate_submission

__all__ = [
    "CURRENT_SUITE", "SPLITS", "SUITES", "RenderRefused", "Split", "SubmissionCheck", "SubmissionError",
    "Suite", "SuiteMismatchError", "SuiteTask", "TaskCheck", "check_schema", "check_suite",
    "checked_submissions", "evaluate", "get_split", "get_suite", "load_submission", "load_submissions",
    "median_run", "parse_submission", "render", "render_chart", "render_markdown", "require_suite",
    "save_submission", "submission_filename", "suite_mismatch", "task_digest", "task_score", "validate_file",
    "validate_submission",
]
