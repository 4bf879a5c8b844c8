"""Plan agents after the field's planners (issue 66): ``alpa``, ``galvatron`` and ``plan-move-bandit``, each
``agent(task, seed=0, budget=None) -> AgentResult`` of `baselines.plans`' registry. ``alpa`` and ``galvatron``
set values per pipeline stage (`Plan.stage_layers`, `Plan.stage_tp`), so their ``placement`` is the `Plan`
itself; ``plan-move-bandit`` answers with a choice.

What the plan model can express of a stage: its layers and its tensor degree (the stage's ``tp x dp`` GPUs
split into that tensor degree and the data degree left, `Plan.stage_views`); everything else (micro-batch,
sequence parallelism, recomputation, ZeRO stage, expert degree) is one value for the whole plan. Both
planners therefore search, for each *configuration* (`StageConfig`: pipeline depth, sequences a micro-batch,
sequence parallelism, recomputation, ZeRO stage, expert degree), the per-stage values by their own method,
from each stage's figures in the plan model (`stage_costs`, `stage_ends`: one layer priced once per stage
plan, not a whole plan; these profiles are not evaluations and ``info["stage_profiles"]`` counts them, as
Alpa and Galvatron profile stages and layers before they search). Each configuration's optimum is a
candidate; the candidates, most promising by the method's own estimate first, are priced by
``task.evaluate`` (each one evaluation) up to ``budget`` (None: every candidate, at most `DEFAULT_BUDGET`),
and the fastest that fits is the answer; where none fits, the one that needs the least memory; where no
configuration fits at all by the stage figures, the Megatron-LM rules' plan (`baselines.plans.megatron`).
Both run the 1F1B schedule without interleaving (as Alpa and Galvatron do) and no context parallelism. On a
mixed mesh (`Mesh.parts`) each stage is priced at the figures of the GPUs its ranks lie on, so that Alpa's
DP gives the faster GPUs' stages more layers.

- ``alpa`` (Zheng et al., OSDI'22). Inter-operator pass: a dynamic programme over pipeline stages, which
  contiguous layers each holds and each stage's intra-operator configuration, minimising Alpa's pipeline
  latency ``sum of stage latencies + (micro-batches - 1) x the largest`` under each GPU's memory (the
  weights, gradients and optimizer state of the stage's layers and the activations 1F1B keeps on it: as
  many micro-batches as stages from it to the last), by Alpa's enumeration of the largest stage latency
  ``t_max`` (smallest first, stopped once ``min sum + (micro-batches - 1) x t_max`` cannot beat the best).
  Intra-operator pass: Alpa solves an ILP over each operator's sharding; here every layer of a stage shares
  one sharding, and the ILP reduces to an exhaustive choice of the stage's tensor degree (with the data
  degree left) for each stage, sequence parallelism and recomputation being the configuration's. Left out:
  shardings per operator, submeshes of unequal sizes (every stage has the same GPUs in this model), the
  sends between stages and the data-parallel gradient reduction and optimizer step in the DP's objective
  (the pricing of the candidates has them).
- ``galvatron`` (Miao et al., VLDB'23). For each pipeline degree, the layers split evenly over the stages
  (Galvatron's default partition), and per stage (a layer group: the model prices one tensor degree a
  stage) the hybrid of tensor and data parallelism and checkpointing that minimises the stage's time under
  the GPU's memory: Galvatron's dynamic programme over a stage's layers with memory as the knapsack's
  dimension. The layers of a stage being identical here, a DP state (layers placed, memory used) is fixed by
  the layers checkpointed so far, and the plan gives one count of checkpointed layers for every stage
  (`Plan.recompute_layers`: the first k of each stage): the search enumerates that count k (0: none) and
  takes, for each stage, the fastest tensor degree that fits with ``min(layers, k)`` checkpointed; or every
  layer selectively recomputed. ZeRO stages 0, 2 and 3 (Galvatron's DDP, ZeRO-2 and sharded data
  parallelism) are the configuration's, as the micro-batch. Pipelines are compared by the same 1F1B estimate
  as Alpa's; the best over pipeline degrees is the fastest priced. Left out: Galvatron-BMW's uneven,
  workload-balanced stage split, and strategies that differ between the layers of a stage.
- ``plan-move-bandit``: hill climbing over choices from the rules' plan, a move changing one dimension of
  the choice (tensor, pipeline or virtual-stage degree, context or expert degree, micro-batch size, schedule,
  sequence parallelism, ZeRO stage, recomputation) to another value that divides; which kind of move to try
  is chosen by UCB1 (Auer et al. 2002) on the improvement each kind brought (a move that cuts the current
  step by 10% earns 0.1, one that does not improve 0). Improvements are taken, a plan is priced once (a move
  to a plan priced before costs nothing), and where no kind has an unpriced move left the search restarts
  from the best plan changed by `KICK_MOVES` random moves. Budget: evaluations, the rules' included.
"""

