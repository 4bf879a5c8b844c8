"""Gantt chart of a simulated schedule: one row per device for ops, one per used directed link for
transfers. matplotlib is an optional extra (the ``viz`` extra), imported lazily."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from placement_gym.common.extras import install_command
from placement_gym.cost_model.result import Schedule

if TYPE_CHECKING:
    from matplotlib.figure import Figure

OP_KIND_NAMES: tuple[str, ...] = ("forward", "backward", "update", "recompute")
# One colour family per op kind; two shades alternate along each row so neighbouring bars stay
# distinguishable when thousands of short ops touch each other.
_OP_SHADES: tuple[tuple[str, str], ...] = (
    ("#1f5fa8", "#6fa8dc"),  # forward: blues
    ("#d35400", "#f5a35c"),  # backward: oranges
    ("#2e8b3a", "#8fd19e"),  # update: greens
    ("#7d3c98", "#c39bd3"),  # recompute (a forward op replayed in the backward pass): purples
)
_TRANSFER_SHADES: tuple[str, str] = ("#6a4c93", "#b8a5d6")  # transfers: purples
# The legend's title: what the two shades of a colour mean (nothing but "the next bar").
LEGEND_TITLE = (
    "dark and light shades of a colour:\nthe same kind, alternating so\nthat touching bars stay apart"
)
_BAR_HEIGHT = 0.8
_DPI = 100


@dataclass(frozen=True)
class TimelineRow:
    """One row of the chart: ops of ``device``, or transfers on the directed ``link`` (src, dst)."""

    label: str
    device: int | None = None
    link: tuple[int, int] | None = None


def _check(task: Any, schedule: Schedule) -> None:
    """Clear errors for a schedule that does not belong to ``task``."""
    n_ops, n_devices = int(task.n_ops), int(task.cluster.n_devices)
    for key in ("op_device", "op_start", "op_finish"):
        if len(getattr(schedule, key)) != n_ops:
            raise ValueError(
                f"schedule.{key} has {len(getattr(schedule, key))} entries "
                f"but task {task.id!r} has {n_ops} ops"
            )
    if len(task.op_kind) != n_ops:
        raise ValueError(f"task.op_kind has {len(task.op_kind)} entries, expected {n_ops}")
    kinds = np.asarray(task.op_kind)
    if kinds.size and (kinds.min() < 0 or kinds.max() >= len(OP_KIND_NAMES)):
        raise ValueError("task.op_kind values must be 0 (forward), 1 (backward), 2 (update) or 3 (recompute)")
    n_transfers = len(schedule.transfer_src)
    for key in ("transfer_dst", "transfer_start", "transfer_finish"):
        if len(getattr(schedule, key)) != n_transfers:
            raise ValueError(
                f"schedule.{key} has {len(getattr(schedule, key))} entries, expected {n_transfers}"
            )
    for key in ("op_device", "transfer_src", "transfer_dst"):
        devices = np.asarray(getattr(schedule, key))
        if devices.size and (devices.min() < 0 or devices.max() >= n_devices):
            raise ValueError(f"schedule.{key} holds a device index outside 0..{n_devices - 1}")


def timeline_rows(task: Any, schedule: Schedule) -> list[TimelineRow]:
    """The chart's rows, top to bottom: every device of ``task.cluster``, then every directed link that
    carries at least one transfer, ordered by (src, dst)."""
    _check(task, schedule)
    names = task.cluster.device_names
    rows = [TimelineRow(label=name, device=i) for i, name in enumerate(names)]
    pairs = sorted(
        {(int(s), int(d)) for s, d in zip(schedule.transfer_src, schedule.transfer_dst, strict=True)}
    )
    rows += [TimelineRow(label=f"{names[s]}\u2192{names[d]}", link=(s, d)) for s, d in pairs]
    return rows


def _runtime(schedule: Schedule) -> float:
    finishes = [np.asarray(schedule.op_finish), np.asarray(schedule.transfer_finish)]
    return float(max((f.max() for f in finishes if f.size), default=0.0))


_Spans = list[tuple[float, float]]


def _bars(start: np.ndarray, finish: np.ndarray) -> tuple[_Spans, _Spans]:
    """(start, width) pairs in ms, sorted by start and split into the two alternating shades."""
    order = np.argsort(start, kind="stable")
    spans = [(float(start[k]) * 1e3, float(finish[k] - start[k]) * 1e3) for k in order]
    return spans[0::2], spans[1::2]


def _import_matplotlib() -> tuple[Any, Any, Any, Any]:
    try:
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
        from matplotlib.legend_handler import HandlerTuple
        from matplotlib.patches import Patch
    except ImportError:
        raise ImportError(f"drawing a timeline needs matplotlib: {install_command('viz')}") from None
    return Figure, FigureCanvasAgg, Patch, HandlerTuple


def build_timeline_figure(task: Any, schedule: Schedule, title: str | None = None) -> Figure:
    """The Gantt chart as a matplotlib `Figure` on an Agg canvas (no pyplot, no global state).

    Bars are drawn with one ``broken_barh`` per (row, op kind, shade), so thousands of ops cost a
    handful of artists.
    """
    figure_class, canvas_class, patch_class, handler_tuple = _import_matplotlib()
    rows = timeline_rows(task, schedule)
    runtime = _runtime(schedule)

    fig = figure_class(figsize=(12.0, max(2.5, 1.3 + 0.32 * len(rows))), dpi=_DPI, layout="constrained")
    canvas_class(fig)
    ax = fig.add_subplot(1, 1, 1)

    op_device = np.asarray(schedule.op_device)
    op_kind = np.asarray(task.op_kind)
    op_start, op_finish = np.asarray(schedule.op_start), np.asarray(schedule.op_finish)
    t_src, t_dst = np.asarray(schedule.transfer_src), np.asarray(schedule.transfer_dst)
    t_start, t_finish = np.asarray(schedule.transfer_start), np.asarray(schedule.transfer_finish)
    kinds_drawn: set[int] = set()
    for y, row in enumerate(rows):
        band = (y - _BAR_HEIGHT / 2, _BAR_HEIGHT)
        if row.device is not None:
            on_row = op_device == row.device
            for kind, shades in enumerate(_OP_SHADES):
                chosen = on_row & (op_kind == kind)
                if not chosen.any():
                    continue
                kinds_drawn.add(kind)
                for spans, colour in zip(_bars(op_start[chosen], op_finish[chosen]), shades, strict=True):
                    if spans:
                        ax.broken_barh(spans, band, facecolors=colour, linewidth=0)
        else:
            src, dst = row.link
            chosen = (t_src == src) & (t_dst == dst)
            for spans, colour in zip(_bars(t_start[chosen], t_finish[chosen]), _TRANSFER_SHADES, strict=True):
                if spans:
                    ax.broken_barh(spans, band, facecolors=colour, linewidth=0)

    n_devices = task.cluster.n_devices
    if len(rows) > n_devices:
        ax.axhline(n_devices - 0.5, color="0.6", linewidth=0.8, linestyle="--")
    ax.set_yticks(range(len(rows)))
    ax.set_yticklabels([row.label for row in rows], fontsize=9 if len(rows) <= 40 else 7)
    ax.set_ylim(len(rows) - 0.5, -0.5)  # first device on top
    ax.set_xlim(0.0, runtime * 1e3 * 1.01 if runtime > 0 else 1.0)
    ax.set_xlabel("time (ms)")
    ax.grid(axis="x", color="0.9", linewidth=0.6)
    ax.set_axisbelow(True)

    # Each entry shows both shades of its colour side by side, and the title says what they mean.
    entries = [(_OP_SHADES[kind], OP_KIND_NAMES[kind]) for kind in sorted(kinds_drawn)]
    if len(t_src):
        entries.append((_TRANSFER_SHADES, "transfer"))
    if entries:
        handles = [tuple(patch_class(facecolor=shade) for shade in shades) for shades, _ in entries]
        ax.legend(handles, [label for _, label in entries], loc="upper left", bbox_to_anchor=(1.0, 1.0),
                  fontsize=9, title=LEGEND_TITLE, title_fontsize=8, alignment="left", frameon=False,
                  handler_map={tuple: handler_tuple(ndivide=None, pad=0.0)})
    ax.set_title(f"{title or task.id}: runtime {runtime * 1e3:.3f} ms", fontsize=11)
    return fig


def draw_timeline(
    task: Any, schedule: Schedule, path: str | Path | None = None, title: str | None = None
) -> np.ndarray:
    """Render the schedule's Gantt chart; returns it as an RGB ``uint8`` array ``(H, W, 3)`` and writes
    it as PNG to ``path`` when given (its folder created when missing).

    ``task`` needs ``cluster``, ``id``, ``n_ops`` and ``op_kind`` (0 forward, 1 backward, 2 update,
    3 recompute per op).
    """
    fig = build_timeline_figure(task, schedule, title=title)
    fig.canvas.draw()
    image = np.asarray(fig.canvas.buffer_rgba())[..., :3].copy()
    if path is not None:
        # After the figure is built: a missing matplotlib leaves no empty folder behind.
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        fig.savefig(Path(path), format="png", dpi=_DPI)
    return image
