"""The torch executor's op functions against onnxruntime, one tiny one-op ONNX model per case.

Each case builds a single-node model with onnx.helper, runs it in onnxruntime, and runs the same
inputs through `placement_gym.real.ops.OP_TABLE` (as the executor calls it: integer inputs as CPU
tensors, ``_opset`` and ``_n_outputs`` added). Attributes are covered case by case: axes (as an
attribute before the opset that made them an input, and as an input after), keepdims, broadcasting,
negative indices and axes, and every Pad and Resize mode the executor supports. A second table says
which attribute combinations are refused, with the op named, before anything runs.
"""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, ValueInfoProto, helper

torch = pytest.importorskip("torch")
ort = pytest.importorskip("onnxruntime")

from placement_gym.real import ops  # noqa: E402

_R = np.random.default_rng(0)


def _f(*shape: int) -> np.ndarray:
    return _R.standard_normal(shape).astype(np.float32)


def _i(*values) -> np.ndarray:
    """int64 indices: ``_i(1, 2)`` is a vector, ``_i([[0, 1]])`` the nested array as written."""
    nested = len(values) == 1 and isinstance(values[0], list)
    return np.array(values[0] if nested else values, dtype=np.int64)


_X = _f(2, 3, 6, 6)
_A = _f(2, 3, 4)
_MASK = np.array([[1, 1, 0, 1], [0, 1, 1, 1]], dtype=np.int64)


def _model(op_type: str, inputs: list, attrs: dict, n_outputs: int, opset: int):
    names = ["" if v is None else f"in{i}" for i, v in enumerate(inputs)]
    graph = helper.make_graph(
        [helper.make_node(op_type, names, [f"out{i}" for i in range(n_outputs)], name="the_node", **attrs)],
        "one_op",
        [helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(v.dtype), v.shape)
         for n, v in zip(names, inputs, strict=True) if n],
        [ValueInfoProto(name=f"out{i}") for i in range(n_outputs)],  # untyped: onnxruntime infers them
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    return model


def _case(op_type, inputs, attrs=None, n_outputs=1, opset=18, label=""):
    name = f"{op_type}-{label}" if label else op_type
    return pytest.param(op_type, inputs, attrs or {}, n_outputs, opset, id=name)


