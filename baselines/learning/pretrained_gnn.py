"""`pretrained-gnn`: a graph network that predicts how fast a placement of a task runs, pre-trained
across real architectures and clusters, choosing among constructive placements of an unseen task with
one forward pass and one evaluation.

Why a critic. On real models HEFT (`baselines.scheduling.heft_schedule`) is hard to beat op by op:
a network trained to imitate search results op by op learns to copy HEFT's device, because search
moves few ops (docs/baselines.md, "The pre-trained layout critic"). What HEFT gets wrong on real models is the
whole layout: it spreads a transformer whose copies then queue on the links (a third of the
held-out real-model pairs run faster on one device), or overfills a device's memory. Those are
choices among a few layouts, each of which a list scheduler builds (`candidates`): HEFT over all
devices, HEFT over the fastest 1, 2 or 4 devices, HEFT within 70% of each device's memory, and the
`pretrained-list` prior's schedule. The network learns which of them the simulator will run
fastest, from the graph and the layout.

The network (`PlacementCritic`). Node inputs per forward op: its observation features
(`placement_gym.envs.observation.NODE_FEATURES`), the features of its device in the layout
(`DEVICE_INPUTS`), whether that is HEFT's device, and the share of its input bytes that come from
another device. A `DagEncoder` (`baselines.learning.gnn`) embeds the ops; their mean and maximum,
with the layout's `LAYOUT_FEATURES` (its contention-free makespan against HEFT's, devices used,
the fullest device's memory estimate, bytes crossing devices), give ``log(runtime / HEFT's)``
through an MLP. Every weight is independent of the graph's size and of the device count. The
layouts of one task are one batch: one forward pass.

Placing. The layout predicted fastest, unless no other is predicted faster than HEFT's by more
than ``threshold`` (chosen after training on held-out training tasks, `select`; never on test
graphs). Budgets as `pretrained-list`: 1 (zero-shot: that layout, one evaluation), None (HEFT's
memory retries on it, at most 7 evaluations), larger (fine-tuning by move-bandit from the better of
it and the constructive heuristics' best).

Pre-training (`pretrain`, ``python -m baselines.learning.pretrained_gnn``): ``pool`` training tasks
of the real architectures' train split (drawn as `pretrained.training_tasks` draws: graphs of at
most ``max_ops`` ops on presets and random-v1 train clusters); each task's layouts, and the placement
move-bandit finds with ``search_budget`` evaluations (so that the critic also sees layouts better than
any heuristic), simulated; the critic regresses their ``log(runtime / HEFT's)`` (HEFT as registered,
with its memory retries; an infeasible layout counts ``log 4``), and each layout's difference from
HEFT's layout, on which the choice turns. Every evaluation is counted in the
checkpoint's record. Deterministic for the seed (torch on one thread, `placement_gym.common.threads`).
"""

from __future__ import annotations

import argparse
import functools
import math
import os
import platform
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from baselines.learning.gnn import DagEncoder, graph_inputs, mlp
from baselines.learning.move_bandit import move_bandit
from baselines.learning.pretrained import PretrainConfig as ListPretrainConfig
from baselines.learning.pretrained import (
    add_pretraining_options,
    declared_from,
    learned_schedule,
    place_pretrained,
    pretraining_options,
    shipped_model,
    training_tasks,
)
from baselines.registry import OPTIONAL_AGENTS, register
from baselines.scheduling import (
    ListSchedule,
    heft,
    heft_schedule,
    memory_aware,
    op_memory,
    priority_order,
    task_dag,
    upward_rank,
)
from placement_gym.common.threads import intra_op_threads
from placement_gym.cost_model import simulate
from placement_gym.envs.observation import DEVICE_FEATURES, NODE_FEATURES
from placement_gym.evaluation.agents import AgentResult
from placement_gym.evaluation.budget import Budget
from placement_gym.evaluation.parallel import check_backend, run_jobs
from placement_gym.task.cache import TaskCache
from placement_gym.task.compiled import Task

