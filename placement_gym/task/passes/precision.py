"""A half-precision step (``bf16``/``fp16``, mixed precision with fp32 master weights): its tensors and
the bytes its forward and backward ops move at the precision's bytes per element, its static memory
per parameter element as mixed-precision training keeps it (the module docstring of
`placement_gym.task.compiled`). Its matmul and conv ops run on tensor cores: `uses_tensor_cores`, which
the op durations read (`placement_gym.task.passes.durations`)."""

from __future__ import annotations

import dataclasses

import numpy as np

from placement_gym.graph.opgraph import OpGraph
from placement_gym.task.passes.step_graph import UPDATE, StepGraph
from placement_gym.task.step import DEFAULT_PRECISION, OPTIMIZERS, PRECISIONS, Step

GRAPH_BYTES_PER_ELEMENT = 4  # a graph's tensor, op and parameter bytes are fp32
# Mixed-precision training: bytes per parameter element of the bf16/fp16 weights and gradients and of
# the fp32 master copy; each optimizer state copy is fp32 (4 bytes).
HALF_WEIGHT_BYTES, HALF_GRADIENT_BYTES, MASTER_WEIGHT_BYTES, STATE_BYTES = 2, 2, 4, 4


def uses_tensor_cores(step: Step) -> bool:
    """Whether the step's matmul and conv ops run at the devices' tensor-core rate (half precision)."""
    return step.precision != DEFAULT_PRECISION


def at_precision(ops: StepGraph, graph: OpGraph, step: Step) -> StepGraph:
    """``ops`` (the fp32 step of ``graph``, before recomputation and micro-batches) at ``step``'s
    precision: unchanged in fp32. In half precision every tensor and the bytes of every op but the
    update ops (which read and write the fp32 master weights and state) scale by the precision's bytes
    per element; static memory per parameter element: the half weights for inference, the half weights
    and gradients, the fp32 master copy and the optimizer's fp32 state for training."""
    if not uses_tensor_cores(step):
        return ops
    scale = PRECISIONS[step.precision] / GRAPH_BYTES_PER_ELEMENT
    elements = graph.param_bytes / GRAPH_BYTES_PER_ELEMENT
    if step.objective == "inference":
        bytes_moved = ops.bytes_moved * scale
        static_bytes = elements * HALF_WEIGHT_BYTES
    else:
        # Scaling by a power of two is exact, so scaling the backward ops' doubled bytes gives what
        # doubling the scaled forward bytes gives.
        bytes_moved = np.where(ops.op_kind == UPDATE, ops.bytes_moved, ops.bytes_moved * scale)
        states = OPTIMIZERS[step.optimizer][0]
        static_bytes = elements * (
            HALF_WEIGHT_BYTES + HALF_GRADIENT_BYTES + MASTER_WEIGHT_BYTES + STATE_BYTES * states
        )
    return dataclasses.replace(
        ops, bytes_moved=bytes_moved, tensor_bytes=ops.tensor_bytes * scale, static_bytes=static_bytes
    )
