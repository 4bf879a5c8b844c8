"""The real-hardware executor: same numbers as a plain forward, training updates, timing, failures."""

from __future__ import annotations

import math

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

torch = pytest.importorskip("torch")

from placement_gym.graph.bundled import bundled_graph_names, load_graph  # noqa: E402
from placement_gym.graph.onnx_import import graph_from_onnx  # noqa: E402
from placement_gym.real import ops  # noqa: E402
from placement_gym.real.devices import get_real_cluster, virtual_cpu_cluster  # noqa: E402
from placement_gym.real.executor import Executor, RealResult  # noqa: E402
from placement_gym.real.program import (  # noqa: E402
    build_program,
    make_inputs,
    make_parameters,
    run_reference_forward,
)
from placement_gym.task.compiled import make_task  # noqa: E402

CPU2 = {"cpu:0": "cpu", "cpu:1": "cpu"}


def _diamond_model() -> onnx.ModelProto:
    """x -> MatMul(W1) -> Relu -> {Tanh, Sigmoid} -> Add -> MatMul(W2) -> y, plus a shared weight."""
    nodes = [
        helper.make_node("MatMul", ["x", "w1"], ["h"], name="mm1"),
        helper.make_node("Relu", ["h"], ["r"], name="relu"),
        helper.make_node("Tanh", ["r"], ["a"], name="tanh"),
        helper.make_node("Sigmoid", ["r"], ["b"], name="sigmoid"),
        helper.make_node("Add", ["a", "b"], ["s"], name="add"),
        helper.make_node("MatMul", ["s", "w2"], ["y"], name="mm2"),
        helper.make_node("MatMul", ["a", "w2"], ["z"], name="mm3"),  # w2 shared: owner mm2
    ]
    rng = np.random.default_rng(0)
    inits = [numpy_helper.from_array(rng.standard_normal((8, 16)).astype(np.float32), "w1"),
             numpy_helper.from_array(rng.standard_normal((16, 4)).astype(np.float32), "w2")]
    graph = helper.make_graph(
        nodes, "diamond", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [6, 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [6, 4]),
         helper.make_tensor_value_info("z", TensorProto.FLOAT, [6, 4])], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 20)])


@pytest.fixture(scope="module")
def diamond():
    model = _diamond_model()
    return model, graph_from_onnx(model)


def _close(a: dict, b: dict) -> bool:
    return a.keys() == b.keys() and all(torch.allclose(a[k], b[k], rtol=1e-5, atol=1e-6) for k in a)


@pytest.mark.parametrize("n_devices", [1, 2])
def test_outputs_equal_a_plain_forward(diamond, n_devices):
    model, graph = diamond
    task = make_task(graph, virtual_cpu_cluster(n_devices), "inference")
    executor = Executor(task, {f"cpu:{i}": "cpu" for i in range(n_devices)}, seed=3, model=model)
    reference = run_reference_forward(task, seed=3, model=model)
    rng = np.random.default_rng(1)
    for _ in range(3):
        placement = rng.integers(0, n_devices, graph.n_ops)
        result = executor.run(placement, warmup=0, repeats=1)
        assert result.feasible, result.error
        assert _close(executor.outputs, reference)


