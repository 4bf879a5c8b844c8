"""The step of an inference task: the graph's forward ops and tensors as they are."""

from __future__ import annotations

import numpy as np

from placement_gym.graph.opgraph import OpGraph
from placement_gym.task.passes.step_graph import StepGraph


def forward_step(graph: OpGraph) -> StepGraph:
    """The `StepGraph` of ``graph``'s forward pass: its ops (all forward), its tensors (parameters
    static, graph outputs persistent), its edges as reads and its parameter bytes as static memory."""
    n = graph.n_ops
    return StepGraph(
        op_kind=np.zeros(n, dtype=np.int8),
        op_forward=np.arange(n, dtype=np.int32),
        flops=graph.flops,
        bytes_moved=graph.bytes_accessed,
        op_category=graph.category.astype(np.int64),
        tensor_producer=graph.tensor_producer.astype(np.int64),
        tensor_bytes=graph.tensor_bytes,
        tensor_static=graph.tensor_is_parameter.copy(),
        tensor_persistent=graph.tensor_is_output.copy(),
        consumer_tensor=graph.edge_tensor.astype(np.int64),
        consumer_op=graph.edge_dst.astype(np.int64),
        static_bytes=graph.param_bytes.copy(),
        backward_index=None,
    )