CASES = [
    # indexing and scattering (attention masks, position ids, KV caches)
    _case("GatherND", [_A, _i([[0, 1], [1, -1]])], label="pairs-negative"),
    _case("GatherND", [_A, _i([[[1]], [[0]]])], label="whole-rows"),
    _case("GatherND", [_A, _i([[1, 2], [0, 0]])], {"batch_dims": 1}, label="batch_dims"),
    _case("ScatterND", [_A, _i([[0, 1], [1, 2]]), _f(2, 4)], label="rows"),
    _case("ScatterND", [_A, _i([[1], [-2]]), _f(2, 3, 4)], {"reduction": "add"}, label="add-negative"),
    _case("ScatterND", [_A, _i([[0, 0, 0], [1, 2, 3]]), _f(2)], {"reduction": "mul"}, label="mul"),
    _case("ScatterND", [_A, _i([[0, 1]]), _f(1, 4)], {"reduction": "max"}, label="max"),
    _case("GatherElements", [_A, _i([[[0, 1, 2, -1]], [[3, 3, 0, 1]]])], {"axis": -1}, label="axis-last"),
    _case("GatherElements", [_A, _i([[[1, 0, 2, 1]]])], {"axis": 1}),
    _case("ScatterElements", [_A, _i([[[0, 1]], [[2, -1]]]), _f(2, 1, 2)], {"axis": 2}),
    _case("ScatterElements", [_A, _i([[[0, 0]]]), _f(1, 1, 2)], {"axis": 1, "reduction": "add"}, label="add"),
    _case("Gather", [_f(7, 3), _i([[0, -1], [3, 3]])], {"axis": 0}),
    _case("Gather", [_A, np.array(-1, dtype=np.int64)], {"axis": 1}, label="scalar-index"),
    # masks and comparisons
    _case("Where", [_MASK.astype(bool)[:, None, :], _f(2, 3, 4), np.array(-1e9, dtype=np.float32)]),
    _case("Equal", [_MASK, np.array(0, dtype=np.int64)]),
    _case("Not", [_MASK.astype(bool)]),
    _case("And", [_MASK.astype(bool), np.array([True, False, True, True])]),
    _case("Or", [_MASK.astype(bool), np.array([[True], [False]])]),
    _case("Less", [_A, _f(4)]),
    _case("Greater", [_A, _f(3, 1)]),
    _case("IsNaN", [np.array([1.0, np.nan, -np.inf], dtype=np.float32)]),
    _case("IsInf", [np.array([1.0, np.inf, -np.inf, np.nan], dtype=np.float32)], {"detect_negative": 0}),
    _case("Mod", [_i(7, -7, 7, -7), _i(3, 3, -3, -3)], label="int"),
    _case("Mod", [np.array([5.5, -5.5], dtype=np.float32), np.array([2.0, 2.0], dtype=np.float32)],
          {"fmod": 1}, label="fmod"),
    # shapes and ranges
    _case("Shape", [_X]),
    _case("Shape", [_X], {"start": 1, "end": -1}, label="start-end"),
    _case("Size", [_X]),
    _case("ConstantOfShape", [_i(2, 3)], {"value": helper.make_tensor("v", TensorProto.INT64, [1], [7])}),
    _case("ConstantOfShape", [_i(3)], label="default-zero"),
    _case("Range", [np.array(0, dtype=np.int64), np.array(9, dtype=np.int64), np.array(2, dtype=np.int64)]),
    _case("Range", [np.array(1.0, dtype=np.float32), np.array(-2.0, dtype=np.float32),
                    np.array(-0.5, dtype=np.float32)], label="float-negative"),
    _case("CumSum", [_A, np.array(1, dtype=np.int64)]),
    _case("CumSum", [_MASK, np.array(-1, dtype=np.int64)], {"exclusive": 1, "reverse": 1}, label="excl-rev"),
    _case("CumSum", [_A, np.array(2, dtype=np.int64)], {"exclusive": 1}, label="exclusive"),
    _case("Trilu", [_f(2, 4, 5)], label="upper"),
    _case("Trilu", [_f(2, 4, 5), np.array(-1, dtype=np.int64)], {"upper": 0}, label="lower-k"),
    _case("Expand", [_f(3, 1), _i(2, 1, 4)], label="broadcast-both"),
    _case("Expand", [_f(1, 4), _i(3, 1)], label="smaller-shape"),
    _case("Tile", [_f(2, 3), _i(2, 1)]),
    _case("Unsqueeze", [_A, _i(0, -1)], label="axes-input"),
    _case("Unsqueeze", [_A], {"axes": [1]}, opset=11, label="axes-attr"),
    _case("Squeeze", [_f(2, 1, 3, 1), _i(-1)], label="axes-input"),
    _case("Squeeze", [_f(2, 1, 3, 1)], label="all"),
    _case("Squeeze", [_f(2, 1, 3, 1)], {"axes": [1]}, opset=11, label="axes-attr"),
    _case("Slice", [_X, _i(5, 0), _i(-100, 6), _i(2, 3), _i(-2, 2)], label="steps"),
    _case("Slice", [_A, _i(1), _i(2**63 - 1), _i(-1)], label="int64-max"),
    _case("Slice", [_A, _i(-1), _i(-(2**63)), _i(2), _i(-1)], label="reverse-all"),
    _case("Split", [_X], {"axis": 1, "num_outputs": 3}, 3, label="num_outputs"),
    _case("Split", [_A, _i(1, 3)], {"axis": -1}, 2, label="sizes-input"),
    _case("Split", [_f(5, 2)], {"axis": 0, "num_outputs": 2}, 2, label="uneven"),
    _case("Split", [_f(4, 2)], {"axis": 0}, 2, opset=13, label="equal-opset13"),
    _case("Concat", [_A, _f(2, 1, 4)], {"axis": -2}),
    _case("Reshape", [_X, _i(2, 0, -1)]),
    _case("Flatten", [_X], {"axis": 2}),
    _case("Flatten", [_X], {"axis": 0}, label="axis0"),
    _case("Transpose", [_X], {"perm": [0, 2, 3, 1]}),
    _case("Transpose", [_A], label="reverse"),
    _case("Cast", [_A], {"to": TensorProto.INT64}, label="float-int"),
    _case("Cast", [_MASK], {"to": TensorProto.BOOL}, label="int-bool"),
    _case("Cast", [_MASK.astype(bool)], {"to": TensorProto.FLOAT}, label="bool-float"),
    _case("CastLike", [_MASK, _A], label="int-float"),
    # arithmetic and activations
    _case("Add", [_A, _f(4)]), _case("Sub", [_f(4), _A]), _case("Mul", [_A, np.array(2.0, dtype=np.float32)]),
    _case("Div", [_A, _f(3, 1)]), _case("Div", [_i(7, -7), _i(2, 2)], label="int-trunc"),
    _case("Pow", [np.abs(_A), np.array(2.0, dtype=np.float32)]),
    _case("Pow", [np.abs(_A), _f(4)], label="broadcast"),
    _case("Sqrt", [np.abs(_A)]), _case("Erf", [_A]), _case("Tanh", [_A]), _case("Exp", [_A]),
    _case("Reciprocal", [_A + 3]), _case("Neg", [_A]), _case("Abs", [_A]), _case("Log", [np.abs(_A) + 0.1]),
    _case("Round", [np.array([0.5, 1.5, -2.5, 2.6], dtype=np.float32)]),
    _case("Gelu", [_A], opset=20), _case("Gelu", [_A], {"approximate": "tanh"}, opset=20, label="tanh"),
    _case("Relu", [_A]), _case("Sigmoid", [_A]), _case("Softplus", [_A]), _case("Softsign", [_A]),
    _case("LeakyRelu", [_A], {"alpha": 0.2}), _case("Elu", [_A], {"alpha": 0.5}),
    _case("Selu", [_A]), _case("Celu", [_A], {"alpha": 0.7}), _case("Mish", [_A]),
    _case("ThresholdedRelu", [_A], {"alpha": 0.3}),
    _case("PRelu", [_X, _f(3, 1, 1)]),
    _case("HardSigmoid", [_A], {"alpha": 0.3, "beta": 0.4}),
    _case("HardSigmoid", [_A * 4], {"alpha": 1 / 6}, label="torch-hardsigmoid"),
    _case("HardSwish", [_A * 4]),
    _case("Clip", [_A, np.array(0.0, dtype=np.float32), np.array(6.0, dtype=np.float32)], label="relu6"),
    _case("Clip", [_A, None, np.array(0.5, dtype=np.float32)], label="max-only"),
    _case("Clip", [_A], {"min": -0.5, "max": 0.5}, opset=6, label="attrs"),
    _case("Clip", [_i(-3, 0, 9), np.array(0, dtype=np.int64), np.array(5, dtype=np.int64)], label="int"),
    _case("Min", [_A, _f(4), _f(3, 1)]), _case("Max", [_A, np.array(0.1, dtype=np.float32)]),
    _case("Sum", [_A, _A, _f(4)]), _case("Mean", [_A, _f(1)]),
    _case("Sin", [_A]), _case("Cos", [_A]), _case("Tan", [_A * 0.5]), _case("Atan", [_A]),
    _case("Asin", [np.tanh(_A)]), _case("Acos", [np.tanh(_A)]), _case("Sinh", [_A]), _case("Cosh", [_A]),
    _case("Sign", [_A]), _case("Floor", [_A]), _case("Ceil", [_A]),
    # products
    _case("MatMul", [_A, _f(4, 5)]), _case("MatMul", [_f(5, 2, 3), _f(3, 4)], label="batched"),
    _case("Gemm", [_f(3, 4), _f(5, 4), _f(5)], {"transB": 1, "alpha": 0.5, "beta": 2.0}, label="transB"),
    _case("Gemm", [_f(4, 3), _f(4, 5), _f(3, 5)], {"transA": 1}, label="transA"),
    _case("Gemm", [_f(4, 3), _f(5, 4)], {"transA": 1, "transB": 1}, label="both-no-bias"),
    _case("Einsum", [_f(2, 3, 4), _f(2, 4, 5)], {"equation": "bij,bjk->bik"}),
    _case("Einsum", [_f(2, 2, 3, 4), _f(2, 2, 5, 4)], {"equation": "bhqd,bhkd->bhqk"}, label="attention"),
    # normalisation and softmax
    _case("LayerNormalization", [_A, _f(4), _f(4)], {"axis": -1, "epsilon": 1e-12}),
    _case("LayerNormalization", [_A, _f(3, 4)], {"axis": 1}, label="two-axes-no-bias"),
    _case("Softmax", [_A], {"axis": 1}), _case("Softmax", [_A], label="default-axis"),
    _case("Softmax", [_A], {"axis": 1}, opset=11, label="opset11-coerced"),
    _case("LogSoftmax", [_A]),
    _case("BatchNormalization", [_X, *[_R.uniform(0.5, 1.5, 3).astype(np.float32) for _ in range(4)]],
          {"epsilon": 1e-3}),
    _case("InstanceNormalization", [_X, _f(3), _f(3)]),
    # reductions: axes as an input (ReduceMean from opset 18, ReduceSum from 13) and as an attribute
    _case("ReduceMean", [_X, _i(2, 3)], label="keepdims"),
    _case("ReduceMean", [_X, _i(-1)], {"keepdims": 0}, label="negative-no-keepdims"),
    _case("ReduceMean", [_X], {"axes": [1], "keepdims": 0}, opset=13, label="axes-attr"),
    _case("ReduceMean", [_X], label="all-axes"),
    _case("ReduceSum", [_A, _i(1)], {"keepdims": 0}, opset=13),
    _case("ReduceSum", [_A, np.zeros(0, dtype=np.int64)], {"noop_with_empty_axes": 1}, opset=13,
          label="noop"),
    _case("ReduceMax", [_A, _i(0, 2)]), _case("ReduceMin", [_A], {"axes": [-1]}, opset=13),
    _case("ReduceProd", [_A, _i(1)]), _case("ReduceL2", [_A, _i(2)], {"keepdims": 0}),
    _case("ReduceL1", [_A, _i(2)]), _case("ReduceSumSquare", [_A, _i(0)]),
    _case("ReduceLogSumExp", [_A, _i(-1)]), _case("ReduceLogSum", [np.abs(_A) + 0.1, _i(1)]),
    _case("ArgMax", [_A], {"axis": -1}),
    _case("ArgMin", [np.array([[1, 0, 0], [2, 2, 1]], dtype=np.float32)], {"axis": 1, "keepdims": 0,
                                                                            "select_last_index": 1}),
    _case("TopK", [_A, _i(2)], {"axis": 1}, 2),
    _case("TopK", [_A, _i(3)], {"largest": 0}, 2, label="smallest"),
    _case("OneHot", [_i(0, 2, -1), _i(3), np.array([0.0, 1.0], dtype=np.float32)]),
    _case("OneHot", [np.array([[1, 0]], dtype=np.int64), _i(2), np.array([-1, 5], dtype=np.int64)],
          {"axis": 0}, label="axis0"),
    # pooling, convolutions, padding and resizing (torchvision-style blocks)
    _case("GlobalAveragePool", [_X]), _case("GlobalMaxPool", [_X]),
    _case("AveragePool", [_X], {"kernel_shape": [3, 3], "pads": [1, 1, 1, 1], "count_include_pad": 0}),
    _case("AveragePool", [_X], {"kernel_shape": [2, 2], "strides": [2, 2]}, label="stride"),
    _case("AveragePool", [_f(2, 3, 7, 7)], {"kernel_shape": [3, 3], "strides": [2, 2], "ceil_mode": 1},
          label="ceil"),
    _case("MaxPool", [_X], {"kernel_shape": [3, 3], "pads": [1, 1, 1, 1], "strides": [2, 2]}),
    _case("MaxPool", [_f(2, 3, 7, 7)], {"kernel_shape": [3, 3], "strides": [2, 2], "ceil_mode": 1},
          label="ceil"),
    _case("MaxPool", [_X], {"kernel_shape": [2, 2], "pads": [0, 0, 1, 1], "strides": [2, 2]},
          label="asymmetric-pads"),
    _case("MaxPool", [_X], {"kernel_shape": [3, 3], "auto_pad": "SAME_UPPER"}, label="same-upper"),
    _case("Conv", [_X, _f(4, 3, 3, 3), _f(4)], {"pads": [1, 0, 1, 2], "strides": [2, 1]}),
    _case("Conv", [_X, _f(3, 1, 3, 3)], {"group": 3, "pads": [1, 1, 1, 1]}, label="depthwise"),
    _case("ConvTranspose", [_X, _f(3, 2, 3, 3)], {"strides": [2, 2], "pads": [1, 1, 1, 1],
                                                  "output_padding": [1, 1]}),
    _case("Pad", [_X, _i(0, 0, 1, 2, 0, 0, 2, 0)], label="constant"),
    _case("Pad", [_X, _i(0, 0, 1, 2, 0, 0, 2, 0), np.array(1.5, dtype=np.float32)], label="value"),
    _case("Pad", [_X, _i(0, 0, 2, 1, 0, 0, 1, 2)], {"mode": "reflect"}, label="reflect"),
    _case("Pad", [_X, _i(0, 0, 2, 1, 0, 0, 1, 2)], {"mode": "edge"}, label="edge"),
    _case("Pad", [_X, _i(0, 0, 2, 1, 0, 0, 1, 2)], {"mode": "wrap"}, opset=19, label="wrap"),
    _case("Pad", [_X, _i(1, 2, 0, 3), None, _i(-1, 2)], label="axes"),
    _case("Pad", [_A, _i(0, 0, -1, 0, 0, 1)], label="negative-crop"),
    _case("Resize", [_X, None, np.array([1, 1, 2, 2], dtype=np.float32)],
          {"mode": "nearest", "coordinate_transformation_mode": "asymmetric", "nearest_mode": "floor"},
          label="nearest-asymmetric"),
    _case("Resize", [_X, None, None, _i(2, 3, 9, 4)],
          {"mode": "nearest", "coordinate_transformation_mode": "half_pixel",
           "nearest_mode": "round_prefer_ceil"},
          label="nearest-half-pixel-sizes"),
    _case("Resize", [_X, None, np.array([1, 1, 1.5, 2], dtype=np.float32)],
          {"mode": "linear", "coordinate_transformation_mode": "half_pixel"}, label="linear-half-pixel"),
    _case("Resize", [_X, None, np.array([1, 1, 2, 0.5], dtype=np.float32)],
          {"mode": "linear", "coordinate_transformation_mode": "pytorch_half_pixel"}, label="linear-pytorch"),
    _case("Resize", [_X, None, None, _i(2, 3, 11, 5)],
          {"mode": "linear", "coordinate_transformation_mode": "align_corners"}, label="linear-align"),
    _case("Resize", [_X, None, np.array([2, 2], dtype=np.float32)],
          {"mode": "cubic", "coordinate_transformation_mode": "half_pixel", "axes": [2, 3]},
          label="cubic-axes"),
    _case("Resize", [_f(2, 3, 5), None, np.array([1, 1, 3], dtype=np.float32)],
          {"mode": "linear", "coordinate_transformation_mode": "align_corners"}, label="linear-1d"),
    _case("DepthToSpace", [_f(1, 8, 2, 3)], {"blocksize": 2}, label="DCR"),
    _case("DepthToSpace", [_f(1, 8, 2, 3)], {"blocksize": 2, "mode": "CRD"}, label="CRD"),
    _case("SpaceToDepth", [_f(1, 2, 4, 6)], {"blocksize": 2}),
    _case("Identity", [_A]), _case("Dropout", [_A]),
]


