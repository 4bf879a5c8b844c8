"""The leaderboard's images: a suite's chart (the overall score per entry, a panel per budget track) and
the learning curves of each of its tasks (`curves`), as PNG bytes; nothing is written but by
`render_chart`."""

from __future__ import annotations

from pathlib import Path

from placement_gym.common.extras import require
from placement_gym.common.progress import ProgressCallback
from placement_gym.common.untrusted import write_inside
from placement_gym.leaderboard.curves import curve_file_name, curves_png, figure_png
from placement_gym.leaderboard.layout import suite_page
from placement_gym.leaderboard.ranking import (
    TRACK_BUDGETS,
    best_known_runtimes,
    budget_track,
    entries,
    group_submissions,
    overall_rows,
    split_verified,
)
from placement_gym.leaderboard.suite import Suite, get_suite
from placement_gym.leaderboard.task_bounds import TaskBound


def render_chart(
    submissions: list[tuple[str, dict]], path: str | Path, suite: str | Suite | None = None,
    verified: set[str] | None = None,
) -> bool:
    """Write the chart (`chart_png`) to ``path`` (`write_inside`: atomically, never through a link);
    False when there is nothing to draw."""
    png = chart_png(submissions, suite, verified)
    if png is None:
        return False
    path = Path(path)
    write_inside(path.parent, path.name, png)
    return True


def chart_png(
    submissions: list[tuple[str, dict]], suite: str | Suite | None = None, verified: set[str] | None = None
) -> bytes | None:
    """The PNG of a bar chart of the overall score per entry, one panel per budget track (entries whose
    budget is verified, as in `render_markdown`); None when there is nothing."""
    suite = get_suite(suite)
    groups, _ = split_verified(group_submissions(submissions, suite), verified)
    tracks = [
        (budget, overall_rows(submissions, suite, groups=budget_track(groups, budget)))
        for budget in TRACK_BUDGETS
    ]
    if not any(rows for _, rows in tracks):
        return None
    matplotlib = require("matplotlib", "drawing the plot")
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    longest = max(len(rows) for _, rows in tracks)
    figure, panels = plt.subplots(1, len(tracks), figsize=(5 * len(tracks), 0.32 * longest + 1.4))
    for axes, (budget, rows) in zip(panels, tracks):
        rows = rows[::-1]  # best at the top of a horizontal bar chart
        # "$" would start matplotlib's math text: labels are shown as written.
        axes.barh([r["name"].replace("$", r"\$") for r in rows], [r["score"] for r in rows], color="#4c72b0")
        axes.set_xlim(0.0, 1.0)
        axes.tick_params(axis="y", labelsize=8)
        axes.set_title(f"at most {budget:,} evaluations")
        axes.set_xlabel("score (mean of best known / runtime)")
    figure.suptitle(f"placement-gym leaderboard, suite {suite.version}")
    figure.tight_layout()
    return figure_png(figure, dpi=100)


def render_all_curves(
    submissions: list[tuple[str, dict]], bounds: dict[str, TaskBound], suite: str | Suite | None = None,
    progress: ProgressCallback | None = None,
) -> dict[str, bytes]:
    """Every task's learning curves (`curves.curves_png`), by their file names in a leaderboard folder
    (in the suite's curves folder, `suite_page`); ``progress`` is told each task as it starts."""
    suite = get_suite(suite)
    folder = suite_page(suite.version).curves
    best_known = best_known_runtimes(submissions, suite)
    groups = group_submissions(submissions, suite)
    drawn = [(task_id, task_entries) for task_id, task_entries in entries(submissions, suite, groups).items()
             if task_entries]
    curves = {}
    for done, (task_id, task_entries) in enumerate(drawn):
        if progress is not None:
            progress(f"drawing the learning curves of suite {suite.version}", done, len(drawn), task_id)
        png = curves_png(task_id, task_entries, bounds[task_id].value, best_known[task_id])
        curves[f"{folder}/{curve_file_name(task_id)}"] = png
    return curves
