"""`StepGraph`: a step as its ops, its tensors and what each op reads, the value every compile pass
(`placement_gym.task.passes`) takes and gives back, before the task's adjacency and durations are
made from it."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

# op_kind values, by index
OP_KINDS: tuple[str, ...] = ("forward", "backward", "update", "recompute")
UPDATE = OP_KINDS.index("update")


@dataclass(frozen=True, eq=False)
class StepGraph:
    """The ops, tensors and reads of a step (one array entry per op, per tensor or per read).

    Ops: ``op_kind`` (index in `OP_KINDS`), ``op_forward`` (the forward op whose device the op
    follows), ``flops``, ``bytes_moved`` and ``op_category`` (the cost figures of the op).
    Tensors: ``tensor_producer`` (-1: a graph data input), ``tensor_bytes``, ``tensor_static`` (its
    memory is counted in the static memory), ``tensor_persistent`` (alive until the end of the step).
    Reads: ``consumer_tensor[i]`` is read by op ``consumer_op[i]``.
    ``static_bytes``: the static memory of each forward op (parameters, and for training gradients
    and optimizer state). ``backward_index``: the index of each forward op's backward op (micro-batch
    0's in a pipelined step; None for inference), which the passes after the backward pass place their
    ops by."""

    op_kind: np.ndarray
    op_forward: np.ndarray
    flops: np.ndarray
    bytes_moved: np.ndarray
    op_category: np.ndarray
    tensor_producer: np.ndarray
    tensor_bytes: np.ndarray
    tensor_static: np.ndarray
    tensor_persistent: np.ndarray
    consumer_tensor: np.ndarray
    consumer_op: np.ndarray
    static_bytes: np.ndarray
    backward_index: np.ndarray | None

    @property
    def n_ops(self) -> int:
        return len(self.op_kind)

    @property
    def n_tensors(self) -> int:
        return len(self.tensor_bytes)
