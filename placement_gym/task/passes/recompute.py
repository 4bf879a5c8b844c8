"""Activation recomputation of a training step (Chen et al. 2016; layout: the module docstring of
`placement_gym.task.compiled`): the forward ops cut into about sqrt(n) segments, every segment but the
last replayed in the backward pass, its backward ops reading the replayed copies of its activations."""

from __future__ import annotations

import numpy as np

from placement_gym.graph.opgraph import OpGraph
from placement_gym.task.passes.step_graph import OP_KINDS, StepGraph


def recompute_segments(n_forward: int) -> np.ndarray:
    """The recomputation segment (int64) of each forward op: ``K = max(1, round(sqrt(n)))`` contiguous
    ranges of the topological order with equal op counts (to one op), as Chen et al. (2016) cut a
    network of n layers into about sqrt(n) segments. The last segment is never replayed."""
    k = max(1, round(float(np.sqrt(n_forward))))
    return np.arange(n_forward, dtype=np.int64) * k // max(n_forward, 1)


def with_recomputation(graph: OpGraph, ops: StepGraph) -> StepGraph:
    """``ops`` (a one-micro-batch training step of ``graph``, as the backward pass laid it out) with
    activation recomputation: the replayed ops, the copies of the activations they make, the tokens
    that hold a segment's replay until the backward pass reaches it, and each forward op's new
    backward index."""
    g = graph
    segment = recompute_segments(g.n_ops)
    n = g.n_ops
    n_one = ops.n_ops
    last = int(segment[-1])
    replayed = segment < last
    # The backward section: for each segment from the last down, its replayed ops in forward order,
    # then its backward ops in reverse order; both stay topological.
    kinds, forwards = [], []
    for s in range(last, -1, -1):
        members = np.flatnonzero(segment == s)
        if s < last:
            kinds.append(np.full(len(members), OP_KINDS.index("recompute")))
            forwards.append(members)
        kinds.append(np.full(len(members), OP_KINDS.index("backward")))
        forwards.append(members[::-1])
    section_kind, section_forward = np.concatenate(kinds), np.concatenate(forwards)
    position = n + np.arange(len(section_kind))
    is_backward = section_kind == OP_KINDS.index("backward")
    backward_index = np.empty(n, dtype=np.int64)
    backward_index[section_forward[is_backward]] = position[is_backward]
    replay_index = np.full(n, -1, dtype=np.int64)
    replay_index[section_forward[~is_backward]] = position[~is_backward]
    n_section = len(section_kind)
    # Old op index (forward, backward at 2n - 1 - f, update at 2n + j) -> new index.
    old_map = np.concatenate([np.arange(n), backward_index[::-1], np.arange(2 * n, n_one) - n + n_section])
    section_old = np.where(is_backward, 2 * n - 1 - section_forward, section_forward)
    ops_from_old = np.concatenate([np.arange(n), section_old, np.arange(2 * n, n_one)])

    producer = np.asarray(ops.tensor_producer, dtype=np.int64)
    new_producer = np.where(producer >= 0, old_map[np.maximum(producer, 0)], -1)
    # A copy of every activation a replayed op makes: the replayed op produces it for the backward ops
    # of its own segment; the original still serves the forward pass and later segments.
    forward_tensor = np.arange(len(producer)) < g.n_tensors
    copied = np.flatnonzero(
        forward_tensor & (producer >= 0) & replayed[np.clip(producer, 0, n - 1)]
        & ~np.concatenate([g.tensor_is_parameter, np.zeros(len(producer) - g.n_tensors, dtype=bool)])
    )
    copy_of = np.full(len(producer), -1, dtype=np.int64)
    copy_of[copied] = len(producer) + np.arange(len(copied))
    tensor_segment = np.where(producer >= 0, segment[np.clip(producer, 0, n - 1)], -1)

    def own_copy(tensor: np.ndarray, reader_forward: np.ndarray) -> np.ndarray:
        """``tensor``, or its copy where the reader's segment made one."""
        mine = (copy_of[tensor] >= 0) & (tensor_segment[tensor] == segment[reader_forward])
        return np.where(mine, copy_of[tensor], tensor)

    consumer_tensor = np.asarray(ops.consumer_tensor, dtype=np.int64)
    consumer_op = np.asarray(ops.consumer_op, dtype=np.int64)
    reads_saved = (consumer_op >= n) & (consumer_op < 2 * n)
    reader_forward = np.where(reads_saved, 2 * n - 1 - consumer_op, 0)
    tensors = [np.where(reads_saved, own_copy(consumer_tensor, reader_forward), consumer_tensor)]
    readers = [old_map[consumer_op]]
    # A replayed op reads what its forward op read: the copies made in its segment, the originals of
    # earlier segments (the checkpoints), parameters and data inputs.
    edge_dst, edge_tensor = g.edge_dst.astype(np.int64), g.edge_tensor.astype(np.int64)
    replay_edge = replayed[edge_dst]
    tensors.append(own_copy(edge_tensor[replay_edge], edge_dst[replay_edge]))
    readers.append(replay_index[edge_dst[replay_edge]])
    # A segment's replay waits for every gradient sent into the segment from a later one: one zero-byte
    # token from each such backward op to each replayed op of the segment that reads no copy.
    sender = producer[consumer_tensor]
    gradient = reads_saved & (sender >= n) & (sender < 2 * n)
    source_forward = 2 * n - 1 - sender[gradient]
    target_segment = segment[reader_forward[gradient]]
    into_earlier = (segment[source_forward] > target_segment) & (target_segment < last)
    pairs = np.unique(source_forward[into_earlier] * (last + 1) + target_segment[into_earlier])
    token_source, token_segment = pairs // (last + 1), pairs % (last + 1)
    inner = np.zeros(n, dtype=bool)
    edge_producer = producer[edge_tensor]
    inner_edge = (edge_producer >= 0) & (segment[np.clip(edge_producer, 0, n - 1)] == segment[edge_dst])
    inner[edge_dst[inner_edge]] = True
    # Those entry ops grouped by segment once (a stable sort keeps op order within a segment), so the
    # readers of every token are one slice: linear in tokens + entry ops, not their product.
    entry = np.flatnonzero(replayed & ~inner)
    entry = entry[np.argsort(segment[entry], kind="stable")]
    entry_segment = segment[entry]
    start = np.searchsorted(entry_segment, token_segment, side="left")
    count = np.searchsorted(entry_segment, token_segment, side="right") - start
    n_tokens = len(token_source)
    first_token = len(producer) + len(copied)
    within = np.arange(int(count.sum())) - np.repeat(np.cumsum(count) - count, count)
    tensors.append(first_token + np.repeat(np.arange(n_tokens), count))
    readers.append(replay_index[entry[np.repeat(start, count) + within]])
    n_total = len(ops_from_old)
    merged = np.unique(np.concatenate(tensors) * n_total + np.concatenate(readers))
    no_extra = np.zeros(len(copied) + n_tokens, dtype=bool)
    return StepGraph(
        op_kind=np.concatenate([np.zeros(n, dtype=np.int8), section_kind.astype(np.int8),
                                np.full(n_one - 2 * n, OP_KINDS.index("update"), dtype=np.int8)]),
        op_forward=np.concatenate(
            [np.arange(n), section_forward, np.asarray(ops.op_forward)[2 * n :]]
        ).astype(np.int32),
        flops=np.asarray(ops.flops, dtype=np.float64)[ops_from_old],
        bytes_moved=np.asarray(ops.bytes_moved, dtype=np.float64)[ops_from_old],
        op_category=np.asarray(ops.op_category, dtype=np.int64)[ops_from_old],
        tensor_producer=np.concatenate(
            [new_producer, replay_index[producer[copied]], backward_index[token_source]]
        ),
        tensor_bytes=np.concatenate([np.asarray(ops.tensor_bytes, np.float64),
                                     np.asarray(ops.tensor_bytes, np.float64)[copied], np.zeros(n_tokens)]),
        tensor_static=np.concatenate([np.asarray(ops.tensor_static, bool), no_extra]),
        tensor_persistent=np.concatenate([np.asarray(ops.tensor_persistent, bool), no_extra]),
        consumer_tensor=merged // n_total,
        consumer_op=merged % n_total,
        static_bytes=ops.static_bytes,
        backward_index=backward_index,
    )
