"""What a training run shows and writes: a progress bar, the reference runtimes a curve is read
against, TensorBoard scalars, and the output folder (``curve.csv``, ``best_placement.json``,
``curve.png``)."""

from __future__ import annotations

import csv
import json
import math
from pathlib import Path
from typing import Any

import numpy as np

from baselines.registry import get_agent
from placement_gym.cost_model import lower_bound, simulate
from placement_gym.evaluation.agents import INSTALL_HINT
from placement_gym.evaluation.evaluator import (
    COST_MODEL,
    CostModelEvaluator,
    as_evaluator,
    best_single_runtime,
)
from placement_gym.evaluation.placements import placement_to_dict
from placement_gym.task.compiled import Task

# Names of the reference runtimes (`references`), as the PNG legend, TensorBoard and JSON show them.
BEST_SINGLE, HEFT, LOWER_BOUND = "best single device", "HEFT", "simple lower bound"


def progress_bar(total: int, initial: int, enabled: bool, label: str):
    """A tqdm bar counting evaluations (None when not enabled or tqdm is missing)."""
    if not enabled:
        return None
    try:
        from tqdm.auto import tqdm
    except ImportError:
        return None
    return tqdm(total=total, initial=initial, desc=label, unit="eval", dynamic_ncols=True)


def references(task: Task, evaluator: Any = None) -> dict[str, float]:
    """The runtimes a learning curve of ``task`` is read against, on the scale of ``evaluator``'s
    runtimes (None: the cost model): `BEST_SINGLE` (the best single device), `HEFT` (HEFT's
    placement) and `LOWER_BOUND` (`placement_gym.cost_model.lower_bound`); for an evaluator that is
    not a cost model (real runs), the best single device alone, evaluated once through it (not
    counted in any budget). They are computed on copies of the tasks (``task`` and a given cost model's),
    so that ``task.evaluations`` (and its trace) count only a run's own evaluations."""
    task = task.independent_copy()
    scorer = as_evaluator(task, evaluator)
    if isinstance(scorer, CostModelEvaluator) and scorer.task is not task:
        scorer = CostModelEvaluator(scorer.task.independent_copy())
    found = {BEST_SINGLE: float(best_single_runtime(scorer, task))}
    if isinstance(scorer, CostModelEvaluator):
        # A profiled evaluator's task holds the measured figures: HEFT's placement (made on the
        # task) and the bound are read on it, the scale of the run's runtimes.
        heft = get_agent("heft")(task, seed=0, budget=None).placement
        found[HEFT] = float(simulate(scorer.task, heft).runtime)
        found[LOWER_BOUND] = float(lower_bound(scorer.task))
    return found


def tensorboard_writer(directory: str | Path | None, run: str) -> Any:
    """A torch `SummaryWriter` logging to ``directory/run`` (None without a directory); ImportError
    naming the extra when torch or the tensorboard package is missing."""
    if directory is None:
        return None
    try:
        from torch.utils.tensorboard import SummaryWriter
    except ImportError as error:  # torch says "TensorBoard logging requires TensorBoard ..."
        raise ImportError(
            f"--tensorboard needs torch and the tensorboard package ({error}): {INSTALL_HINT}"
        ) from None
    return SummaryWriter(log_dir=str(Path(directory) / run))


def run_name(agent: str, task: Task, seed: int, scored_by: str = COST_MODEL) -> str:
    """``<agent>-<graph>-<cluster>-<objective>[-<scored by>]-s<seed>``: the folder of a run's
    TensorBoard events (as ``placement-gym train`` names its output folder), the scorer named when
    it is not the cost model, so that runs of one task scored alike share a folder name."""
    mode = "" if scored_by == COST_MODEL else f"-{scored_by}"
    return f"{agent}-{task.id.replace('/', '-')}{mode}-s{seed}"


