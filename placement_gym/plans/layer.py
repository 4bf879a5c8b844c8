"""One transformer layer of a model under a plan, op by op, on one representative rank.

`layer_ops` writes a layer as the family's torch module runs it (`placement_gym.export.models`: gpt,
llama, moe), each op with the sharding Megatron-LM gives it: the QKV and first MLP products column-split
over the tensor group, the attention core split by heads, the output and second MLP products
row-split (then one all-reduce each, forward and backward), norms, dropout and residuals replicated or,
with sequence parallelism, split by sequence (the all-reduces become reduce-scatter + all-gather), the
experts of a mixture over the expert group behind an all-to-all each way. Each op says what it keeps
for the backward pass, so that a layer's activation memory is Korthikanti et al.'s (2022) without
parallelism, with tensor parallelism, with sequence parallelism and with selective recomputation.

`LayerCost` sums the ops: seconds of compute and of exposed tensor/expert/context communication
forward, backward and recomputed, bytes kept per micro-batch, and weights per rank.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from placement_gym.plans.collectives import Group, collective_time
from placement_gym.plans.kernels import op_seconds
from placement_gym.plans.mesh import Mesh
from placement_gym.plans.models import TransformerModel
from placement_gym.plans.plan import Plan

ACTIVATION_BYTES = 2  # bf16/fp16 activations (an fp8 step keeps its activations in bf16)
# Backward of a memory-bound op: reads the output's gradient and what it kept, writes the input's.
MEMORY_BACKWARD = 1.5
MATMUL_BACKWARD = 2.0  # the input's gradient and the weight's, each a product of the forward's size
ATTENTION_BACKWARD = 2.5  # FlashAttention-2's backward: five products to the forward's two


@dataclass(frozen=True)
class Op:
    """One kernel: ``category`` (`placement_gym.plans.kernels.CATEGORIES`), forward ``flops`` and
    ``bytes``, ``kept`` bytes for the backward pass, whether selective recomputation recomputes it
    (``core``: the attention core)."""

    name: str
    category: str
    flops: float
    bytes: float
    kept: float = 0.0
    core: bool = False


@dataclass(frozen=True)
class Comm:
    """A collective of the layer: ``operation`` on ``buffer`` bytes over the ``group`` kind (tensor,
    expert, context), in the forward pass and its conjugate in the backward pass."""

    name: str
    forward: str
    backward: str
    buffer: float
    group: str


def layer_ops(model: TransformerModel, plan: Plan) -> tuple[list[Op], list[Comm]]:
    """The forward ops and collectives of one layer of ``model`` on one rank of ``plan``."""
    e = ACTIVATION_BYTES
    t, b, c = plan.tp, plan.microbatch_size, plan.cp
    h, s, a = model.hidden, model.seq, model.heads
    d = model.head_dim
    tokens = b * s / c  # the rank's tokens (a context-parallel rank holds a chunk of the sequence)
    spread = tokens / t if plan.sequence_parallel else tokens  # tokens of the norms and residuals
    kv = 2 * d * max(model.key_value_heads // t, 1)  # keys and values per rank (replicated past kv heads)
    q = h / t
    ops = [Op("norm1", "memory", 0.0, 2 * e * spread * h, e * spread * h)]
    ops.append(
        Op(
            "qkv",
            "matmul",
            2 * tokens * h * (q + kv),
            e * (tokens * h + h * (q + kv) + tokens * (q + kv)),
            e * spread * h,
        )
    )
    if model.family != "gpt":
        ops.append(Op("rotary", "memory", 0.0, 2 * e * tokens * (q + kv / 2)))
    if plan.fused_attention:
        # Causal: half the score blocks are skipped; the kernel keeps q, k, v and the row statistics.
        ops.append(
            Op(
                "attention",
                "attention",
                2 * tokens * s * q,
                e * tokens * (2 * q + kv),
                e * tokens * (q + kv) + 4 * tokens * a / t,
            )
        )
    else:
        scores = tokens * s * a / t  # score elements on the rank
        ops.append(
            Op(
                "scores",
                "scores",
                2 * tokens * s * q,
                e * (tokens * (q + kv / 2) + scores),
                e * tokens * (q + kv / 2),
            )
        )  # keeps the queries and keys
        ops.append(Op("softmax", "memory", 0.0, 2 * e * scores, e * scores, core=True))
        if model.dropout:
            ops.append(Op("attention_dropout", "memory", 0.0, 2 * e * scores + scores, 3 * scores, core=True))
        ops.append(
            Op(
                "context",
                "scores",
                2 * tokens * s * q,
                e * (scores + tokens * (kv / 2 + q)),
                e * tokens * kv / 2,
            )
        )
    ops.append(
        Op("out_proj", "matmul", 2 * tokens * q * h, e * (tokens * q + q * h + tokens * h), e * tokens * q)
    )
    ops += _residual(model, "1", spread, h)
    ops.append(Op("norm2", "memory", 0.0, 2 * e * spread * h, e * spread * h))
    comms = [
        Comm("attention", "all_reduce", "all_reduce", e * tokens * h, "tensor"),
        Comm("mlp", "all_reduce", "all_reduce", e * tokens * h, "tensor"),
    ]
    if plan.sequence_parallel:
        comms = [
            Comm(f"{name}_{kind}", op, op_back, e * tokens * h, "tensor")
            for name in ("attention", "mlp")
            for kind, op, op_back in (
                ("gather", "all_gather", "reduce_scatter"),
                ("scatter", "reduce_scatter", "all_gather"),
            )
        ]
    if plan.cp > 1:
        comms.append(Comm("context_kv", "all_gather", "reduce_scatter", e * tokens * kv * c, "context"))
    f = model.ffn_width / t
    width = 2 * f if model.gated else f
    routed = tokens
    if model.family == "moe":
        ops.append(
            Op(
                "router",
                "matmul",
                2 * tokens * h * model.experts,
                e * tokens * (h + model.experts),
                e * tokens * h,
            )
        )
        routed = tokens * model.top_k  # each token's copies, balanced over the expert group's ranks
        comms += [
            Comm("dispatch", "all_to_all", "all_to_all", e * routed * h, "expert"),
            Comm("combine", "all_to_all", "all_to_all", e * routed * h, "expert"),
        ]
    fc1_weights = h * width * (model.experts // plan.ep if model.family == "moe" else 1)
    ops.append(
        Op(
            "fc1",
            "matmul",
            2 * routed * h * width,
            e * (routed * h + fc1_weights + routed * width),
            e * (spread if model.family != "moe" else routed) * h,
        )
    )
    if model.gated:
        ops.append(Op("swiglu", "memory", 0.0, 3 * e * routed * f, 2 * e * routed * f))
    else:
        ops.append(Op("gelu", "memory", 0.0, 2 * e * routed * f, e * routed * f))
    ops.append(
        Op(
            "fc2",
            "matmul",
            2 * routed * f * h,
            e * (routed * f + fc1_weights * f / width + routed * h),
            e * routed * f,
        )
    )
    ops += _residual(model, "2", spread, h)
    return ops, comms


def _residual(model: TransformerModel, which: str, spread: float, h: int) -> list[Op]:
    """Dropout (a byte of mask kept per element) where the family trains with it, then the residual add."""
    e = ACTIVATION_BYTES
    ops = (
        [Op(f"dropout{which}", "memory", 0.0, 2 * e * spread * h + spread * h, spread * h)]
        if model.dropout
        else []
    )
    return ops + [Op(f"residual{which}", "memory", 0.0, 3 * e * spread * h)]


def group_of(kind: str, plan: Plan, mesh: Mesh) -> Group:
    """The group of ``kind`` (tensor, context, data, expert, expert_data) in Megatron's layout: tensor
    innermost, then context, then data (expert groups are consecutive data-parallel ranks), pipeline
    outermost. Where the groups of a kind lie
    differently across nodes (degrees that do not divide a node evenly), the slowest: the most nodes,
    then the fewest GPUs in a node."""
    t, c, d, ep = plan.tp, plan.cp, plan.dp, plan.ep
    size, stride = {
        "tensor": (t, 1),
        "context": (c, t),
        "data": (d, t * c),
        "expert": (ep, t * c),
        "expert_data": (d // ep, t * c * ep),
    }[kind]
    per_node, nodes = _slowest_layout(size, stride, plan.gpus, mesh.gpus_per_node)
    return Group(size, per_node, nodes, mesh)


@lru_cache(maxsize=1024)
def _slowest_layout(size: int, stride: int, ranks: int, gpus_per_node: int) -> tuple[int, int]:
    """(per node, nodes) of the slowest group of ``size`` ranks ``stride`` apart among ``ranks``."""
    rank = np.arange(ranks)
    groups = rank.reshape(-1, size, stride).transpose(0, 2, 1).reshape(-1, size) // gpus_per_node
    spans = 1 + np.count_nonzero(np.diff(groups, axis=1), axis=1)
    worst = groups[spans == spans.max()]
    fewest = [int(np.min(np.unique(row, return_counts=True)[1])) for row in np.unique(worst, axis=0)]
    return min(fewest), int(spans.max())


def stage_sends_cross_nodes(plan: Plan, mesh: Mesh) -> tuple[bool, ...]:
    """For each virtual stage, whether a rank's send to the next virtual stage (the last's to the first
    under the interleaved schedule) leaves its node, for any rank of the stage."""
    return _crossings(plan.pp, plan.vp, plan.tp * plan.cp * plan.dp, mesh.gpus_per_node)


@lru_cache(maxsize=1024)
def _crossings(pp: int, vp: int, per_stage: int, gpus_per_node: int) -> tuple[bool, ...]:
    offset = np.arange(per_stage)
    device = [
        bool(
            np.any(
                (s * per_stage + offset) // gpus_per_node
                != ((s + 1) % pp * per_stage + offset) // gpus_per_node
            )
        )
        for s in range(pp)
    ]
    return tuple(device[v % pp] for v in range(pp * vp))


def layer_input_bytes(model: TransformerModel, plan: Plan) -> float:
    """Bytes of one layer's input on a rank for one micro-batch (its sequences, its context chunk, its
    slice under sequence parallelism): what full recomputation keeps and what a pipeline stage receives."""
    size = ACTIVATION_BYTES * model.hidden * plan.microbatch_size * model.seq / plan.cp
    return size / (plan.tp if plan.sequence_parallel else 1)


@dataclass(frozen=True)
class Segment:
    """A stretch of one rank's work: ``seconds`` of compute, or a collective (``operation`` of
    `placement_gym.plans.collectives.COLLECTIVES` on ``buffer`` bytes over the ``group`` kind of
    `group_of`)."""

    seconds: float = 0.0
    operation: str = ""
    buffer: float = 0.0
    group: str = ""


def layer_segments(model: TransformerModel, plan: Plan, mesh: Mesh) -> dict[str, list[Segment]]:
    """One layer's work on one rank for one micro-batch, in order: ``forward`` (the ops, then the
    layer's collectives), ``backward`` (the ops' backward passes in reverse, then the collectives'
    conjugates) and ``recompute`` (what the backward pass replays first: the whole forward pass for full
    recomputation, the attention core's ops for selective)."""
    return _segments(*layer_ops(model, plan), plan, mesh)


def _segments(ops: list[Op], comms: list[Comm], plan: Plan, mesh: Mesh) -> dict[str, list[Segment]]:
    """`layer_segments` of a layer's ``ops`` and ``comms`` (`layer_ops`)."""
    gpu, precision = mesh.gpu, plan.precision
    forward, backward, core = [], [], []
    for op in ops:
        seconds = op_seconds(op.category, op.flops, op.bytes, precision, gpu)
        forward.append(Segment(seconds))
        if op.core or op.category == "scores":
            core.append(Segment(seconds))
        if op.category == "memory":
            backward.append(Segment(op_seconds(op.category, 0.0, MEMORY_BACKWARD * op.bytes, precision, gpu)))
        else:
            factor = ATTENTION_BACKWARD if op.category == "attention" else MATMUL_BACKWARD
            seconds = op_seconds(op.category, factor * op.flops, factor * op.bytes, precision, gpu)
            backward.append(Segment(seconds))
    backward.reverse()
    forward += [Segment(0.0, comm.forward, comm.buffer, comm.group) for comm in comms]
    backward += [Segment(0.0, comm.backward, comm.buffer, comm.group) for comm in comms]
    recompute = {"full": list(forward), "selective": core, "none": []}[plan.recompute]
    return {"forward": forward, "backward": backward, "recompute": recompute}


@dataclass(frozen=True)
class LayerCost:
    """One layer on one rank for one micro-batch: seconds of ``forward`` / ``backward`` compute, of
    exposed ``forward_comm`` / ``backward_comm``, of the forward ops a recomputing backward replays
    (``recompute`` compute, ``recompute_comm``), bytes ``kept`` until the backward pass (and
    ``kept_without_recompute``: what the layer would keep without recomputation), the most bytes alive
    while the layer's backward runs (``transient``), and weights per rank (``dense`` and
    ``expert``)."""

    forward: float
    backward: float
    forward_comm: float
    backward_comm: float
    recompute: float
    recompute_comm: float
    kept: float
    kept_without_recompute: float
    transient: float
    dense: float
    expert: float


def layer_cost(model: TransformerModel, plan: Plan, mesh: Mesh) -> LayerCost:
    """Price one layer of ``model`` under ``plan`` on ``mesh`` (see the module docstring)."""
    ops, comms = layer_ops(model, plan)
    segments = _segments(ops, comms, plan, mesh)

    def compute(part: str) -> float:
        return sum(segment.seconds for segment in segments[part])

    def communication(part: str) -> float:
        return sum(
            collective_time(segment.operation, segment.buffer, group_of(segment.group, plan, mesh))
            for segment in segments[part]
            if segment.operation
        )

    every = sum(op.kept for op in ops)
    if plan.recompute == "full":
        kept, transient = layer_input_bytes(model, plan), every
    elif plan.recompute == "selective":
        kept = every - sum(op.kept for op in ops if op.core)
        transient = every - kept
    else:
        kept, transient = every, 0.0
    t = plan.tp
    kv = 2 * model.head_dim * max(model.key_value_heads // t, 1)
    attention = model.hidden * (model.hidden / t + kv) + model.hidden / t * model.hidden
    expert_count = model.experts // plan.ep if model.family == "moe" else 1
    mlp = expert_count * model.expert_parameters() / t
    router = model.hidden * model.experts if model.family == "moe" else 0
    dense = attention + 2 * model.hidden + router + (0 if model.family == "moe" else mlp)
    return LayerCost(
        compute("forward"),
        compute("backward"),
        communication("forward"),
        communication("backward"),
        compute("recompute"),
        communication("recompute"),
        kept,
        every,
        transient,
        dense,
        mlp if model.family == "moe" else 0.0,
    )
