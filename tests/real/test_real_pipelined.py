"""Real runs of every task form: micro-batches, recomputation and low precision give the maths of a
plain torch training loop, and recomputation holds less memory."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

torch = pytest.importorskip("torch")

from placement_gym.graph.onnx_import import graph_from_onnx  # noqa: E402
from placement_gym.real.devices import virtual_cpu_cluster  # noqa: E402
from placement_gym.real.executor import Executor  # noqa: E402
from placement_gym.real.program import build_program, make_inputs, make_parameters  # noqa: E402
from placement_gym.task.compiled import make_task  # noqa: E402

CPU3 = {"cpu:0": "cpu", "cpu:1": "cpu", "cpu:2": "cpu"}
LR = 0.05


def _branchy_model() -> onnx.ModelProto:
    """x -> MatMul(w1) -> Relu -> {Tanh, Sigmoid -> MatMul(w3)} -> Add -> MatMul(w2) -> y, z = a w2
    (w2 shared by two ops), y2 = Tanh(r) * 2: two outputs, a shared weight, branches across devices."""
    nodes = [
        helper.make_node("MatMul", ["x", "w1"], ["h"], name="mm1"),
        helper.make_node("Relu", ["h"], ["r"], name="relu"),
        helper.make_node("Tanh", ["r"], ["a"], name="tanh"),
        helper.make_node("Sigmoid", ["r"], ["s0"], name="sigmoid"),
        helper.make_node("MatMul", ["s0", "w3"], ["s1"], name="mm3"),
        helper.make_node("Add", ["a", "s1"], ["s"], name="add"),
        helper.make_node("MatMul", ["s", "w2"], ["y"], name="mm2"),
        helper.make_node("MatMul", ["a", "w2"], ["z"], name="mm4"),
    ]
    rng = np.random.default_rng(1)
    inits = [numpy_helper.from_array(rng.standard_normal(shape).astype(np.float32), name)
             for name, shape in (("w1", (8, 16)), ("w3", (16, 16)), ("w2", (16, 4)))]
    graph = helper.make_graph(
        nodes, "branchy", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [6, 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [6, 4]),
         helper.make_tensor_value_info("z", TensorProto.FLOAT, [6, 4])], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 20)])


@pytest.fixture(scope="module")
def branchy():
    model = _branchy_model()
    return model, graph_from_onnx(model)


def _reference_sgd_step(model, graph, microbatches: int, dtype=None) -> dict:
    """One SGD step written out in plain torch: every micro-batch's forward (its own data), the loss the
    sum over micro-batches of the means of the outputs, one update of the summed gradients."""
    program = build_program(graph, model, None)
    weights = {k: v.clone().requires_grad_(True) for k, v in make_parameters(program, 0).items()}
    loss = 0.0
    for b in range(microbatches):
        x = make_inputs(program, 0, b)["x"]
        w = weights if dtype is None else {k: v.to(dtype) for k, v in weights.items()}
        x = x if dtype is None else x.to(dtype)
        r = torch.relu(x @ w["w1"])
        a = torch.tanh(r)
        s = a + torch.sigmoid(r) @ w["w3"]
        loss = loss + (s @ w["w2"]).float().mean() + (a @ w["w2"]).float().mean()
    grads = torch.autograd.grad(loss, list(weights.values()))
    return {k: (v - LR * g).detach() for (k, v), g in zip(weights.items(), grads, strict=True)}


PLACEMENTS = {"one device": [0] * 8, "three devices": [1, 0, 2, 1, 2, 0, 1, 2], "alternating": [0, 1] * 4}


@pytest.mark.parametrize("placement", list(PLACEMENTS))
@pytest.mark.parametrize("options", [{"microbatches": 3}, {"recompute": True},
                                     {"microbatches": 2, "recompute": True}],
                         ids=["microbatches", "recompute", "both"])
def test_pipelined_and_recomputed_steps_are_the_plain_training_step(branchy, placement, options):
    model, graph = branchy
    task = make_task(graph, virtual_cpu_cluster(3), "train_step", optimizer="sgd", **options)
    executor = Executor(task, CPU3, seed=0, model=model, lr=LR)
    result = executor.run(np.array(PLACEMENTS[placement]), warmup=0, repeats=1)
    assert result.feasible, result.error
    expected = _reference_sgd_step(model, graph, options.get("microbatches", 1))
    assert executor.parameters.keys() == expected.keys()
    for name, value in expected.items():
        torch.testing.assert_close(executor.parameters[name], value, rtol=1e-5, atol=1e-6)


def test_micro_batches_each_read_their_own_data(branchy):
    # Were the data the same for every micro-batch, the step would be the one-batch step with a
    # doubled gradient: the reference with two micro-batches tells them apart.
    model, graph = branchy
    program = build_program(graph, model, None)
    assert not torch.equal(make_inputs(program, 0, 0)["x"], make_inputs(program, 0, 1)["x"])
    start = make_parameters(program, 0)
    one = _reference_sgd_step(model, graph, 1)
    same_data_twice = {k: 2 * one[k] - start[k] for k in one}  # w - 2 lr g: one batch's gradient doubled
    two = _reference_sgd_step(model, graph, 2)
    assert any(not torch.allclose(two[k], same_data_twice[k], rtol=1e-4, atol=1e-5) for k in two)


def _chain_model(layers: int = 10, width: int = 256, batch: int = 64) -> onnx.ModelProto:
    nodes, inits, previous = [], [], "x"
    rng = np.random.default_rng(0)
    for i in range(layers):
        inits.append(numpy_helper.from_array(
            (rng.standard_normal((width, width)) / np.sqrt(width)).astype(np.float32), f"w{i}"))
        nodes.append(helper.make_node("MatMul", [previous, f"w{i}"], [f"h{i}"], name=f"mm{i}"))
        nodes.append(helper.make_node("Tanh", [f"h{i}"], [f"t{i}"], name=f"tanh{i}"))
        previous = f"t{i}"
    inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, [batch, width])]
    outputs = [helper.make_tensor_value_info(previous, TensorProto.FLOAT, [batch, width])]
    graph = helper.make_graph(nodes, "chain", inputs, outputs, inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 20)])


def test_recomputation_holds_fewer_activations_and_trains_the_same():
    model = _chain_model()
    graph = graph_from_onnx(model)
    placement = np.zeros(graph.n_ops, dtype=int)
    peaks, weights = {}, {}
    for recompute in (False, True):
        task = make_task(graph, virtual_cpu_cluster(1), "train_step", optimizer="adam", recompute=recompute)
        executor = Executor(task, {"cpu:0": "cpu"}, seed=0, model=model)
        result = executor.run(placement, warmup=1, repeats=1)
        assert result.feasible, result.error
        peaks[recompute] = result.peak_memory[0]
        weights[recompute] = executor.parameters
        static = task.static_memory(placement)[0]
        peaks[recompute] -= static  # what the step holds beyond weights, gradients and optimizer state
    activation = 64 * 256 * 4
    # Without recomputation the step holds all 20 activations at the end of the forward pass (and the
    # gradients its backward makes); with it about sqrt(20) checkpoints and one segment's activations.
    assert peaks[False] >= 20 * activation
    assert peaks[True] < peaks[False] / 2
    for name in weights[False]:
        torch.testing.assert_close(weights[True][name], weights[False][name], rtol=1e-5, atol=1e-7)


def test_low_precision_steps_keep_fp32_master_weights(branchy):
    model, graph = branchy
    for precision, dtype in (("bf16", torch.bfloat16), ("fp16", torch.float16)):
        task = make_task(graph, virtual_cpu_cluster(3), "train_step", optimizer="sgd", precision=precision)
        executor = Executor(task, CPU3, seed=0, model=model, lr=LR)
        result = executor.run(np.array(PLACEMENTS["three devices"]), warmup=0, repeats=1)
        assert result.feasible, result.error
        assert executor.outputs["y"].dtype == dtype
        expected = _reference_sgd_step(model, graph, 1, dtype=dtype)
        exact = _reference_sgd_step(model, graph, 1)
        for name, value in expected.items():
            assert executor.parameters[name].dtype == torch.float32
            torch.testing.assert_close(executor.parameters[name], value, rtol=1e-3, atol=1e-3)
        # the low-precision step is not the fp32 one: the comparison above can tell them apart
        assert any(not torch.allclose(expected[k], exact[k], rtol=1e-6, atol=1e-7) for k in exact)
        inference = make_task(graph, virtual_cpu_cluster(3), "inference", precision=precision)
        executor = Executor(inference, CPU3, seed=0, model=model)
        assert executor.run(np.zeros(8, dtype=int), warmup=0, repeats=1).feasible
        assert executor.parameters["w1"].dtype == dtype


@pytest.mark.parametrize("options", [{}, {"microbatches": 2}, {"recompute": True}],
                         ids=["plain", "microbatches", "recompute"])
def test_compiled_segments_train_as_the_ops_one_by_one(branchy, options):
    # "aot_eager" captures each unit as one graph and differentiates it (AOTAutograd) without
    # generating code: the capture and the block backward are what this checks, in seconds.
    model, graph = branchy
    task = make_task(graph, virtual_cpu_cluster(3), "train_step", optimizer="sgd", **options)
    expected = _reference_sgd_step(model, graph, options.get("microbatches", 1))
    for placement in PLACEMENTS.values():
        executor = Executor(task, CPU3, seed=0, model=model, lr=LR, compile="aot_eager")
        result = executor.run(np.array(placement), warmup=0, repeats=1)
        assert result.feasible, result.error
        for name, value in expected.items():
            torch.testing.assert_close(executor.parameters[name], value, rtol=1e-5, atol=1e-6)


def test_compile_modes_are_checked(branchy):
    model, graph = branchy
    task = make_task(graph, virtual_cpu_cluster(3), "inference")
    with pytest.raises(ValueError, match="compile must be None or one of inductor, reduce-overhead"):
        Executor(task, CPU3, model=model, compile="fast")
    executor = Executor(task, CPU3, model=model, compile="aot_eager")
    assert executor.run(np.array(PLACEMENTS["alternating"]), warmup=0, repeats=1).feasible
    reference = Executor(task, CPU3, model=model)
    reference.run(np.array(PLACEMENTS["alternating"]), warmup=0, repeats=1)
    for name, value in reference.outputs.items():
        torch.testing.assert_close(executor.outputs[name], value)
