"""Learning curves of the leaderboard: one PNG per task, the best runtime so far of the entries that
matter against their evaluations (log axis), with the reference lines.

What a plot shows (`shown_algorithms`), per algorithm (its entries at several budgets together):
the `TOP_ALGORITHMS` algorithms with the fastest feasible result on the task, the papers' learned
agents (`PAPER_AGENTS`) and the references: the curve of the best-known portfolio
(`BEST_KNOWN_AGENT`), the best single device (`SINGLE_DEVICE_AGENT`, a line), the best known runtime
and the proven lower bound (lines). Every other entry, infeasible ones included, is left out and
counted in the legend's last row ("+N more entries: see the table").

A curve is the harness's trace of the entry's median seed (`Task.trace`: the evaluation counts at which
the best feasible runtime improved), drawn for the algorithm's largest budget that recorded one and
ending in a mark; its other budgets, and an entry without a trace (a heuristic, an older submission),
are marks at (its evaluations, its runtime). Each algorithm drawn in colour has a hue and a line style
of its own in the plot (`series_styles`: the papers' agents dashed in fixed hues, the others by a hash
of their name, moved to the least used hue when another algorithm holds theirs); the references are
black and grey.
The legend, ordered by result, stands beside the plot. The y axis spans the lower bound, at least
`Y_RANGE` x the best known and every result shown; it is logarithmic when that spans `LOG_SPAN` or more.
"""

from __future__ import annotations

import io
import math
import zlib
from collections import Counter
from typing import Any

from placement_gym.common.extras import require
from placement_gym.leaderboard.ranking import Entry

CURVES_DIR = "curves"
# Entries that never evaluate more than this and record no curve are constructive heuristics.
CONSTRUCTIVE_EVALUATIONS = 10
# The y axis reaches at least this multiple of the best known, so that a plot whose results all lie
# near it still shows how the curves got there.
Y_RANGE = 1.6
# A y axis that spans this ratio (a decade) or more is logarithmic: linear, the results near the bound
# would be squeezed into a sliver by one slow entry.
LOG_SPAN = 10.0
# How many of the fastest algorithms on the task a plot shows besides the papers' agents.
TOP_ALGORITHMS = 6
# The learned placers of the device-placement papers the baselines re-implement (Mirhoseini et al.
# 2017 and 2018, Gao et al. 2018, Addanki et al. 2019, Duan et al. 2024): shown in every plot.
PAPER_AGENTS = ("pg", "hierarchical", "spotlight", "placeto", "hsdag")
BEST_KNOWN_AGENT = "best-known"
SINGLE_DEVICE_AGENT = "best-single"
# tab10 without its grey (the best single device's line): nine hues. The papers' agents are dashed,
# each in a hue of its own; the other algorithms are solid or dash-dotted (`series_styles`). A style's
# mark ends a curve and marks its points.
_HUES = (0, 1, 2, 3, 4, 5, 6, 8, 9)
_PAPER_STYLE = ("--", "s")
_STYLES = (("-", "o"), ("-.", "^"))
_SLOTS = len(_HUES) * len(_STYLES)


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


def algorithm_name(entry: Entry) -> str:
    """The algorithm of ``entry`` without its budget label (``anneal (10k)`` -> ``anneal``)."""
    return entry.algorithm.split(" (")[0]


def shown_algorithms(task_entries: list[Entry]) -> dict[str, list[Entry]]:
    """The feasible entries a plot draws in colour or as the best-known portfolio's curve, by algorithm,
    fastest algorithm first (module docstring: the `TOP_ALGORITHMS` fastest, the `PAPER_AGENTS`
    and `BEST_KNOWN_AGENT`); each algorithm's entries fastest first. Of equal runtimes the one with
    fewer evaluations ranks first."""
    by_algorithm: dict[str, list[Entry]] = {}
    # Of equal runtimes, the one that took fewer evaluations first.
    for entry in sorted(task_entries, key=lambda e: (e.runtime, e.evaluations, e.algorithm)):
        if entry.feasible and algorithm_name(entry) != SINGLE_DEVICE_AGENT:
            by_algorithm.setdefault(algorithm_name(entry), []).append(entry)
    ranked = list(by_algorithm)  # in the order of each algorithm's fastest entry
    contenders = [a for a in ranked if a != BEST_KNOWN_AGENT]
    kept = {*contenders[:TOP_ALGORITHMS], *PAPER_AGENTS, BEST_KNOWN_AGENT}
    return {a: by_algorithm[a] for a in ranked if a in kept}