def _torch_input(value):
    return None if value is None else torch.from_numpy(np.array(value))


@pytest.mark.parametrize(("op_type", "inputs", "attrs", "n_outputs", "opset"), CASES)
def test_op_matches_onnxruntime(op_type, inputs, attrs, n_outputs, opset):
    model = _model(op_type, inputs, attrs, n_outputs, opset)
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    expected = session.run(None, {f"in{i}": v for i, v in enumerate(inputs) if v is not None})
    torch_attrs = {key: value for key, value in attrs.items()}
    if "value" in torch_attrs:
        torch_attrs["value"] = model.graph.node[0].attribute[0].t
    got = ops.OP_TABLE[op_type]([_torch_input(v) for v in inputs],
                                {**torch_attrs, "_opset": opset, "_n_outputs": n_outputs})
    got = got if isinstance(got, tuple) else (got,)
    assert len(got) >= n_outputs
    for g, e in zip(got[:n_outputs], expected, strict=True):
        g = g.detach().numpy()
        assert g.shape == e.shape, f"{op_type}: shape {g.shape}, onnxruntime {e.shape}"
        assert g.dtype == e.dtype, f"{op_type}: dtype {g.dtype}, onnxruntime {e.dtype}"
        np.testing.assert_allclose(g, e, rtol=1e-5, atol=1e-5)


