"""Shapes of weights a file reads but never declares, derived from the ops that read them.

``torch.onnx.export(model, args, f, export_params=False)`` with the default (dynamo) exporter writes
a graph whose nodes read the weights by name while the file has no initializer, graph input or
value_info for them (the ONNX checker rejects it). The size of such a weight follows from its op
when the op's semantics fix it: a Conv weight is (C_out, C_in / group, *kernel_shape), a Gemm or
MatMul weight (K, N), a normalisation scale one value per normalised element, an LSTM's W
(directions, 4 * hidden, input size). It does not follow for an embedding table (the vocabulary
size appears nowhere) or for an operand of an element-wise op (a bias, a scalar or a mask
broadcast into the activation); such a weight is reported, with a way to export a loadable file.
A tied weight read by several ops takes the shape any of them fixes (they must agree).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping

import onnx

from placement_gym.graph.op_costs import TensorInfo

HOW_TO_EXPORT = (
    "export with export_params=True (placement-gym reads only shapes: the weights may stay in an "
    "external data file, which need not be present), or with export_params=False and "
    "keep_initializers_as_inputs=True, or with dynamo=False"
)

_GATES = {"LSTM": 4, "GRU": 3, "RNN": 1}


def _attr(node: onnx.NodeProto, name: str, default):  # -> attribute value or default
    for attr in node.attribute:
        if attr.name == name:
            return onnx.helper.get_attribute_value(attr)
    return default


def _shape_at(node: onnx.NodeProto, slot: int, opset: int, info: Callable[[str], TensorInfo | None]
              ) -> tuple[tuple[int, ...], float] | None:
    """(shape, itemsize) of input ``slot`` of ``node`` as the op's semantics fix it, or None."""

    def tensor(index: int, outputs: bool = False) -> TensorInfo | None:
        names = node.output if outputs else node.input
        return info(names[index]) if index < len(names) and names[index] else None

    x, y = tensor(0), tensor(0, outputs=True)
    op = node.op_type
    if op in ("Conv", "ConvTranspose") and x is not None and y is not None and len(x.shape) >= 3:
        kernel = tuple(int(k) for k in _attr(node, "kernel_shape", ()))
        group = int(_attr(node, "group", 1))
        c_in, c_out = x.shape[1], y.shape[1]
        if slot == 2:
            return (c_out,), x.itemsize
        if slot == 1 and len(kernel) == len(x.shape) - 2:
            weight = (c_out, c_in // group) if op == "Conv" else (c_in, c_out // group)
            return weight + kernel, x.itemsize
    elif op == "Gemm" and x is not None and y is not None and len(x.shape) == 2:
        k = x.shape[0] if _attr(node, "transA", 0) else x.shape[1]
        n = y.shape[1]
        if slot == 1:
            return ((n, k) if _attr(node, "transB", 0) else (k, n)), x.itemsize
        if slot == 2:
            return (n,), x.itemsize  # a bias: one value per output feature
    elif op == "MatMul" and y is not None and len(y.shape) >= 2:
        other = tensor(1 - slot) if slot in (0, 1) else None
        if other is not None and len(other.shape) >= 2:
            m, n = y.shape[-2], y.shape[-1]
            # A weight is a matrix; the activation carries the batch dimensions.
            return ((other.shape[-1], n) if slot == 1 else (m, other.shape[-2])), other.itemsize
    elif op == "BatchNormalization" and x is not None and len(x.shape) >= 2 and slot in (1, 2, 3, 4):
        return (x.shape[1],), x.itemsize
    elif op == "InstanceNormalization" and x is not None and len(x.shape) >= 2 and slot in (1, 2):
        return (x.shape[1],), x.itemsize
    elif op == "GroupNormalization" and x is not None and len(x.shape) >= 2 and slot in (1, 2):
        # Opset 18 has one scale per group; opset 21 one per channel.
        size = x.shape[1] if opset >= 21 else int(_attr(node, "num_groups", 1))
        return (size,), x.itemsize
    elif op in ("LayerNormalization", "RMSNormalization") and x is not None and slot in (1, 2):
        axis = int(_attr(node, "axis", -1))
        return tuple(x.shape[axis:]), x.itemsize
    elif op in _GATES and x is not None and len(x.shape) == 3:
        hidden = int(_attr(node, "hidden_size", 0))
        directions = 2 if _attr(node, "direction", b"forward") in (b"bidirectional", "bidirectional") else 1
        gates = _GATES[op] * hidden
        shapes = {1: (directions, gates, x.shape[2]), 2: (directions, gates, hidden),
                  3: (directions, 2 * gates), 7: (directions, 3 * hidden)}
        if hidden > 0 and slot in shapes:
            return shapes[slot], x.itemsize
    elif op == "PRelu" and x is not None and slot == 1 and len(x.shape) >= 2:
        return (x.shape[1], *([1] * (len(x.shape) - 2))), x.itemsize  # torch's per-channel slope
    return None


def derive_shapes(nodes: list[onnx.NodeProto], uses: Mapping[str, tuple[tuple[int, int], ...]], opset: int,
                  info: Callable[[str], TensorInfo | None]) -> dict[str, TensorInfo]:
    """The shape of each undeclared weight in ``uses`` (name -> (node index, input index) pairs).

    ``info`` gives the static shape of any other tensor (None if unknown). Raises ValueError
    naming the weights (the first ten, in the order of ``uses``) whose shape no reading op fixes,
    or whose readers disagree.
    """
    shapes: dict[str, TensorInfo] = {}
    unknown: list[str] = []
    for name, places in uses.items():
        found = {_shape_at(nodes[i], j, opset, info) for i, j in places} - {None}
        numels = {math.prod(shape) for shape, _ in found}
        if len(numels) == 1:
            shape, itemsize = min(found)
            shapes[name] = TensorInfo(shape, itemsize)
        else:
            readers = ", ".join(sorted({f"{nodes[i].op_type} {nodes[i].name or '(unnamed)'!r}"
                                        for i, _ in places}))
            unknown.append(f"{name!r} (read by {readers})" + (": the readers disagree" if numels else ""))
    if unknown:
        listed = "; ".join(unknown[:10]) + (f"; and {len(unknown) - 10} more" if len(unknown) > 10 else "")
        raise ValueError(
            f"the file reads {len(uses)} weight(s) it neither contains nor declares (what "
            "torch.onnx.export(dynamo=True, export_params=False) writes), and the size of "
            f"{len(unknown)} of them follows from no op that reads it: {listed}. To cost this model, "
            f"{HOW_TO_EXPORT}"
        )
    return shapes
