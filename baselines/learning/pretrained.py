"""`pretrained-list`: a list scheduler whose op priorities and device scores were learned beforehand
on the train split of ``synthetic-v1`` (never a test graph), then placed zero-shot on any task.

What is learned. HEFT (`baselines.scheduling.heft`) orders the ops by upward rank and puts each on
the device where it finishes first. Both rules are fixed, and both miss what the simulator charges:
HEFT's links are contention-free, so on communication-heavy graphs (the recurrent ENAS cells) it
spreads ops whose copies then queue, and ends behind one device. Here the two rules are linear in
features of the task's arrays:

* **priority** of an op = ``w_priority . f(op)``, `PRIORITY_FEATURES`, each scaled per graph (ranks
  by the critical path, sizes by the graph's largest): upward and downward rank, mean time, output
  bytes, memory, fan-in and fan-out, backward and update flags. ``w_priority = e_upward`` is HEFT's
  order.
* **device score** of a forward op on device ``d`` = its earliest finish time (with insertion into
  idle gaps, as HEFT) plus the penalties of `DEVICE_FEATURES` (copies into ``d``, the op's time on
  ``d``, memory filled, opening a device no op uses yet, the device's load so far; the last three in
  units of the critical path), weighted by ``W_device . c(task)``: the weights depend on the
  context `CONTEXT_FEATURES` of the graph and cluster (communication to computation ratio, the
  graph's parallelism, the device count), so one model can keep a communication-bound graph on few
  devices and spread a parallel one. The lowest score wins; devices whose memory (Baechi's estimate,
  `baselines.scheduling.op_memory`) has no room are skipped.

All weights zero except ``w_priority[upward] = 1`` is HEFT exactly (the same placement: `hand case`
in tests/baselines/test_pretrained.py). `PretrainedModel` holds them: 9 + 5 x 4 = 29 numbers.

Training (`pretrain`): a seeded evolution strategy (antithetic Gaussian perturbations, centred ranks,
Adam) over the weights, each generation on a batch of training tasks drawn from the train split of
``synthetic-v1`` (graphs of at most ``max_ops`` forward ops) on preset clusters and the train split
of ``random-v1``; the objective is the mean ``log(runtime / HEFT's runtime)`` (an infeasible
placement counts ``log 4`` plus its memory overflow). The checkpoint `CHECKPOINT` is the result of
``python -m baselines.learning.pretrained`` (its defaults), with the evaluations, wall time and
machine of that run in it; ``--ray`` (with ``--address`` for a cluster) scores each generation's
population as Ray jobs, with the same weights.

Placing. With ``budget=1`` (zero-shot) the agent schedules once and evaluates once. With ``budget``
None it retries an out-of-memory schedule with the overflowing devices' memory shrunk, as HEFT does
(`baselines.scheduling.memory_aware`, at most 7 evaluations). With a larger ``budget`` it fine-tunes:
the better of the zero-shot placement (its memory retries counted) and the best of the constructive
heuristics `baselines.search.START_AGENTS` (their evaluations counted, as anneal's start) starts
``move-bandit`` (annealing whose move mix a bandit adapts), which spends the rest of the budget; the
best placement evaluated is returned.
Deterministic for a seed.
"""

from __future__ import annotations

import argparse
import functools
import json
import math
import os
import platform
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from baselines.learning.move_bandit import move_bandit
from baselines.registry import register
from baselines.scheduling import (
    MEMORY_RETRIES,
    ListSchedule,
    downward_rank,
    heft,
    memory_aware,
    op_memory,
    priority_order,
    task_dag,
    upward_rank,
)
from baselines.search import find_start
from placement_gym.cost_model import simulate
from placement_gym.evaluation.agents import AgentResult
from placement_gym.evaluation.budget import Budget
from placement_gym.evaluation.parallel import check_backend, connect_ray, import_ray, run_jobs
from placement_gym.task.compiled import Task

