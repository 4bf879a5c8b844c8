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
from placement_gym.graph.opgraph import CATEGORIES
from placement_gym.real.rebatch import rebatched_graph
from placement_gym.task.compiled import OP_KINDS, Task, make_task
from placement_gym.task.step import Step


def relative_error(result) -> float:
    """A compared row's ``model / row.published - 1``."""
    return result.model / result.row.published - 1.0


def within_tolerance(result) -> bool:
    """Whether a compared row's error is within its row's tolerance."""
    return abs(relative_error(result)) <= result.row.tolerance


@dataclass(frozen=True)
class RowResult:
    """A published row and the model's figure for it: ``model`` is a step time (s), a ratio or a
    utilisation, ``error`` = model / published - 1; ``within`` = |error| <= the row's tolerance. For
    a ratio row ``single_s``/``placed_s`` are the two simulated runtimes; for an mfu row
    ``single_s`` is the simulated time of its matrix products."""

    row: PublishedRow
    model: float
    single_s: float
    placed_s: float | None = None

    error = property(relative_error)
    within = property(within_tolerance)

    @property
    def held(self) -> bool:
        """Whether the row is held to its tolerance (not one the model cannot reproduce by design)."""
        return not self.row.beyond_model


@functools.lru_cache(maxsize=16)
def row_task(graph: str, batch: int, cluster: str, optimizer: str, precision: str = "fp32") -> Task:
    """The training-step task of a row: the bundled graph at the source's batch on the row's machine, in
    the source's precision."""
    return make_task(
        rebatched_graph(load_graph(graph), batch, larger=True), load_cluster(cluster),
        Step("train_step", optimizer, precision),
    )


def matmul_utilisation(task: Task, device: int) -> tuple[float, float]:
    """(utilisation, seconds) of the task's matmul ops, forward and backward, on ``device``: their FLOPs
    over their op times (`Task.duration`) and the device's tensor-core peak (its FP32 peak where it has
    none); what a model-FLOP utilisation measures of a step made of matrix products."""
    cluster = task.cluster
    ops = np.flatnonzero(
        (task.op_kind != OP_KINDS.index("update"))
        & (task.graph.category[task.op_forward] == CATEGORIES.index("matmul"))
    )
    forward = task.op_kind[ops] == OP_KINDS.index("forward")
    flops = task.graph.flops[task.op_forward[ops]] * np.where(forward, 1.0, 2.0)  # backward: twice
    seconds = float(task.duration[ops, device].sum())
    peak = cluster.peak_flops if cluster.tensor_peak_flops is None else cluster.tensor_peak_flops
    return float(flops.sum()) / (seconds * float(peak[device])), seconds


def model_row(row: PublishedRow) -> RowResult:
    """Simulate one row (a ratio row runs its placement's agent with seed 0)."""
    task = row_task(row.graph, row.batch, row.cluster, row.optimizer, row.precision)
    device = task.cluster.device_index(row.device)
    if row.kind == "mfu":
        utilisation, seconds = matmul_utilisation(task, device)
        return RowResult(row, utilisation, seconds)
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
        unit = {"step": " s", "ratio": "x", "mfu": ""}[row.kind]
        within = f"{'yes' if result.within else 'no'} (±{row.tolerance:.0%})"
        if not result.held:
            within = f"{'yes' if result.within else 'no'}, not held: beyond the model"
        precision = "" if row.precision == "fp32" else f", {row.precision}"
        lines.append(
            f"| `{row.id}` | {row.model}, batch {row.batch}{precision}, {row.hardware}, {row.framework} | "
            f"{row.figure} | {row.published:.3f}{unit} | {result.model:.3f}{unit} | {result.error:+.1%} | "
            f"{within} |"
        )
    return "\n".join(lines)


def scatter_plot(results: list[RowResult], path: str | Path) -> Path:
    """Model against published, step times (log axes) and ratios side by side, with the tolerance
    bands; written as PNG."""
    matplotlib = require("matplotlib", "drawing the plot")
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    panels = [
        (kind, title)
        for kind, title in (
            ("step", "one device: seconds per training step"),
            ("ratio", "one device / placement (speedup)"),
            ("mfu", "matmul utilisation of the tensor-core peak"),
        )
        if any(r.row.kind == kind for r in results)
    ]
    figure, axes = plt.subplots(1, len(panels), figsize=(5.5 * len(panels), 4.8), squeeze=False)
    for axis, (kind, title) in zip(axes[0], panels, strict=True):
        chosen = [r for r in results if r.row.kind == kind]
        tolerance = chosen[0].row.tolerance
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
    held = [r for r in results if r.held]
    inside = sum(r.within for r in held)
    beyond = [f"- `{r.row.id}` is beyond the model: {r.row.beyond_model}." for r in results if not r.held]
    parts = [
        BEGIN_MARK,
        f"{inside} of {len(held)} rows within their tolerance"
        + (f" ({len(beyond)} more shown that the model cannot reproduce)." if beyond else "."),
        "",
        markdown_table(results),
        "",
        *notes,
        *beyond,
    ]
    if image:
        parts += ["", f"![cost model against published measurements]({image})"]
    return "\n".join([*parts, END_MARK])


def update_page(path: str | Path, block: str) -> bool:
    """Put ``block`` between the page's markers of the same kind (its first and last lines; appended
    when the page has none; the page is created when missing). Returns whether the file changed."""
    page = Path(path)
    text = page.read_text(encoding="utf-8") if page.exists() else ""
    begin, end = block.splitlines()[0], block.splitlines()[-1]
    if begin in text and end in text:
        head, rest = text.split(begin, 1)
        new = head + block + rest.split(end, 1)[1]
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
