"""Cost formulas against hand-computed small cases."""

from __future__ import annotations

import pytest

from placement_gym.graph.op_costs import COST_RULES, TensorInfo, op_cost
from placement_gym.graph.opgraph import CATEGORIES


def f32(*shape: int) -> TensorInfo:
    return TensorInfo(tuple(shape), 4)


def i64(*shape: int) -> TensorInfo:
    return TensorInfo(tuple(shape), 8)


def test_conv_with_groups_and_stride():
    # X (1, 4, 8, 8), W (6, 4/2, 3, 3), groups 2, stride 2, pad 1 -> Y (1, 6, 4, 4).
    # Each output element: (Cin/groups) * kh * kw = 2 * 9 = 18 multiply-adds = 36 FLOPs;
    # 96 outputs -> 3456 FLOPs, + 96 bias adds.
    x, w, b, y = f32(1, 4, 8, 8), f32(6, 2, 3, 3), f32(6), f32(1, 6, 4, 4)
    attrs = {"group": 2, "strides": [2, 2], "pads": [1, 1, 1, 1], "kernel_shape": [3, 3]}
    cost = op_cost("Conv", [x, w, b], [y], attrs)
    assert cost.flops == 3456 + 96
    assert cost.category == "conv"
    assert op_cost("Conv", [x, w, None], [y], attrs).flops == 3456


def test_conv_transpose():
    # X (1, 2, 3, 3), W (2, 4, 2, 2), stride 2 -> Y (1, 4, 6, 6): each of the 18 inputs is
    # multiplied into 4 * 2 * 2 = 16 outputs -> 18 * 16 * 2 = 576 FLOPs.
    inputs = [f32(1, 2, 3, 3), f32(2, 4, 2, 2)]
    cost = op_cost("ConvTranspose", inputs, [f32(1, 4, 6, 6)], {"strides": [2, 2]})
    assert cost.flops == 576
    assert cost.category == "conv"


def test_gemm():
    # (3 x 5) @ (5 x 7) + bias: 3 * 7 outputs, 5 multiply-adds each -> 210 FLOPs + 21 bias adds.
    assert op_cost("Gemm", [f32(3, 5), f32(5, 7), f32(7)], [f32(3, 7)]).flops == 210 + 21
    # transA: A is stored (K, M) = (5, 3).
    cost = op_cost("Gemm", [f32(5, 3), f32(7, 5)], [f32(3, 7)], {"transA": 1, "transB": 1})
    assert cost.flops == 210
    assert cost.category == "matmul"


def test_batched_matmul_with_broadcast():
    # A (2, 1, 3, 4) @ B (5, 4, 6) -> Y (2, 5, 3, 6): 10 matmuls of 3x4 @ 4x6 = 10 * 2*3*6*4 = 1440.
    assert op_cost("MatMul", [f32(2, 1, 3, 4), f32(5, 4, 6)], [f32(2, 5, 3, 6)]).flops == 1440
    # Vector @ matrix: (4,) @ (4, 6) -> (6,): 6 * 4 multiply-adds.
    assert op_cost("MatMul", [f32(4), f32(4, 6)], [f32(6)]).flops == 48


def test_einsum():
    # Batched matmul spelt as einsum: b=2, i=3, j=4, k=5 -> 2 * 2*3*4*5 = 240.
    attrs = {"equation": b"bij,bjk->bik"}
    cost = op_cost("Einsum", [f32(2, 3, 4), f32(2, 4, 5)], [f32(2, 3, 5)], attrs)
    assert cost.flops == 240
    assert cost.category == "matmul"
    # Same contraction with an ellipsis for the batch dimension.
    attrs = {"equation": "...ij,jk->...ik"}
    assert op_cost("Einsum", [f32(2, 3, 4), f32(4, 5)], [f32(2, 3, 5)], attrs).flops == 240
    # One operand (a sum over j): 1 add per point of the 3 x 4 space.
    assert op_cost("Einsum", [f32(3, 4)], [f32(3)], {"equation": "ij->i"}).flops == 12


