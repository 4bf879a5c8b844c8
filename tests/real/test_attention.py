"""Fused attention: the ops of an exported attention found, run as one scaled_dot_product_attention
call with the same outputs and training step as op by op, and left alone where they cannot be fused."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

torch = pytest.importorskip("torch")

from placement_gym.graph.onnx_import import graph_from_onnx  # noqa: E402
from placement_gym.real import attention as attention_module  # noqa: E402
from placement_gym.real.attention import find_attention  # noqa: E402
from placement_gym.real.devices import virtual_cpu_cluster  # noqa: E402
from placement_gym.real.executor import Executor  # noqa: E402
from placement_gym.real.program import build_program  # noqa: E402
from placement_gym.task.compiled import make_task  # noqa: E402

CPU2 = {"cpu:0": "cpu", "cpu:1": "cpu"}
B, H, S, D = 2, 3, 5, 4


def _attention_model(expose_scores: bool = False) -> onnx.ModelProto:
    """q, k, v projections of x; S = q k^T / 2; S + bias; causal Where(upper, -inf, S); softmax; P v."""
    rng = np.random.default_rng(3)
    inits = [numpy_helper.from_array(rng.standard_normal((D, D)).astype(np.float32) / 2, name)
             for name in ("wq", "wk", "wv")]
    constants = {"two": np.array(2.0, dtype=np.float32), "neg": np.array(-np.inf, dtype=np.float32),
                 "upper": np.triu(np.ones((S, S), dtype=bool), 1)}
    nodes = [helper.make_node("Constant", [], [name], name=f"const_{name}",
                              value=numpy_helper.from_array(value, name))
             for name, value in constants.items()]
    nodes += [
        helper.make_node("MatMul", ["x", "wq"], ["q"], name="q"),
        helper.make_node("MatMul", ["x", "wk"], ["k"], name="k"),
        helper.make_node("MatMul", ["x", "wv"], ["v"], name="v"),
        helper.make_node("Transpose", ["k"], ["kt"], name="kt", perm=[0, 1, 3, 2]),
        helper.make_node("MatMul", ["q", "kt"], ["scores"], name="scores"),
        helper.make_node("Div", ["scores", "two"], ["scaled"], name="scale"),
        helper.make_node("Add", ["scaled", "bias"], ["biased"], name="bias"),
        helper.make_node("Where", ["upper", "neg", "biased"], ["masked"], name="causal"),
        helper.make_node("Softmax", ["masked"], ["p"], name="softmax", axis=-1),
        helper.make_node("MatMul", ["p", "v"], ["out"], name="weighted"),
    ]
    outputs = [helper.make_tensor_value_info("out", TensorProto.FLOAT, [B, H, S, D])]
    if expose_scores:
        outputs.append(helper.make_tensor_value_info("scaled", TensorProto.FLOAT, [B, H, S, S]))
    graph = helper.make_graph(
        nodes, "attention",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [B, H, S, D]),
         helper.make_tensor_value_info("bias", TensorProto.FLOAT, [B, H, S, S])], outputs, inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def test_the_chain_is_found_with_its_scale_and_masks():
    model = _attention_model()
    program = build_program(graph_from_onnx(model), model, None)
    [chain] = find_attention(program)
    names = [program.graph.op_names[k] for k in chain.ops]
    assert names == ["scores", "scale", "bias", "causal", "softmax", "weighted"]
    assert chain.scale == 0.5 and [kind for kind, _ in chain.masks] == ["add", "drop"]
    exposed = _attention_model(expose_scores=True)
    assert find_attention(build_program(graph_from_onnx(exposed), exposed, None)) == []


def _run(model, objective, placement, fuse):
    graph = graph_from_onnx(model)
    task = make_task(graph, virtual_cpu_cluster(2), objective, optimizer="sgd")
    executor = Executor(task, CPU2, seed=1, model=model, lr=0.1, fuse_attention=fuse)
    result = executor.run(np.array(placement), warmup=0, repeats=1)
    assert result.feasible, result.error
    return executor


@pytest.mark.parametrize("objective", ["inference", "train_step"])
def test_fused_attention_gives_the_op_by_op_results(objective, monkeypatch):
    model = _attention_model()
    calls = []
    fused_sdpa = torch.nn.functional.scaled_dot_product_attention

    def counting(*args, **kwargs):
        calls.append(1)
        return fused_sdpa(*args, **kwargs)

    monkeypatch.setattr(torch.nn.functional, "scaled_dot_product_attention", counting)
    one_device = [0] * 10
    fused = _run(model, objective, one_device, True)
    assert len(calls) == 1
    plain = _run(model, objective, one_device, False)
    assert len(calls) == 1
    split = _run(model, objective, [0, 0, 0, 0, 0, 1, 1, 1, 1, 1], True)  # the chain across two devices
    assert len(calls) == 1  # not fused: its ops are not in one unit
    for other in (plain, split):
        torch.testing.assert_close(fused.outputs["out"], other.outputs["out"], rtol=1e-5, atol=1e-6)
        for name, value in other.parameters.items():
            torch.testing.assert_close(fused.parameters[name], value, rtol=1e-5, atol=1e-6)
    assert torch.isfinite(fused.outputs["out"]).all()
    assert attention_module.MASK_FILL_LIMIT < 0
