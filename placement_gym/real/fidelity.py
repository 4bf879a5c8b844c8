"""How close the cost models come to real measurements: placements run for real and simulated.

* `spearman` and `mape`: the two figures of merit (numpy only).
* `parse_device_map` / `resolve_devices` (with `placement_gym.real.devices.cluster_device_map`): cluster
  device name -> torch device.
* `rebatched_graph` (from `placement_gym.real.rebatch`): the graph re-imported at a smaller batch (the
  cost models must see the batch the executor runs, or every predicted transfer and FLOP count is off
  by the batch ratio).
* `fidelity_placements`: single-device, heuristic and seeded random placements.
* `run_fidelity`: each placement on real devices (`Executor`), in the analytical cost model and in
  the profiled one; returns a `FidelityReport`. `scatter_plot` draws predicted vs measured.

torch (and matplotlib, for the plot) are imported only inside the functions that need them.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from placement_gym.cluster.cluster import Cluster
from placement_gym.common.extras import require
from placement_gym.cost_model import simulate
from placement_gym.evaluation.agents import AgentResult, lookup_agent
from placement_gym.real.devices import cluster_device_map, intra_op_threads, virtual_cpus
from placement_gym.real.profiled import profiled_task
from placement_gym.real.rebatch import rebatched_graph
from placement_gym.task.compiled import Task, make_task

# Heuristic agents (of the `baselines` package, found through the entry-point group placement_gym.agents)
# tried as fidelity placements (those installed and quick; the learned and searching agents are left
# out: they cost many evaluations).
HEURISTIC_AGENTS: tuple[str, ...] = ("heft", "m-etf", "expert", "partition", "m-topo", "cpop")


# --- figures of merit ---------------------------------------------------------------------------------


def _average_ranks(values: np.ndarray) -> np.ndarray:
    """Ranks 1..n of ``values``; tied values share the average of the ranks they span."""
    order = np.argsort(values, kind="stable")
    ranks = np.empty(len(values), dtype=np.float64)
    ranks[order] = np.arange(1, len(values) + 1, dtype=np.float64)
    sorted_values = values[order]
    start = 0
    while start < len(values):
        end = start
        while end + 1 < len(values) and sorted_values[end + 1] == sorted_values[start]:
            end += 1
        if end > start:
            ranks[order[start : end + 1]] = (start + end) / 2.0 + 1.0
        start = end + 1
    return ranks


def _paired(a: Sequence[float], b: Sequence[float], what: str) -> tuple[np.ndarray, np.ndarray]:
    x = np.asarray(a, dtype=np.float64).reshape(-1)
    y = np.asarray(b, dtype=np.float64).reshape(-1)
    if len(x) != len(y):
        raise ValueError(f"{what} needs two sequences of equal length, got {len(x)} and {len(y)}")
    if len(x) < 2:
        raise ValueError(f"{what} needs at least two pairs, got {len(x)}")
    if not (np.all(np.isfinite(x)) and np.all(np.isfinite(y))):
        raise ValueError(f"{what} needs finite values (drop infeasible placements first)")
    return x, y


def spearman(a: Sequence[float], b: Sequence[float]) -> float:
    """Spearman's rank correlation: the Pearson correlation of the average ranks (ties averaged).
    NaN when either sequence is constant (its ranks have no spread)."""
    x, y = _paired(a, b, "spearman")
    rx, ry = _average_ranks(x) - (len(x) + 1) / 2.0, _average_ranks(y) - (len(y) + 1) / 2.0
    denominator = np.sqrt(np.sum(rx * rx) * np.sum(ry * ry))
    return float(np.sum(rx * ry) / denominator) if denominator > 0 else float("nan")


def mape(predicted: Sequence[float], measured: Sequence[float]) -> float:
    """Mean absolute percentage error of ``predicted`` against ``measured``, in percent:
    ``100 * mean(|predicted - measured| / measured)``. Measured values must be positive."""
    p, m = _paired(predicted, measured, "mape")
    if np.any(m <= 0):
        raise ValueError("mape needs positive measured values")
    return float(100.0 * np.mean(np.abs(p - m) / m))


# --- devices ------------------------------------------------------------------------------------------

_DEVICE_ITEM = re.compile(r"([A-Za-z0-9_.\-]+:[0-9]+)=((?:cpu)|(?:cuda(?::[0-9]+)?)|(?:mps))")


def parse_device_map(text: str) -> dict[str, str]:
    """``"cpu:0=cpu,cpu:1=cpu,gpu:0=cuda:0"`` -> ``{"cpu:0": "cpu", ...}`` (cluster device name =
    torch device; torch devices ``cpu``, ``cuda``, ``cuda:<i>``, ``mps``)."""
    items = [item.strip() for item in str(text).split(",")]
    mapping: dict[str, str] = {}
    for item in items:
        match = _DEVICE_ITEM.fullmatch(item)
        if match is None:
            raise ValueError(
                f"bad device {item!r} in --devices {text!r}: expected NAME=TORCH_DEVICE items separated by "
                "commas, such as cpu:0=cpu,cpu:1=cpu or cpu:0=cpu,gpu:0=cuda:0"
            )
        name, device = match.groups()
        if name in mapping:
            raise ValueError(f"device {name!r} appears twice in --devices {text!r}")
        mapping[name] = device
    return mapping


def resolve_devices(devices: str | None, cluster: str | None) -> tuple[Cluster, dict[str, str]]:
    """The cluster and the device map of ``--devices`` and ``--cluster`` (either or both).

    Only ``--cluster``: its devices (`cluster_device_map`). Only ``--devices``: names ``cpu:0 ..
    cpu:<N-1>`` give the virtual CPU cluster ``cpu<N>``; other names need ``--cluster``. Both: the
    names must be the cluster's."""
    from placement_gym.cluster import load_cluster

    if devices is None and cluster is None:
        raise ValueError("give --devices (such as cpu:0=cpu,cpu:1=cpu) or --cluster (such as cpu2)")
    mapping = parse_device_map(devices) if devices is not None else None
    if cluster is None:
        assert mapping is not None
        names = sorted(mapping)
        if names != sorted(f"cpu:{i}" for i in range(len(names))):
            raise ValueError(
                f"--devices names {', '.join(names)} are not cpu:0 .. cpu:{len(names) - 1}: give --cluster "
                "too (a preset, a cluster JSON file, or cpu<N>) so that the cost models know the devices"
            )
        cluster = f"cpu{len(names)}"
    loaded = load_cluster(cluster)
    if mapping is None:
        return loaded, cluster_device_map(loaded)
    if sorted(mapping) != sorted(loaded.device_names):
        raise ValueError(
            f"--devices names {', '.join(sorted(mapping))} are not the devices of cluster {loaded.name!r} "
            f"({', '.join(loaded.device_names)})"
        )
    return loaded, mapping