def test_plain_forward_is_the_math_of_the_graph(diamond):
    # The reference forward itself, against numpy with the same weights.
    model, graph = diamond
    task = make_task(graph, virtual_cpu_cluster(1), "inference")
    executor = Executor(task, {"cpu:0": "cpu"}, seed=5, model=model)
    executor.run(np.zeros(graph.n_ops, dtype=int), warmup=0, repeats=1)
    w1 = executor.parameters["w1"].detach().numpy()
    w2 = executor.parameters["w2"].detach().numpy()

    x = make_inputs(build_program(graph, model, None), 5)["x"].numpy()
    r = np.maximum(x @ w1, 0)
    a, b = np.tanh(r), 1 / (1 + np.exp(-r))
    np.testing.assert_allclose(executor.outputs["y"].numpy(), (a + b) @ w2, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(executor.outputs["z"].numpy(), a @ w2, rtol=1e-4, atol=1e-5)


def test_weights_do_not_depend_on_the_placement(diamond):
    model, graph = diamond
    task = make_task(graph, virtual_cpu_cluster(2), "inference")
    executor = Executor(task, CPU2, seed=7, model=model)
    executor.run(np.zeros(graph.n_ops, dtype=int), warmup=0, repeats=1)
    first = {k: v.detach().clone() for k, v in executor.parameters.items()}
    executor.run(np.ones(graph.n_ops, dtype=int), warmup=0, repeats=1)
    assert _close(first, {k: v.detach() for k, v in executor.parameters.items()})
    other = Executor(task, CPU2, seed=8, model=model)
    other.run(np.ones(graph.n_ops, dtype=int), warmup=0, repeats=1)
    assert not torch.allclose(first["w1"], other.parameters["w1"].detach())


def test_train_step_matches_autograd_sgd_on_two_devices(diamond):
    model, graph = diamond
    task = make_task(graph, virtual_cpu_cluster(2), "train_step", optimizer="sgd")
    lr = 0.1
    executor = Executor(task, CPU2, seed=2, model=model, lr=lr)
    placement = np.array([0, 1, 0, 1, 1, 0, 1])
    result = executor.run(placement, warmup=0, repeats=1)
    assert result.feasible, result.error
    assert math.isfinite(result.loss)
    # Oracle: one whole-graph autograd step of loss = mean(y) + mean(z) from the same start.

    program = build_program(graph, model, None)
    w = {k: v.clone().requires_grad_(True) for k, v in make_parameters(program, 2).items()}
    x = make_inputs(program, 2)["x"]
    a = torch.tanh(torch.relu(x @ w["w1"]))
    b = torch.sigmoid(torch.relu(x @ w["w1"]))
    loss = ((a + b) @ w["w2"]).mean() + (a @ w["w2"]).mean()
    loss.backward()
    assert result.loss == pytest.approx(float(loss.detach()), rel=1e-5)
    for name in ("w1", "w2"):
        expected = w[name].detach() - lr * w[name].grad
        assert not torch.allclose(expected, w[name].detach())  # the step changes the weights
        assert torch.allclose(executor.parameters[name].detach(), expected, rtol=1e-5, atol=1e-6)


def _reference_training(model, graph, optimizer, seed, lr, steps):
    """Oracle: ``steps`` whole-graph autograd steps of loss = mean(y) + mean(z) on one device, from the
    executor's starting weights, updated by torch.optim's own Adam / SGD(momentum) / SGD."""
    from placement_gym.real.optimizers import ADAM_BETAS, ADAM_EPS, MOMENTUM

    program = build_program(graph, model, None)
    w = {k: v.clone().requires_grad_(True) for k, v in make_parameters(program, seed).items()}
    x = make_inputs(program, seed)["x"]
    params = [w["w1"], w["w2"]]
    torch_optimizer = {
        "adam": lambda: torch.optim.Adam(params, lr=lr, betas=ADAM_BETAS, eps=ADAM_EPS, foreach=False),
        "momentum": lambda: torch.optim.SGD(params, lr=lr, momentum=MOMENTUM, foreach=False),
        "sgd": lambda: torch.optim.SGD(params, lr=lr, foreach=False),
    }[optimizer]()
    for _ in range(steps):
        torch_optimizer.zero_grad()
        a = torch.tanh(torch.relu(x @ w["w1"]))
        b = torch.sigmoid(torch.relu(x @ w["w1"]))
        loss = ((a + b) @ w["w2"]).mean() + (a @ w["w2"]).mean()
        loss.backward()
        torch_optimizer.step()
    return w, torch_optimizer, float(loss.detach())


@pytest.mark.parametrize("optimizer", ["adam", "momentum", "sgd"])
def test_train_steps_run_the_task_s_optimizer_like_torch_optim(diamond, optimizer):
    # Three steps across two devices (warm-up included: the state carries over), against torch.optim.
    model, graph = diamond
    task = make_task(graph, virtual_cpu_cluster(2), "train_step", optimizer=optimizer)
    lr, steps = 0.05, 3
    executor = Executor(task, CPU2, seed=4, model=model, lr=lr)
    # w1 (mm1) on cpu:0, w2 (mm2) on cpu:1; mm3 on cpu:0 reads w2 and sends its gradient back across.
    placement = np.array([0, 1, 0, 1, 1, 1, 0])
    result = executor.run(placement, warmup=1, repeats=steps - 1)
    assert result.feasible, result.error
    w, reference, last_loss = _reference_training(model, graph, optimizer, seed=4, lr=lr, steps=steps)
    assert result.loss == pytest.approx(last_loss, rel=1e-5)
    for name in ("w1", "w2"):
        assert torch.allclose(executor.parameters[name].detach(), w[name].detach(), rtol=1e-5, atol=1e-6)
        state = executor.optimizer_state[name]
        expected = reference.state[w[name]]
        if optimizer == "adam":
            assert set(state) == {"exp_avg", "exp_avg_sq"}
            assert torch.allclose(state["exp_avg"], expected["exp_avg"], rtol=1e-5, atol=1e-7)
            assert torch.allclose(state["exp_avg_sq"], expected["exp_avg_sq"], rtol=1e-5, atol=1e-9)
        elif optimizer == "momentum":
            assert torch.allclose(state["velocity"], expected["momentum_buffer"], rtol=1e-5, atol=1e-7)
        else:
            assert state == {}
        for value in state.values():
            assert value.device == executor.parameters[name].device and value.shape == w[name].shape


def test_the_optimizers_differ_so_the_comparison_can_tell_them_apart(diamond):
    model, graph = diamond
    finals = {opt: _reference_training(model, graph, opt, seed=4, lr=0.05, steps=3)[0]["w1"].detach()
              for opt in ("adam", "momentum", "sgd")}
    assert not torch.allclose(finals["adam"], finals["sgd"], rtol=1e-5, atol=1e-6)
    assert not torch.allclose(finals["momentum"], finals["sgd"], rtol=1e-5, atol=1e-6)


def test_optimizer_state_is_held_on_the_parameter_s_device(diamond):
    # On the device that holds every parameter, Adam holds 2 and momentum 1 more copies of the
    # parameters than SGD, the other device none: exactly the optimizer-state difference of the cost
    # model's static memory. (One device at a time: a split step's CPU peak also depends on when the
    # other device's thread frees what it read, which varies from run to run.)
    model, graph = diamond
    params = 8 * 16 + 16 * 4
    for d in (0, 1):
        placement = np.full(graph.n_ops, d)
        held = {}
        for optimizer in ("adam", "momentum", "sgd"):
            task = make_task(graph, virtual_cpu_cluster(2), "train_step", optimizer=optimizer)
            result = Executor(task, CPU2, seed=0, model=model).run(placement, warmup=0, repeats=1)
            assert result.feasible, result.error
            held[optimizer] = result.peak_memory
        expected = np.zeros(2)
        expected[d] = 2 * 4 * params
        np.testing.assert_array_equal(held["adam"] - held["sgd"], expected)
        np.testing.assert_array_equal(held["momentum"] - held["sgd"], expected / 2)
        sgd_task = make_task(graph, virtual_cpu_cluster(2), "train_step", optimizer="sgd")
        adam_task = make_task(graph, virtual_cpu_cluster(2), "train_step", optimizer="adam")
        np.testing.assert_array_equal(held["adam"] - held["sgd"],
                                      adam_task.static_memory(placement) - sgd_task.static_memory(placement))


def test_optimizer_maths_is_the_documented_formula():
    # One parameter element by hand: g = 2, lr = 0.1, two steps.
    from placement_gym.real.optimizers import STATE_TENSORS, apply_update, check_optimizer, new_state
    from placement_gym.task.compiled import OPTIMIZERS

    assert {k: len(v) for k, v in STATE_TENSORS.items()} == {k: v[0] for k, v in OPTIMIZERS.items()}
    results = {}
    for optimizer in ("adam", "momentum", "sgd"):
        weight = torch.tensor([1.0], dtype=torch.float64)
        state = new_state(optimizer, weight)
        for step in (1, 2):
            apply_update(optimizer, weight, torch.tensor([2.0], dtype=torch.float64), state, step, 0.1)
        results[optimizer] = float(weight)
    assert results["sgd"] == pytest.approx(1.0 - 0.1 * 2 - 0.1 * 2)
    assert results["momentum"] == pytest.approx(1.0 - 0.1 * 2 - 0.1 * (0.9 * 2 + 2))
    # Adam with a constant gradient: m_hat = g, v_hat = g^2, so each step moves by lr * g / (|g| + eps).
    assert results["adam"] == pytest.approx(1.0 - 2 * 0.1 * 2 / (2 + 1e-8))
    with pytest.raises(ValueError, match="unknown optimizer 'adamw'; allowed: adam, momentum, sgd"):
        check_optimizer("adamw")


def test_timing_gives_positive_runtimes_and_a_spread(diamond):
    model, graph = diamond
    task = make_task(graph, virtual_cpu_cluster(2), "inference")
    result = Executor(task, CPU2, model=model).run(np.zeros(graph.n_ops, dtype=int), warmup=1, repeats=3)
    assert isinstance(result, RealResult)
    assert len(result.runtimes) == 3 and all(r > 0 for r in result.runtimes)
    assert result.runtime == sorted(result.runtimes)[1]
    assert result.spread == pytest.approx((max(result.runtimes) - min(result.runtimes)) / result.runtime)
    sim = result.to_simulation_result()
    assert sim.runtime == result.runtime and sim.feasible
    # Inference holds x, w1, w2 and the activations on cpu:0: at least the weights' bytes.
    assert result.peak_memory[0] >= (8 * 16 + 16 * 4) * 4 and result.peak_memory[1] == 0


def test_missing_cuda_device_is_an_infeasible_result(diamond):
    model, graph = diamond
    task = make_task(graph, virtual_cpu_cluster(2), "inference")
    executor = Executor(task, {"cpu:0": "cpu", "cpu:1": "cuda:7"}, model=model)
    placement = np.zeros(graph.n_ops, dtype=int)
    assert executor.run(placement, warmup=0, repeats=1).feasible  # cuda:7 unused: fine
    placement[2] = 1
    result = executor.run(placement, warmup=0, repeats=1)
    assert not result.feasible and "cuda:7" in result.error and math.isinf(result.runtime)


def test_failing_op_is_infeasible_and_the_executor_recovers(diamond, monkeypatch):
    model, graph = diamond
    task = make_task(graph, virtual_cpu_cluster(2), "train_step")
    executor = Executor(task, CPU2, model=model)
    placement = np.array([0, 1, 0, 1, 1, 0, 1])

    def broken(inputs, attrs):
        raise RuntimeError("simulated device failure")

    with monkeypatch.context() as patch:
        patch.setitem(ops.OP_TABLE, "Sigmoid", broken)
        result = executor.run(placement, warmup=0, repeats=1)
    assert not result.feasible
    assert "sigmoid" in result.error and "cpu:1" in result.error
    assert "simulated device failure" in result.error
    again = executor.run(placement, warmup=0, repeats=1)
    assert again.feasible and math.isfinite(again.loss)


def test_bad_device_maps_and_arguments_are_clear_errors(diamond):
    model, graph = diamond
    task = make_task(graph, virtual_cpu_cluster(2), "inference")
    with pytest.raises(ValueError, match="missing"):
        Executor(task, {"cpu:0": "cpu"}, model=model)
    with pytest.raises(ValueError, match="unknown names"):
        Executor(task, {**CPU2, "gpu:0": "cuda:0"}, model=model)
    with pytest.raises(ValueError, match="not a torch device"):
        Executor(task, {"cpu:0": "cpu", "cpu:1": "tpu-ish:x"}, model=model)
    with pytest.raises(ValueError, match="one CPU device"):
        Executor(task, {"cpu:0": "cpu", "cpu:1": "cpu:1"}, model=model)
    with pytest.raises(ValueError, match="model="):
        Executor(task, CPU2)  # an in-memory graph: the executor needs its ONNX model
    executor = Executor(task, CPU2, model=model)
    with pytest.raises(ValueError, match="repeats"):
        executor.run(np.zeros(graph.n_ops, dtype=int), repeats=0)
    with pytest.raises(ValueError, match="out of range"):
        executor.run(np.full(graph.n_ops, 2))


def test_default_devices_need_cuda_for_gpus():
    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA")
    from placement_gym.cluster.presets import k80x2

    task = make_task(load_graph("cifar10_cnn"), k80x2(), "inference")
    with pytest.raises(ValueError, match="CUDA device"):
        Executor(task)


def test_every_bundled_op_type_has_a_torch_function():
    missing = {}
    for name in bundled_graph_names():
        types = set(load_graph(name).op_types) - set(ops.OP_TABLE)
        if types:
            missing[name] = sorted(types)
    assert not missing, f"op types without a torch function: {missing}"


def _single_op_model(op_type, inputs, attrs, n_outputs=1, constants=()):
    names = [f"in{i}" for i in range(len(inputs))]
    outputs = [f"out{i}" for i in range(n_outputs)]
    inits = [numpy_helper.from_array(np.asarray(v), names[i]) for i, v in constants]
    const_idx = {i for i, _ in constants}
    graph = helper.make_graph(
        [helper.make_node(op_type, names, outputs, **attrs)], "one",
        [helper.make_tensor_value_info(names[i], helper.np_dtype_to_tensor_dtype(v.dtype), v.shape)
         for i, v in enumerate(inputs) if i not in const_idx],
        [helper.make_tensor_value_info(o, TensorProto.UNDEFINED, None) for o in outputs], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 20)])