CHECKPOINT = Path(__file__).with_name("pretrained_gnn.pt")
DEVICE_INPUTS: tuple[str, ...] = (*DEVICE_FEATURES, "log_link_bandwidth")
LAYOUT_FEATURES: tuple[str, ...] = (
    "makespan",  # log(contention-free makespan / HEFT's), clipped to +-2, / 2
    "devices_used",  # devices holding a forward op / devices
    "memory_fill",  # the fullest device's memory estimate / its memory, clipped to 2, / 2
    "cut_bytes",  # log1p(bytes crossing devices / 1 MB) / 10, clipped to 1
)
# log1p(bytes/s) of a device's mean link to the others, over log1p of this scale (900 GB/s: NVLink 4)
LINK_SCALE = 9e11
TOP_DEVICES = (1, 2, 4)  # HEFT restricted to the fastest k devices
MEMORY_MARGIN = 0.7  # the memory-safe layouts fill at most this share of each device
THRESHOLDS = (0.0, 0.02, 0.05, 0.1, 0.2)
INFEASIBLE_LOSS = math.log(4.0)
TARGET_CLIP = 2.0


@dataclass(frozen=True)
class PretrainConfig:
    """What `pretrain` runs: ``pool`` training tasks of ``dataset``'s train split (graphs of at most
    ``max_ops`` ops, clusters of ``clusters``), their layouts and move-bandit's placement at
    ``search_budget`` evaluations simulated, ``valid`` more for `select`; the critic (``hidden``,
    ``rounds``) trained for ``epochs`` passes over the pool at ``learning_rate``."""

    dataset: str = "architectures-v1"
    pool: int = 400
    valid: int = 80
    max_ops: int = 3000
    clusters: tuple[str, ...] = ("k80x4", "h100x8", "random-v1:train")
    search_budget: int = 300
    hidden: int = 32
    rounds: int = 3
    epochs: int = 60
    learning_rate: float = 3e-3


def device_inputs(task: Task) -> np.ndarray:
    """`DEVICE_INPUTS` of every device of ``task``'s cluster, ``(devices, 5)`` in [0, 1]."""
    observed = graph_inputs(task).device_features.numpy()
    bandwidth = task.cluster.link_bandwidth.astype(float)
    n = task.n_devices
    off = ~np.eye(n, dtype=bool)
    mean_link = np.array([bandwidth[d][off[d]].mean() if n > 1 else 0.0 for d in range(n)])
    link = np.clip(np.log1p(mean_link) / math.log1p(LINK_SCALE), 0.0, 1.0)
    return np.concatenate([observed, link[:, None]], axis=1).astype(np.float32)


def fixed_makespan(task: Task, placement: np.ndarray) -> float:
    """The contention-free makespan of ``placement`` as HEFT's scheduler sees it: ops by upward rank,
    each on its placed device (backward and update ops on their forward op's), inserted into idle
    gaps. No evaluation."""
    schedule = ListSchedule(task)
    devices = np.asarray(placement)[task.op_forward]
    for op in priority_order(task, upward_rank(task, np.arange(task.n_devices))):
        d = int(devices[op])
        ready = float(schedule.data_ready(op)[d])
        start, gap = schedule.insertion_slot(d, ready, float(task.duration[op, d]))
        schedule.place(op, d, start, gap)
    return schedule.makespan


def _heft_layout(task: Task) -> tuple[np.ndarray, float]:
    schedule = heft_schedule(task)
    return schedule.placement(), schedule.makespan


# Per task, HEFT's placement and its own (contention-free) makespan: the layouts and the critic's
# relative inputs both start from it, and on a large graph it takes seconds of Python.
_HEFT_LAYOUT: TaskCache[tuple[np.ndarray, float]] = TaskCache("pretrained_gnn_heft_layout")


def candidates(task: Task) -> dict[str, np.ndarray]:
    """The layouts the critic chooses among (module docstring), by name; no evaluation."""
    capacity = task.cluster.memory_capacity.astype(float)
    layouts = {"heft": _HEFT_LAYOUT.get(task, _heft_layout)[0].copy(),
               "heft-memory-safe": heft_schedule(task, capacity=capacity * MEMORY_MARGIN).placement()}
    fastest = np.argsort(task.duration[: task.n_forward].sum(axis=0), kind="stable")
    for k in TOP_DEVICES:
        if k < task.n_devices:
            layouts[f"heft-fastest-{k}"] = heft_schedule(task, fastest[:k]).placement()
    prior = shipped_model()[0]
    layouts["pretrained-list"] = learned_schedule(task, prior, capacity * MEMORY_MARGIN).placement()
    return layouts