# --- placements ---------------------------------------------------------------------------------------


def fidelity_placements(
    task: Task, samples: int, seed: int = 0, heuristics: Sequence[str] = HEURISTIC_AGENTS
) -> list[tuple[str, np.ndarray]]:
    """``samples`` distinct placements ``(label, placement)``: each single device first, then the
    heuristic agents (those an installed agent provider has and that succeed), then
    seeded random ones, alternating two kinds so the runtimes spread: per-op random with device
    probabilities drawn from a Dirichlet, and contiguous runs of the topological order whose number
    of runs is log-uniform from 2 to the number of ops, each run on another device than the one
    before (so the number of tensors crossing devices ranges from a few to nearly every one)."""
    if isinstance(samples, bool) or not isinstance(samples, (int, np.integer)) or samples < 1:
        raise ValueError(f"samples must be a positive integer, got {samples!r}")
    n, k = task.n_forward, task.n_devices
    found: list[tuple[str, np.ndarray]] = []
    seen: set[bytes] = set()

    def add(label: str, placement: np.ndarray) -> None:
        placement = np.asarray(placement, dtype=np.int64)
        key = placement.tobytes()
        if len(found) < samples and key not in seen:
            seen.add(key)
            found.append((label, placement))

    for d, name in enumerate(task.cluster.device_names):
        add(f"single:{name}", np.full(n, d))
    for name in heuristics:
        if len(found) >= samples:
            break
        agent = lookup_agent(name)  # from the providers of the entry-point group placement_gym.agents
        if agent is not None:
            try:
                add(name, AgentResult.checked(task, agent(task, seed, None)).placement)
            except (ValueError, RuntimeError):
                continue  # an agent that cannot place this task is skipped, not fatal
    rng = np.random.default_rng(seed)
    attempts = 0
    while len(found) < samples and attempts < 100 * samples:
        attempts += 1
        if k == 1:
            break
        if attempts % 2:
            probabilities = rng.dirichlet(np.ones(k))
            add("random", rng.choice(k, size=n, p=probabilities))
        elif n > 1:
            n_cuts = min(int(np.exp(rng.uniform(0.0, np.log(n)))), n - 1)
            cuts = np.sort(rng.choice(np.arange(1, n), size=n_cuts, replace=False))
            # Each run moves to another device: a step of 1..k-1 from the previous one.
            devices = np.cumsum(np.concatenate([[rng.integers(0, k)], rng.integers(1, k, size=n_cuts)])) % k
            add(f"random-split:{n_cuts + 1}", np.repeat(devices, np.diff(np.concatenate([[0], cuts, [n]]))))
    return found


# --- the experiment -----------------------------------------------------------------------------------