PRIORITY_FEATURES: tuple[str, ...] = (
    "upward",  # upward rank / critical path (HEFT's priority)
    "downward",  # downward rank / critical path
    "duration",  # mean time over the devices / the graph's largest
    "output_bytes",  # log(1 + bytes of the op's outputs) / the graph's largest
    "memory",  # log(1 + Baechi's memory estimate of its forward op) / the graph's largest
    "fan_in",  # log(1 + predecessors) / the graph's largest
    "fan_out",  # log(1 + successors) / the graph's largest
    "backward",  # 1 for a backward op
    "update",  # 1 for an optimizer update op
)
DEVICE_FEATURES: tuple[str, ...] = (
    "comm",  # seconds of copies into the device from the op's predecessors elsewhere
    "compute",  # the op's seconds on the device (beyond what its finish time already holds)
    "memory",  # share of the device's memory in use once the op is there, x critical path
    "new_device",  # 1 when no forward op is on the device yet, x critical path
    "load",  # busy seconds of the device so far / the graph's total mean work, x critical path
)
CONTEXT_FEATURES: tuple[str, ...] = (
    "bias",  # 1
    "comm_ratio",  # log10(mean copy time of all tensors / mean compute time of all ops) / 3, clipped to +-1
    "parallelism",  # log(total work / critical path) / log(devices), clipped to [0, 2]
    "devices",  # devices / 16
)
N_WEIGHTS = len(PRIORITY_FEATURES) + len(DEVICE_FEATURES) * len(CONTEXT_FEATURES)
CHECKPOINT = Path(__file__).with_name("pretrained_list.json")
# Fine-tuning needs the heuristics' start (26 evaluations on a typical task), the zero-shot placement's
# attempts and a batch of moves.
FINETUNE_MIN_BUDGET = 64
# An infeasible placement's loss in training: as bad as four times HEFT's runtime, plus its overflow.
INFEASIBLE_LOSS = math.log(4.0)


@dataclass(frozen=True)
class PretrainedModel:
    """The learned weights: ``priority`` (one per `PRIORITY_FEATURES`) and ``device`` (one row per
    `DEVICE_FEATURES`, one column per `CONTEXT_FEATURES`)."""

    priority: np.ndarray
    device: np.ndarray

    @classmethod
    def heft(cls) -> PretrainedModel:
        """The weights that give HEFT's schedule: upward rank first, earliest finish."""
        priority = np.zeros(len(PRIORITY_FEATURES))
        priority[PRIORITY_FEATURES.index("upward")] = 1.0
        return cls(priority, np.zeros((len(DEVICE_FEATURES), len(CONTEXT_FEATURES))))

    @classmethod
    def from_vector(cls, vector: Sequence[float]) -> PretrainedModel:
        """The model of a flat vector of `N_WEIGHTS` numbers (priority first, then device row-major)."""
        v = np.asarray(vector, dtype=np.float64)
        if v.shape != (N_WEIGHTS,) or not np.all(np.isfinite(v)):
            raise ValueError(f"a pretrained-list model is {N_WEIGHTS} finite numbers, got shape {v.shape}")
        k = len(PRIORITY_FEATURES)
        return cls(v[:k].copy(), v[k:].reshape(len(DEVICE_FEATURES), len(CONTEXT_FEATURES)).copy())

    def vector(self) -> np.ndarray:
        """The flat weights (`from_vector`'s inverse)."""
        return np.concatenate([self.priority, self.device.ravel()])


def load_checkpoint(path: str | Path = CHECKPOINT) -> tuple[PretrainedModel, dict]:
    """The model stored at ``path`` (default the shipped `CHECKPOINT`) and the record of its training.
    A missing or malformed file is a one-line ValueError."""
    path = Path(path)
    try:
        data = json.loads(path.read_text())
        model = PretrainedModel.from_vector(data["weights"])
        if tuple(data["priority_features"]) != PRIORITY_FEATURES or \
                tuple(data["device_features"]) != DEVICE_FEATURES or \
                tuple(data["context_features"]) != CONTEXT_FEATURES:
            raise ValueError("its features are not this module's")
    except (OSError, KeyError, TypeError, json.JSONDecodeError, ValueError) as error:
        raise ValueError(f"cannot load the pretrained-list checkpoint {path}: {error}") from None
    return model, data.get("training", {})


@dataclass(frozen=True)
class TaskFeatures:
    """What the model reads of a task, computed once per task."""

    priority: np.ndarray  # (ops, PRIORITY_FEATURES)
    context: np.ndarray  # (CONTEXT_FEATURES,)
    critical_path: float  # seconds (the largest upward rank)
    total_work: float  # seconds (sum over ops of the mean time)


