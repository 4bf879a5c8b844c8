"""Loading the leaderboard's submissions for its pages: every file of a folder read, validated and its
runtimes replaced by the re-simulated ones, or the render refused (`RenderRefused`) naming each file that
fails. The pages (`cost_model_page`, `generalisation_page`) only format what this gives them.

Submission file names appear in the pages inside code spans, so a file whose name is not
`SAFE_FILE_NAME` is refused with the others. A folder without ``submissions/`` is refused
(`require_submissions_folder`) rather than rendered as an empty leaderboard.
"""

from __future__ import annotations

import os
import re
import stat
from pathlib import Path

from placement_gym.common.progress import ProgressCallback
from placement_gym.common.untrusted import UntrustedFileError, path_text, shown
from placement_gym.leaderboard.submission import SubmissionError, load_submission, read_submission
from placement_gym.leaderboard.validate import SubmissionCheck, add_entry_problems, validate_submission

SUBMISSIONS_DIR = "submissions"
# Submission file names appear in the pages inside code spans: letters, digits and . _ - only.
SAFE_FILE_NAME = r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}\.json"


class RenderRefused(ValueError):
    """`render` found submissions that fail validation; ``checks`` holds their verdicts."""

    def __init__(self, checks: list[SubmissionCheck]) -> None:
        self.checks = checks
        named = "; ".join(f"{c.source}: {_first_reason(c)}" for c in checks)
        super().__init__(f"not rendered: {len(checks)} submission(s) fail validation ({named})")


def _first_reason(check: SubmissionCheck) -> str:
    reasons = check.problems + [f"{t.task_id}: {r}" for t in check.tasks for r in t.reasons]
    return reasons[0] + (f" (and {len(reasons) - 1} more)" if len(reasons) > 1 else "")


def load_submissions(directory: str | Path) -> list[tuple[str, dict]]:
    """(file name, submission) for every ``*.json`` under ``directory``, sorted by file name, as the files
    claim them (read and schema-checked, not re-evaluated: `checked_submissions` does both and is what
    `render` publishes)."""
    paths = sorted(Path(directory).glob("*.json"))
    return [(path.name, load_submission(path)) for path in paths]


def resimulated(data: dict, check: SubmissionCheck) -> dict:
    """``data`` with each task's runtime and feasibility replaced by the re-simulated ones of ``check``
    (the claims agree with them within float printing; what is ranked is ours)."""
    copy = {**data, "results": dict(data["results"])}
    for task in check.tasks:
        copy["results"][task.task_id] = {**data["results"][task.task_id], "runtime": task.runtime,
                                         "feasible": task.feasible}
    return copy


def checked_submissions(directory: str | Path) -> list[tuple[str, dict]]:
    """Every submission under ``directory`` after validating it (`validate_submission`) and its name
    (`SAFE_FILE_NAME`), with the re-simulated runtimes and feasibility in place of the claimed ones
    (`resimulated`). Raises `RenderRefused` naming every file that fails, and `SuiteMismatchError` when
    the cost model no longer reproduces the current suite."""
    return [(name, data) for name, _, data in checked_files(directory)]


def checked_files(directory: str | Path, progress: ProgressCallback | None = None
                  ) -> list[tuple[str, bytes, dict]]:
    """`checked_submissions` with the bytes each file was parsed from (what a re-run record hashes);
    ``progress`` (`placement_gym.common.progress`) is told each file as it starts."""
    failing: list[SubmissionCheck] = []
    checks: list[tuple[str, bytes, SubmissionCheck]] = []
    paths = sorted(Path(directory).glob("*.json"))
    for done, path in enumerate(paths):
        if progress is not None:
            progress("validating submissions", done, len(paths), path.name)
        if not re.fullmatch(SAFE_FILE_NAME, path.name):
            failing.append(
                SubmissionCheck(
                    shown(path.name),
                    [
                        "file name: allowed are letters, digits and . _ - (at most 128 characters), "
                        "ending in .json"
                    ],
                )
            )
            continue
        try:
            raw, data = read_submission(path)
        except SubmissionError as error:
            failing.append(SubmissionCheck(str(path), [str(error)]))
            continue
        checks.append((path.name, raw, validate_submission(data, str(path))))
    # A file that joins an entry declaring other fields than its files is refused with its entry.
    add_entry_problems([check for _, _, check in checks])
    failing += [check for _, _, check in checks if not check.ok]
    if failing:
        raise RenderRefused(failing)
    return [(name, raw, resimulated(check.data, check)) for name, raw, check in checks]


def require_submissions_folder(directory: Path) -> None:
    """`UntrustedFileError` unless ``directory`` holds a folder ``submissions/``: without one, `render`
    would replace the pages by an empty leaderboard."""
    try:
        is_folder = stat.S_ISDIR(os.lstat(directory / SUBMISSIONS_DIR).st_mode)
    except OSError:  # missing, or ``directory`` is not a folder
        is_folder = False
    if not is_folder:
        raise UntrustedFileError(f"{path_text(directory)} is not a leaderboard folder: it has no folder "
                                 f"{SUBMISSIONS_DIR}/ (a leaderboard folder is made with 'placement-gym "
                                 "leaderboard init DIR'); nothing rendered")