_DIFFERENTIABLE = [
    ("GatherND", [_A, _i([[0, 1], [1, -1]])], {}),
    ("ScatterND", [_A, _i([[0, 1], [1, 2]]), _f(2, 4)], {}),
    ("GatherElements", [_A, _i([[[0, 1, 2, -1]], [[3, 3, 0, 1]]])], {"axis": -1}),
    ("CumSum", [_A, np.array(1, dtype=np.int64)], {"exclusive": 1}),
    ("Resize", [_X, None, np.array([1, 1, 2, 2], dtype=np.float32)], {"mode": "linear"}),
    ("HardSwish", [_A], {}),
]


@pytest.mark.parametrize(("op_type", "inputs", "attrs"), _DIFFERENTIABLE, ids=[c[0] for c in _DIFFERENTIABLE])
def test_new_float_ops_have_gradients(op_type, inputs, attrs):
    # A train step takes the gradient of every op on its own device: the float input must get one.
    args = [_torch_input(v) for v in inputs]
    args[0] = args[0].requires_grad_(True)
    out = ops.OP_TABLE[op_type](args, {**attrs, "_opset": 18, "_n_outputs": 1})
    (grad,) = torch.autograd.grad(out.sum(), [args[0]])
    assert grad.shape == args[0].shape and torch.isfinite(grad).all() and grad.abs().sum() > 0


