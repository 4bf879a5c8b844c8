"""The step of a training task: the forward graph extended with a backward op per forward op, the
gradient tensors, the saved activations and an update op per op with parameters (layout and costs:
the module docstring of `placement_gym.task.compiled`)."""

from __future__ import annotations

import numpy as np

from placement_gym.graph.op_costs import batch_norm_in_training
from placement_gym.graph.opgraph import CATEGORY_INDEX, OpGraph
from placement_gym.task.passes.step_graph import StepGraph
from placement_gym.task.step import OPTIMIZERS

# Op categories whose backward op computes the gradients of both operands: twice the forward FLOPs.
DOUBLE_BACKWARD = np.array(
    [name in ("matmul", "conv") for name in sorted(CATEGORY_INDEX, key=CATEGORY_INDEX.get)]
)


def training_step(graph: OpGraph, optimizer: str) -> StepGraph:
    """The `StepGraph` of a training step of ``graph`` with ``optimizer`` (a key of `OPTIMIZERS`),
    in fp32: forward ops ``0..n-1``, the backward op of ``f`` at ``2n - 1 - f``, update ops from ``2n``
    in forward order; BatchNormalization costed in its training form."""
    g = graph
    n = g.n_ops
    category = g.category.astype(np.int64)
    edge_src = g.edge_src.astype(np.int64)
    edge_dst = g.edge_dst.astype(np.int64)
    edge_tensor = g.edge_tensor.astype(np.int64)
    states, update_flops, update_bytes = OPTIMIZERS[optimizer]
    owners = np.flatnonzero(g.param_bytes > 0)
    n_update = len(owners)
    n_total = 2 * n + n_update
    backward = lambda f: 2 * n - 1 - f  # noqa: E731 - index of f's backward op
    update_of = np.full(n, -1, dtype=np.int64)
    update_of[owners] = 2 * n + np.arange(n_update)
    op_kind = np.concatenate([np.zeros(n), np.ones(n), np.full(n_update, 2)]).astype(np.int8)
    op_forward = np.concatenate([np.arange(n), np.arange(n)[::-1], owners]).astype(np.int32)
    param_elements = g.param_bytes[owners] / 4.0
    forward_flops, forward_bytes = batch_norm_in_training(g)
    flops = np.concatenate(
        [
            forward_flops,
            (forward_flops * np.where(DOUBLE_BACKWARD[category], 2.0, 1.0))[::-1],
            param_elements * update_flops,
        ]
    )
    bytes_moved = np.concatenate(
        [forward_bytes, 2.0 * forward_bytes[::-1], g.param_bytes[owners] * update_bytes]
    )
    op_category = np.concatenate([category, category[::-1], np.full(n_update, CATEGORY_INDEX["elementwise"])])
    t0 = g.n_tensors
    # Forward tensors keep their ids; each is also read by the backward op of each consumer
    # (saved input) and of its producer (saved output).
    producers = g.tensor_producer.astype(np.int64)
    has_producer = np.flatnonzero(producers >= 0)
    tensors, consumers = (
        [edge_tensor, edge_tensor, has_producer],
        [edge_dst, backward(edge_dst), backward(producers[has_producer])],
    )
    new_producer, new_bytes, new_static = [], [], []
    # Gradient tensors, one per forward edge from an op: c.grad -> p.grad, or for a shared
    # parameter c.grad -> owner.update.
    from_op = np.flatnonzero(edge_src >= 0)
    is_param = g.tensor_is_parameter[edge_tensor[from_op]]
    grad_ids = t0 + np.arange(len(from_op))
    new_producer.append(backward(edge_dst[from_op]))
    new_bytes.append(g.tensor_bytes[edge_tensor[from_op]])
    new_static.append(np.zeros(len(from_op), dtype=bool))
    tensors.append(grad_ids)
    consumers.append(np.where(is_param, update_of[edge_src[from_op]], backward(edge_src[from_op])))
    next_id = t0 + len(from_op)
    # Ops with no output tensor still have to run before their backward op: a 0-byte tensor.
    silent = np.setdiff1d(np.arange(n), producers[has_producer])
    ids = next_id + np.arange(len(silent))
    new_producer.append(silent)
    new_bytes.append(np.zeros(len(silent)))
    new_static.append(np.zeros(len(silent), dtype=bool))
    tensors.append(ids)
    consumers.append(backward(silent))
    next_id += len(silent)
    # Parameter gradients of each owner: owner.grad -> owner.update (memory is static).
    ids = next_id + np.arange(n_update)
    new_producer.append(backward(owners))
    new_bytes.append(g.param_bytes[owners])
    new_static.append(np.ones(n_update, dtype=bool))
    tensors.append(ids)
    consumers.append(update_of[owners])
    tensor_bytes = np.concatenate([g.tensor_bytes, *new_bytes])
    pairs = np.unique(np.concatenate(tensors) * n_total + np.concatenate(consumers))
    return StepGraph(
        op_kind=op_kind,
        op_forward=op_forward,
        flops=flops,
        bytes_moved=bytes_moved,
        op_category=op_category,
        tensor_producer=np.concatenate([producers, *new_producer]),
        tensor_bytes=tensor_bytes,
        tensor_static=np.concatenate([g.tensor_is_parameter, *new_static]),
        tensor_persistent=np.concatenate([g.tensor_is_output, np.zeros(len(tensor_bytes) - t0, dtype=bool)]),
        consumer_tensor=pairs // n_total,
        consumer_op=pairs % n_total,
        static_bytes=g.param_bytes * (2 + states),
        backward_index=backward(np.arange(n)),
    )