from __future__ import annotations

import itertools
import math
import time
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

from baselines.plans import DEFAULT_BUDGET, megatron, register_plan_agent
from placement_gym.evaluation.agents import AgentResult
from placement_gym.plans.collectives import collective_time
from placement_gym.plans.evaluate import (
    GRADIENT_BYTES,
    STATE_BYTES,
    WEIGHT_BYTES,
    PlanResult,
    StageCosts,
    stage_costs,
    stage_ends,
)
from placement_gym.plans.mesh import Mesh
from placement_gym.plans.plan import MAX_UNITS, Plan
from placement_gym.plans.space import DIMENSION_NAMES, DIMENSIONS, OPTION_COUNTS, PlanTask

# The recomputation each planner's configurations take: Alpa's is one for the whole plan; Galvatron's
# "full" is its per-layer checkpointing (the first k layers of each stage, k searched).
ALPA_RECOMPUTE = ("none", "selective", "full")
GALVATRON_RECOMPUTE = ("selective", "full")
# ZeRO stages: Alpa's intra-operator space shards the optimizer state over the data-parallel group (stage
# 1-2), Galvatron has DDP, ZeRO-2 and ZeRO-3; stage 1 prices as stage 2 in this model with more memory.
ZERO_STAGES = (0, 2, 3)
# A micro-batch's sequences range so that some stage's ranks take 1 to this many each.
MAX_RANK_MICROBATCH = 8
# plan-move-bandit: the exploration weight of UCB1 (its rewards are fractions of a step, a good move's
# about 0.1), the random moves of a restart, and the draws a restart may take to reach an unpriced plan.
UCB_C = 0.1
KICK_MOVES = 3
KICK_TRIES = 50


@dataclass(frozen=True)
class StageConfig:
    """What every stage of a searched plan shares: ``pp`` pipeline stages, ``sequences`` of a micro-batch
    (over the data-parallel ranks of a stage), ``sequence_parallel`` (for the stages of tensor degree above
    1), ``recompute``, ``zero`` and the expert degree ``ep``."""

    pp: int
    sequences: int
    sequence_parallel: bool
    recompute: str
    zero: int
    ep: int = 1


@dataclass
class Candidate:
    """A configuration's optimum: the method's ``estimate`` (seconds) and the plan."""

    estimate: float
    plan: Plan


