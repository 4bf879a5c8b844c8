"""Your own ONNX model in real mode: real exports of Hugging Face and torchvision-style models
(tests/fixtures/onnx_real, made by make_fixtures.py there) run on two virtual CPU devices under a
placement that splits them, match onnxruntime, and go through every env id; an op the executor
cannot run is one line naming it, from Python and from the command line (exit code 2)."""

from __future__ import annotations

import math
import warnings
from pathlib import Path

import gymnasium as gym
import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper
from paths import TESTS

torch = pytest.importorskip("torch")
ort = pytest.importorskip("onnxruntime")

import placement_gym  # noqa: E402,F401 - registers the env ids
from placement_gym.cli import main  # noqa: E402
from placement_gym.evaluation.evaluator import make_evaluator  # noqa: E402
from placement_gym.real.executor import Executor  # noqa: E402
from placement_gym.real.program import (  # noqa: E402
    UnsupportedOpError,
    build_program,
    load_model,
    make_inputs,
    make_parameters,
    run_reference_forward,
)
from placement_gym.task.named import get_task  # noqa: E402

FIXTURES = TESTS / "fixtures" / "onnx_real"
WITH_WEIGHTS = ["bert_legacy", "bert_dynamo", "gpt2_legacy", "gpt2_dynamo", "mobilenet_block", "resnet_block"]
ALL = [*WITH_WEIGHTS, "resnet_block_weight_free"]
ENV_IDS = ["DevicePlacement-v0", "DevicePlacementStaged-v0", "DevicePlacementRefine-v0"]
# The default exporter folds BatchNorm into the Convs of resnet_block, and the importer says so.
pytestmark = pytest.mark.filterwarnings("ignore:graph 'resnet_block'")


def _file(name: str) -> str:
    return str(FIXTURES / f"{name}.onnx")


def _split(n_ops: int) -> np.ndarray:
    """The first half of the topological order on cpu:0, the rest on cpu:1: tensors cross devices
    in the middle (and back, for the residuals and masks the second half reads)."""
    return (np.arange(n_ops) >= n_ops // 2).astype(np.int64)


def test_fixtures_are_small_and_regenerated_by_the_script():
    script = (FIXTURES / "make_fixtures.py").read_text()
    for name in ALL:
        assert (FIXTURES / f"{name}.onnx").stat().st_size < 300_000, name
        model = onnx.load(_file(name), load_external_data=False)
        external = [t.name for t in model.graph.initializer if t.data_location == TensorProto.EXTERNAL]
        assert not external, f"{name}.onnx reads weights from a side file: {external[:3]}"
        assert f'"{name}.onnx"' in script, f"{name}.onnx is not made by make_fixtures.py"


@pytest.mark.parametrize("name", ALL)
def test_inference_and_train_step_on_two_virtual_cpus(name):
    path = _file(name)
    inference = get_task(path, "cpu2", "inference")
    placement = _split(inference.n_forward)
    executor = Executor(inference, model=path, seed=1)  # cpu2: every device is the CPU
    result = executor.run(placement, warmup=0, repeats=1)
    assert result.feasible, result.error
    assert math.isfinite(result.runtime) and result.runtime > 0
    reference = run_reference_forward(inference, seed=1, model=path)
    assert executor.outputs.keys() == reference.keys() and reference
    for key, value in reference.items():
        assert torch.isfinite(value).all(), key
        torch.testing.assert_close(executor.outputs[key], value, rtol=1e-5, atol=1e-5)

    train = get_task(path, "cpu2", "train_step")
    trainer = Executor(train, model=path, seed=1)
    before = make_parameters(trainer.program, 1)
    result = trainer.run(placement, warmup=0, repeats=1)
    assert result.feasible, result.error
    assert math.isfinite(result.runtime) and math.isfinite(result.loss)
    assert np.all(result.peak_memory > 0)
    moved = [n for n, w in trainer.parameters.items() if not torch.equal(w.detach(), before[n])]
    assert moved, "the train step updated no parameter"


def _onnxruntime_outputs(path: str, weights: dict, data: dict) -> dict[str, np.ndarray]:
    """The model's outputs in onnxruntime with the executor's weights in place of the file's."""
    model = onnx.load(path)
    for tensor in model.graph.initializer:
        if tensor.name in weights:
            tensor.CopyFrom(numpy_helper.from_array(weights[tensor.name].numpy(), tensor.name))
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    feeds = {name: value.numpy() for name, value in data.items()}
    names = [o.name for o in session.get_outputs()]
    return dict(zip(names, session.run(None, feeds), strict=True))


@pytest.mark.parametrize("name", WITH_WEIGHTS)
def test_forward_equals_onnxruntime(name):
    path = _file(name)
    task = get_task(path, "cpu2", "inference")
    program = build_program(task.graph, load_model(task.graph, path), None)
    weights, data = make_parameters(program, 2), make_inputs(program, 2)
    in_file = {t.name for t in onnx.load(path).graph.initializer}
    assert set(weights) <= in_file, "a parameter the file does not hold: not a with-weights fixture"
    executor = Executor(task, model=path, seed=2)
    assert executor.run(_split(task.n_forward), warmup=0, repeats=1).feasible
    expected = _onnxruntime_outputs(path, weights, data)
    assert expected.keys() == executor.outputs.keys()
    for key, value in expected.items():
        np.testing.assert_allclose(executor.outputs[key].numpy(), value, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("env_id", ENV_IDS)
@pytest.mark.parametrize("name", ["bert_dynamo", "mobilenet_block"])
def test_gym_make_with_the_file_in_real_mode(env_id, name):
    env = gym.make(env_id, graph=_file(name), cluster="cpu2", objective="inference", reward_mode="real")
    env.reset(seed=0)
    for _ in range(2):
        _, reward, terminated, truncated, info = env.step(env.action_space.sample())
        assert np.isfinite(reward)
        if terminated or truncated:
            assert np.isfinite(info["runtime"]) and info["runtime"] > 0
            env.reset()
    env.close()


@pytest.mark.parametrize("objective", ["inference", "train_step"])
def test_make_evaluator_runs_the_file_the_task_came_from(objective):
    path = _file("gpt2_dynamo")
    task = get_task(path, "cpu2", objective)
    with pytest.raises(ValueError, match="pass model="):
        make_evaluator(task, "real")  # no file: nothing says which model the graph came from
    evaluator = make_evaluator(task, "real", source=path)  # cpu2 needs no devices=
    result = evaluator.simulate(_split(task.n_forward))
    assert result.feasible and math.isfinite(result.runtime) and evaluator.evaluations == 1


# --- ops the executor cannot run ------------------------------------------------------------------


def _unsupported_model(path: Path) -> str:
    """x -> Relu -> GridSample(grid) -> y: a valid ONNX graph with an op the executor lacks."""
    nodes = [helper.make_node("Relu", ["x"], ["r"], name="relu"),
             helper.make_node("GridSample", ["r", "grid"], ["y"], name="sampler")]
    grid = numpy_helper.from_array(np.zeros((2, 4, 4, 2), dtype=np.float32), "grid")
    graph = helper.make_graph(nodes, "sampling", [helper.make_tensor_value_info("x", TensorProto.FLOAT,
                                                                                [2, 3, 8, 8])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3, 4, 4])], [grid])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)]), path)
    return str(path)