_R = np.random.default_rng(0)
_X4 = _R.standard_normal((2, 3, 6, 6)).astype(np.float32)
_CASES = [
    ("Conv", [_X4, _R.standard_normal((4, 3, 3, 3)).astype(np.float32)],
     {"pads": [1, 0, 1, 2], "strides": [2, 1]}, 1),
    ("Conv", [_X4, _R.standard_normal((3, 1, 3, 3)).astype(np.float32)],
     {"group": 3, "auto_pad": "SAME_UPPER"}, 1),
    ("MaxPool", [_X4], {"kernel_shape": [3, 3], "pads": [1, 1, 1, 1], "strides": [2, 2]}, 1),
    ("AveragePool", [_X4], {"kernel_shape": [3, 3], "pads": [1, 1, 1, 1], "count_include_pad": 0}, 1),
    ("AveragePool", [_R.standard_normal((2, 1, 5, 4, 4)).astype(np.float32)],
     {"kernel_shape": [3, 1, 1], "count_include_pad": 1}, 1),
    ("BatchNormalization", [_X4, *[_R.uniform(0.5, 1.5, 3).astype(np.float32) for _ in range(4)]], {}, 1),
    ("LayerNormalization",
     [_X4, _R.standard_normal(6).astype(np.float32), _R.standard_normal(6).astype(np.float32)],
     {"axis": -1}, 1),
    ("Gemm", [_R.standard_normal((3, 4)).astype(np.float32), _R.standard_normal((5, 4)).astype(np.float32),
              _R.standard_normal(5).astype(np.float32)], {"transB": 1, "alpha": 0.5, "beta": 2.0}, 1),
    ("Softmax", [_X4], {"axis": 1}, 1),
    ("LogSoftmax", [_X4], {}, 1),
    ("Gelu", [_X4], {}, 1),
    ("Pow", [np.abs(_X4), np.array(0.75, dtype=np.float32)], {}, 1),
    ("Split", [_X4], {"axis": 1, "num_outputs": 3}, 3),
    ("Transpose", [_X4], {"perm": [0, 2, 3, 1]}, 1),
    ("Concat", [_X4, _X4], {"axis": 2}, 1),
    ("ReduceMean", [_X4, np.array([2, 3])], {"keepdims": 1}, 1),
    ("Slice", [_X4, np.array([5, 0]), np.array([-100, 6]), np.array([2, 3]), np.array([-2, 2])], {}, 1),
    ("Pad", [_X4, np.array([0, 0, 1, 2, 0, 0, 2, 0])], {}, 1),
    ("Squeeze", [_X4[:, :1], np.array([1])], {}, 1),
    ("Unsqueeze", [_X4, np.array([0, -1])], {}, 1),
    ("Reshape", [_X4, np.array([2, 0, -1])], {}, 1),
    ("Gather", [_R.standard_normal((7, 3)).astype(np.float32), np.array([[0, -1], [3, 3]])], {"axis": 0}, 1),
]


