"""The price of a training step under a parallel plan: `evaluate_plan`.

One representative rank per pipeline stage (the ranks of a tensor, context or data group do the same
work): each layer priced once by `placement_gym.plans.layer` and reused for every layer of a stage,
the first virtual stage adding the embedding and the last the final norm, output head and loss; the
pipeline simulated over stage-micro-batch units (`placement_gym.plans.schedule`); then each device's
data-parallel gradient reduction and parameter gathering, overlapped as Megatron-LM overlaps them
(reduce-scatter during the last micro-batch's backward pass, all-gather during the first forward), and
the fused optimizer over the rank's share of the weights.

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
    group_of,
    layer_cost,
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


def evaluate_plan(model: TransformerModel, plan: Plan, mesh: Mesh) -> PlanResult:
    """The price of one training step of ``model`` under ``plan`` on ``mesh`` (module docstring). A plan
    `plan_problems` refuses gives an infeasible result with its reasons, never an exception."""
    problems = tuple(plan_problems(plan, model, mesh))
    if problems:  # refused before anything is sized by the plan's degrees
        return PlanResult(math.inf, 0.0, 0.0, 0.0, False, {}, {}, problems)
    layer = layer_cost(model, plan, mesh)
    pp, vp, m = plan.pp, plan.vp, plan.microbatches
    stages = plan.virtual_stages
    layers = np.array(plan.layers_of_stages(model.layers), dtype=np.float64)
    # Full recomputation of the first `recompute_layers` layers of each virtual stage only (Megatron's
    # block method): the others keep what they would keep without recomputation.
    replayed = np.minimum(layers, plan.recompute_layers) if plan.recompute_layers else layers
    keeping = layer_cost(model, replace(plan, recompute="none", recompute_layers=0), mesh).kept
    forward = layers * (layer.forward + layer.forward_comm)
    backward = layers * (layer.backward + layer.backward_comm)
    backward += replayed * (layer.recompute + layer.recompute_comm)
    comm_forward = layers * layer.forward_comm
    comm_backward = layers * layer.backward_comm + replayed * layer.recompute_comm
    first_f, first_b, last_f, last_b, logits, end_comm, loss_comm = stage_ends(model, plan, mesh)
    forward[0] += first_f
    backward[0] += first_b
    forward[-1] += last_f
    backward[-1] += last_b
    comm_forward[0] += end_comm
    comm_backward[0] += end_comm
    comm_forward[-1] += end_comm + loss_comm
    comm_backward[-1] += end_comm
    kept = replayed * layer.kept + (layers - replayed) * keeping
    # ZeRO-3 gathers a stage's weights before its forward and backward and reduce-scatters its
    # gradients, per micro-batch, prefetched under the compute: a unit takes the longer of the two.
    data = group_of("data", plan, mesh)
    weights = layers * (layer.dense + layer.expert)
    weights[0] += model.vocab * model.hidden / plan.tp
    if not model.tied_embeddings or pp * vp > 1:
        weights[-1] += model.vocab * model.hidden / plan.tp
    expert_weights = layers * layer.expert
    expert_data = group_of("expert_data", plan, mesh) if plan.ep > 1 else data
    sharded = plan.zero == 3 and plan.dp > 1
    if sharded:  # expert weights are gathered over their own data-parallel group
        gather, scatter = (
            np.array(
                [
                    collective_time(operation, size * dense, data)
                    + collective_time(operation, size * experts, expert_data)
                    for dense, experts in zip(weights - expert_weights, expert_weights)
                ]
            )
            for operation, size in (("all_gather", WEIGHT_BYTES), ("reduce_scatter", GRADIENT_BYTES))
        )
        comm_forward += np.maximum(gather - forward, 0.0)
        comm_backward += np.maximum(gather + scatter - backward, 0.0)
        forward = np.maximum(forward, gather)
        backward = np.maximum(backward, gather + scatter)
    message = (
        ACTIVATION_BYTES
        * model.hidden
        * plan.microbatch_size
        * model.seq
        / plan.cp
        / (plan.tp if plan.sequence_parallel else 1)
    )
    sends = (
        np.array(
            [
                collective_time(
                    "send_recv", message, Group(2, 1, 2, mesh) if crossing else Group(2, 2, 1, mesh)
                )
                for crossing in stage_sends_cross_nodes(plan, mesh)
            ]
        )
        if pp > 1
        else np.zeros(stages)
    )
    # sends[v]: virtual stage v to v + 1; a gradient comes back from v to v - 1 over the same link
    returns = np.concatenate([[0.0], sends[:-1]])
    finish, busy, peak_kept, first_forward, last_backward = simulate_pipeline(
        pp, vp, m, SCHEDULE_CODES[plan.schedule], forward, backward, sends, returns, kept
    )
    device_of = np.arange(stages) % pp
    device_weights = np.bincount(device_of, weights=weights, minlength=pp)
    device_experts = np.bincount(device_of, weights=expert_weights, minlength=pp)
    device_dense = device_weights - device_experts
    device_comm = m * (np.bincount(device_of, weights=comm_forward + comm_backward, minlength=pp))
    steps, memories, exposed_dp, optimizer = [], [], np.zeros(pp), np.zeros(pp)
    # ZeRO-3 holds a layer's gathered weights while it runs and the next one's prefetched
    gathered = 2 * WEIGHT_BYTES * (layer.dense + layer.expert) if sharded else 0.0
    for s in range(pp):
        dense, experts = device_dense[s], device_experts[s]
        if plan.zero < 3:
            reduce = _grad_sync(dense, data, plan.zero) + _grad_sync(experts, expert_data, plan.zero)
            gather = (
                (_weight_gather(dense, data) + _weight_gather(experts, expert_data)) if plan.zero else 0.0
            )
            buckets = max(1.0, (dense + experts) / BUCKET_WEIGHTS)
            exposed_dp[s] = max(reduce - last_backward[s], reduce / buckets) + max(
                gather - first_forward[s], gather / buckets
            )
        shard = dense / (plan.dp if plan.zero else 1) + experts / ((plan.dp // plan.ep) if plan.zero else 1)
        optimizer[s] = shard * OPTIMIZER_BYTES / (mesh.gpu.memory_bandwidth * BANDWIDTH_FRACTION)
        steps.append(finish[s] + exposed_dp[s] + optimizer[s])
        memories.append(
            _static_bytes(dense, plan.dp, plan.zero)
            + _static_bytes(experts, plan.dp // plan.ep, plan.zero)
            + peak_kept[s]
            + layer.transient
            + gathered
            + (logits if s == (stages - 1) % pp else 0.0)
        )
    slowest = int(np.argmax(steps))
    step = float(steps[slowest])
    fullest = int(np.argmax(memories))
    tokens = plan.global_batch * model.seq
    mfu = model.training_flops_per_token() * tokens / (step * mesh.gpus * mesh.gpu.peak[plan.precision])
    communication = float(device_comm[slowest] + exposed_dp[slowest])
    breakdown = {
        "compute": float(busy[slowest] - device_comm[slowest]),
        "communication": communication,
        "bubble": float(finish[slowest] - busy[slowest]),
        "optimizer": float(optimizer[slowest]),
    }
    static = _static_bytes(device_dense[fullest], plan.dp, plan.zero)
    static += _static_bytes(device_experts[fullest], plan.dp // plan.ep, plan.zero)
    memory = {"weights_and_state": static, "activations_and_buffers": float(memories[fullest] - static)}
    peak = float(memories[fullest])
    fits = peak <= mesh.gpu.memory
    reasons = () if fits else (f"needs {peak / 1e9:,.1f} GB on a GPU of {mesh.gpu.memory / 1e9:,.0f} GB",)
    return PlanResult(step, tokens / step / mesh.gpus, float(mfu), peak, fits, breakdown, memory, reasons)


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
