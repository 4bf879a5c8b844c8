"""A pipelined step (``microbatches`` M > 1; layout: the module docstring of
`placement_gym.task.compiled`): the one-micro-batch step copied M times, the parameters shared, with
the zero-byte tokens of GPipe's fill-drain order."""

from __future__ import annotations

import numpy as np

from placement_gym.graph.opgraph import OpGraph
from placement_gym.task.passes.step_graph import UPDATE, StepGraph


def micro_batch_copies(graph: OpGraph, m: int, ops: StepGraph) -> StepGraph:
    """``ops`` (the one-micro-batch step of ``graph``) copied for ``m`` micro-batches, with the
    fill-drain tokens: forward ops of micro-batch ``k`` at ``k n + f``, the backward sections after all
    of them, the update ops (one per step) last; the static memory is the one step's."""
    g = graph
    backward_index = ops.backward_index
    op_kind, op_forward, flops, bytes_moved, op_category = (
        ops.op_kind, ops.op_forward, ops.flops, ops.bytes_moved, ops.op_category
    )
    tensor_producer, tensor_bytes, tensor_static, tensor_persistent = (
        ops.tensor_producer, ops.tensor_bytes, ops.tensor_static, ops.tensor_persistent
    )
    consumer_tensor, consumer_op = ops.consumer_tensor, ops.consumer_op
    n = g.n_ops
    training = backward_index is not None
    n_one = len(op_kind)  # ops of one copy: n forward (+ the backward section + the update ops)
    section = int(np.count_nonzero(np.asarray(op_kind) != UPDATE)) - n
    copy = np.arange(m, dtype=np.int64)

    def op_of(op: np.ndarray, k: np.ndarray) -> np.ndarray:
        """Index of one-copy op ``op`` in micro-batch ``k`` (update ops: the same for every k)."""
        backward_or_update = np.where(
            op < n + section, m * n + k * section + (op - n), (m - 1) * (n + section) + op
        )
        return np.where(op < n, k * n + op, backward_or_update)

    # Each new op's one-copy op: forward copies, backward sections, then the update ops once.
    one = np.arange(n_one)
    source = np.concatenate([np.tile(one[:n], m), np.tile(one[n : n + section], m), one[n + section :]])
    # Tensors: micro-batch 0's keep their ids; the others' copies follow, the parameter tensors
    # (read by every copy, produced by micro-batch 0's owner) excepted.
    n_tensors = len(tensor_bytes)
    shared = np.zeros(n_tensors, dtype=bool)
    shared[: g.n_tensors] = g.tensor_is_parameter
    per_copy = np.flatnonzero(~shared)
    rank = np.full(n_tensors, -1, dtype=np.int64)
    rank[per_copy] = np.arange(len(per_copy))
    tensor_of = lambda t, k: np.where(  # noqa: E731 - id of one-copy tensor t in micro-batch k
        (k == 0) | shared[t], t, n_tensors + (k - 1) * len(per_copy) + rank[t]
    )
    k_tensor = np.repeat(copy[1:], len(per_copy))
    t_copy = np.tile(per_copy, m - 1)
    producer_one = np.concatenate([tensor_producer, tensor_producer[t_copy]]).astype(np.int64)
    k_all = np.concatenate([np.zeros(n_tensors, dtype=np.int64), k_tensor])
    producer = np.where(producer_one >= 0, op_of(np.maximum(producer_one, 0), k_all), -1)
    nbytes = [np.asarray(tensor_bytes, np.float64), np.asarray(tensor_bytes, np.float64)[t_copy]]
    static = [np.asarray(tensor_static, bool), np.asarray(tensor_static, bool)[t_copy]]
    persistent = [np.asarray(tensor_persistent, bool), np.asarray(tensor_persistent, bool)[t_copy]]
    # Every consumer pair, in every micro-batch.
    k_pair = np.repeat(copy, len(consumer_tensor))
    t_pair = np.tile(consumer_tensor, m)
    readers = [op_of(np.tile(consumer_op, m), k_pair)]
    tensors = [tensor_of(t_pair, k_pair)]
    # Fill-drain tokens (zero bytes): op f of micro-batch k -> op f of micro-batch k + 1, forward and
    # backward; every sink of the last micro-batch -> the backward op of every sink of micro-batch 0.
    token_producer, token_reader = [], []
    for chained in (np.arange(n), np.arange(n, n + section)):
        token_producer.append(op_of(np.tile(chained, m - 1), np.repeat(copy[:-1], len(chained))))
        token_reader.append(op_of(np.tile(chained, m - 1), np.repeat(copy[1:], len(chained))))
    if training:
        src, tensor = g.edge_src.astype(np.int64), g.edge_tensor
        sinks = np.setdiff1d(np.arange(n), src[(src >= 0) & ~g.tensor_is_parameter[tensor]])
        token_producer.append(np.repeat(op_of(sinks, m - 1), len(sinks)))
        token_reader.append(np.tile(op_of(backward_index[sinks], 0), len(sinks)))
    token_producer, token_reader = np.concatenate(token_producer), np.concatenate(token_reader)
    n_before = len(producer)
    # One token tensor per producing op: a sink of the last micro-batch sends one to every reader.
    token_ops, token_index = np.unique(token_producer, return_inverse=True)
    producer = np.concatenate([producer, token_ops])
    nbytes.append(np.zeros(len(token_ops)))
    static.append(np.zeros(len(token_ops), dtype=bool))
    persistent.append(np.zeros(len(token_ops), dtype=bool))
    tensors.append(n_before + token_index.ravel())
    readers.append(token_reader)
    n_total = len(source)
    pairs = np.unique(np.concatenate(tensors) * n_total + np.concatenate(readers))
    return StepGraph(
        op_kind=np.asarray(op_kind)[source],
        op_forward=np.asarray(op_forward)[source],
        flops=np.asarray(flops, dtype=np.float64)[source],
        bytes_moved=np.asarray(bytes_moved, dtype=np.float64)[source],
        op_category=np.asarray(op_category, dtype=np.int64)[source],
        tensor_producer=producer,
        tensor_bytes=np.concatenate(nbytes),
        tensor_static=np.concatenate(static),
        tensor_persistent=np.concatenate(persistent),
        consumer_tensor=pairs // n_total,
        consumer_op=pairs % n_total,
        static_bytes=ops.static_bytes,
        backward_index=None if backward_index is None else op_of(backward_index, np.zeros(n, dtype=np.int64)),
    )