REFUSED = [
    ("Resize", {"mode": "nearest", "coordinate_transformation_mode": "tf_crop_and_resize"}, "Resize nearest"),
    ("Resize", {"mode": "cubic", "cubic_coeff_a": -0.5}, "cubic_coeff_a"),
    ("Resize", {"mode": "linear", "antialias": 1}, "antialias"),
    ("Pad", {"mode": "mirror"}, "Pad mode 'mirror'"),
    ("BatchNormalization", {"training_mode": 1}, "training_mode"),
    ("MaxPool", {"kernel_shape": [2, 2], "_n_outputs": 2}, "Indices"),
    ("Cast", {"to": TensorProto.STRING}, "Cast to"),
    ("ConvTranspose", {"output_shape": [4, 4]}, "output_shape"),
    ("GridSample", {}, "no torch function"),
]


@pytest.mark.parametrize(("op_type", "attrs", "message"), REFUSED, ids=[f"{c[0]}-{c[2]}" for c in REFUSED])
def test_unsupported_attributes_are_named_before_running(op_type, attrs, message):
    reason = ops.unsupported_reason(op_type, {"_opset": 18, "_n_outputs": 1, **attrs})
    assert reason is not None and message in reason and "\n" not in reason


def test_supported_attributes_are_not_refused():
    for op_type, _inputs, attrs, n_outputs, opset in (c.values for c in CASES):
        reason = ops.unsupported_reason(op_type, {**attrs, "_opset": opset, "_n_outputs": n_outputs})
        assert reason is None, f"{op_type} {attrs}: {reason}"