@pytest.mark.filterwarnings("ignore:graph 'sampling'")
def test_unsupported_op_is_one_clear_exception(tmp_path):
    path = _unsupported_model(tmp_path / "sampling.onnx")
    task = get_task(path, "cpu2", "inference")
    with pytest.raises(UnsupportedOpError) as caught:
        Executor(task, model=path)
    message = str(caught.value)
    assert "'sampler'" in message and "GridSample" in message and "\n" not in message
    assert isinstance(caught.value, ValueError)  # what the command line reports as bad input
    with pytest.raises(UnsupportedOpError, match="GridSample"):
        make_evaluator(task, "real", source=path)


def test_unsupported_attribute_is_refused_before_running(tmp_path):
    model = onnx.load(_file("mobilenet_block"))
    resize = next(n for n in model.graph.node if n.op_type == "Resize")
    resize.attribute.append(helper.make_attribute("antialias", 1))
    path = tmp_path / "antialiased.onnx"
    onnx.save(model, path)
    with pytest.raises(UnsupportedOpError, match=f"{resize.name}.*Resize.*antialias"):
        Executor(get_task(str(path), "cpu2", "inference"), model=str(path))


@pytest.mark.parametrize("command", [
    ["profile", "--cluster", "cpu2", "--repeats", "1"],
    ["fidelity", "--cluster", "cpu2", "--samples", "2"],
    ["train", "--agent", "random-search", "--cluster", "cpu2", "--evaluator", "real", "--budget", "2"],
], ids=["profile", "fidelity", "train"])
@pytest.mark.parametrize("bad", ["unsupported", "not_onnx"])
def test_commands_exit_2_with_one_line(tmp_path, capsys, monkeypatch, command, bad):
    monkeypatch.setenv("PLACEMENT_GYM_CACHE", str(tmp_path / "cache"))
    if bad == "unsupported":
        path, expected = _unsupported_model(tmp_path / "sampling.onnx"), "GridSample"
    else:
        path, expected = tmp_path / "notes.onnx", "notes.onnx"
        path.write_text("not a model")
    out = ["--out", str(tmp_path / "out")] if command[0] == "train" else []
    argv = [*command, "--graph", str(path), *out]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        code = main(argv)
    err = capsys.readouterr().err.strip()
    assert code == 2, err
    assert err.startswith("placement-gym: error:") and len(err.splitlines()) == 1 and expected in err
    if command[0] != "train":  # train builds its task first, and the import warns of GridSample's cost
        assert not caught, [str(w.message) for w in caught]  # nothing printed beside the error line
