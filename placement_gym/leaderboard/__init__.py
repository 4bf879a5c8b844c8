"""The leaderboard: versioned task suites, submission files, validation and rendering.

``evaluate(agent, suite="v0", budget=N, algorithm=...)`` runs any agent over a suite and writes a
submission; `validate_file` re-evaluates one; `render` writes the leaderboard README and chart
(several seeds of an algorithm as one entry, the median seed per task); `get_split` gives a suite's
generalisation split (training graphs and held-out graphs).
"""

from placement_gym.leaderboard.generalisation import SPLITS, Split, get_split
from placement_gym.leaderboard.harness import evaluate, task_digest
from placement_gym.leaderboard.render import (
    load_submissions,
    median_run,
    render,
    render_chart,
    render_markdown,
)
from placement_gym.leaderboard.submission import (
    SubmissionError,
    check_schema,
    load_submission,
    save_submission,
    submission_filename,
)
from placement_gym.leaderboard.suite import (
    CURRENT_SUITE,
    SUITES,
    Suite,
    SuiteTask,
    check_suite,
    get_suite,
)
from placement_gym.leaderboard.validate import SubmissionCheck, TaskCheck, validate_file, validate_submission

__all__ = [
    "CURRENT_SUITE", "SPLITS", "SUITES", "Split", "SubmissionCheck", "SubmissionError", "Suite", "SuiteTask",
    "TaskCheck", "check_schema", "check_suite", "evaluate", "get_split", "get_suite", "load_submission",
    "load_submissions", "median_run", "render", "render_chart", "render_markdown", "save_submission",
    "submission_filename",
    "task_digest", "validate_file", "validate_submission",
]
