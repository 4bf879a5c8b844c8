"""Per-op cost formulas: FLOPs, bytes accessed and cost category of one ONNX node.

The importer gives each formula the static shapes and element sizes of the node's inputs and
outputs plus its attributes; a formula never needs tensor values. Conventions:

- A multiply-add counts as 2 FLOPs (the convention of the papers' FLOP counts and of
  ``torch.utils.flop_counter``).
- Element-wise arithmetic, comparisons and selects count 1 FLOP per output element. A
  transcendental function (exp, log, tanh, erf, sqrt, ...) counts `TRANSCENDENTAL_FLOPS`, the
  rough cost of the polynomial approximation a vectorised math library evaluates. The exact
  constants matter little: these ops are memory-bound, so the cost model's ``bytes / bandwidth``
  term dominates their time.
- bytes_accessed = bytes of all inputs (data, parameters, constants) + bytes of all outputs, with
  three documented exceptions: views, which move nothing (`VIEW_OPS`), gathers and slices, which
  read only the elements they copy (`SPARSE_READ_OPS`), and Shape/Size, which read only metadata.
- Category: one of `CATEGORIES` (a device's efficiency is given per category).

`op_cost` returns ``None`` for an op type with no formula; the importer then costs the op by its
bytes and warns once per import. An unknown default-domain op whose inputs have its output's shape
is costed as an element-wise op instead; the importer warns about those too. A window op (`WINDOW_OPS`:
convolutions and pooling) with a stride, dilation, kernel size or group below 1, or a pad below 0,
is refused: its output shape cannot come from such a window, so neither can its cost.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Any

import numpy as np

from placement_gym.graph.opgraph import CATEGORIES, OpGraph


@dataclass(frozen=True)
class TensorInfo:
    """Static shape and element size (bytes; 0.5 for 4-bit types) of one tensor."""

    shape: tuple[int, ...]
    itemsize: float

    # Cached: an import asks for each tensor's size several times (a frozen dataclass keeps no other
    # state, so the cache cannot go stale).
    @cached_property
    def numel(self) -> int:
        return math.prod(self.shape)

    @cached_property
    def nbytes(self) -> float:
        return self.numel * self.itemsize


@dataclass(frozen=True)
class OpCost:
    """Cost of one op: FLOPs, bytes read plus written, and its category (a name in `CATEGORIES`)."""

    flops: float
    bytes_accessed: float
    category: str


Inputs = Sequence[TensorInfo | None]  # None for an absent optional input
Outputs = Sequence[TensorInfo | None]  # None for an unused output whose shape is unknown
Attrs = Mapping[str, Any]
FlopsFunction = Callable[[Inputs, Outputs, Attrs], float]
BytesFunction = Callable[[Inputs, Outputs, Attrs], float]

# A transcendental function evaluated by a vectorised polynomial approximation: a handful of
# multiply-adds. 4 is a round, deliberately rough figure (see the module docstring).
TRANSCENDENTAL_FLOPS = 4

# Normalisation that computes its statistics (LayerNorm, GroupNorm, InstanceNorm, BatchNorm in
# training mode): mean (1 add), variance (subtract, square, add: 3), normalise (subtract,
# multiply by the inverse deviation: 2), scale and shift (2) = 8 per element. With precomputed
# statistics (BatchNorm at inference) only normalise + scale and shift remain: 4.
NORMALIZE_WITH_STATS_FLOPS = 8
NORMALIZE_PRECOMPUTED_FLOPS = 4
# Softmax: max, subtract, exp (counted as 1 here, the classic ~5/element estimate), sum, divide.
SOFTMAX_FLOPS = 5

# FLOPs per output element of unary element-wise ops (activations and math functions).
T = TRANSCENDENTAL_FLOPS
ACTIVATION_FLOPS: dict[str, float] = {
    "Relu": 1, "Neg": 1, "Abs": 1, "Sign": 1, "Ceil": 1, "Floor": 1, "Round": 1, "Not": 1,
    "Reciprocal": 1, "IsNaN": 1, "IsInf": 1, "BitwiseNot": 1,
    "LeakyRelu": 2, "Clip": 2, "ThresholdedRelu": 2, "Shrink": 2, "Softsign": 3,
    "HardSigmoid": 3,  # multiply, add, clip
    "HardSwish": 4,  # hard sigmoid, multiply
    "Exp": T, "Log": T, "Sqrt": T, "Erf": T, "Tanh": T, "Sin": T, "Cos": T, "Tan": T,
    "Asin": T, "Acos": T, "Atan": T, "Sinh": T, "Cosh": T, "Asinh": T, "Acosh": T, "Atanh": T,
    "Sigmoid": T + 2,  # exp, add, divide
    "Elu": T + 3,  # exp, subtract, multiply, select
    "Celu": T + 4,
    "Selu": T + 4,
    "Softplus": 2 * T + 1,  # exp, add, log
    "Gelu": T + 4,  # x * 0.5 * (1 + erf(x / sqrt(2))): erf + 4 arithmetic ops
    "FastGelu": T + 7,  # com.microsoft: tanh approximation
    "BiasGelu": T + 5,  # com.microsoft: bias add + Gelu
    "QuickGelu": T + 3,  # com.microsoft: x * sigmoid(1.702 x)
    "Mish": 3 * T + 2,  # x * tanh(softplus(x))
    "Swish": T + 3,  # x * sigmoid(x)
    "Pow": 2 * T,  # exp(y * log(x))
}
del T

# Element-wise ops with two or more inputs: 1 FLOP per output element per extra input.
ELEMENTWISE_NARY_OPS: frozenset[str] = frozenset({
    "Add", "Sub", "Mul", "Div", "Max", "Min", "Sum", "Mean", "Mod", "Where", "Equal", "Less",
    "Greater", "LessOrEqual", "GreaterOrEqual", "And", "Or", "Xor", "BitShift", "BitwiseAnd",
    "BitwiseOr", "BitwiseXor", "PRelu",
})

REDUCTION_OPS: frozenset[str] = frozenset({
    "ReduceMean", "ReduceSum", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL1", "ReduceL2",
    "ReduceLogSum", "ReduceLogSumExp", "ReduceSumSquare", "ArgMax", "ArgMin", "CumSum",
})

DATA_MOVEMENT_OPS: frozenset[str] = frozenset({
    "Reshape", "Transpose", "Concat", "Split", "Slice", "Gather", "GatherElements", "GatherND",
    "Squeeze", "Unsqueeze", "Flatten", "Expand", "Tile", "Pad", "Shape", "Size", "Identity",
    "Dropout", "Range", "ConstantOfShape", "ScatterND", "ScatterElements", "Scatter", "Resize",
    "Upsample", "DepthToSpace", "SpaceToDepth", "Trilu", "OneHot", "NonZero", "Compress",
    "ReverseSequence", "EyeLike", "CenterCropPad",
})

# Views: Reshape, Squeeze, Unsqueeze, Flatten and Identity return an alias of their input in
# PyTorch, TensorFlow and ONNX Runtime (no copy), so they move no memory. Their output still has
# its full size: the value must be transferred when a consumer sits on another device.
VIEW_OPS: frozenset[str] = frozenset({"Reshape", "Squeeze", "Unsqueeze", "Flatten", "Identity"})

# Gathers and slices read only the elements they copy, not their whole data input (an embedding
# lookup touches a few rows of a table of tens of megabytes): bytes = index inputs (all inputs
# after the first) + output read + output written.
SPARSE_READ_OPS: frozenset[str] = frozenset({"Gather", "GatherElements", "GatherND", "Slice"})

# Shape and Size read the input's metadata, never its data.
METADATA_OPS: frozenset[str] = frozenset({"Shape", "Size"})


def _numel(info: TensorInfo | None) -> int:
    return 0 if info is None else info.numel


def _nbytes(infos: Sequence[TensorInfo | None]) -> float:
    return float(sum(info.nbytes for info in infos if info is not None))


def _first_output(outputs: Outputs) -> TensorInfo:
    if not outputs or outputs[0] is None:
        raise ValueError("the op's first output has no static shape")
    return outputs[0]


def _present(inputs: Inputs, index: int) -> bool:
    return len(inputs) > index and inputs[index] is not None


def _attr_str(attrs: Attrs, key: str, default: str = "") -> str:
    value = attrs.get(key, default)
    return value.decode() if isinstance(value, bytes) else str(value)


# --- bytes ------------------------------------------------------------------------------------


def all_bytes(inputs: Inputs, outputs: Outputs, attrs: Attrs) -> float:
    """Default traffic: every input read once, every output written once."""
    return _nbytes(inputs) + _nbytes(outputs)


def _view_bytes(inputs: Inputs, outputs: Outputs, attrs: Attrs) -> float:
    return 0.0


def _sparse_read_bytes(inputs: Inputs, outputs: Outputs, attrs: Attrs) -> float:
    return _nbytes(inputs[1:]) + 2.0 * _nbytes(outputs)


def _metadata_bytes(inputs: Inputs, outputs: Outputs, attrs: Attrs) -> float:
    return _nbytes(outputs)


# --- FLOPs ------------------------------------------------------------------------------------


def _zero_flops(inputs: Inputs, outputs: Outputs, attrs: Attrs) -> float:
    return 0.0


def conv_flops(inputs: Inputs, outputs: Outputs, attrs: Attrs, weight_index: int = 1,
               bias_index: int = 2) -> float:
    """Conv: 2 * N * Cout * prod(out spatial) * (Cin / groups) * prod(kernel) (+ 1 per output with bias).

    The weight has shape (Cout, Cin / groups, *kernel), so the multiply-adds per output element
    are prod(weight.shape[1:]); strides and dilations are already reflected in the output shape.
    """
    y = _first_output(outputs)
    w = inputs[weight_index]
    assert w is not None
    flops = 2.0 * y.numel * math.prod(w.shape[1:])
    if _present(inputs, bias_index):
        flops += y.numel
    return flops


def conv_transpose_flops(inputs: Inputs, outputs: Outputs, attrs: Attrs) -> float:
    """ConvTranspose: every input element is multiplied into (Cout / groups) * prod(kernel) outputs.

    The weight has shape (Cin, Cout / groups, *kernel): 2 * numel(X) * prod(weight.shape[1:]),
    + 1 per output element with a bias.
    """
    x, w = inputs[0], inputs[1]
    assert x is not None and w is not None
    flops = 2.0 * x.numel * math.prod(w.shape[1:])
    if _present(inputs, 2):
        flops += _first_output(outputs).numel
    return flops


def gemm_flops(inputs: Inputs, outputs: Outputs, attrs: Attrs) -> float:
    """Gemm: 2 * M * N * K, + M * N for the bias C (alpha and beta scaling are not counted)."""
    a = inputs[0]
    assert a is not None
    y = _first_output(outputs)
    k = a.shape[0] if attrs.get("transA", 0) else a.shape[1]
    flops = 2.0 * y.numel * k
    if _present(inputs, 2):
        flops += y.numel
    return flops


def matmul_flops(inputs: Inputs, outputs: Outputs, attrs: Attrs) -> float:
    """MatMul (numpy semantics, batched and broadcast): 2 * numel(output) * K, K = A.shape[-1]."""
    a = inputs[0]
    assert a is not None
    return 2.0 * _first_output(outputs).numel * a.shape[-1]


def _einsum_index_sizes(equation: str, inputs: Inputs) -> list[int]:
    """Sizes of the distinct indices of an einsum equation (ellipsis dims included, broadcast)."""
    lhs = equation.replace(" ", "").split("->")[0]
    terms = lhs.split(",")
    if len(terms) != len(inputs):
        raise ValueError(f"Einsum equation {equation!r} has {len(terms)} operands, node has {len(inputs)}")
    sizes: dict[str, int] = {}
    ellipsis: list[int] = []  # right-aligned broadcast sizes of the "..." dims
    for term, info in zip(terms, inputs, strict=True):
        assert info is not None
        letters = term.replace("...", "")
        n_ellipsis = len(info.shape) - len(letters) if "..." in term else 0
        head, _, tail = term.partition("...")
        shape = info.shape
        labelled = list(zip(head, shape[: len(head)], strict=False))
        labelled += list(zip(tail, shape[len(head) + n_ellipsis:], strict=False))
        for letter, size in labelled:
            sizes[letter] = max(sizes.get(letter, 1), size)
        dims = shape[len(head): len(head) + n_ellipsis]
        if len(dims) > len(ellipsis):
            ellipsis = [1] * (len(dims) - len(ellipsis)) + ellipsis
        for i, size in enumerate(dims):
            j = len(ellipsis) - len(dims) + i
            ellipsis[j] = max(ellipsis[j], size)
    return list(sizes.values()) + ellipsis


def einsum_flops(inputs: Inputs, outputs: Outputs, attrs: Attrs) -> float:
    """Einsum: one pass over the product of the sizes of all distinct indices.

    Each point of that iteration space costs (operands - 1) multiplies and 1 add: n_operands
    FLOPs (2 for the usual two-operand contraction, matching 2 * M * N * K for a matmul).
    """
    space = math.prod(_einsum_index_sizes(_attr_str(attrs, "equation"), inputs))
    return float(len(inputs) * space)


def _pool_flops(inputs: Inputs, outputs: Outputs, attrs: Attrs) -> float:
    """MaxPool / AveragePool / LpPool: prod(kernel_shape) operations per output element."""
    return float(_first_output(outputs).numel * math.prod(attrs.get("kernel_shape", ())))


def _global_pool_flops(inputs: Inputs, outputs: Outputs, attrs: Attrs) -> float:
    """GlobalAveragePool / GlobalMaxPool: one operation per input element."""
    return float(_numel(inputs[0]))


def _per_input_element(flops_per_element: float) -> FlopsFunction:
    def flops(inputs: Inputs, outputs: Outputs, attrs: Attrs) -> float:
        return float(flops_per_element * _numel(inputs[0]))

    return flops


def _per_output_element(flops_per_element: float) -> FlopsFunction:
    def flops(inputs: Inputs, outputs: Outputs, attrs: Attrs) -> float:
        return float(flops_per_element * _first_output(outputs).numel)

    return flops


def _nary_flops(inputs: Inputs, outputs: Outputs, attrs: Attrs) -> float:
    """1 FLOP per output element per combining step (n - 1 steps for n inputs, at least 1)."""
    n_inputs = sum(1 for info in inputs if info is not None)
    return float(max(1, n_inputs - 1) * _first_output(outputs).numel)


def _batch_norm_flops(inputs: Inputs, outputs: Outputs, attrs: Attrs) -> float:
    per_element = NORMALIZE_WITH_STATS_FLOPS if attrs.get("training_mode", 0) else NORMALIZE_PRECOMPUTED_FLOPS
    return float(per_element * _numel(inputs[0]))


def _topk_flops(inputs: Inputs, outputs: Outputs, attrs: Attrs) -> float:
    """TopK by a heap of size k: about log2(k) comparisons per input element."""
    x, y = inputs[0], _first_output(outputs)
    assert x is not None
    k = y.shape[attrs.get("axis", -1)] if y.shape else 1
    return float(x.numel * max(1.0, math.log2(max(k, 1))))


# Element-wise work per hidden unit and time step besides the gate matmuls (gate activations
# at TRANSCENDENTAL_FLOPS each plus the state update):
#   LSTM: 4 gate activations + c = f*c + i*g (3) + h = o * tanh(c) (1 + tanh) = 5 * T + 4
#   GRU: 3 gate activations + reset gating (1) + h = (1 - z) * n + z * h (4) = 3 * T + 5
#   RNN: 1 activation.
_RNN_GATES = {"LSTM": 4, "GRU": 3, "RNN": 1}
_RNN_STATE_FLOPS = {
    "LSTM": 5 * TRANSCENDENTAL_FLOPS + 4,
    "GRU": 3 * TRANSCENDENTAL_FLOPS + 5,
    "RNN": TRANSCENDENTAL_FLOPS,
}


def _recurrent_flops(op_type: str) -> FlopsFunction:
    """LSTM / GRU / RNN: per time step and direction, the gate matmuls 2 * batch * G*H * (I + H),
    the biases (2 * batch * G*H) and the element-wise state update; times seq_len * directions."""

    def flops(inputs: Inputs, outputs: Outputs, attrs: Attrs) -> float:
        x, w, r = inputs[0], inputs[1], inputs[2]
        assert x is not None and w is not None and r is not None
        seq_len, batch = (x.shape[1], x.shape[0]) if attrs.get("layout", 0) else (x.shape[0], x.shape[1])
        directions, hidden = w.shape[0], r.shape[2]
        gate_width = _RNN_GATES[op_type] * hidden
        per_step = 2.0 * batch * gate_width * (x.shape[2] + hidden)
        if _present(inputs, 3):
            per_step += 2.0 * batch * gate_width
        per_step += batch * hidden * _RNN_STATE_FLOPS[op_type]
        return seq_len * directions * per_step

    return flops


def _attention_flops(inputs: Inputs, outputs: Outputs, attrs: Attrs) -> float:
    """ONNX Attention (opset 23): Q K^T (2 * scores * D), softmax (5 * scores), scores V
    (2 * numel(Y) * S_kv), where scores = batch * heads * S_q * S_kv; + 1 per score for a mask."""
    q, k = inputs[0], inputs[1]
    assert q is not None and k is not None
    y = _first_output(outputs)
    if len(q.shape) == 4:  # (batch, heads, S_q, D)
        head_dim, kv_len = q.shape[-1], k.shape[-2]
    else:  # (batch, S_q, heads * D)
        head_dim, kv_len = q.shape[-1] // max(1, int(attrs.get("q_num_heads", 1))), k.shape[1]
    scores = q.numel // max(1, head_dim) * kv_len
    flops = 2.0 * scores * head_dim + SOFTMAX_FLOPS * scores + 2.0 * y.numel * kv_len
    if _present(inputs, 3):
        flops += scores
    return flops


@dataclass(frozen=True)
class CostRule:
    """How to cost one op type: its category, a FLOPs formula and a bytes formula."""

    category: str
    flops: FlopsFunction
    bytes: BytesFunction = all_bytes


def _build_rules() -> dict[str, CostRule]:
    norm_stats = NORMALIZE_WITH_STATS_FLOPS
    rules: dict[str, CostRule] = {
        "Conv": CostRule("conv", conv_flops),
        "ConvInteger": CostRule("conv", conv_flops),
        "QLinearConv": CostRule("conv", lambda i, o, a: conv_flops(i, o, a, weight_index=3, bias_index=8)),
        "ConvTranspose": CostRule("conv", conv_transpose_flops),
        "Gemm": CostRule("matmul", gemm_flops),
        "MatMul": CostRule("matmul", matmul_flops),
        "MatMulInteger": CostRule("matmul", matmul_flops),
        "QLinearMatMul": CostRule("matmul", matmul_flops),
        "Einsum": CostRule("matmul", einsum_flops),
        "Attention": CostRule("matmul", _attention_flops),
        "MaxPool": CostRule("reduction", _pool_flops),
        "AveragePool": CostRule("reduction", _pool_flops),
        "LpPool": CostRule("reduction", _pool_flops),
        "GlobalAveragePool": CostRule("reduction", _global_pool_flops),
        "GlobalMaxPool": CostRule("reduction", _global_pool_flops),
        "GlobalLpPool": CostRule("reduction", _global_pool_flops),
        "BatchNormalization": CostRule("normalization", _batch_norm_flops),
        "LayerNormalization": CostRule("normalization", _per_input_element(norm_stats)),
        "GroupNormalization": CostRule("normalization", _per_input_element(norm_stats)),
        "InstanceNormalization": CostRule("normalization", _per_input_element(norm_stats)),
        "MeanVarianceNormalization": CostRule("normalization", _per_input_element(norm_stats)),
        "SkipLayerNormalization": CostRule("normalization", _per_input_element(norm_stats + 1)),  # + skip add
        # RMSNorm: square and add (2), inverse root per row (negligible), multiply, scale (2).
        "RMSNormalization": CostRule("normalization", _per_input_element(4)),
        "SimplifiedLayerNormalization": CostRule("normalization", _per_input_element(4)),
        "LpNormalization": CostRule("normalization", _per_input_element(3)),
        "Softmax": CostRule("normalization", _per_input_element(SOFTMAX_FLOPS)),
        "LogSoftmax": CostRule("normalization", _per_input_element(SOFTMAX_FLOPS)),
        "Hardmax": CostRule("normalization", _per_input_element(2)),
        "TopK": CostRule("reduction", _topk_flops),
        "Cast": CostRule("elementwise", _zero_flops),  # a conversion, no arithmetic
        "CastLike": CostRule("elementwise", _zero_flops),
    }
    for op_type, per_element in ACTIVATION_FLOPS.items():
        rules[op_type] = CostRule("elementwise", _per_output_element(per_element))
    for op_type in ELEMENTWISE_NARY_OPS:
        rules[op_type] = CostRule("elementwise", _nary_flops)
    rules["PRelu"] = CostRule("elementwise", _per_output_element(2))  # multiply + select
    for op_type in REDUCTION_OPS:
        rules[op_type] = CostRule("reduction", _per_input_element(1))
    for op_type in DATA_MOVEMENT_OPS:
        if op_type in VIEW_OPS:
            rules[op_type] = CostRule("data_movement", _zero_flops, _view_bytes)
        elif op_type in SPARSE_READ_OPS:
            rules[op_type] = CostRule("data_movement", _zero_flops, _sparse_read_bytes)
        elif op_type in METADATA_OPS:
            rules[op_type] = CostRule("data_movement", _zero_flops, _metadata_bytes)
        else:
            rules[op_type] = CostRule("data_movement", _zero_flops)
    for op_type in ("LSTM", "GRU", "RNN"):
        rules[op_type] = CostRule("matmul", _recurrent_flops(op_type))
    for rule in rules.values():
        assert rule.category in CATEGORIES, rule.category
    return rules


COST_RULES: dict[str, CostRule] = _build_rules()

DEFAULT_DOMAINS = frozenset({"", "ai.onnx"})

WINDOW_OPS: frozenset[str] = frozenset({
    "Conv", "ConvInteger", "QLinearConv", "ConvTranspose", "MaxPool", "AveragePool", "LpPool",
})
# The least value of each entry of a window op's attributes.
_WINDOW_MINIMA: dict[str, int] = {
    "strides": 1, "dilations": 1, "kernel_shape": 1, "group": 1, "pads": 0, "output_padding": 0,
}


def check_window_attributes(op_type: str, attrs: Attrs) -> None:
    """For a `WINDOW_OPS` op type, a ValueError naming the first attribute with an entry that is no
    integer or below its least value (strides, dilations, kernel_shape, group >= 1; pads,
    output_padding >= 0)."""
    if op_type not in WINDOW_OPS:
        return
    for key, least in _WINDOW_MINIMA.items():
        if key not in attrs:
            continue
        value = attrs[key]
        entries = value if isinstance(value, (list, tuple)) else [value]
        if not all(isinstance(v, int) and not isinstance(v, bool) and v >= least for v in entries):
            raise ValueError(f"attribute {key} must hold integers >= {least}, got {value!r}")


def _broadcasts_to(shape: tuple[int, ...], target: tuple[int, ...]) -> bool:
    if len(shape) > len(target):
        return False
    return all(s in (1, t) for s, t in zip(reversed(shape), reversed(target), strict=False))


def _is_elementwise_shaped(inputs: Inputs, outputs: Outputs) -> bool:
    """One output, and every input has its shape (or broadcasts to it)."""
    if len(outputs) != 1 or outputs[0] is None:
        return False
    present = [info for info in inputs if info is not None]
    return bool(present) and all(_broadcasts_to(info.shape, outputs[0].shape) for info in present)


def op_cost(op_type: str, inputs: Inputs, outputs: Outputs, attrs: Attrs | None = None,
            domain: str = "") -> OpCost | None:
    """Cost of one node, or ``None`` when no formula applies to its op type.

    A known op type is costed by its rule whatever its domain (com.microsoft's Gelu is a Gelu).
    An unknown op type of the default ONNX domain whose inputs all have (or broadcast to) the
    shape of its single output is costed as a 1-FLOP-per-element element-wise op. A window op with
    impossible attributes raises a ValueError (`check_window_attributes`).
    """
    attrs = attrs or {}
    check_window_attributes(op_type, attrs)
    rule = COST_RULES.get(op_type)
    if rule is not None:
        return OpCost(rule.flops(inputs, outputs, attrs), rule.bytes(inputs, outputs, attrs), rule.category)
    if domain in DEFAULT_DOMAINS and _is_elementwise_shaped(inputs, outputs):
        return OpCost(float(_first_output(outputs).numel), all_bytes(inputs, outputs, attrs), "elementwise")
    return None


def batch_norm_in_training(graph: OpGraph) -> tuple[np.ndarray, np.ndarray]:
    """Forward FLOPs and bytes of ``graph`` with every BatchNormalization costed as a training step
    runs it: batch statistics computed (8 FLOPs per element instead of the 4 of normalising with
    running statistics) in one more pass over the input (its bytes read once more). Exported CNNs
    carry the inference form; a node already in training form (8 FLOPs per element) is kept."""
    flops = graph.flops.copy()
    moved = graph.bytes_accessed.copy()
    data_bytes = np.zeros(graph.n_ops)  # the first non-parameter input of each op
    for tensor, op in zip(graph.edge_tensor[::-1], graph.edge_dst[::-1], strict=True):
        if not graph.tensor_is_parameter[tensor]:
            data_bytes[op] = graph.tensor_bytes[tensor]
    for op, op_type in enumerate(graph.op_types):
        if op_type == "BatchNormalization" and data_bytes[op] > 0:
            elements = data_bytes[op] / 4.0
            if flops[op] < NORMALIZE_WITH_STATS_FLOPS * elements:
                flops[op] = NORMALIZE_WITH_STATS_FLOPS * elements
                moved[op] += data_bytes[op]
    return flops, moved