# How a placement's timed rounds become its runtime. "min" (the default): interference from other
# processes or a virtualised host only ever slows a run down, so the fastest round estimates what the
# placement itself costs (`timeit` advises the same); the profile's op times are minima too
# (`placement_gym.real.measure`). "median" is reported beside it.
STATISTICS: dict[str, Callable[..., np.ndarray]] = {"min": np.min, "median": np.median}


def _check_statistic(statistic: Any) -> str:
    if statistic not in STATISTICS:
        raise ValueError(f"unknown statistic {statistic!r}; allowed: {', '.join(STATISTICS)}")
    return statistic


@dataclasses.dataclass(frozen=True)
class FidelityReport:
    """Measured and predicted runtimes (seconds) of each placement, and the figures of merit
    (over the placements that ran: an infeasible real run is kept in ``labels`` but not scored)."""

    task_id: str
    batch: int | None
    labels: tuple[str, ...]
    measured: np.ndarray
    analytical: np.ndarray
    profiled: np.ndarray
    spread: np.ndarray
    errors: tuple[str | None, ...]
    # Measured runtime of each placement in each round (rows: rounds; NaN where a run failed).
    rounds: np.ndarray | None = None
    # How ``measured`` was made from ``rounds``: a key of `STATISTICS`.
    statistic: str = "min"
    # The optimizer the measured train steps ran and both models costed (None for inference).
    optimizer: str | None = None

    def _scored(self) -> np.ndarray:
        return np.isfinite(self.measured) & np.isfinite(self.analytical) & np.isfinite(self.profiled)

    def figures(self, statistic: str | None = None) -> dict[str, Any]:
        """``samples``, ``scored``, ``statistic``, ``spearman_*`` and ``mape_*`` (percent) for both
        models, and ``spearman_repeat``: the rank correlation of the measurements with themselves, the
        even rounds against the odd ones (NaN with fewer than 2 rounds). It is the ceiling a model can
        reach on this machine: no model ranks placements more consistently than the measurements rank
        themselves. ``statistic`` (default: the report's) reduces the rounds to one runtime."""
        statistic = self.statistic if statistic is None else _check_statistic(statistic)
        ok = self._scored()
        measured = self.measured
        if statistic != self.statistic and self.rounds is not None:
            measured = np.where(ok, STATISTICS[statistic](np.where(ok, self.rounds, 1.0), axis=0), np.inf)
        out: dict[str, Any] = {"samples": len(self.labels), "scored": int(ok.sum()), "statistic": statistic}
        enough = ok.sum() >= 2
        for model, predicted in (("profiled", self.profiled), ("analytical", self.analytical)):
            out[f"spearman_{model}"] = spearman(predicted[ok], measured[ok]) if enough else float("nan")
            out[f"mape_{model}"] = mape(predicted[ok], measured[ok]) if enough else float("nan")
        repeat = float("nan")
        if enough and self.rounds is not None and len(self.rounds) >= 2:
            even, odd = (STATISTICS[statistic](self.rounds[start::2][:, ok], axis=0) for start in (0, 1))
            repeat = spearman(even, odd)
        out["spearman_repeat"] = repeat
        return out

    def to_dict(self) -> dict[str, Any]:
        """JSON-able: the figures and one row per placement."""
        rows = [
            {
                "label": label,
                "measured_s": float(m),
                "analytical_s": float(a),
                "profiled_s": float(p),
                "spread": float(s),
                "rounds_s": [] if self.rounds is None else [float(t) for t in self.rounds[:, j]],
                "error": error,
            }
            for j, (label, m, a, p, s, error) in enumerate(zip(
                self.labels,
                self.measured,
                self.analytical,
                self.profiled,
                self.spread,
                self.errors,
                strict=True,
            ))
        ]
        other = {name: self.figures(name) for name in STATISTICS if name != self.statistic}
        return {"task": self.task_id, "batch": self.batch, "optimizer": self.optimizer, **self.figures(),
                "other_statistics": other, "placements": rows}


