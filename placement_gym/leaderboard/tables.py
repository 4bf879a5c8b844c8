"""The cells and tables the leaderboard's pages share: an entry's row, the overall ranking table, and the
fixed formats of their figures (so that a render is the same text every time)."""

from __future__ import annotations

import math

from placement_gym.leaderboard.markdown import file_list, markdown_table, markdown_text
from placement_gym.leaderboard.ranking import Entry


def speedup_and_gap_cells(entry: Entry) -> list[str]:
    """The speedup and gap cells; "-" for an infeasible placement, whose makespan is no speedup (it
    does not fit in memory, so the step would not run)."""
    if not entry.feasible:
        return ["-", "-"]
    return [f"{entry.speedup:.3f}x", f"{100 * entry.gap:.1f}%"]


def seconds_cell(value: float) -> str:
    """Seconds in six significant digits."""
    return f"{value:.6g}"


def ratio_cell(value: float, suffix: str, scale: float = 1.0, digits: int = 3) -> str:
    """``value`` x ``scale`` with ``digits`` decimals and ``suffix``; "-" for NaN (nothing to show)."""
    return "-" if math.isnan(value) else f"{scale * value:.{digits}f}{suffix}"


def spread_cell(entry: Entry) -> str:
    """The runtimes' span over seeds, or "-" for a single seed."""
    if entry.seeds < 2:
        return "-"
    return f"{seconds_cell(entry.runtime_min)}–{seconds_cell(entry.runtime_max)}"


def overall_table(
    rows: list[dict], n_tasks: int, tasks_column: str = "tasks", trained_on: bool = False, names: bool = False
) -> list[str]:
    """The overall ranking table of ``rows`` (`overall_rows`); ``names``: the algorithm's name alone (a
    budget track has one entry per algorithm, its budget in its own column)."""
    columns = [
        "rank",
        "algorithm",
        "budget",
        "score",
        "seeds",
        tasks_column,
        "infeasible",
        "geomean speedup",
        "geomean gap",
    ]
    right = [True, False, True, True, True, True, True, True, True]
    if trained_on:
        columns.append("trained on")
        right.append(True)
    cells = []
    for i, r in enumerate(rows):
        row = [
            str(i + 1),
            markdown_text(r["name"] if names else r["algorithm"]),
            r["budget"],
            f"{r['score']:.3f}",
            str(r["seeds"]),
            f"{r['tasks']}/{n_tasks}",
            str(r["infeasible"]),
            ratio_cell(r["geomean_speedup"], "x"),
            ratio_cell(r["geomean_gap"], "%", 100, 1),
        ]
        if trained_on:
            row.append(f"{len(r['trained_on'])} tasks")
        cells.append([*row, file_list(r["sources"])])
    return markdown_table([*columns, "files"], cells, [*right, False])


ENTRY_COLUMNS = [
    "algorithm",
    "budget",
    "runtime (s)",
    "score",
    "speedup",
    "gap to bound",
    "evaluations",
    "wall (s)",
    "feasible",
    "seeds",
    "runtime over seeds (s)",
]
ENTRY_RIGHT = [False, True, True, True, True, True, True, True, False, True, True]


def entry_cells(entry: Entry) -> list[str]:
    """One entry's cells, in `ENTRY_COLUMNS` order."""
    return [
        markdown_text(entry.algorithm),
        entry.budget,
        seconds_cell(entry.runtime),
        f"{entry.score:.3f}",
        *speedup_and_gap_cells(entry),
        str(entry.evaluations),
        f"{entry.wall_s:.2f}",
        "yes" if entry.feasible else "no",
        str(entry.seeds),
        spread_cell(entry),
    ]