def declared_pretraining(path: str | Path = CHECKPOINT) -> dict:
    """The leaderboard's ``pretraining`` object of the checkpoint at ``path`` (default the shipped one):
    its training record's evaluations, wall time and machine, ``counted: declared`` (it was trained
    outside the harness)."""
    return declared_from(load_checkpoint(path)[1])


def declared_from(record: dict) -> dict:
    """The leaderboard's ``pretraining`` object of a checkpoint's training ``record`` (its evaluations,
    wall time and machine; ``counted: declared``), for any agent shipped pre-trained."""
    return {"evaluations": int(record["evaluations"]), "wall_s": float(record["wall_s"]),
            "machine": str(record["machine"]), "counted": "declared"}


def _scaled_log(values: np.ndarray) -> np.ndarray:
    logs = np.log1p(np.maximum(values, 0.0))
    top = logs.max() if len(logs) else 0.0
    return logs / top if top > 0 else logs


def task_features(task: Task) -> TaskFeatures:
    """The per-op features and the task's context (see the module docstring)."""
    devices = np.arange(task.n_devices)
    up = upward_rank(task, devices)
    down = downward_rank(task, devices)
    cp = float(up.max()) if task.n_ops else 0.0
    scale = cp if cp > 0 else 1.0
    mean_time = task.duration.mean(axis=1)
    dag = task_dag(task)
    fan_in, fan_out = np.diff(dag.pred_pointer), np.diff(dag.succ_pointer)
    produced = (task.tensor_producer >= 0)
    out_bytes = np.bincount(task.tensor_producer[produced], weights=task.tensor_bytes[produced],
                            minlength=task.n_ops)
    memory = op_memory(task)[task.op_forward]
    top_time = mean_time.max() if task.n_ops and mean_time.max() > 0 else 1.0
    priority = np.stack([
        up / scale, down / scale, mean_time / top_time, _scaled_log(out_bytes), _scaled_log(memory),
        _scaled_log(fan_in.astype(float)), _scaled_log(fan_out.astype(float)),
        (task.op_kind == 1).astype(float), (task.op_kind == 2).astype(float),
    ], axis=1)
    total_work = float(mean_time.sum())
    off = ~np.eye(task.n_devices, dtype=bool)
    if task.n_devices > 1 and task.n_ops:
        bandwidth = task.cluster.link_bandwidth[off].mean()
        copy = float(dag.succ_bytes.sum()) / bandwidth / max(len(dag.succ_bytes), 1)
        compute = total_work / task.n_ops
        ratio = np.clip(math.log10(max(copy, 1e-15) / max(compute, 1e-15)) / 3.0, -1.0, 1.0)
        parallel = np.clip(math.log(max(total_work / scale, 1.0)) / math.log(task.n_devices), 0.0, 2.0)
    else:
        ratio, parallel = 0.0, 0.0
    context = np.array([1.0, ratio, parallel, task.n_devices / 16.0])
    return TaskFeatures(priority, context, cp, total_work)