def test_pooling():
    # MaxPool 3x3 stride 2 on (1, 2, 9, 9) -> (1, 2, 4, 4): 32 outputs * 9 comparisons.
    attrs = {"kernel_shape": [3, 3], "strides": [2, 2]}
    cost = op_cost("MaxPool", [f32(1, 2, 9, 9)], [f32(1, 2, 4, 4)], attrs)
    assert cost.flops == 288
    assert cost.category == "reduction"
    # Global pooling reads every input element once.
    assert op_cost("GlobalAveragePool", [f32(2, 3, 5, 5)], [f32(2, 3, 1, 1)]).flops == 150


def test_elementwise_and_bytes():
    # Add (2, 3) + (3,) -> (2, 3): 6 FLOPs; bytes 24 + 12 read + 24 written = 60.
    cost = op_cost("Add", [f32(2, 3), f32(3)], [f32(2, 3)])
    assert (cost.flops, cost.bytes_accessed, cost.category) == (6, 60, "elementwise")
    assert op_cost("Relu", [f32(10)], [f32(10)]).flops == 10
    # Sum of three inputs: two adds per output element.
    assert op_cost("Sum", [f32(4), f32(4), f32(4)], [f32(4)]).flops == 8


def test_view_and_gather_bytes():
    # Reshape is a view: no memory traffic, whatever the sizes.
    cost = op_cost("Reshape", [f32(4, 6), i64(2)], [f32(6, 4)])
    assert (cost.flops, cost.bytes_accessed, cost.category) == (0, 0, "data_movement")
    # Transpose copies: reads 96 bytes, writes 96.
    assert op_cost("Transpose", [f32(4, 6)], [f32(6, 4)]).bytes_accessed == 192
    # Embedding lookup: a (1000, 8) table, 5 int64 ids -> (5, 8) output: reads the ids (40) and
    # the 5 rows it copies (160), writes 160; not the whole 32 kB table.
    assert op_cost("Gather", [f32(1000, 8), i64(5)], [f32(5, 8)]).bytes_accessed == 40 + 160 + 160


def test_normalization_and_softmax():
    assert op_cost("LayerNormalization", [f32(2, 8), f32(8), f32(8)], [f32(2, 8)]).category == "normalization"
    assert op_cost("Softmax", [f32(3, 4)], [f32(3, 4)]).flops == 5 * 12
    bn_inputs = [f32(2, 3, 4, 4), f32(3), f32(3), f32(3), f32(3)]
    inference = op_cost("BatchNormalization", bn_inputs, [f32(2, 3, 4, 4)]).flops
    training = op_cost("BatchNormalization", bn_inputs, [f32(2, 3, 4, 4)], {"training_mode": 1}).flops
    assert 0 < inference < training


def test_lstm_gate_matmuls_scale_with_sequence_length():
    # seq 5, batch 2, input 10, hidden 16, one direction, no bias: the gate matmuls alone are
    # 5 steps * 2 * 2 * 64 * (10 + 16) = 33280 FLOPs; the element-wise state update adds more.
    def lstm(seq: int) -> float:
        inputs = [f32(seq, 2, 10), f32(1, 64, 10), f32(1, 64, 16)]
        return op_cost("LSTM", inputs, [f32(seq, 1, 2, 16)], {"hidden_size": 16}).flops

    assert lstm(5) > 33280
    assert lstm(10) == pytest.approx(2 * lstm(5))
    per_step_elementwise = lstm(1) - 2 * 2 * 64 * 26
    assert 0 < per_step_elementwise < 2 * 2 * 64 * 26


def test_unknown_ops():
    # A custom-domain op has no formula.
    assert op_cost("MyFancyOp", [f32(3)], [f32(3)], {}, domain="com.example") is None
    # An unknown default-domain op with element-wise shapes is costed as element-wise.
    cost = op_cost("SomeFutureUnaryOp", [f32(3, 4), f32(4)], [f32(3, 4)])
    assert (cost.flops, cost.category) == (12, "elementwise")
    assert op_cost("SomeFutureShapeOp", [f32(3, 4)], [f32(12, 2)]) is None


def test_every_rule_has_a_known_category():
    assert {rule.category for rule in COST_RULES.values()} <= set(CATEGORIES)