@pytest.mark.parametrize("case", _CASES, ids=[f"{c[0]}-{i}" for i, c in enumerate(_CASES)])
def test_op_functions_match_the_onnx_reference_runtime(case):
    from onnx.reference import ReferenceEvaluator

    op_type, inputs, attrs, n_outputs = case
    model = _single_op_model(op_type, inputs, attrs, n_outputs)
    expected = ReferenceEvaluator(model).run(None, {f"in{i}": v for i, v in enumerate(inputs)})
    got = ops.OP_TABLE[op_type]([torch.from_numpy(np.array(v)) for v in inputs],
                                {**attrs, "_opset": 20, "_n_outputs": n_outputs})
    got = got if isinstance(got, tuple) else (got,)
    assert len(got) == n_outputs
    for g, e in zip(got, expected, strict=True):
        np.testing.assert_allclose(g.numpy(), e, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("name", ["cifar10_cnn", "cifar10_resnet56"])
def test_small_bundled_graphs_run_on_two_virtual_devices(name):
    graph = load_graph(name)
    task = make_task(graph, virtual_cpu_cluster(2), "inference")
    executor = Executor(task, CPU2, seed=1, batch=2)
    placement = np.random.default_rng(0).integers(0, 2, graph.n_ops)
    result = executor.run(placement, warmup=0, repeats=1)
    assert result.feasible, result.error
    reference = run_reference_forward(task, seed=1, batch=2)
    assert _close(executor.outputs, reference)
    assert all(v.shape[0] == 2 for v in reference.values())


def test_bundled_cnn_train_step_updates_every_parameter():
    graph = load_graph("cifar10_cnn")
    task = make_task(graph, virtual_cpu_cluster(2), "train_step", optimizer="sgd")
    executor = Executor(task, CPU2, seed=1, batch=2, lr=0.1)

    start = make_parameters(executor.program, 1)
    result = executor.run(np.arange(graph.n_ops) % 2, warmup=0, repeats=1)
    assert result.feasible, result.error and math.isfinite(result.loss)
    changed = [name for name, w in start.items() if not torch.equal(w, executor.parameters[name].detach())]
    assert sorted(changed) == sorted(start)


def test_batch_must_be_smaller():
    task = make_task(load_graph("cifar10_cnn"), virtual_cpu_cluster(2), "inference")
    with pytest.raises(ValueError, match="larger than the graph's batch"):
        Executor(task, CPU2, batch=1000)


def test_real_cluster_names():
    cluster = get_real_cluster("cpu3")
    assert cluster.device_names == ("cpu:0", "cpu:1", "cpu:2") and cluster.name == "cpu3"
    assert set(cluster.device_kinds) == {"cpu"}
    with pytest.raises(ValueError, match="cpu<N>"):
        get_real_cluster("cpu0")
    with pytest.raises(ValueError, match="n_devices"):
        virtual_cpu_cluster(0)


def test_importing_the_package_does_not_import_torch():
    import subprocess
    import sys

    code = ("import sys, placement_gym, placement_gym.real, placement_gym.real.devices; "
            "print('torch' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_virtual_cpus_are_two_or_more_cpu_devices():
    # the real mode's intra_op_threads: tests/common/test_threads.py
    from placement_gym.real.devices import virtual_cpus

    assert virtual_cpus(["cpu", "cpu"]) and virtual_cpus([torch.device("cpu")] * 3)
    assert not virtual_cpus(["cpu"]) and not virtual_cpus(["cpu", "cuda:0"])