class StageProfiler:
    """Stage figures of one task in the plan model, each stage plan's layer priced once
    (`stage_costs`' cache; ``profiles`` counts the layers priced). On a mixed mesh (one with ``parts``), a
    stage is priced at the figures of the GPUs its ranks lie on, as `evaluate_plan` prices it."""

    def __init__(self, task: PlanTask) -> None:
        self.task = task
        self.layers: dict[str, dict] = {}  # per mesh of figures, `stage_costs`' cache
        self._costs: dict[tuple[Plan, str], StageCosts] = {}
        self._meshes: dict[int, list[Mesh]] = {}
        self._collectives: dict[tuple, dict[float, float]] = {}

    @property
    def profiles(self) -> int:
        return sum(len(prices) for prices in self.layers.values())

    def stage_meshes(self, pp: int) -> list[Mesh]:
        """The mesh whose figures each of ``pp`` pipeline stages runs at: the task's, or on a mixed mesh
        those of the GPUs of the stage's ranks (`Mesh.figures`)."""
        mesh = self.task.mesh
        if pp not in self._meshes:
            if mesh.parts:
                gpus = mesh.gpus
                self._meshes[pp] = [mesh.figures((s * gpus // pp, (s + 1) * gpus // pp)) for s in range(pp)]
            else:
                self._meshes[pp] = [mesh] * pp
        return self._meshes[pp]

    def degrees(self, config: StageConfig) -> tuple[int, ...]:
        """The tensor degrees a stage of ``config`` can take: of `DIMENSIONS`' tp values, those that fit a
        node, divide the stage's GPUs, the heads and the MLP, leave a data degree that divides the
        micro-batch's sequences and that the expert degree divides."""
        model, mesh = self.task.model, self.task.mesh
        gpus = mesh.gpus // config.pp
        kv = model.key_value_heads
        found = []
        for t in DIMENSIONS["tp"]:
            if t > mesh.gpus_per_node or gpus % t or model.heads % t or model.ffn_width % t:
                continue
            if kv % t and t % kv:
                continue
            dp = gpus // t
            if config.sequences % dp or dp % config.ep:
                continue
            found.append(t)
        return tuple(found)

    def view(self, config: StageConfig, t: int, recompute: str | None = None) -> Plan:
        """The plan of a stage of tensor degree ``t`` (what `Plan.stage_views` gives that stage)."""
        dp = self.task.mesh.gpus // config.pp // t
        return Plan(tp=t, pp=config.pp, dp=dp, global_batch=self.task.global_batch,
                    microbatch_size=config.sequences // dp, ep=config.ep,
                    sequence_parallel=config.sequence_parallel and t > 1, zero=config.zero,
                    recompute=recompute or config.recompute, precision=self.task.precision)

    def costs(self, view: Plan, mesh: Mesh) -> StageCosts:
        key = view, mesh.name
        if key not in self._costs:
            prices = self.layers.setdefault(mesh.name, {})
            self._costs[key] = stage_costs(self.task.model, view, mesh, prices)
        return self._costs[key]

    def collective(self, operation: str, sizes: np.ndarray, group) -> np.ndarray:
        """`collective_time` of each of ``sizes`` over ``group``, each size and group timed once."""
        where = (operation, group.size, group.per_node, group.nodes, group.mesh.name)
        known = self._collectives.setdefault(where, {})
        times = [known.get(size) for size in sizes.ravel().tolist()]
        for k, size in enumerate(sizes.ravel().tolist()):
            if times[k] is None:
                times[k] = known[size] = collective_time(operation, size, group)
        return np.array(times).reshape(sizes.shape)

    def figures(self, view: Plan, mesh: Mesh, n, replayed, first, last) -> tuple[np.ndarray, ...]:
        """``(latency, memory, kept)`` of stages of ``view`` on ``mesh`` (`stage_meshes`) holding ``n``
        layers (arrays broadcast), of which ``replayed`` recompute, ``first`` / ``last`` whether the stage
        holds the embedding / the head, as `evaluate_plan` prices them: a micro-batch's forward and backward
        seconds (ZeRO-3's gathers where they take longer), the bytes a GPU of the stage holds apart from the
        kept activations (weights and state, the layer recomputed, ZeRO-3's gathered layers, the loss's
        logits) and the bytes one micro-batch keeps."""
        model, pp, zero = self.task.model, view.pp, view.zero
        costs = self.costs(view, mesh)
        layer, ends = costs.layer, stage_ends(model, view, mesh)
        n, replayed = np.asarray(n, dtype=np.float64), np.asarray(replayed, dtype=np.float64)
        first, last = np.asarray(first, dtype=bool), np.asarray(last, dtype=bool)
        forward = (n * (layer.forward + layer.forward_comm) + np.where(first, ends.first_forward, 0.0)
                   + np.where(last, ends.last_forward, 0.0))
        backward = (n * (layer.backward + layer.backward_comm)
                    + replayed * (layer.recompute + layer.recompute_comm)
                    + np.where(first, ends.first_backward, 0.0) + np.where(last, ends.last_backward, 0.0))
        table = model.vocab * model.hidden / view.tp
        head = last & (not model.tied_embeddings or pp > 1)
        dense = n * layer.dense + np.where(first, table, 0.0) + np.where(head, table, 0.0)
        experts = n * layer.expert
        dense, experts = np.broadcast_arrays(dense, experts)
        if zero == 3:
            gather = (self.collective("all_gather", WEIGHT_BYTES * dense, costs.data)
                      + self.collective("all_gather", WEIGHT_BYTES * experts, costs.expert_data))
            scatter = (self.collective("reduce_scatter", GRADIENT_BYTES * dense, costs.data)
                       + self.collective("reduce_scatter", GRADIENT_BYTES * experts, costs.expert_data))
            forward, backward = np.maximum(forward, gather), np.maximum(backward, gather + scatter)
        static = state_bytes(dense, view.dp, zero) + state_bytes(experts, view.dp // view.ep, zero)
        held = 2 * WEIGHT_BYTES * (layer.dense + layer.expert) if zero == 3 and view.dp > 1 else 0.0
        memory = static + layer.transient + held + np.where(last, ends.logits_bytes, 0.0)
        kept = replayed * layer.kept + (n - replayed) * layer.kept_without_recompute
        return forward + backward, memory, kept


def state_bytes(weights, group: int, zero: int):
    """Bytes of ``weights`` with their gradients and optimizer state under ZeRO stage ``zero`` over
    ``group`` data-parallel ranks (the ZeRO paper's 2 + 2 + 12 bytes a weight, docs/cost_model.md)."""
    sharded = {0: 0.0, 1: STATE_BYTES, 2: GRADIENT_BYTES + STATE_BYTES,
               3: WEIGHT_BYTES + GRADIENT_BYTES + STATE_BYTES}[zero]
    return weights * (WEIGHT_BYTES + GRADIENT_BYTES + STATE_BYTES - sharded + sharded / group)


def pipeline_estimate(latencies, microbatches: int) -> float:
    """Alpa's latency of a synchronous 1F1B pipeline: the stages' latencies summed (filling and draining)
    plus ``microbatches - 1`` times the largest."""
    latencies = np.asarray(latencies, dtype=np.float64)
    return float(latencies.sum() + (microbatches - 1) * latencies.max())


def in_flight(pp: int, microbatches: int) -> np.ndarray:
    """Micro-batches whose activations each stage keeps at once under 1F1B: ``pp - s`` on stage ``s``, at
    most every micro-batch."""
    return np.minimum(pp - np.arange(pp), microbatches)


def configurations(task: PlanTask, profiler: StageProfiler,
                   recomputes: tuple[str, ...]) -> Iterator[StageConfig]:
    """Every `StageConfig` of ``task`` some stage can take: pipeline depths dividing the GPUs (at most the
    layers), the micro-batch's sequences dividing the global batch with some stage's ranks taking 1 to
    `MAX_RANK_MICROBATCH` each, sequence parallelism where a tensor degree above 1 is possible,
    ``recomputes``, `ZERO_STAGES` where a data degree above 1 is, and expert degrees of `DIMENSIONS` that
    divide the experts (1 for a dense model)."""
    model, gpus, batch = task.model, task.mesh.gpus, task.global_batch
    experts = [e for e in DIMENSIONS["ep"] if model.family == "moe" and model.experts % e == 0] or [1]
    for pp in (p for p in range(1, min(gpus, model.layers) + 1) if gpus % p == 0):
        stage = gpus // pp
        for ep, sequences in itertools.product(experts, (s for s in range(1, batch + 1) if batch % s == 0)):
            if pp * (batch // sequences) > MAX_UNITS:
                continue  # more pipeline units than the plan model simulates
            base = StageConfig(pp, sequences, False, "none", 0, ep)
            degrees = profiler.degrees(base)
            if not any(sequences * t // stage <= MAX_RANK_MICROBATCH for t in degrees):
                continue
            for sp, recompute, zero in itertools.product((False, True), recomputes, ZERO_STAGES):
                if (sp and max(degrees) == 1) or (zero and stage // min(degrees) == 1):
                    continue
                yield StageConfig(pp, sequences, sp, recompute, zero, ep)


def stage_plan(task: PlanTask, config: StageConfig, layers, degrees, recompute: str | None = None,
               recompute_layers: int = 0) -> Plan:
    """The plan of ``config`` whose stages hold ``layers`` and take tensor degrees ``degrees`` (left out
    where even or uniform)."""
    layers, degrees = tuple(int(n) for n in layers), tuple(int(t) for t in degrees)
    gpus, top = task.mesh.gpus // config.pp, max(degrees)
    dp = gpus // top
    even = task.model.layers % config.pp == 0 and len(set(layers)) == 1
    return Plan(tp=top, pp=config.pp, dp=dp, global_batch=task.global_batch,
                microbatch_size=config.sequences // dp, ep=config.ep,
                sequence_parallel=config.sequence_parallel and top > 1, zero=config.zero,
                recompute=recompute or config.recompute, recompute_layers=recompute_layers,
                precision=task.precision, stage_layers=() if even else layers,
                stage_tp=() if len(set(degrees)) == 1 else degrees)


# --- alpa -------------------------------------------------------------------------------------------


def alpa_stage_table(profiler: StageProfiler, config: StageConfig) -> tuple[tuple[int, ...], np.ndarray]:
    """``(degrees, cost)``: ``cost[s, j, n]`` the latency of stage ``s`` holding ``n`` layers at tensor
    degree ``degrees[j]`` where it fits a GPU's memory, else inf (and for ``n`` 0)."""
    task = profiler.task
    layers, pp = task.model.layers, config.pp
    microbatches = task.global_batch // config.sequences
    degrees = profiler.degrees(config)
    n = np.arange(layers + 1)
    flights = in_flight(pp, microbatches)
    meshes = profiler.stage_meshes(pp)
    # stages on the same GPUs holding neither end share their figures but for the kept micro-batches
    kinds = {(s == 0, s == pp - 1, meshes[s].name): s for s in reversed(range(pp))}
    kind_of = np.array([list(kinds).index((s == 0, s == pp - 1, meshes[s].name)) for s in range(pp)])
    capacity = np.array([meshes[s].gpu.memory for s in kinds.values()])[kind_of, None]
    cost = np.full((pp, len(degrees), layers + 1), np.inf)
    for j, t in enumerate(degrees):
        view = profiler.view(config, t)
        latency, memory, kept = (np.stack(figures)[kind_of] for figures in zip(*(
            profiler.figures(view, meshes[s], n, n, s == 0, s == pp - 1) for s in kinds.values())))
        fits = memory + flights[:, None] * kept <= capacity
        cost[:, j] = np.where(fits & (n > 0), latency, np.inf)
    return degrees, cost


def _min_sum(cost: np.ndarray, limit: float, largest: bool = False) -> tuple[float, list[int], list[int]]:
    """The least sum of stage latencies over every split of the layers into ``cost``'s stages (each at
    least one layer) and tensor degree per stage with no stage above ``limit``: ``(sum, layers, degree
    indices)``; inf and empty lists where none is. ``largest``: the least largest latency instead of the
    least sum."""
    pp, _, width = cost.shape
    capped = np.where(cost <= limit, cost, np.inf)
    best_degree = np.argmin(capped, axis=1)
    least = np.min(capped, axis=1)  # (pp, layers + 1)
    finite = np.flatnonzero(np.isfinite(least).any(axis=0))
    if not len(finite):
        return math.inf, [], []
    sizes = np.arange(1, min(width - pp, int(finite[-1])) + 1)  # the others hold a layer each at least
    before = np.arange(width)[:, None] - sizes[None, :]  # [k, i]: before a stage of sizes[i] ending at k
    outside = before < 0
    before = np.where(outside, 0, before)
    done = np.full(width, np.inf)
    done[0] = 0.0
    back, rows = [], np.arange(width)
    for s in range(pp):
        table = np.where(outside, np.inf, done[before])
        table = np.maximum(table, least[s][sizes]) if largest else table + least[s][sizes]
        pick = np.argmin(table, axis=1)
        done = table[rows, pick]
        back.append(sizes[pick])
    total = float(done[-1])
    if not math.isfinite(total):
        return math.inf, [], []
    layers, degrees, k = [], [], width - 1
    for s in reversed(range(pp)):
        n = int(back[s][k])
        layers.append(n)
        degrees.append(int(best_degree[s, n]))
        k -= n
    return total, layers[::-1], degrees[::-1]


def alpa_dp(cost: np.ndarray, microbatches: int) -> tuple[float, list[int], list[int]] | None:
    """Alpa's inter-operator DP over a stage table (``cost[s, j, n]``: the latency of stage ``s`` holding
    ``n`` layers at intra-operator option ``j``, inf where it does not fit): ``(estimate, layers of each
    stage, option of each stage)`` of least `pipeline_estimate`, each stage one layer at least; None where
    no split fits. For each largest stage latency ``t_max`` of the table, smallest first from the least
    that admits a split (the same DP with the largest latency for the sum), the DP gives the least sum of
    latencies with no stage above it; the enumeration stops once ``least sum + (microbatches - 1) x
    t_max`` reaches the best (Alpa's early stop) or the sum reaches its unconstrained least."""
    floor, _, _ = _min_sum(cost, math.inf)
    if not math.isfinite(floor):
        return None
    limits = np.unique(cost[np.isfinite(cost)])
    smallest, _, _ = _min_sum(cost, math.inf, largest=True)  # the least t_max that admits a split
    best, found = math.inf, ([], [])
    for limit in limits[np.searchsorted(limits, smallest):]:
        if floor + (microbatches - 1) * limit >= best:
            break  # no larger t_max can beat the best
        total, split, chosen = _min_sum(cost, limit)
        largest = max(cost[s, j, n] for s, (j, n) in enumerate(zip(chosen, split)))
        estimate = total + (microbatches - 1) * largest
        if estimate < best:
            best, found = float(estimate), (split, chosen)
        if total <= floor:
            break  # the least sum reached: a larger t_max only adds to the estimate
    return best, *found


def alpa_stages(profiler: StageProfiler, config: StageConfig) -> Candidate | None:
    """Alpa's inter-operator DP (`alpa_dp`) for ``config`` (module docstring): the plan of least
    `pipeline_estimate` over every split of the layers into ``config.pp`` contiguous stages and tensor
    degree per stage that fits memory, with that estimate; None where nothing fits."""
    degrees, cost = alpa_stage_table(profiler, config)
    if not degrees:
        return None
    found = alpa_dp(cost, profiler.task.global_batch // config.sequences)
    if found is None:
        return None
    estimate, split, chosen = found
    return Candidate(estimate, stage_plan(profiler.task, config, split, [degrees[j] for j in chosen]))


# --- galvatron --------------------------------------------------------------------------------------


def even_split(layers: int, pp: int) -> tuple[int, ...]:
    """Layers of each of ``pp`` stages, the remainder on the first (as `PlanTask.plan_of`)."""
    share, left = divmod(layers, pp)
    return tuple(share + (s < left) for s in range(pp))


def galvatron_stages(profiler: StageProfiler, config: StageConfig) -> Candidate | None:
    """Galvatron's search for ``config`` (module docstring): the even split, and per stage the fastest
    tensor degree that fits with ``min(layers, k)`` layers checkpointed, for the count ``k`` (``config``'s
    recompute "full") of least `pipeline_estimate`, or every layer selectively recomputed ("selective");
    None where nothing fits."""
    task = profiler.task
    pp = config.pp
    microbatches = task.global_batch // config.sequences
    split = np.array(even_split(task.model.layers, pp))
    degrees = profiler.degrees(config)
    if not degrees:
        return None
    stages = np.arange(pp)
    first, last, flights = stages == 0, stages == pp - 1, in_flight(pp, microbatches)
    meshes = profiler.stage_meshes(pp)
    groups = [(mesh, np.array([m.name == mesh.name for m in meshes]))  # the stages on each kind of GPU
              for mesh in {m.name: m for m in meshes}.values()]
    counts = [None] if config.recompute == "selective" else range(int(split.max()) + 1)
    best: Candidate | None = None
    for k in counts:
        mode = "selective" if k is None else ("none" if k == 0 else "full")
        replayed = split if k is None else np.minimum(split, k)
        latencies = np.full((len(degrees), pp), np.inf)
        for j, t in enumerate(degrees):
            view = profiler.view(config, t, mode)
            for mesh, on in groups:
                figures = profiler.figures(view, mesh, split[on], replayed[on], first[on], last[on])
                latency, memory, kept = figures
                latencies[j, on] = np.where(memory + flights[on] * kept <= mesh.gpu.memory, latency, np.inf)
        chosen = np.argmin(latencies, axis=0)
        fastest = latencies[chosen, stages]
        if not np.all(np.isfinite(fastest)):
            continue
        estimate = pipeline_estimate(fastest, microbatches)
        if best is None or estimate < best.estimate:
            every = k is None or k == 0 or k >= split.max()
            plan = stage_plan(task, config, split, [degrees[j] for j in chosen], mode, 0 if every else k)
            best = Candidate(estimate, plan)
    return best


# --- the planners' common end: price the candidates -------------------------------------------------


def _score(result: PlanResult) -> tuple[int, float]:
    """Lower is better: fitting plans by step, then plans that run but do not fit by their memory."""
    if result.feasible:
        return 0, result.step_s
    return (1, result.peak_memory_bytes) if result.peak_memory_bytes > 0 else (2, 0.0)


def rules_start(task: PlanTask, seed: int, budget: int) -> AgentResult:
    """The rules' plan (`megatron`, at most ``budget`` evaluations); where the rules find no degrees that
    divide, the first choice `PlanTask.choice_masks` allows in each dimension, priced."""
    start = megatron(task, seed, budget)
    if start.placement is not None:
        return start
    chosen: dict[str, int] = {}
    for k, name in enumerate(DIMENSION_NAMES):
        allowed = np.flatnonzero(task.choice_masks(chosen)[k])
        chosen[name] = int(allowed[0]) if len(allowed) else 0
    choice = np.array([chosen[name] for name in DIMENSION_NAMES], dtype=np.int64)
    result = task.evaluate(choice)
    step = result.step_s if result.feasible else math.inf
    return AgentResult(choice, start.evaluations + 1, {"step_s": step})


def price_candidates(task: PlanTask, seed: int, budget: int | None, method,
                     recomputes: tuple[str, ...]) -> AgentResult:
    """Run ``method(profiler, config)`` over every configuration of ``task`` with ``recomputes``, price the
    candidates in order of their estimate up to ``budget`` and answer the best (module docstring)."""
    start = time.perf_counter()
    profiler = StageProfiler(task)
    candidates = []
    configs = 0
    for config in configurations(task, profiler, recomputes):
        configs += 1
        found = method(profiler, config)
        if found is not None:
            candidates.append(found)
    total = DEFAULT_BUDGET if budget is None else max(int(budget), 1)
    info = {"configurations": configs, "candidates": len(candidates), "stage_profiles": profiler.profiles}
    if not candidates:
        fallback = rules_start(task, seed, total)
        info.update(fallback.info, fallback="megatron", seconds=time.perf_counter() - start)
        return AgentResult(fallback.placement, fallback.evaluations, info)
    order = sorted(range(len(candidates)), key=lambda i: candidates[i].estimate)  # stable: ties by order
    best, best_score, best_estimate = None, None, math.nan
    for i in order[:total]:
        result = task.evaluate(candidates[i].plan)
        if best is None or _score(result) < best_score:
            best, best_score, best_estimate = candidates[i].plan, _score(result), candidates[i].estimate
    evaluations = min(total, len(candidates))
    step = best_score[1] if best_score[0] == 0 else math.inf
    info.update(step_s=step, estimate_s=best_estimate, plan=best.suffix(),
                seconds=time.perf_counter() - start)
    return AgentResult(best, evaluations, info)


@register_plan_agent("alpa", "Alpa's inter-op DP over stages (layers, tensor degree each) minimising the "
                             "1F1B pipeline latency under memory, its intra-op choice exhaustive per stage")
def alpa(task: PlanTask, seed: int = 0, budget: int | None = None) -> AgentResult:
    """Alpa (module docstring). ``budget``: the candidates priced (None: all of them, at most
    `DEFAULT_BUDGET`); deterministic (``seed`` unused but for the rules' fallback)."""
    return price_candidates(task, seed, budget, alpa_stages, ALPA_RECOMPUTE)


@register_plan_agent("galvatron", "Galvatron's per-stage search: even stages, per stage the tensor x data "
                                  "hybrid and checkpointing that fit memory fastest, best pipeline degree")
def galvatron(task: PlanTask, seed: int = 0, budget: int | None = None) -> AgentResult:
    """Galvatron (module docstring). ``budget``: the candidates priced (None: all of them, at most
    `DEFAULT_BUDGET`); deterministic (``seed`` unused but for the rules' fallback)."""
    return price_candidates(task, seed, budget, galvatron_stages, GALVATRON_RECOMPUTE)


# --- plan-move-bandit -------------------------------------------------------------------------------


def _repaired(choice: np.ndarray) -> np.ndarray:
    """``choice`` with the schedule following the virtual stages (interleaved exactly where vp > 1) and no
    sequence parallelism without a tensor degree above 1."""
    k = {name: i for i, name in enumerate(DIMENSION_NAMES)}
    schedules = DIMENSIONS["schedule"]
    interleaved = schedules.index("interleaved")
    if DIMENSIONS["vp"][choice[k["vp"]]] > 1:
        choice[k["schedule"]] = interleaved
    elif choice[k["schedule"]] == interleaved:
        choice[k["schedule"]] = schedules.index("1f1b")
    if DIMENSIONS["tp"][choice[k["tp"]]] == 1:
        choice[k["sequence_parallel"]] = 0
    return choice


def neighbours(task: PlanTask, choice: np.ndarray) -> list[list[np.ndarray]]:
    """Per dimension, the choices one move away: that dimension set to another value (the schedule and
    sequence parallelism following, `_repaired`) whose plan divides (`PlanTask.problems` empty)."""
    moves = []
    for k in range(len(DIMENSION_NAMES)):
        found, seen = [], {choice.tobytes()}
        for value in range(OPTION_COUNTS[k]):
            if value == choice[k] or not task.value_masks[k][value]:
                continue
            candidate = choice.copy()
            candidate[k] = value
            candidate = _repaired(candidate)
            if candidate.tobytes() not in seen and not task.problems(candidate):
                seen.add(candidate.tobytes())
                found.append(candidate)
        moves.append(found)
    return moves


@register_plan_agent("plan-move-bandit", "hill climbing over plans from the rules' plan, the kind of move "
                                         "(tp, pp, vp, micro-batch, ZeRO, recompute...) chosen by UCB1")
def plan_move_bandit(task: PlanTask, seed: int = 0, budget: int | None = None) -> AgentResult:
    """The move bandit (module docstring). ``budget``: evaluations in all, the rules' included (None:
    `DEFAULT_BUDGET`); it stops early where no unpriced plan is left within reach. Deterministic for
    ``seed``."""
    rng = np.random.default_rng(seed)
    total = DEFAULT_BUDGET if budget is None else max(int(budget), 1)
    start = rules_start(task, seed, min(total, 8))
    evaluations = start.evaluations
    current = np.asarray(start.placement, dtype=np.int64)
    step = start.info["step_s"]
    scores = {current.tobytes(): (0, step) if math.isfinite(step) else (1, math.inf)}
    best = current
    arms = len(DIMENSION_NAMES)
    pulls, gains = np.zeros(arms), np.zeros(arms)
    moves_of: dict[bytes, list[list[np.ndarray]]] = {}
    kicks = 0

    def moves(choice: np.ndarray) -> list[list[np.ndarray]]:
        key = choice.tobytes()
        if key not in moves_of:
            moves_of[key] = neighbours(task, choice)
        return moves_of[key]

    def price(choice: np.ndarray) -> tuple[int, float]:
        nonlocal evaluations
        evaluations += 1
        scores[choice.tobytes()] = _score(task.evaluate(choice))
        return scores[choice.tobytes()]

    while evaluations < total:
        options = moves(current)
        here = scores[current.tobytes()]
        known = [c for kind in options for c in kind if c.tobytes() in scores and scores[c.tobytes()] < here]
        if known:  # a plan priced before is better: move there for free
            current = min(known, key=lambda c: scores[c.tobytes()])
            continue
        fresh = [[c for c in kind if c.tobytes() not in scores] for kind in options]
        open_arms = [k for k in range(arms) if fresh[k]]
        if not open_arms:  # every neighbour priced and none better: restart near the best
            kicked = None
            for _ in range(KICK_TRIES):
                trial = best
                for _ in range(KICK_MOVES):
                    kinds = [kind for kind in moves(trial) if kind]
                    if not kinds:
                        break
                    kind = kinds[int(rng.integers(len(kinds)))]
                    trial = kind[int(rng.integers(len(kind)))]
                if trial.tobytes() not in scores:
                    kicked = trial
                    break
            if kicked is None:
                break  # nothing unpriced within reach
            kicks += 1
            price(kicked)
            current = kicked
            if scores[kicked.tobytes()] < scores[best.tobytes()]:
                best = kicked
            continue
        untried = [k for k in open_arms if pulls[k] == 0]
        if untried:
            arm = untried[int(rng.integers(len(untried)))]
        else:
            n = pulls[open_arms]
            index = gains[open_arms] / n + UCB_C * np.sqrt(2.0 * math.log(pulls.sum()) / n)
            arm = open_arms[int(np.argmax(index))]
        candidate = fresh[arm][int(rng.integers(len(fresh[arm])))]
        score = price(candidate)
        pulls[arm] += 1
        if score < here:
            # the share of the step (or, while nothing fits, of the memory) the move saved; 1 from not
            # fitting to fitting
            same = score[0] == here[0] and math.isfinite(here[1]) and here[1] > 0
            gains[arm] += (here[1] - score[1]) / here[1] if same else 1.0
            current = candidate
            if score < scores[best.tobytes()]:
                best = candidate
    final = scores[best.tobytes()]
    return AgentResult(best, evaluations, {
        "step_s": final[1] if final[0] == 0 else math.inf, "kicks": kicks,
        "pulls": {name: int(p) for name, p in zip(DIMENSION_NAMES, pulls)},
        "gains": {name: round(float(g), 6) for name, g in zip(DIMENSION_NAMES, gains)}})
