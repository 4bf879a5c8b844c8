"""Learning curves of the leaderboard: one PNG per task, every entry's best runtime so far against its
evaluations (log axis), with the proven lower bound and the best known runtime as lines.

A curve is the harness's trace of the entry's median seed (`Task.trace`: the evaluation counts at which
the best feasible runtime improved); an entry without a recorded trace (a heuristic, an older
submission) is one point at (its evaluations, its runtime). Entries of one algorithm at several budgets
share a colour and line style (ten colours, then the same colours dash-dotted, then dotted); the curve
of the largest budget that recorded one is drawn as a line, the others as points; constructive
heuristics (at most `CONSTRUCTIVE_EVALUATIONS` evaluations, no curve) are grey marks. The legend
stands beside the plot. Runtimes above `Y_RANGE` x the best known are off the plot.
"""

from __future__ import annotations

import io
import math
from typing import Any

from placement_gym.common.extras import require
from placement_gym.leaderboard.ranking import Entry

CURVES_DIR = "curves"
# Entries that never evaluate more than this and record no curve are constructive heuristics.
CONSTRUCTIVE_EVALUATIONS = 10
# The plot shows runtimes up to this multiple of the best known (a random placement's would flatten
# every curve); what is slower is off the plot.
Y_RANGE = 1.6
# Line style and point marker of the algorithms drawn in colour, in turn once the ten colours are used.
_STYLES = (("-", "o"), ("-.", "s"), (":", "^"))


def curve_file_name(task_id: str) -> str:
    """The PNG file name of a task's curves: its id with ``/`` as ``_``, and the ``:`` of a dataset
    graph's id (``unrolled-v1:gnmt-tf-4/...``) as ``_`` too, since Windows allows no colon in a file
    name."""
    return task_id.replace("/", "_").replace(":", "_") + ".png"


def figure_png(figure: Any, dpi: int) -> bytes:
    """The matplotlib ``figure`` as PNG bytes, closed afterwards. Drawn in memory, so that ``render``
    writes a file only once every figure is drawn and ``render --check`` compares bytes; the same
    figure gives the same bytes (no time stamp, no version string)."""
    import matplotlib.pyplot as plt

    buffer = io.BytesIO()
    try:
        # No "Software" metadata: the PNG must not change with the matplotlib version string.
        figure.savefig(buffer, format="png", dpi=dpi, metadata={"Software": None})
    finally:
        plt.close(figure)
    return buffer.getvalue()


def curves_png(task_id: str, task_entries: list[Entry], lower_bound: float, best_known: float) -> bytes:
    """The PNG of ``task_entries``' curves of one task (module docstring)."""
    matplotlib = require("matplotlib", "drawing the learning curves")
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(figsize=(9.5, 5))
    by_algorithm: dict[str, list[Entry]] = {}
    for entry in task_entries:
        if entry.feasible:
            by_algorithm.setdefault(entry.algorithm.split(" (")[0], []).append(entry)
    colours = plt.get_cmap("tab10")
    constructive_labelled = False
    index = -1  # of the algorithms drawn in colour
    for algorithm, runs in sorted(by_algorithm.items()):
        traced = [e for e in runs if e.trace]
        line = max(traced, key=lambda e: e.evaluations) if traced else None
        if line is None and max(e.evaluations for e in runs) <= CONSTRUCTIVE_EVALUATIONS:
            # Heuristics that construct a placement: one grey mark each, one legend entry for all.
            for entry in runs:
                axes.plot([max(entry.evaluations, 1)], [entry.runtime], "x", color="grey", markersize=5,
                          label=None if constructive_labelled else "constructive heuristics")
                constructive_labelled = True
            continue
        index += 1
        colour = colours(index % 10)
        style, marker = _STYLES[(index // 10) % len(_STYLES)]
        if line is not None:
            counts = [n for n, _ in line.trace] + [max(line.evaluations, line.trace[-1][0])]
            values = [r for _, r in line.trace] + [line.trace[-1][1]]
            axes.step(counts, values, where="post", color=colour, linestyle=style, label=algorithm,
                      linewidth=1.4)
        for entry in runs:
            if entry is not line:
                axes.plot([max(entry.evaluations, 1)], [entry.runtime], marker, color=colour, markersize=5,
                          label=algorithm if line is None and entry is runs[0] else None)
    axes.axhline(lower_bound, color="black", linestyle="--", linewidth=1, label="lower bound")
    if not math.isnan(best_known):
        axes.axhline(best_known, color="black", linestyle=":", linewidth=1, label="best known")
    axes.set_xscale("log")
    reference = best_known if not math.isnan(best_known) else lower_bound
    axes.set_ylim(0.97 * lower_bound, Y_RANGE * reference)
    axes.set_xlabel("evaluations of the task (log)")
    axes.set_ylabel("best runtime so far (s)")
    axes.set_title(f"{task_id}: learning curves")
    axes.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0.0)
    figure.tight_layout()
    return figure_png(figure, dpi=90)