def series_styles(algorithms: list[str]) -> dict[str, tuple[int, str, str]]:
    """The (tab10 colour index, line style, mark) of each of ``algorithms``, pairwise distinct.

    A paper's agent (`PAPER_AGENTS`) is dashed in a hue of its own, the same in every plot. Every other
    algorithm, in the order given, takes its slot (a hue and a style, by a hash of its name, so that it
    keeps it from plot to plot where nothing else claims it), or else the next free slot whose hue the
    algorithms before it used least (no hue twice while one is unused)."""
    styles = {a: (_HUES[PAPER_AGENTS.index(a)], *_PAPER_STYLE) for a in algorithms if a in PAPER_AGENTS}
    uses = Counter(hue for hue, _, _ in styles.values())
    taken: set[int] = set()
    for algorithm in (a for a in algorithms if a not in PAPER_AGENTS):
        preferred = zlib.crc32(algorithm.encode("utf-8")) % _SLOTS
        order = [(preferred + step) % _SLOTS for step in range(_SLOTS)]
        free = [s for s in order if s not in taken]
        slot = min(free, key=lambda s: uses[_HUES[s % len(_HUES)]])  # the first of the least used hue
        taken.add(slot)
        uses[_HUES[slot % len(_HUES)]] += 1
        styles[algorithm] = (_HUES[slot % len(_HUES)], *_STYLES[slot // len(_HUES)])
    return styles


def _draw_algorithm(axes: Any, runs: list[Entry], colour: Any, style: str, mark: str, label: str) -> Any:
    """One algorithm's entries: the curve of its largest budget that recorded one, ended by ``mark``,
    and a ``mark`` per other entry. Returns the artist that stands for it in the legend."""
    traced = [e for e in runs if e.trace]
    line = max(traced, key=lambda e: e.evaluations) if traced else None
    handles = []
    if line is not None:
        counts = [n for n, _ in line.trace] + [max(line.evaluations, line.trace[-1][0])]
        values = [r for _, r in line.trace] + [line.trace[-1][1]]
        handles += axes.plot(counts, values, drawstyle="steps-post", color=colour, linestyle=style,
                             marker=mark, markevery=[len(counts) - 1], markersize=5, linewidth=1.4,
                             label=label)
    for entry in runs:
        if entry is not line:
            handles += axes.plot([max(entry.evaluations, 1)], [entry.runtime], linestyle="none",
                                 marker=mark, color=colour, markersize=5,
                                 label=label if line is None and not handles else None)
    return handles[0]


def _y_range(axes: Any, results: list[float], lower_bound: float, best_known: float) -> None:
    """The y axis from below the lower bound to above every result shown and `Y_RANGE` x the best
    known; logarithmic when that spans `LOG_SPAN` or more."""
    from matplotlib.ticker import LogFormatter

    class PlainLogFormatter(LogFormatter):
        """The ticks `LogFormatter` labels, as plain numbers (0.6, not 6e-01)."""

        def __call__(self, x: float, pos: int | None = None) -> str:
            return f"{x:g}" if super().__call__(x, pos) else ""

    values = [v for v in (*results, lower_bound, best_known) if v > 0 and math.isfinite(v)]
    if not values:
        return
    bottom = min(values)
    reference = best_known if best_known > 0 else bottom
    top = max(1.08 * max(values), Y_RANGE * reference)
    if top / bottom >= LOG_SPAN:
        axes.set_yscale("log")
        axes.set_ylim(bottom / 1.15, 1.15 * top)
        # Plain numbers (20, not 2 x 10^1): the minor ticks are labelled where less than a few decades show.
        axes.yaxis.set_major_formatter(PlainLogFormatter())
        axes.yaxis.set_minor_formatter(PlainLogFormatter(labelOnlyBase=False, minor_thresholds=(2, 0.4)))
    else:
        axes.set_ylim(bottom - 0.04 * (top - bottom), top)  # the lower bound's line clear of the frame


def curve_figure(task_id: str, task_entries: list[Entry], lower_bound: float, best_known: float) -> Any:
    """The matplotlib Figure of ``task_entries``' curves of one task (module docstring), not yet saved."""
    matplotlib = require("matplotlib", "drawing the learning curves")
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.lines import Line2D

    figure, axes = plt.subplots(figsize=(9.5, 5))
    shown = shown_algorithms(task_entries)
    styles = series_styles([a for a in shown if a != BEST_KNOWN_AGENT])
    palette = plt.get_cmap("tab10")
    legend: dict[str, Any] = {}
    # The slowest first, so that the fastest curves, near the bound, are drawn on top.
    for algorithm, runs in reversed(shown.items()):
        label = f"{algorithm}: {runs[0].runtime:.4g} s"
        if algorithm == BEST_KNOWN_AGENT:
            colour, style, mark, label = "black", "-", "D", f"{label} (portfolio)"
        else:
            hue, style, mark = styles[algorithm]
            colour = palette(hue)
        legend[algorithm] = (_draw_algorithm(axes, runs, colour, style, mark, label), label)
    references = []
    single = [e for e in task_entries if e.feasible and algorithm_name(e) == SINGLE_DEVICE_AGENT][:1]
    for runtime, colour, style, name in (
        *((e.runtime, "grey", "-.", "best single device") for e in single),
        (best_known, "black", ":", "best known"),
        (lower_bound, "black", "--", "lower bound"),
    ):
        if math.isfinite(runtime):
            label = f"{name}: {runtime:.4g} s"
            references.append((axes.axhline(runtime, color=colour, linestyle=style, linewidth=1, label=label),
                               label))
    axes.set_xscale("log")
    _y_range(axes, [runs[0].runtime for runs in shown.values()] + [e.runtime for e in single],
             lower_bound, best_known)
    axes.set_xlabel("evaluations of the task (log)")
    axes.set_ylabel("best runtime so far (s" + (", log)" if axes.get_yscale() == "log" else ")"))
    axes.set_title(f"{task_id}: learning curves")
    items = [legend[a] for a in shown] + references  # fastest first, then the references
    left_out = len(task_entries) - sum(len(runs) for runs in shown.values()) - len(single)
    if left_out:  # a row of the legend without a mark
        items.append((Line2D([], [], linestyle="none"), f"+{left_out} more entries: see the table"))
    axes.legend([h for h, _ in items], [label for _, label in items], fontsize=7, loc="upper left",
                bbox_to_anchor=(1.01, 1.0), borderaxespad=0.0)
    figure.tight_layout()
    return figure


def curves_png(task_id: str, task_entries: list[Entry], lower_bound: float, best_known: float) -> bytes:
    """The PNG of ``task_entries``' curves of one task (`curve_figure`)."""
    return figure_png(curve_figure(task_id, task_entries, lower_bound, best_known), dpi=90)
