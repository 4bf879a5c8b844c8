"""The cost model's figure for every published row (`published.PUBLISHED`), and the page that shows
them: a markdown table and a scatter plot (``placement-gym fidelity --published``)."""

from __future__ import annotations

import functools
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from placement_gym.calibration.published import PUBLISHED, PublishedRow
from placement_gym.cluster import load_cluster
from placement_gym.common.extras import require
from placement_gym.cost_model import simulate
from placement_gym.evaluation.agents import run_installed_agent
from placement_gym.graph import load_graph
from placement_gym.real.rebatch import rebatched_graph
from placement_gym.task.compiled import Task, make_task


@dataclass(frozen=True)
class RowResult:
    """A published row and the model's figure for it: ``model`` is a step time (s) or a ratio,
    ``error`` = model / published - 1; ``within`` = |error| <= the row's tolerance. For a ratio row
    ``single_s``/``placed_s`` are the two simulated runtimes."""

    row: PublishedRow
    model: float
    single_s: float
    placed_s: float | None = None

    @property
    def error(self) -> float:
        return self.model / self.row.published - 1.0

    @property
    def within(self) -> bool:
        return abs(self.error) <= self.row.tolerance


@functools.lru_cache(maxsize=16)
def row_task(graph: str, batch: int, cluster: str, optimizer: str) -> Task:
    """The training-step task of a row: the bundled graph at the source's batch on the row's machine."""
    return make_task(
        rebatched_graph(load_graph(graph), batch, larger=True), load_cluster(cluster), "train_step", optimizer
    )


def model_row(row: PublishedRow) -> RowResult:
    """Simulate one row (a ratio row runs its placement's agent with seed 0)."""
    task = row_task(row.graph, row.batch, row.cluster, row.optimizer)
    device = task.cluster.device_index(row.device)
    single = simulate(task, np.full(task.n_forward, device, dtype=np.int64)).runtime
    if row.kind == "step":
        return RowResult(row, single, single)
    assert row.placement is not None
    placed = simulate(task, run_installed_agent(task, row.placement, seed=0).placement).runtime
    return RowResult(row, single / placed, single, placed)


def compare_published(rows: tuple[PublishedRow, ...] = PUBLISHED) -> list[RowResult]:
    """The model's figure for each row, in order."""
    return [model_row(row) for row in rows]


def markdown_table(results: list[RowResult]) -> str:
    """One line per row: source figure, published and model value, error and tolerance."""
    lines = [
        "| row | model, hardware, framework | published figure | published | model | error | within |",
        "|---|---|---|---:|---:|---:|---|",
    ]
    for result in results:
        row = result.row
        unit = " s" if row.kind == "step" else "x"
        within = "yes" if result.within else "no"
        lines.append(
            f"| `{row.id}` | {row.model}, batch {row.batch}, {row.hardware}, {row.framework} | "
            f"{row.figure} | {row.published:.3f}{unit} | {result.model:.3f}{unit} | {result.error:+.1%} | "
            f"{within} (±{row.tolerance:.0%}) |"
        )
    return "\n".join(lines)


def scatter_plot(results: list[RowResult], path: str | Path) -> Path:
    """Model against published, step times (log axes) and ratios side by side, with the tolerance
    bands; written as PNG."""
    matplotlib = require("matplotlib", "drawing the plot")
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(1, 2, figsize=(11, 4.8))
    for axis, kind, title, tolerance in (
        (axes[0], "step", "one device: seconds per training step", 0.25),
        (axes[1], "ratio", "one device / placement (speedup)", 0.15),
    ):
        chosen = [r for r in results if r.row.kind == kind]
        published = np.array([r.row.published for r in chosen])
        model = np.array([r.model for r in chosen])
        low, high = min(published.min(), model.min()) * 0.8, max(published.max(), model.max()) * 1.25
        line = np.geomspace(low, high, 50)
        axis.plot(line, line, color="black", linewidth=1)
        axis.fill_between(
            line,
            line * (1 - tolerance),
            line * (1 + tolerance),
            color="tab:green",
            alpha=0.15,
            label=f"within {tolerance:.0%}",
        )
        axis.scatter(
            published, model, color=["tab:blue" if r.within else "tab:red" for r in chosen], zorder=3
        )
        for result, x, y in zip(chosen, published, model, strict=True):
            axis.annotate(result.row.id, (x, y), fontsize=7, xytext=(4, 2), textcoords="offset points")
        if kind == "step":
            from matplotlib.ticker import NullFormatter

            axis.set_xscale("log")
            axis.set_yscale("log")
            axis.xaxis.set_minor_formatter(NullFormatter())
            axis.yaxis.set_minor_formatter(NullFormatter())
        axis.set_xlabel("published")
        axis.set_ylabel("cost model")
        axis.set_title(title)
        axis.legend(loc="upper left")
    figure.tight_layout()
    out = Path(path)
    figure.savefig(out, dpi=120)
    plt.close(figure)
    return out


BEGIN_MARK = "<!-- generated by placement-gym fidelity --published: begin -->"
END_MARK = "<!-- generated by placement-gym fidelity --published: end -->"


def page_block(results: list[RowResult], image: str | None) -> str:
    """The generated part of the calibration page: the table, notes per row, the plot."""
    notes = [f"- `{r.row.id}`: {r.row.note}." for r in results if r.row.note]
    inside = sum(r.within for r in results)
    parts = [
        BEGIN_MARK,
        f"{inside} of {len(results)} rows within their tolerance.",
        "",
        markdown_table(results),
        "",
        *notes,
    ]
    if image:
        parts += ["", f"![cost model against published measurements]({image})"]
    return "\n".join([*parts, END_MARK])


def update_page(path: str | Path, block: str) -> bool:
    """Put ``block`` between the page's markers (appended when it has none; the page is created when
    missing). Returns whether the file changed."""
    page = Path(path)
    text = page.read_text(encoding="utf-8") if page.exists() else ""
    if BEGIN_MARK in text and END_MARK in text:
        head, rest = text.split(BEGIN_MARK, 1)
        new = head + block + rest.split(END_MARK, 1)[1]
    else:
        new = text + ("\n" if text and not text.endswith("\n") else "") + block + "\n"
    if new == text:
        return False
    page.write_text(new, encoding="utf-8")
    return True


def page_is_current(path: str | Path, block: str) -> bool:
    """Whether the page holds exactly ``block`` between its markers."""
    page = Path(path)
    return page.exists() and block in page.read_text(encoding="utf-8")