def learned_schedule(task: Task, model: PretrainedModel, capacity: np.ndarray | None = None,
                     features: TaskFeatures | None = None) -> ListSchedule:
    """The list schedule of ``task`` under ``model`` (see the module docstring); ``capacity``: usable
    memory per device (default the cluster's)."""
    f = task_features(task) if features is None else features
    schedule = ListSchedule(task, capacity)
    weights = model.device @ f.context  # one weight per DEVICE_FEATURES for this task
    w_comm, w_compute, w_memory, w_new, w_load = weights.tolist()
    cp = f.critical_path if f.critical_path > 0 else 1.0
    work = f.total_work if f.total_work > 0 else 1.0
    everywhere = np.arange(task.n_devices)
    busy = np.zeros(task.n_devices)
    opened = np.zeros(task.n_devices, dtype=bool)
    duration = task.duration
    dag = schedule.dag
    for op in priority_order(task, f.priority @ model.priority):
        pinned = schedule.pinned_device(op)
        lo, hi = dag.pred_pointer[op], dag.pred_pointer[op + 1]
        if hi > lo:
            preds = dag.pred_op[lo:hi]
            src = schedule.device[preds]
            transfer = schedule.latency[src] + dag.pred_bytes[lo:hi, None] * schedule.inverse_bandwidth[src]
            ready = (schedule.finish[preds, None] + transfer).max(axis=0)
            comm = transfer.sum(axis=0)
        else:
            ready = comm = np.zeros(task.n_devices)
        if pinned >= 0:
            candidates = np.array([pinned])
        else:
            room = everywhere[schedule.has_room(op, everywhere)]
            candidates = room if len(room) else np.array([schedule.fallback_device(everywhere)])
        best = None
        for d in candidates.tolist():
            time_d = float(duration[op, d])
            start, gap = schedule.insertion_slot(d, float(ready[d]), time_d)
            score = start + time_d
            if pinned < 0:
                filled = (schedule.used[d] + schedule.memory[op]) / max(schedule.capacity[d], 1.0)
                score += (w_comm * comm[d] + w_compute * time_d
                          + cp * (w_memory * filled + w_new * (not opened[d]) + w_load * busy[d] / work))
            if best is None or score < best[0]:
                best = (score, d, start, gap)
        _, d, start, gap = best
        schedule.place(op, d, start, gap)
        busy[d] += float(duration[op, d])
        if pinned < 0:
            opened[d] = True
    return schedule


def zero_shot(task: Task, model: PretrainedModel, attempts: int) -> AgentResult:
    """The model's placement, scheduled and evaluated at most ``attempts`` times (1: once; more: the
    memory retries of `baselines.scheduling.memory_aware`, at most its own limit of 7)."""
    features = task_features(task)

    def build(capacity):
        schedule = learned_schedule(task, model, capacity, features)
        return schedule.placement(), {"own_makespan": schedule.makespan}

    return memory_aware(task, build, attempts)


@functools.cache
def shipped_model() -> tuple[PretrainedModel, dict]:
    """The shipped `CHECKPOINT`'s model and record, read once per process."""
    return load_checkpoint(CHECKPOINT)


@register("pretrained-list", "list scheduler with priorities and device scores pre-trained on "
          "synthetic-v1:train (zero-shot; with a budget, move-bandit from its placement)", takes_budget=True,
          pretraining=declared_pretraining)
def pretrained_list(task: Task, seed: int = 0, budget: int | Budget | None = None, *,
                    model: PretrainedModel | None = None) -> AgentResult:
    """Place ``task`` with the pre-trained list scheduler (see the module docstring). ``budget``: 1
    or up to `FINETUNE_MIN_BUDGET` - 1: zero-shot within that many evaluations; None: zero-shot with
    HEFT's memory retries; larger (an int or a `Budget`): fine-tuning by ``move-bandit`` from the
    zero-shot placement, the zero-shot's evaluations counted. ``model``: other weights than the
    shipped `CHECKPOINT`. Deterministic for ``seed``."""
    if model is None:
        model, _ = shipped_model()

    def place() -> tuple[np.ndarray, dict]:
        schedule = learned_schedule(task, model)
        return schedule.placement(), {"own_makespan": schedule.makespan}

    return place_pretrained(task, seed, budget, place, lambda attempts: zero_shot(task, model, attempts))


def place_pretrained(task: Task, seed: int, budget: int | Budget | None,
                     place: Callable[[], tuple[np.ndarray, dict]],
                     zero_shot: Callable[[int], AgentResult]) -> AgentResult:
    """The budgets of a pre-trained placer (``pretrained-list``, ``pretrained-gnn``): ``place()`` its
    placement and what it says of it, no evaluation; ``zero_shot(attempts)`` that placement evaluated,
    with HEFT's memory retries within ``attempts``. ``budget`` 1 to `FINETUNE_MIN_BUDGET` - 1: zero-shot
    within that many evaluations (a `Budget`: one evaluation through it, so that its curve holds it);
    None: zero-shot with the retries; larger: `finetune_from` the zero-shot placement."""
    limit = budget.remaining if isinstance(budget, Budget) else budget
    if limit is not None and limit < 1:
        raise ValueError(f"budget must be >= 1 evaluation, got {limit}")
    if limit is None or limit < FINETUNE_MIN_BUDGET:
        if isinstance(budget, Budget):
            placement, info = place()
            score = budget.scores(placement[None])[0]
            info = {**info, "simulated_runtime": score.runtime, "memory_retries": 0}
            return AgentResult(placement, 1, info)
        return zero_shot(MEMORY_RETRIES + 1 if limit is None else min(limit, MEMORY_RETRIES + 1))
    return finetune_from(task, seed, budget, lambda: zero_shot(MEMORY_RETRIES + 1))