@dataclass(frozen=True)
class CriticInputs:
    """The critic's inputs for ``k`` layouts of one task: ``graph`` (`baselines.learning.gnn.GraphInputs`,
    one node per forward op), ``nodes`` ``(k, ops, node inputs)``, ``layouts`` ``(k, LAYOUT_FEATURES)``."""

    graph: Any
    nodes: torch.Tensor
    layouts: torch.Tensor


def critic_arrays(task: Task, placements: Sequence[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """The node inputs ``(k, ops, node inputs)`` and `LAYOUT_FEATURES` ``(k, 4)`` of ``placements``
    (forward-op placements) of ``task``, float32; HEFT's schedule is the reference of the relative
    inputs. No evaluation."""
    graph = graph_inputs(task)
    if graph.n_nodes != task.n_forward:
        raise ValueError(f"expected one graph node per forward op, got {graph.n_nodes} for {task.n_forward}")
    devices = device_inputs(task)
    heft_device, heft_makespan = _HEFT_LAYOUT.get(task, _heft_layout)
    heft_makespan = max(heft_makespan, 1e-12)
    memory, capacity = op_memory(task), task.cluster.memory_capacity.astype(float)
    dag = task_dag(task)
    forward = task.op_forward
    src = np.repeat(np.arange(task.n_ops), np.diff(dag.succ_pointer))
    dst = dag.succ_op
    edge_bytes = dag.succ_bytes
    in_bytes = np.bincount(forward[dst], weights=edge_bytes, minlength=task.n_ops)[: task.n_forward]
    nodes, layouts = [], []
    for placement in placements:
        placement = np.asarray(placement, dtype=np.int64)
        on = placement[forward]
        crossing = on[src] != on[dst]
        cut_in = np.bincount(forward[dst][crossing], weights=edge_bytes[crossing],
                             minlength=task.n_ops)[: task.n_forward]
        cut_share = np.where(in_bytes > 0, cut_in / np.maximum(in_bytes, 1e-30), 0.0)
        nodes.append(np.concatenate([graph.features.numpy(), devices[placement],
                                     (placement == heft_device)[:, None], cut_share[:, None]], axis=1))
        fill = np.bincount(placement, weights=memory, minlength=task.n_devices) / capacity
        # HEFT's own layout replays to HEFT's makespan exactly (tests/baselines/test_pretrained_gnn.py)
        same = np.array_equal(placement, heft_device)
        ratio = 0.0 if same else math.log(max(fixed_makespan(task, placement), 1e-12) / heft_makespan)
        cut = math.log1p(edge_bytes[crossing].sum() / 1e6) / 10
        layouts.append([np.clip(ratio, -2, 2) / 2, len(np.unique(placement)) / task.n_devices,
                        min(fill.max(), 2.0) / 2, min(cut, 1.0)])
    return np.stack(nodes).astype(np.float32), np.array(layouts, dtype=np.float32)


def critic_inputs(task: Task, placements: Sequence[np.ndarray],
                  arrays: tuple[np.ndarray, np.ndarray] | None = None) -> CriticInputs:
    """`CriticInputs` of ``placements`` of ``task`` (``arrays``: their `critic_arrays`, when made
    elsewhere). No evaluation."""
    nodes, layouts = critic_arrays(task, placements) if arrays is None else arrays
    # torch.tensor copies into torch's own memory (numpy's may sit elsewhere from run to run)
    return CriticInputs(graph_inputs(task), torch.tensor(nodes), torch.tensor(layouts))


class PlacementCritic(nn.Module):
    """Predicted ``log(runtime / HEFT's)`` of each layout of `CriticInputs` (module docstring)."""

    def __init__(self, hidden: int = 32, rounds: int = 3) -> None:
        super().__init__()
        self.encoder = DagEncoder(len(NODE_FEATURES) + len(DEVICE_INPUTS) + 2, hidden, rounds)
        self.head = mlp(2 * hidden + len(LAYOUT_FEATURES), hidden, 1)

    def forward(self, inputs: CriticInputs) -> torch.Tensor:
        h = self.encoder(inputs.nodes, inputs.graph)  # (layouts, ops, hidden)
        pooled = torch.cat([h.mean(dim=1), h.amax(dim=1), inputs.layouts], dim=1)
        return self.head(pooled)[:, 0]


def chosen_index(predicted: np.ndarray, heft_index: int, threshold: float) -> int:
    """The index of the layout predicted fastest, HEFT's (``heft_index``) unless another is predicted
    faster than HEFT's by more than ``threshold``."""
    best = int(np.argmin(predicted))
    return heft_index if predicted[best] > predicted[heft_index] - threshold else best


def choose(task: Task, critic: PlacementCritic, threshold: float) -> tuple[str, np.ndarray, dict]:
    """The layout the critic chooses (`chosen_index`), its name and every layout's prediction. One
    forward pass, no evaluation."""
    layouts = candidates(task)
    names = list(layouts)
    with torch.no_grad():
        predicted = critic(critic_inputs(task, [layouts[n] for n in names])).double().numpy()
    best = chosen_index(predicted, names.index("heft"), threshold)
    return names[best], layouts[names[best]], {n: round(float(p), 4) for n, p in zip(names, predicted)}


@dataclass
class PretrainedGNN:
    """A trained `PlacementCritic` with the ``threshold`` `select` chose, and its training record."""

    critic: PlacementCritic
    threshold: float
    record: dict


def load_checkpoint(path: str | Path = CHECKPOINT) -> PretrainedGNN:
    """The model saved by `save_checkpoint` (weights only: nothing in the file runs)."""
    try:
        data = torch.load(Path(path), weights_only=True)
        if not isinstance(data, dict) or data.get("agent") != "pretrained-gnn":
            raise ValueError("not a pretrained-gnn checkpoint")
        record = data["training"]
        critic = PlacementCritic(int(record["config"]["hidden"]), int(record["config"]["rounds"]))
        critic.load_state_dict(data["state"])
        threshold = float(data["threshold"])
    except Exception as error:  # the file is whatever a user points at: say so in one line
        reason = str(error).splitlines()[0] if str(error) else type(error).__name__
        raise ValueError(f"cannot load the pretrained-gnn checkpoint {path}: {reason[:200]}") from None
    critic.eval()
    return PretrainedGNN(critic, threshold, record)


def save_checkpoint(model: PretrainedGNN, path: str | Path) -> None:
    """Write ``model`` as the file `load_checkpoint` reads."""
    torch.save({"agent": "pretrained-gnn", "state": model.critic.state_dict(), "threshold": model.threshold,
                "training": model.record}, Path(path))


def declared_pretraining(path: str | Path = CHECKPOINT) -> dict:
    """The leaderboard's ``pretraining`` object of the shipped checkpoint (declared, not counted)."""
    return declared_from(load_checkpoint(path).record)


@functools.cache
def shipped_critic() -> PretrainedGNN:
    """The shipped `CHECKPOINT`'s model, read once per process."""
    return load_checkpoint(CHECKPOINT)


def zero_shot(task: Task, model: PretrainedGNN, attempts: int) -> AgentResult:
    """The chosen layout, evaluated; with ``attempts`` > 1, rebuilt by HEFT's memory retries
    (`baselines.scheduling.memory_aware`) while it is out of memory."""
    name, placement, predicted = choose(task, model.critic, model.threshold)
    info = {"layout": name, "predicted": predicted}

    def build(capacity: np.ndarray) -> tuple[np.ndarray, dict]:
        if np.array_equal(capacity, task.cluster.memory_capacity):
            return placement, info
        return heft_schedule(task, capacity=capacity).placement(), {**info, "layout": "heft (memory retry)"}

    return memory_aware(task, build, attempts)


@register("pretrained-gnn", OPTIONAL_AGENTS["pretrained-gnn"].description, takes_budget=True,
          pretraining=declared_pretraining)
def pretrained_gnn(task: Task, seed: int = 0, budget: int | Budget | None = None, *,
                   model: PretrainedGNN | None = None) -> AgentResult:
    """Place ``task`` with the pre-trained critic (module docstring); ``budget`` as
    `baselines.learning.pretrained.pretrained_list`'s. ``model``: another than the shipped
    `CHECKPOINT`. Deterministic for ``seed``."""
    model = shipped_critic() if model is None else model

    def place() -> tuple[np.ndarray, dict]:
        name, placement, _ = choose(task, model.critic, model.threshold)
        return placement, {"layout": name}

    return place_pretrained(task, seed, budget, place, lambda attempts: zero_shot(task, model, attempts))


# ---------------------------------------------------------------------------------------------------
# Pre-training


def pretraining_tasks(config: PretrainConfig, seed: int) -> tuple[list[str], list[str]]:
    """The training pool and the held-out training tasks of `select` (disjoint graphs)."""
    draw = ListPretrainConfig(dataset=config.dataset, pool=config.pool + 3 * config.valid,
                              max_ops=config.max_ops, clusters=config.clusters)
    ids = training_tasks(draw, seed)
    pool = ids[: config.pool]
    graphs = {t.split("/")[0] for t in pool}
    valid = [t for t in ids[config.pool:] if t.split("/")[0] not in graphs][: config.valid]
    return pool, valid


def _target(task: Task, placement: np.ndarray, reference: float) -> float:
    """log(runtime / ``reference``), clipped to `TARGET_CLIP`; an infeasible placement + log 4."""
    result = simulate(task, placement)
    loss = math.log(result.runtime / reference)
    if not result.feasible:
        loss = max(loss, 0.0) + INFEASIBLE_LOSS
    return float(np.clip(loss, -TARGET_CLIP, TARGET_CLIP))


@dataclass
class LayoutExample:
    """One task's layouts for training or `select`: their `CriticInputs`, their targets
    (``log(runtime / HEFT's)``, clipped) and their names."""

    inputs: CriticInputs
    targets: torch.Tensor
    names: list[str]


def simulated_layouts(job: tuple[str, int, int]) -> dict:
    """One pre-training job, ``(task id, seed, search budget)``: the task's layouts (and, with a search
    budget, move-bandit's placement), their targets against HEFT as registered, their
    `critic_arrays` and the evaluations spent. A pure function of the job, so that it runs in this
    process or as a Ray job with the same result."""
    from placement_gym.task.named import parse_task_id

    task_id, seed, search_budget = job
    task = parse_task_id(task_id)
    reference = heft(task)
    evaluations = reference.evaluations
    runtime = float(reference.info["simulated_runtime"])
    layouts = candidates(task)
    if search_budget:
        found = move_bandit(task, seed=seed, budget=search_budget)
        evaluations += found.evaluations
        layouts["search"] = found.placement
    names = list(layouts)
    targets = np.array([_target(task, layouts[n], runtime) for n in names], dtype=np.float32)
    placements = [layouts[n] for n in names]
    return {"task": task_id, "names": names, "placements": placements, "targets": targets,
            "arrays": critic_arrays(task, placements), "evaluations": evaluations + len(names)}


def _example(result: dict) -> LayoutExample:
    from placement_gym.task.named import parse_task_id

    task = parse_task_id(result["task"])
    inputs = critic_inputs(task, result["placements"], result["arrays"])
    return LayoutExample(inputs, torch.tensor(result["targets"]), list(result["names"]))


def select(critic: PlacementCritic, examples: Sequence[LayoutExample]) -> tuple[float, dict]:
    """The ``threshold`` of `THRESHOLDS` whose choices have the lowest mean target over ``examples``
    (held-out training tasks; their layouts were simulated already), with each threshold's mean, share
    of tasks faster than HEFT, and the oracle's, for the record."""
    table: dict[str, dict] = {}
    best = None
    with torch.no_grad():
        predictions = [critic(e.inputs).double().numpy() for e in examples]
    for threshold in THRESHOLDS:
        chosen = [float(example.targets[chosen_index(predicted, example.names.index("heft"), threshold)])
                  for example, predicted in zip(examples, predictions)]
        table[str(threshold)] = {"mean_log_ratio": round(float(np.mean(chosen)), 5),
                                 "faster_than_heft": round(float(np.mean(np.array(chosen) < -1e-9)), 4)}
        if best is None or np.mean(chosen) < best[0] - 1e-12:
            best = (float(np.mean(chosen)), threshold)
    oracle = [float(e.targets.min()) for e in examples]
    table["oracle"] = {"mean_log_ratio": round(float(np.mean(oracle)), 5),
                       "faster_than_heft": round(float(np.mean(np.array(oracle) < -1e-9)), 4)}
    return best[1], table


def pretrain(config: PretrainConfig = PretrainConfig(), seed: int = 0, *, backend: str = "serial",
             address: str | None = None, workers: int | None = None, log: Any = None) -> PretrainedGNN:
    """Simulate the layouts, train the critic and select the threshold (module docstring). The
    layouts of each task are one job of `placement_gym.evaluation.parallel.run_jobs` (``backend``,
    ``address``, ``workers`` as there): in this process, on a local Ray instance or on the Ray
    cluster at ``address``, with the same result. The critic trains on one torch thread
    (`placement_gym.common.threads.intra_op_threads`); the caller's count is restored."""
    check_backend(backend, address, workers)
    with intra_op_threads(1, "pretrain"):  # one thread: the same sums, the same weights, on any machine
        return _pretrain(config, seed, backend, address, workers, log or (lambda line: None))


def _pretrain(config: PretrainConfig, seed: int, backend: str, address: str | None, workers: int | None,
              say: Callable[[str], None]) -> PretrainedGNN:
    started = time.perf_counter()
    torch.manual_seed(seed)
    rng = np.random.default_rng(seed)
    pool_ids, valid_ids = pretraining_tasks(config, seed)
    jobs = [(t, seed, config.search_budget) for t in pool_ids] + [(t, seed, 0) for t in valid_ids]
    done = [0]

    def progress(_: int, __: dict) -> None:
        done[0] += 1
        if done[0] % 20 == 0 or done[0] == len(jobs):
            seconds = time.perf_counter() - started
            say(f"simulated the layouts of {done[0]}/{len(jobs)} tasks, {seconds:.0f} s")

    results = run_jobs(simulated_layouts, jobs, backend=backend, address=address, workers=workers,
                       progress=progress)
    evaluations = sum(r["evaluations"] for r in results)
    examples = [_example(r) for r in results[: len(pool_ids)]]
    valid = [_example(r) for r in results[len(pool_ids):]]
    critic = PlacementCritic(config.hidden, config.rounds)
    optimiser = torch.optim.Adam(critic.parameters(), lr=config.learning_rate)
    history = []
    for epoch in range(config.epochs):
        total = 0.0
        for index in rng.permutation(len(examples)).tolist():
            example = examples[index]
            predicted, target = critic(example.inputs), example.targets
            # the choice compares each layout with HEFT's: its difference is fitted as well as its value
            h = example.names.index("heft")
            loss = (nn.functional.mse_loss(predicted, target)
                    + nn.functional.mse_loss(predicted - predicted[h], target - target[h]))
            optimiser.zero_grad()
            loss.backward()
            optimiser.step()
            total += loss.item()
        history.append(round(total / len(examples), 5))
        if (epoch + 1) % 10 == 0 or epoch + 1 == config.epochs:
            say(f"epoch {epoch + 1}/{config.epochs}: squared error {history[-1]:.4f}, "
                f"{time.perf_counter() - started:.0f} s")
    critic.eval()
    threshold, table = select(critic, valid)
    say(f"selected threshold {threshold}: {table[str(threshold)]} (oracle {table['oracle']})")
    record = {
        "config": {**asdict(config), "clusters": list(config.clusters)},
        "seed": seed,
        "evaluations": evaluations,
        "wall_s": round(time.perf_counter() - started, 1),
        "machine": f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores, "
                   f"{platform.system()}",
        "squared_error": history,
        "selection": table,
    }
    return PretrainedGNN(critic, threshold, record)


def main(argv: Sequence[str] | None = None) -> None:
    """``python -m baselines.learning.pretrained_gnn``: pre-train and write the checkpoint."""
    parser = argparse.ArgumentParser(description="pre-train the pretrained-gnn agent's network")
    parser.add_argument("--seed", type=int, default=0)
    numbers = [name for name in asdict(PretrainConfig()) if name not in ("clusters", "dataset")]
    for name in numbers:
        default = getattr(PretrainConfig, name)
        parser.add_argument(f"--{name.replace('_', '-')}", type=type(default), default=default,
                            help=f"default: {default}")
    add_pretraining_options(parser, PretrainConfig.dataset, PretrainConfig.clusters, CHECKPOINT,
                            "simulate each task's layouts")
    args = parser.parse_args(argv)
    clusters, backend = pretraining_options(parser, args, "runs the jobs")
    values = {name: getattr(args, name) for name in numbers}
    if not clusters or min(values.values()) <= 0:
        parser.error("--clusters needs at least one cluster, and every number must be positive")
    config = PretrainConfig(dataset=args.dataset, clusters=clusters, **values)
    try:
        model = pretrain(config, args.seed, **backend, log=lambda line: print(line, flush=True))
    except (ValueError, KeyError, ImportError) as error:
        parser.error(str(error))
    save_checkpoint(model, args.out)
    print(f"wrote {args.out} ({args.out.stat().st_size} bytes)")


if __name__ == "__main__":
    main()
