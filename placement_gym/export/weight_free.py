"""Turn an exported ONNX model into the project's weight-free form (the contract with the importer).

- Every floating-point initializer (weights, biases, BatchNorm statistics) becomes a graph input of the
  same name, shape and dtype; its data is dropped. Integer and bool tensors (reshape shapes, axes,
  indices) stay, as initializers.
- `metadata_props["placement_gym.parameters"]` lists, as JSON, the graph inputs that are weights;
  every other graph input is data. `metadata_props["placement_gym.source"]` says where the graph is from.
- All-zero biases the exporter attaches to bias-free convolutions are dropped; any other float tensor
  that is not a weight is kept as a Constant node, never as an initializer.
- Shape-only computations (Concat of constant dims and the like) are folded, Constant nodes of integer
  or bool type are lifted to initializers, unused nodes are removed, node names are made unique,
  and per-node metadata and doc strings (stack traces, file paths) are cleared so that two exports of
  the same model serialise to the same bytes. Nothing that needs a weight's value can be folded
  (weights are inputs by then), so BatchNormalization is never fused into a convolution.

Needs `onnx_ir` and `onnxscript` (the export extra), imported when called.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

import onnx

if TYPE_CHECKING:
    import onnx_ir

PARAMETERS_KEY = "placement_gym.parameters"
SOURCE_KEY = "placement_gym.source"

_FLOAT_TYPES = frozenset({
    onnx.TensorProto.FLOAT, onnx.TensorProto.DOUBLE, onnx.TensorProto.FLOAT16, onnx.TensorProto.BFLOAT16,
})


def _is_float(dtype: onnx_ir.DataType) -> bool:
    return int(dtype) in _FLOAT_TYPES


def _weights_to_inputs(model: onnx_ir.Model) -> list[str]:
    graph = model.graph
    names = [name for name, value in graph.initializers.items() if _is_float(value.dtype)]
    for name in names:
        value = graph.initializers.pop(name)
        value.const_value = None
        graph.inputs.append(value)
    return names


def _lift_integer_constants(model: onnx_ir.Model) -> None:
    """Replace Constant nodes holding non-float tensors by initializers: shapes and axes are data, not ops."""
    import onnx_ir as ir

    graph = model.graph
    for node in list(graph):
        if node.op_type != "Constant" or node.domain not in ("", "onnx.ai") or len(node.attributes) != 1:
            continue
        output = node.outputs[0]
        if output.is_graph_output():
            continue
        attr = next(iter(node.attributes.values()))
        if attr.name == "value":
            tensor = attr.as_tensor()
        elif attr.name == "value_int":
            tensor = ir.tensor(attr.as_int(), dtype=ir.DataType.INT64)
        elif attr.name == "value_ints":
            tensor = ir.tensor(list(attr.as_ints()), dtype=ir.DataType.INT64)
        else:
            continue
        if _is_float(tensor.dtype):
            continue
        initializer = ir.Value(name=output.name, shape=tensor.shape, type=ir.TensorType(tensor.dtype),
                               const_value=tensor)
        graph.register_initializer(initializer)
        output.replace_all_uses_with(initializer)
        graph.remove(node, safe=True)


def _drop_zero_biases(model: onnx_ir.Model) -> None:
    """Remove the all-zero bias the exporter attaches to bias-free Conv/Gemm: it is not part of the model."""
    import numpy as np

    for node in model.graph:
        if node.op_type not in ("Conv", "ConvTranspose", "Gemm") or len(node.inputs) != 3:
            continue
        bias = node.inputs[2]
        if bias is None or bias.const_value is None or bias.is_graph_input():
            continue
        if not np.any(bias.const_value.numpy()):
            node.resize_inputs(2)


def _float_initializers_to_constants(model: onnx_ir.Model) -> None:
    """Float tensors the exporter made (not weights) become Constant nodes: initializers mean weights."""
    import onnx_ir as ir

    graph = model.graph
    for name in [name for name, value in graph.initializers.items() if _is_float(value.dtype)]:
        value = graph.initializers.pop(name)
        tensor = value.const_value
        value.const_value = None
        constant = ir.node("Constant", inputs=[], attributes={"value": tensor}, name=f"constant_{name}")
        value.replace_all_uses_with(constant.outputs[0])
        constant.outputs[0].name = name
        graph.insert_before(graph.node(0), constant)


def _unique_node_names(model: onnx_ir.Model) -> None:
    seen: set[str] = set()
    for index, node in enumerate(model.graph):
        name = node.name or f"{node.op_type}_{index}"
        candidate, suffix = name, 1
        while candidate in seen:
            candidate = f"{name}_{suffix}"
            suffix += 1
        node.name = candidate
        seen.add(candidate)


def make_weight_free(model: onnx_ir.Model, source: str, fold_limit: int | None = None) -> onnx.ModelProto:
    """Rewrite `model` (an onnx_ir model, modified in place) and return the weight-free ModelProto.

    The returned model carries the shapes that ONNX shape inference derives (`graph.value_info`).
    `fold_limit`: the most elements a tensor folded into a constant may have (None: onnxscript's
    default, 262,144). A long sequence's position tables (rotary angles at 4,096 tokens) are input-free
    and would otherwise be folded into a megabyte of constant data; under a lower limit they stay ops.
    """
    import onnx_ir as ir
    import onnx_ir.passes.common as common
    from onnxscript.optimizer import fold_constants

    if "\n" in source:
        raise ValueError("source must be one line")
    if fold_limit is not None and fold_limit < 1:
        raise ValueError(f"fold_limit must be a positive number of elements or None, got {fold_limit}")
    parameter_names = _weights_to_inputs(model)
    common.InlinePass()(model)
    if fold_limit is None:
        fold_constants(model, onnx_shape_inference=True)  # onnxscript's default size limits
    else:
        fold_constants(model, onnx_shape_inference=True, output_size_limit=fold_limit)
    ir.passes.Sequential(
        common.RemoveUnusedNodesPass(),
        common.CommonSubexpressionEliminationPass(),
        common.RemoveUnusedNodesPass(),
        common.RemoveUnusedOpsetsPass(),
        common.ClearMetadataAndDocStringPass(),
    )(model)
    _lift_integer_constants(model)
    _drop_zero_biases(model)
    common.RemoveUnusedNodesPass()(model)
    _float_initializers_to_constants(model)
    _unique_node_names(model)

    # Weights no longer used (none expected) must not be listed as parameters.
    input_names = {value.name for value in model.graph.inputs}
    parameter_names = [name for name in parameter_names if name in input_names]
    model.doc_string = None
    model.graph.doc_string = None
    model.graph.metadata_props.clear()
    model.metadata_props.clear()
    model.metadata_props[PARAMETERS_KEY] = json.dumps(parameter_names)
    model.metadata_props[SOURCE_KEY] = source

    proto = ir.serde.serialize_model(model)
    leftover = [init.name for init in proto.graph.initializer if init.data_type in _FLOAT_TYPES]
    if leftover:
        raise ValueError(f"float initializers left after conversion (would be weights): {leftover[:5]}")
    del proto.graph.value_info[:]
    proto = onnx.shape_inference.infer_shapes(proto, check_type=True, strict_mode=True)
    onnx.checker.check_model(proto, full_check=True)
    check_static_shapes(proto)
    return proto


def check_static_shapes(model: onnx.ModelProto) -> None:
    """Raise ValueError naming the first graph value whose shape is missing or not all known integers."""
    graph = model.graph
    values = list(graph.input) + list(graph.value_info) + list(graph.output)
    typed = {value.name for value in values}
    for value in values:
        tensor_type = value.type.tensor_type
        if not tensor_type.HasField("shape"):
            raise ValueError(f"value {value.name!r} has no inferred shape")
        for dim in tensor_type.shape.dim:
            if not dim.HasField("dim_value"):
                raise ValueError(f"value {value.name!r} has a symbolic or unknown dimension")
    initializers = {init.name for init in graph.initializer}
    for node in graph.node:
        for name in node.output:
            if name and name not in typed and name not in initializers:
                raise ValueError(f"output {name!r} of node {node.name!r} has no inferred shape")