def finetune_from(task: Task, seed: int, budget: int | Budget,
                  place: Callable[[], AgentResult]) -> AgentResult:
    """Fine-tuning within ``budget`` (an int or a `Budget`) from a pre-trained placement (``place()``,
    its evaluations counted): the better of it and the constructive heuristics' best (anneal's start)
    starts ``move-bandit``, which spends the rest; the best placement evaluated is returned."""
    own = budget if isinstance(budget, Budget) else Budget(task, int(budget))
    # The constructive heuristics (anneal's start candidates) and the zero-shot placement compete for
    # the start: on graphs larger than any of training HEFT often wins (experiments/pretrained_placer).
    heuristics = find_start(task, own, None, seed)
    start = place()
    own.used += start.evaluations  # its own simulations; re-scoring it below costs one more
    zero = own.scores(start.placement[None])[0]
    best = start.placement if zero.key < heuristics.score.key else heuristics.placement
    result = move_bandit(task, seed=seed, budget=own, start=best)  # its start is memoised: not counted
    return AgentResult(result.placement, result.evaluations,
                       {**result.info, "zero_shot_runtime": start.info["simulated_runtime"],
                        "zero_shot_evaluations": start.evaluations,
                        "start": "zero-shot" if best is start.placement else heuristics.source})


# ---------------------------------------------------------------------------------------------------
# Pre-training


@dataclass(frozen=True)
class PretrainConfig:
    """What `pretrain` runs: ``generations`` of ``population`` (even: antithetic pairs) perturbed
    models, each scored on ``tasks_per_generation`` training tasks drawn from ``pool`` training
    tasks; ``sigma`` the perturbation's scale, ``learning_rate`` Adam's step."""

    dataset: str = "synthetic-v1"
    pool: int = 160
    max_ops: int = 400
    tasks_per_generation: int = 24
    generations: int = 50
    population: int = 24
    sigma: float = 0.1
    learning_rate: float = 0.05
    clusters: tuple[str, ...] = ("k80x4", "k40x4", "p100x4", "random-v1:train")


def training_tasks(config: PretrainConfig, seed: int) -> list[str]:
    """``config.pool`` training task ids: graphs of the train split with at most ``max_ops`` forward
    ops and clusters of ``config.clusters`` (a family split draws one of its clusters), drawn with
    ``seed``."""
    from placement_gym.datasets import get_dataset
    from placement_gym.datasets.clusters import cluster_ids

    rng = np.random.default_rng(seed)
    dataset = get_dataset(config.dataset)
    ids = dataset.ids("train")
    choices = []
    for cluster in config.clusters:
        family, _, split = cluster.partition(":")
        if family == "random-v1" and split in ("train", "test", "all"):
            choices.append(list(cluster_ids(split)))
        else:
            choices.append([cluster])
    tasks: list[str] = []
    order = rng.permutation(len(ids))
    for index in order.tolist():
        if len(tasks) == config.pool:
            break
        graph = dataset.graph(ids[index])
        if graph.n_ops > config.max_ops:
            continue
        group = choices[int(rng.integers(len(choices)))]
        cluster = group[int(rng.integers(len(group)))]
        tasks.append(f"{config.dataset}:{ids[index]}/{cluster}/train")
    return tasks


def _task_loss(task_id: str, reference: float, model: PretrainedModel) -> float:
    """log(runtime / ``reference``) of ``model``'s one-shot placement (one evaluation); an infeasible
    placement adds `INFEASIBLE_LOSS` and its relative memory overflow."""
    from placement_gym.task.named import parse_task_id

    task = parse_task_id(task_id)
    result = simulate(task, learned_schedule(task, model, None, _features(task, task_id)).placement())
    loss = math.log(result.runtime / reference)
    if not result.feasible:
        capacity = task.cluster.memory_capacity
        overflow = float(np.sum(np.maximum(result.peak_memory - capacity, 0) / capacity))
        loss = max(loss, 0.0) + INFEASIBLE_LOSS + overflow
    return loss


