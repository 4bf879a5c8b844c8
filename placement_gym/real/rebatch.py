"""The graph at the batch the executor runs: `rebatched_graph` re-imports a graph's ONNX model with a
smaller leading dimension of its data inputs (`graph_batch`), so that the cost models (analytical and
profiled) see the tensors the executor moves. Used by the profile measurement and by fidelity.
"""

from __future__ import annotations

import copy
import dataclasses
from typing import Any

import numpy as np

from placement_gym.graph.opgraph import OpGraph


def graph_batch(graph: OpGraph) -> int | None:
    """The leading dimension the graph's data inputs share (None when they do not share one)."""
    leading = {shape[0] for _, shape in graph.data_inputs if shape}
    return leading.pop() if len(leading) == 1 else None


def rebatched_graph(graph: OpGraph, batch: int | None, model: Any = None, larger: bool = False) -> OpGraph:
    """``graph`` re-imported from its ONNX model with data inputs of leading dimension ``batch``
    (Reshape shapes that start with the batch follow it, as in `Executor`). Name and sha256 stay the
    graph's, so profiles and the executor (which take ``batch`` themselves) still match it.
    ``batch`` None or the graph's own batch returns ``graph``."""
    if batch is None:
        return graph
    original = graph_batch(graph)
    if original is None:
        raise ValueError(
            f"graph {graph.name!r}: cannot change the batch, its data inputs do not share one "
            f"leading dimension ({dict(graph.data_inputs)})"
        )
    if (
        isinstance(batch, bool)
        or not isinstance(batch, (int, np.integer))
        or not 1 <= batch <= (batch if larger else original)
    ):
        raise ValueError(f"batch must be an integer from 1 to the graph's batch {original}, got {batch!r}")
    if batch == original:
        return graph
    from onnx import numpy_helper

    from placement_gym.graph.onnx_import import graph_from_onnx
    from placement_gym.real.program import load_model

    model = copy.deepcopy(load_model(graph, model))
    data = dict(graph.data_inputs)
    for value in model.graph.input:
        if value.name in data:
            value.type.tensor_type.shape.dim[0].dim_value = int(batch)
    shapes = {node.input[1] for node in model.graph.node if node.op_type == "Reshape" and len(node.input) > 1}

    def follow(array: np.ndarray) -> np.ndarray | None:
        flat = array.reshape(-1)
        if flat.size and int(flat[0]) == original:
            flat = flat.copy()
            flat[0] = batch
            return flat.reshape(array.shape)
        return None

    for tensor in model.graph.initializer:
        if tensor.name in shapes and (new := follow(numpy_helper.to_array(tensor))) is not None:
            tensor.CopyFrom(numpy_helper.from_array(new, tensor.name))
    for node in model.graph.node:
        if node.op_type == "Constant" and node.output[0] in shapes:
            for attr in node.attribute:
                if attr.name == "value" and (new := follow(numpy_helper.to_array(attr.t))) is not None:
                    attr.t.CopyFrom(numpy_helper.from_array(new, attr.t.name))
    del model.graph.value_info[:]  # shapes are re-inferred from the new inputs
    for value in model.graph.output:
        value.type.tensor_type.ClearField("shape")
    scaled = graph_from_onnx(model, name=graph.name)
    if scaled.op_names != graph.op_names:
        raise ValueError(f"graph {graph.name!r} at batch {batch} has other ops than at batch {original}")
    return dataclasses.replace(scaled, sha256=graph.sha256)