class TensorBoardLog:
    """What a run logs to TensorBoard: per update (a learned agent's iteration, a search's batch),
    at the step of the evaluations spent so far, ``runtime/best_ms`` (best feasible runtime so far),
    ``runtime/sampled_mean_ms`` (mean runtime of the update's placements) and the agent's own
    scalars as ``train/<name>`` (``train/mean_reward``, ``train/loss``...); ``progress/evaluations``
    at the step of the update; at the end the references as ``reference/<name>_ms``, drawn as flat
    lines from the first step to the last."""

    def __init__(self, writer: Any) -> None:
        self.writer = writer

    def update(self, step: int, update: int, rows: list, stats: dict | None) -> None:
        if self.writer is None:
            return
        write = self.writer.add_scalar
        if rows:
            write("runtime/sampled_mean_ms", float(np.mean([row[1] for row in rows])) * 1e3, step)
            best = rows[-1][3]
            if not math.isnan(best):
                write("runtime/best_ms", best * 1e3, step)
        for name, value in (stats or {}).items():
            if isinstance(value, (int, float, np.floating, np.integer)) and not isinstance(value, bool):
                write(f"train/{name}", float(value), step)
        write("progress/evaluations", step, update)

    def close(self, first: int, last: int, found: dict[str, float]) -> None:
        if self.writer is None:
            return
        for name, value in found.items():
            tag = f"reference/{name.replace(' ', '_')}_ms"
            for step in sorted({first, last}):
                self.writer.add_scalar(tag, value * 1e3, step)
        self.writer.close()


def write_outputs(
    out: Path,
    task: Task,
    agent: str,
    curve: list[tuple[int, float, bool, float]],
    best_runtime: float,
    best_feasible: bool,
    best_placement: np.ndarray,
    scored_by: str,
    found: dict[str, float],
) -> dict[str, str]:
    """Write the run's folder ``out``; the files written, by kind."""
    out.mkdir(parents=True, exist_ok=True)
    files = {"curve_csv": str(out / "curve.csv"), "best_placement": str(out / "best_placement.json")}
    with open(out / "curve.csv", "w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["evaluation", "runtime_s", "feasible", "best_runtime_s"])
        writer.writerows(curve)
    (out / "best_placement.json").write_text(
        json.dumps(
            {
                "task": task.id,
                "agent": agent,
                "runtime": best_runtime,
                "scored_by": scored_by,
                "feasible": best_feasible,
                "placement": placement_to_dict(task, best_placement),
            },
            indent=1,
        )
        + "\n"
    )
    try:
        import matplotlib

        matplotlib.use("Agg")
    except ImportError:  # the PNG is the one output that needs matplotlib; the rest is written
        return files
    figure = curve_figure(curve, found, f"{agent} on {task.id}")
    figure.savefig(out / "curve.png", dpi=110)
    files["curve_png"] = str(out / "curve.png")
    return files


# One style per reference line, so that the three read apart in colour and in grey print.
_REFERENCE_STYLES = {
    BEST_SINGLE: {"color": "tab:red", "linestyle": "--"},
    HEFT: {"color": "tab:green", "linestyle": "-."},
    LOWER_BOUND: {"color": "tab:gray", "linestyle": ":"},
}


def curve_figure(curve: list[tuple[int, float, bool, float]], found: dict[str, float], title: str) -> Any:
    """The learning curve as a matplotlib `Figure` (no pyplot): every sampled placement, the best
    feasible runtime so far, and each reference runtime of ``found`` as a labelled horizontal line."""
    from matplotlib.figure import Figure

    points = np.array([(n, r, b) for n, r, _, b in curve], dtype=float).reshape(-1, 3)
    figure = Figure(figsize=(9, 4))
    axes = figure.add_subplot()
    axes.scatter(points[:, 0], points[:, 1] * 1e3, s=3, alpha=0.3, label="sampled placement")
    axes.plot(points[:, 0], points[:, 2] * 1e3, color="black", label="best feasible so far")
    for name, value in found.items():
        axes.axhline(value * 1e3, linewidth=1.2, label=f"{name} ({value * 1e3:,.2f} ms)",
                     **_REFERENCE_STYLES.get(name, {"color": "tab:purple", "linestyle": "--"}))
    axes.set(xlabel="evaluations", ylabel="runtime (ms)", yscale="log", title=title)
    # Outside the axes: inside, it would hide the sampled points or the reference lines at the bottom.
    axes.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False)
    figure.tight_layout()
    return figure