# Per process: the features of the training tasks it has scored (a pure function of the task).
_FEATURES: dict[str, TaskFeatures] = {}


def _features(task: Task, task_id: str) -> TaskFeatures:
    if task_id not in _FEATURES:
        _FEATURES[task_id] = task_features(task)
    return _FEATURES[task_id]


def _losses(job: tuple[list[float], list[tuple[str, float]]]) -> list[float]:
    vector, tasks = job
    model = PretrainedModel.from_vector(vector)
    return [_task_loss(task_id, reference, model) for task_id, reference in tasks]


def _heft_reference(task_id: str) -> tuple[float, int]:
    from placement_gym.task.named import parse_task_id

    result = heft(parse_task_id(task_id))
    return float(result.info["simulated_runtime"]), int(result.evaluations)


def pretrain(config: PretrainConfig = PretrainConfig(), seed: int = 0, *, backend: str = "serial",
             address: str | None = None, workers: int | None = None,
             log: Any = None) -> tuple[PretrainedModel, dict]:
    """Train the weights from HEFT's (`PretrainedModel.heft`) by the evolution strategy of the module
    docstring; returns the model and the record of the run (config, seed, evaluations, wall time,
    backend, workers, the driver's machine, loss per generation). Each generation's population is
    scored as independent jobs of `placement_gym.evaluation.parallel.run_jobs` (``backend``,
    ``address``, ``workers``: as there; on Ray one instance serves every generation): serial, on a
    local Ray instance, or on the Ray cluster at ``address``, with the same result, every score being
    a pure function of its weights and tasks. Deterministic for ``seed``."""
    if config.population < 2 or config.population % 2:
        raise ValueError(f"population must be even and >= 2, got {config.population}")
    check_backend(backend, address, workers)
    started = time.perf_counter()
    rng = np.random.default_rng(seed)
    pool = training_tasks(config, seed)
    references = [_heft_reference(task_id) for task_id in pool]
    evaluations = sum(n for _, n in references)
    theta = PretrainedModel.heft().vector()
    m, v = np.zeros_like(theta), np.zeros_like(theta)
    beta1, beta2 = 0.9, 0.999
    history = []
    ray = import_ray("pretrain(backend='ray')") if backend == "ray" else None
    joined = ray is not None and connect_ray(ray, address, workers)
    try:
        for generation in range(config.generations):
            chosen = rng.choice(len(pool), config.tasks_per_generation, replace=False).tolist()
            batch = [(pool[i], references[i][0]) for i in chosen]
            half = rng.standard_normal((config.population // 2, len(theta)))
            noise = np.concatenate([half, -half])
            candidates = [theta + config.sigma * eps for eps in noise] + [theta]
            jobs = [(c.tolist(), batch) for c in candidates]
            results = run_jobs(_losses, jobs, backend=backend, address=address, workers=workers)
            evaluations += sum(len(r) for r in results)
            losses = np.array([np.mean(r) for r in results])
            ranks = np.empty(config.population)
            ranks[np.argsort(losses[:-1], kind="stable")] = np.arange(config.population)
            utility = ranks / (config.population - 1) - 0.5  # centred ranks, low loss -> negative
            gradient = utility @ noise / (config.population * config.sigma)
            m = beta1 * m + (1 - beta1) * gradient
            v = beta2 * v + (1 - beta2) * gradient ** 2
            step = config.learning_rate * (m / (1 - beta1 ** (generation + 1))) / (
                np.sqrt(v / (1 - beta2 ** (generation + 1))) + 1e-8)
            theta = theta - step
            history.append(round(float(losses[-1]), 6))
            if log is not None:
                log(f"generation {generation}: loss of the mean {losses[-1]:+.4f}, "
                    f"best {losses[:-1].min():+.4f}, {evaluations} evaluations, "
                    f"{time.perf_counter() - started:.0f} s")
    finally:
        if joined:
            ray.shutdown()
    record = {
        "config": {**config.__dict__, "clusters": list(config.clusters)},
        "seed": seed,
        "evaluations": evaluations,
        "wall_s": round(time.perf_counter() - started, 1),
        "backend": backend,
        "workers": workers,
        "machine": f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores, "
                   f"{platform.system()}",
        "loss_history": history,
    }
    return PretrainedModel.from_vector(theta), record


def save_checkpoint(model: PretrainedModel, record: dict, path: str | Path) -> None:
    """Write ``model`` and its training ``record`` as the JSON `load_checkpoint` reads."""
    data = {
        "agent": "pretrained-list",
        "priority_features": list(PRIORITY_FEATURES),
        "device_features": list(DEVICE_FEATURES),
        "context_features": list(CONTEXT_FEATURES),
        "weights": [round(float(x), 8) for x in model.vector()],
        "training": record,
    }
    Path(path).write_text(json.dumps(data, indent=1) + "\n")


def add_pretraining_options(parser: argparse.ArgumentParser, dataset: str, clusters: Sequence[str],
                            checkpoint: Path, ray_runs: str) -> None:
    """The options every pre-training command shares: ``--ray`` (``ray_runs``: what runs as Ray jobs),
    ``--address``, ``--workers``, ``--dataset``, ``--clusters`` and ``--out``; read them back with
    `pretraining_options`."""
    parser.add_argument("--ray", action="store_true", help=f"{ray_runs} as Ray jobs")
    parser.add_argument("--address", help="with --ray: 'auto' or 'ray://HEAD:10001' (default: local Ray)")
    parser.add_argument("--workers", type=int, help="with --ray: jobs at once (default: every CPU)")
    parser.add_argument("--dataset", default=dataset,
                        help=f"the dataset whose train split the tasks are drawn from (default: {dataset}; "
                             "synthetic-v1: synthetic graphs, architectures-v1: real architectures)")
    parser.add_argument("--clusters", default=",".join(clusters),
                        help="comma-separated presets and cluster family splits such as random-v1:train "
                             f"(default: {','.join(clusters)})")
    parser.add_argument("--out", type=Path, default=checkpoint, help="where to write the checkpoint")


def pretraining_options(parser: argparse.ArgumentParser, args: argparse.Namespace,
                        ray_does: str) -> tuple[tuple[str, ...], dict]:
    """The clusters of ``--clusters`` and the ``backend``, ``address`` and ``workers`` keywords of
    ``--ray``, ``--address`` and ``--workers``; a parser error when Ray options come without ``--ray``
    (``ray_does``: what Ray does, for the message)."""
    if (args.address is not None or args.workers is not None) and not args.ray:
        parser.error(f"--address and --workers say where Ray {ray_does}: add --ray")
    clusters = tuple(name.strip() for name in args.clusters.split(",") if name.strip())
    return clusters, {"backend": "ray" if args.ray else "serial", "address": args.address,
                      "workers": args.workers}


def main(argv: Sequence[str] | None = None) -> None:
    """``python -m baselines.learning.pretrained``: pre-train and write the checkpoint."""
    parser = argparse.ArgumentParser(description="pre-train the pretrained-list agent's weights")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--generations", type=int, default=PretrainConfig.generations)
    parser.add_argument("--max-ops", type=int, default=PretrainConfig.max_ops,
                        help="the largest training graph, in forward ops (default: "
                             f"{PretrainConfig.max_ops})")
    add_pretraining_options(parser, PretrainConfig.dataset, PretrainConfig.clusters, CHECKPOINT,
                            "score each population")
    args = parser.parse_args(argv)
    clusters, backend = pretraining_options(parser, args, "scores the population")
    if not clusters or args.max_ops < 1:
        parser.error("--clusters needs at least one cluster and --max-ops a positive number")
    config = PretrainConfig(generations=args.generations, dataset=args.dataset, max_ops=args.max_ops,
                            clusters=clusters)
    try:
        model, record = pretrain(config, args.seed, **backend, log=lambda line: print(line, flush=True))
    except (ValueError, ImportError) as error:
        parser.error(str(error))
    save_checkpoint(model, record, args.out)
    print(f"wrote {args.out} ({args.out.stat().st_size} bytes)")


if __name__ == "__main__":
    main()
