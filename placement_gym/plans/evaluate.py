"""The price of a training step under a parallel plan: `evaluate_plan`.

One representative rank per pipeline stage (the ranks of a tensor, context or data group do the same
work): each stage's plan (`Plan.stage_views`: the plan itself, or the stage's own tensor x data split)
prices a layer once by `placement_gym.plans.layer`, reused for every layer of the stage,
the first virtual stage adding the embedding and the last the final norm, output head and loss; the
pipeline simulated over stage-micro-batch units (`placement_gym.plans.schedule`); then each device's
data-parallel gradient reduction and parameter gathering, overlapped as Megatron-LM overlaps them
(reduce-scatter during the last micro-batch's backward pass, all-gather during the first forward), and
the fused optimizer over the rank's share of the weights.

On a mixed mesh (`placement_gym.plans.mesh.mixed_mesh`: DGX A100 nodes, then DGX H100 nodes, ranks in
node order, pipeline stages outermost) a stage lives on the nodes its ranks occupy (`Mesh.figures`): a
stage on one kind of GPU computes, communicates inside its groups and holds memory at that kind's
figures; a stage spanning both kinds runs in lock step, each op at the slower GPU's time, each of its
collectives at the lower bus bandwidth and the higher latency of the two kinds, its memory against the
smaller GPU. A pipeline send between stages on different kinds runs at the lower NIC figure (the
lock-step figures of the nodes both stages lie on). The step is the pipeline's makespan as ever, so
stages of different speed make uneven ``stage_layers`` worth choosing; MFU is over the sum of every
GPU's peak (`Mesh.peak_flops`).

Memory per GPU: the ZeRO paper's 16 bytes a weight in mixed precision (2 bf16 weights, 2 bf16
gradients, 12 of fp32 master weights and Adam's two moments; Rajbhandari et al. 2020), sharded over the
data-parallel group by stage (1: the 12, 2: and the gradients, 3: all 16; expert weights over the
expert-data group), plus the schedule's peak of kept activations, plus the layer being recomputed and
the loss's fp32 logits on the last stage, plus under ZeRO-3 two layers' gathered bf16 weights (the one
running and the one prefetched).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import NamedTuple

import numpy as np

from placement_gym.plans.collectives import Group, collective_time
from placement_gym.plans.kernels import BANDWIDTH_FRACTION, op_seconds
from placement_gym.plans.layer import (
    ACTIVATION_BYTES,
    MATMUL_BACKWARD,
    MEMORY_BACKWARD,
    LayerCost,
    group_of,
    layer_cost,
    layer_input_bytes,
    stage_sends_cross_nodes,
)
from placement_gym.plans.mesh import Mesh
from placement_gym.plans.models import TransformerModel
from placement_gym.plans.plan import Plan, plan_problems
from placement_gym.plans.schedule import SCHEDULE_CODES, simulate_pipeline

# Optimizer bytes per weight of the rank's shard: fused Adam reads the fp32 gradient, master weight
# and both moments and writes the three back and the bf16 weight (30), and the gradient norm reads the
# gradient once more (4).
OPTIMIZER_BYTES = 34.0
WEIGHT_BYTES, GRADIENT_BYTES, STATE_BYTES = 2.0, 2.0, 12.0
# Megatron-LM reduces gradients in buckets of 40 million weights; the last bucket of a backward pass
# cannot overlap any compute.
BUCKET_WEIGHTS = 40e6


@dataclass(frozen=True)
class PlanResult:
    """A plan's step: ``step_s`` seconds, ``tokens_per_s_per_gpu``, ``mfu`` (model FLOPs per token as
    `TransformerModel.training_flops_per_token` over GPUs x peak), ``peak_memory_bytes`` of the fullest
    GPU, ``feasible`` (it fits and nothing in ``problems`` stops it), the ``breakdown`` of the slowest
    device's step (compute, communication, bubble, optimizer: they sum to ``step_s``) and
    ``memory`` of the fullest GPU (``weights_and_state``: weights, gradients and optimizer state;
    ``activations_and_buffers``: kept activations, the layer being recomputed, the loss's logits and
    ZeRO-3's gathered weights)."""

    step_s: float
    tokens_per_s_per_gpu: float
    mfu: float
    peak_memory_bytes: float
    feasible: bool
    breakdown: dict[str, float]
    memory: dict[str, float] = field(default_factory=dict)
    problems: tuple[str, ...] = ()

    def as_dict(self) -> dict:
        return {
            "step_s": self.step_s,
            "tokens_per_s_per_gpu": self.tokens_per_s_per_gpu,
            "mfu": self.mfu,
            "peak_memory_bytes": self.peak_memory_bytes,
            "feasible": self.feasible,
            "breakdown": dict(self.breakdown),
            "memory": dict(self.memory),
            "problems": list(self.problems),
        }


class StageEnds(NamedTuple):
    """What the first virtual stage adds to a micro-batch (the embedding: ``first_forward``,
    ``first_backward`` seconds) and the last (final norm, head and loss: ``last_forward``,
    ``last_backward``), the fp32 logits the loss keeps (``logits_bytes``), the seconds of the
    tensor-group collective each end's pass includes (``tensor_comm``) and of the loss's three small
    all-reduces (``loss_comm``, in ``last_forward``)."""

    first_forward: float
    first_backward: float
    last_forward: float
    last_backward: float
    logits_bytes: float
    tensor_comm: float
    loss_comm: float


def stage_ends(model: TransformerModel, plan: Plan, mesh: Mesh) -> StageEnds:
    """The `StageEnds` of one micro-batch of ``model`` under ``plan`` on ``mesh``."""
    e, t = ACTIVATION_BYTES, plan.tp
    tokens = plan.microbatch_size * model.seq / plan.cp
    h, v = model.hidden, model.vocab
    gpu, precision = mesh.gpu, plan.precision
    lookup = op_seconds("memory", 0.0, e * tokens * h * 2, precision, gpu)
    head_bytes = e * (tokens * h + h * v / t) + 4 * tokens * v / t
    head = op_seconds("matmul", 2 * tokens * h * v / t, head_bytes, precision, gpu)
    head_back = op_seconds(
        "matmul", MATMUL_BACKWARD * 2 * tokens * h * v / t, MATMUL_BACKWARD * head_bytes, precision, gpu
    )
    loss_bytes = 2 * 4 * tokens * v / t  # the fp32 logits read and the probabilities written
    loss = op_seconds("memory", 0.0, loss_bytes, precision, gpu)
    loss_back = op_seconds("memory", 0.0, MEMORY_BACKWARD * loss_bytes, precision, gpu)
    norm = op_seconds(
        "memory", 0.0, 2 * e * tokens * h / (t if plan.sequence_parallel else 1), precision, gpu
    )
    tensor = group_of("tensor", plan, mesh)
    operation = "reduce_scatter" if plan.sequence_parallel else "all_reduce"
    comm = collective_time(operation, e * tokens * h, tensor)
    # vocabulary-parallel loss: the maximum, the sum and the target logit of each token over the group
    comm_loss = 3 * collective_time("all_reduce", 4 * tokens, tensor)
    return StageEnds(
        lookup + comm,
        lookup * MEMORY_BACKWARD + comm,
        norm + head + loss + comm_loss + comm,
        norm * MEMORY_BACKWARD + head_back + loss_back + comm,
        4 * tokens * v / t,
        comm,
        comm_loss,
    )


@dataclass(frozen=True)
class StageCosts:
    """What one pipeline stage's plan (`Plan.stage_views`) gives every layer it holds: the layer's cost,
    the data-parallel and expert-data groups, and the message a rank of the stage receives from its
    neighbouring stage per micro-batch (the layer input's share of the rank)."""

    view: Plan
    layer: LayerCost
    data: Group
    expert_data: Group
    message: float


def stage_costs(model: TransformerModel, view: Plan, mesh: Mesh, layers: dict | None = None) -> StageCosts:
    """The `StageCosts` of a stage planned by ``view``; ``layers``: `evaluate_plan`'s cache."""
    data = group_of("data", view, mesh)
    expert_data = group_of("expert_data", view, mesh) if view.ep > 1 else data
    if layers is None:
        layer = layer_cost(model, view, mesh)
    else:
        # a layer's price reads neither the ZeRO stage, the schedule, the batch nor the stages' layers
        key = replace(view, zero=0, schedule="1f1b", global_batch=1, stage_layers=(), recompute_layers=0)
        layer = layers.get(key)
        if layer is None:
            layer = layers[key] = layer_cost(model, view, mesh)
    return StageCosts(view, layer, data, expert_data, layer_input_bytes(model, view))


def evaluate_plan(model: TransformerModel, plan: Plan, mesh: Mesh, layers: dict | None = None) -> PlanResult:
    """The price of one training step of ``model`` under ``plan`` on ``mesh`` (module docstring). A plan
    `plan_problems` refuses gives an infeasible result with its reasons, never an exception. ``layers``:
    a dict the caller keeps for one model and mesh, in which layer prices are kept between calls (a
    search prices many plans that share their layers); the result is the same with or without it."""
    problems = tuple(plan_problems(plan, model, mesh))
    if problems:  # refused before anything is sized by the plan's degrees
        return PlanResult(math.inf, 0.0, 0.0, 0.0, False, {}, {}, problems)
    pp, vp, m = plan.pp, plan.vp, plan.microbatches
    stages = plan.virtual_stages
    views = plan.stage_views()
    mixed = bool(mesh.parts)
    if mixed:  # each stage at the figures of the GPUs its ranks lie on (module docstring)
        spans = [(s * plan.gpus // pp, (s + 1) * plan.gpus // pp) for s in range(pp)]
        device_meshes = [mesh.figures(span) for span in spans]
        by_device = _mixed_stage_costs(model, views, device_meshes, layers)
    else:
        device_meshes = [mesh] * pp
        known: dict[Plan, StageCosts] = {}
        for view in views:
            if view not in known:  # stages of the same plan share their costs
                known[view] = stage_costs(model, view, mesh, layers)
        by_device = [known[view] for view in views]
    by_stage = [by_device[k % pp] for k in range(stages)]

    device_of = np.arange(stages) % pp

    def per_stage(value) -> np.ndarray:
        return np.array([value(costs) for costs in by_device], dtype=np.float64)[device_of]

    layers = np.array(plan.layers_of_stages(model.layers), dtype=np.float64)
    # Full recomputation of the first `recompute_layers` layers of each virtual stage only (Megatron's
    # block method): the others keep what they would keep without recomputation.
    replayed = np.minimum(layers, plan.recompute_layers) if plan.recompute_layers else layers
    forward_comm, backward_comm = (
        per_stage(lambda c: c.layer.forward_comm),
        per_stage(lambda c: c.layer.backward_comm),
    )
    recompute, recompute_comm = (
        per_stage(lambda c: c.layer.recompute),
        per_stage(lambda c: c.layer.recompute_comm),
    )
    forward = layers * (per_stage(lambda c: c.layer.forward) + forward_comm)
    backward = layers * (per_stage(lambda c: c.layer.backward) + backward_comm) + replayed * (
        recompute + recompute_comm
    )
    comm_forward = layers * forward_comm
    comm_backward = layers * backward_comm + replayed * recompute_comm
    first = stage_ends(model, by_stage[0].view, device_meshes[0])
    last = stage_ends(model, by_stage[-1].view, device_meshes[(stages - 1) % pp])
    forward[0] += first.first_forward
    backward[0] += first.first_backward
    forward[-1] += last.last_forward
    backward[-1] += last.last_backward
    comm_forward[0] += first.tensor_comm
    comm_backward[0] += first.tensor_comm
    comm_forward[-1] += last.tensor_comm + last.loss_comm
    comm_backward[-1] += last.tensor_comm
    kept = replayed * per_stage(lambda c: c.layer.kept) + (layers - replayed) * per_stage(
        lambda c: c.layer.kept_without_recompute
    )
    expert_weights = layers * per_stage(lambda c: c.layer.expert)
    weights = layers * per_stage(lambda c: c.layer.dense) + expert_weights
    weights[0] += model.vocab * model.hidden / by_stage[0].view.tp
    if not model.tied_embeddings or stages > 1:
        weights[-1] += model.vocab * model.hidden / by_stage[-1].view.tp
    # ZeRO-3 gathers a stage's weights before its forward and backward and reduce-scatters its
    # gradients, per micro-batch, prefetched under the compute: a unit takes the longer of the two.
    # Expert weights are gathered over their own data-parallel group.
    if plan.zero == 3:
        gather, scatter = (
            np.array(
                [
                    collective_time(operation, size * (w - e), c.data)
                    + collective_time(operation, size * e, c.expert_data)
                    for w, e, c in zip(weights, expert_weights, by_stage)
                ]
            )
            for operation, size in (("all_gather", WEIGHT_BYTES), ("reduce_scatter", GRADIENT_BYTES))
        )
        comm_forward += np.maximum(gather - forward, 0.0)
        comm_backward += np.maximum(gather + scatter - backward, 0.0)
        forward = np.maximum(forward, gather)
        backward = np.maximum(backward, gather + scatter)
    # sends[v]: virtual stage v's output to v + 1, the receiver's share; returns[v]: the gradient of
    # v's input back to v - 1, that stage's share; over the link the two stages' ranks lie on
    links = {True: Group(2, 1, 2, mesh), False: Group(2, 2, 1, mesh)}  # across nodes, or inside one
    crossings = stage_sends_cross_nodes(plan, mesh)
    timed: dict[tuple[float, bool], float] = {}  # a send's time by message and link, once each

    def send(message: float, crossing: bool) -> float:
        if (message, crossing) not in timed:
            timed[message, crossing] = collective_time("send_recv", message, links[crossing])
        return timed[message, crossing]

    sends, returns = np.zeros(stages), np.zeros(stages)
    if mixed:  # a send at the figures of the nodes both stages lie on
        for v in range(stages - 1):
            link = mesh.figures(spans[v % pp], spans[(v + 1) % pp])
            group = Group(2, 1, 2, link) if crossings[v] else Group(2, 2, 1, link)
            sends[v] = collective_time("send_recv", by_stage[v + 1].message, group)
            returns[v + 1] = collective_time("send_recv", by_stage[v].message, group)
    else:
        for v in range(stages - 1):
            sends[v] = send(by_stage[v + 1].message, crossings[v])
            returns[v + 1] = send(by_stage[v].message, crossings[v])
    finish, busy, peak_kept, first_forward, last_backward = simulate_pipeline(
        pp, vp, m, SCHEDULE_CODES[plan.schedule], forward, backward, sends, returns, kept
    )
    device_weights = np.bincount(device_of, weights=weights, minlength=pp)
    device_experts = np.bincount(device_of, weights=expert_weights, minlength=pp)
    device_dense = device_weights - device_experts
    device_comm = m * (np.bincount(device_of, weights=comm_forward + comm_backward, minlength=pp))
    steps, memories, statics = [], [], []
    exposed_dp, optimizer = np.zeros(pp), np.zeros(pp)
    for s, costs in enumerate(by_device):
        view, dense, experts = costs.view, device_dense[s], device_experts[s]
        expert_ranks = view.dp // view.ep
        if plan.zero < 3:
            reduce = _grad_sync(dense, costs.data, plan.zero) + _grad_sync(
                experts, costs.expert_data, plan.zero
            )
            gather = (
                _weight_gather(dense, costs.data) + _weight_gather(experts, costs.expert_data)
                if plan.zero
                else 0.0
            )
            buckets = max(1.0, (dense + experts) / BUCKET_WEIGHTS)
            exposed_dp[s] = max(reduce - last_backward[s], reduce / buckets) + max(
                gather - first_forward[s], gather / buckets
            )
        shard = dense / (view.dp if plan.zero else 1) + experts / (expert_ranks if plan.zero else 1)
        optimizer[s] = shard * OPTIMIZER_BYTES / (device_meshes[s].gpu.memory_bandwidth * BANDWIDTH_FRACTION)
        steps.append(finish[s] + exposed_dp[s] + optimizer[s])
        statics.append(
            _static_bytes(dense, view.dp, plan.zero) + _static_bytes(experts, expert_ranks, plan.zero)
        )
        # ZeRO-3 holds a layer's gathered weights while it runs and the next one's prefetched
        gathered = (
            2 * WEIGHT_BYTES * (costs.layer.dense + costs.layer.expert)
            if plan.zero == 3 and view.dp > 1
            else 0.0
        )
        logits = last.logits_bytes if s == (stages - 1) % pp else 0.0
        memories.append(statics[-1] + peak_kept[s] + costs.layer.transient + gathered + logits)
    slowest = int(np.argmax(steps))
    step = float(steps[slowest])
    fullest = int(np.argmax(memories))
    tokens = plan.global_batch * model.seq
    if mixed:
        mfu = model.training_flops_per_token() * tokens / (step * mesh.peak_flops(plan.precision))
    else:
        mfu = model.training_flops_per_token() * tokens / (step * mesh.gpus * mesh.gpu.peak[plan.precision])
    breakdown = {
        "compute": float(busy[slowest] - device_comm[slowest]),
        "communication": float(device_comm[slowest] + exposed_dp[slowest]),
        "bubble": float(finish[slowest] - busy[slowest]),
        "optimizer": float(optimizer[slowest]),
    }
    static = float(statics[fullest])
    memory = {"weights_and_state": static, "activations_and_buffers": float(memories[fullest] - static)}
    peak = float(memories[fullest])
    fits = peak <= mesh.gpu.memory
    if mixed:  # each stage against its own GPUs' memory (the smaller where it spans both kinds)
        capacity = [m.gpu.memory for m in device_meshes]
        over = [s for s in range(pp) if memories[s] > capacity[s]]
        fits = not over
        worst = max(over, key=lambda s: memories[s] / capacity[s], default=fullest)
        need, room = float(memories[worst]), capacity[worst]
    else:
        need, room = peak, mesh.gpu.memory
    reasons = () if fits else (f"needs {need / 1e9:,.1f} GB on a GPU of {room / 1e9:,.0f} GB",)
    return PlanResult(step, tokens / step / mesh.gpus, float(mfu), peak, fits, breakdown, memory, reasons)


def _mixed_stage_costs(model: TransformerModel, views: tuple[Plan, ...], meshes: list[Mesh],
                       layers: dict | None) -> list[StageCosts]:
    """The `StageCosts` of each pipeline stage of a mixed mesh, stage ``s`` planned by ``views[s]`` at
    the figures of ``meshes[s]``; ``layers``: `evaluate_plan`'s cache, a dict of layer prices inside it
    for each mesh of figures."""
    known: dict[tuple[Plan, str], StageCosts] = {}
    for view, mesh in zip(views, meshes):
        if (view, mesh.name) not in known:
            own = None if layers is None else layers.setdefault(mesh.name, {})
            known[view, mesh.name] = stage_costs(model, view, mesh, own)
    return [known[view, mesh.name] for view, mesh in zip(views, meshes)]


def _grad_sync(weights: float, group: Group, zero: int) -> float:
    """Seconds to reduce a device's gradients over its data-parallel group: an all-reduce, or a
    reduce-scatter when ZeRO shards what follows."""
    operation = "reduce_scatter" if zero else "all_reduce"
    return collective_time(operation, GRADIENT_BYTES * weights, group)


def _weight_gather(weights: float, group: Group) -> float:
    """Seconds to all-gather the updated weights that ZeRO 1-2 shards over the data-parallel group."""
    return collective_time("all_gather", WEIGHT_BYTES * weights, group)


def _static_bytes(weights: float, group: int, zero: int) -> float:
    """Bytes of ``weights`` with their gradients and optimizer state under ZeRO stage ``zero`` over a
    data-parallel group of ``group`` ranks."""
    if zero == 0:
        return weights * (WEIGHT_BYTES + GRADIENT_BYTES + STATE_BYTES)
    if zero == 1:
        return weights * (WEIGHT_BYTES + GRADIENT_BYTES + STATE_BYTES / group)
    if zero == 2:
        return weights * (WEIGHT_BYTES + (GRADIENT_BYTES + STATE_BYTES) / group)
    return weights * (WEIGHT_BYTES + GRADIENT_BYTES + STATE_BYTES) / group