def run_fidelity(
    task: Task,
    devices: Mapping[str, str],
    profile: Mapping[str, Any],
    placements: Sequence[tuple[str, np.ndarray]],
    batch: int | None = None,
    seed: int = 0,
    repeats: int = 5,
    warmup: int = 1,
    model: Any = None,
    progress: Callable[[int, str], None] | None = None,
    statistic: str = "min",
) -> FidelityReport:
    """Run each placement on ``devices`` (`Executor`) and simulate it in the analytical and the
    profiled cost model of ``task`` at ``batch`` (the graph re-imported at that batch:
    `rebatched_graph`). ``profile`` must be measured at ``batch`` and, for a ``train_step`` task,
    with the task's optimizer, which the executor's train steps run and both models cost.

    Measurement: ``repeats`` rounds; each round runs every placement once (``warmup`` untimed steps,
    then one timed step) in a seeded random order, and a placement's runtime is the ``statistic``
    (`STATISTICS`: ``"min"``, the default, or ``"median"``) of its rounds; the report's figures
    carry the other statistic's too. Interleaving spreads a slow spell of a shared machine over all
    placements instead of pinning it on the few measured during it. ``progress(i, label)`` is called
    before each of the ``repeats * len(placements)`` runs. With two or more virtual CPU devices every
    run uses one intra-op thread, single-device runs included: a virtual CPU device is one core
    (`placement_gym.real.devices`)."""

    from placement_gym.real.executor import Executor

    if profile.get("batch") != batch:
        raise ValueError(f"the profile was measured at batch {profile.get('batch')}, not at batch {batch}")
    if isinstance(repeats, bool) or not isinstance(repeats, (int, np.integer)) or repeats < 1:
        raise ValueError(f"repeats must be a positive integer (rounds), got {repeats!r}")
    _check_statistic(statistic)
    scaled = make_task(rebatched_graph(task.graph, batch, model), task.cluster, task.step)
    measured_model = profiled_task(scaled, profile)
    executor = Executor(task, dict(devices), seed=seed, batch=batch, model=model)
    times = np.full((repeats, len(placements)), np.nan)
    errors: list[str | None] = [None] * len(placements)
    order = np.random.default_rng(seed)
    count = 0
    with intra_op_threads(1 if virtual_cpus(devices.values()) else None):
        for r in range(repeats):
            for j in order.permutation(len(placements)):
                label, placement = placements[j]
                if progress is not None:
                    progress(count, label)
                count += 1
                if errors[j] is not None:
                    continue  # a placement that failed once is not run again
                result = executor.run(placement, warmup=warmup, repeats=1)
                if result.feasible:
                    times[r, j] = result.runtime
                else:
                    errors[j] = result.error
    failed = np.array([error is not None for error in errors], dtype=bool)
    times[:, failed] = np.nan
    measured = np.full(len(placements), np.inf)
    spread = np.full(len(placements), np.nan)
    if np.any(~failed):
        ran = times[:, ~failed]
        measured[~failed] = STATISTICS[statistic](ran, axis=0)
        spread[~failed] = (np.max(ran, axis=0) - np.min(ran, axis=0)) / np.median(ran, axis=0)
    return FidelityReport(
        task_id=task.id,
        batch=batch,
        labels=tuple(label for label, _ in placements),
        measured=measured,
        analytical=np.array([_runtime(scaled, p) for _, p in placements]),
        profiled=np.array([_runtime(measured_model, p) for _, p in placements]),
        spread=spread,
        errors=tuple(errors),
        rounds=times,
        statistic=statistic,
        optimizer=task.optimizer if task.objective == "train_step" else None,
    )


def _runtime(task: Task, placement: np.ndarray) -> float:
    """Simulated runtime; a placement over memory still gets its makespan (the real run on a
    virtual CPU cluster does not run out of memory the way the model's capacity says)."""
    result = simulate(task, placement)
    return float(result.runtime) if np.isfinite(result.runtime) else np.inf


def scatter_plot(report: FidelityReport, path: str | Path, title: str | None = None) -> Path:
    """Write a PNG: predicted vs measured runtime (ms) of both models, with the y = x line."""
    matplotlib = require("matplotlib", "drawing the plot")
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figures = report.figures()
    ok = report._scored()
    measured = report.measured[ok] * 1e3
    fig, ax = plt.subplots(figsize=(5.5, 5))
    try:
        for name, values, marker in (
            ("profiled", report.profiled, "o"),
            ("analytical", report.analytical, "x"),
        ):
            ax.scatter(
                measured,
                values[ok] * 1e3,
                marker=marker,
                label=(
                    f"{name}: Spearman {figures[f'spearman_{name}']:.3f}, MAPE {figures[f'mape_{name}']:.1f}%"
                ),
            )
        everything = np.concatenate([measured, report.profiled[ok] * 1e3, report.analytical[ok] * 1e3])
        if everything.size:
            low, high = float(everything.min()) * 0.9, float(everything.max()) * 1.1
            ax.plot(
                [low, high],
                [low, high],
                color="gray",
                linewidth=1,
                linestyle="--",
                label="predicted = measured",
            )
            if high / max(low, 1e-12) > 20:
                ax.set_xscale("log")
                ax.set_yscale("log")
        ax.set_xlabel("measured runtime (ms)")
        ax.set_ylabel("predicted runtime (ms)")
        batch = f", batch {report.batch}" if report.batch is not None else ""
        ax.set_title(title or f"{report.task_id}{batch}: {figures['scored']} placements", fontsize=10)
        ax.legend(fontsize=8)
        fig.tight_layout()
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        fig.savefig(path, dpi=120)
    finally:
        plt.close(fig)
    return path
