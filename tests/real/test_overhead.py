"""The executor's overhead (`placement_gym.real.overhead`, `placement-gym bench --real-overhead`): the
direct torch runner computes what the reference and the executor compute, the row's keys and
arithmetic, and the command's JSON and errors. No wall-clock figure is asserted."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from placement_gym.real.devices import cluster_device_map, virtual_cpu_cluster  # noqa: E402
from placement_gym.real.executor import Executor  # noqa: E402
from placement_gym.real.overhead import (  # noqa: E402
    ROW_KEYS,
    DirectRunner,
    measure_overhead,
    one_gpu_cluster,
    overhead_task,
)
from placement_gym.real.program import make_inputs, make_parameters, run_reference_forward  # noqa: E402
from placement_gym.task.named import get_task  # noqa: E402

GRAPH = "cifar10_cnn"  # 30 ops: convolutions, pooling, LRN-style normalisation, Gemm
BATCH = 2


def _bench(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "placement_gym", "bench", "--real-overhead", *args],
                          capture_output=True, text=True, timeout=300)


def test_direct_forward_gives_the_reference_outputs():
    task, _ = overhead_task(GRAPH, "inference")
    runner = DirectRunner(task, batch=BATCH)
    runner.run(warmup=0, repeats=2)
    outputs, reference = runner.outputs(), run_reference_forward(task, batch=BATCH)
    assert outputs.keys() == reference.keys() and outputs
    for name in reference:
        torch.testing.assert_close(outputs[name], reference[name], rtol=1e-5, atol=1e-6)


def test_traced_forward_gives_the_reference_outputs():
    """The graph `compiled_forward` compiles (here run by the eager backend: no compile time)."""
    task, _ = overhead_task(GRAPH, "inference")
    runner = DirectRunner(task, batch=BATCH)
    outputs = runner.compiled_forward(backend="eager")()
    reference = run_reference_forward(task, batch=BATCH)
    assert len(outputs) == len(reference)
    for value, name in zip(outputs, reference, strict=True):
        torch.testing.assert_close(value, reference[name], rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("update", ["torch", "reference"])
@pytest.mark.parametrize("optimizer", ["sgd", "momentum", "adam"])
def test_direct_train_steps_update_the_weights_as_the_executor_does(optimizer, update):
    task = get_task(GRAPH, virtual_cpu_cluster(1), "train_step", optimizer=optimizer)
    lr = 0.05
    runner = DirectRunner(task, batch=BATCH, lr=lr, update=update)
    runner.run(warmup=0, repeats=2)
    executor = Executor(task, batch=BATCH, lr=lr)
    result = executor.run(np.zeros(task.graph.n_ops, dtype=np.int64), warmup=1, repeats=1)
    assert result.feasible, result.error
    assert runner.steps == 2 and runner.parameters.keys() == executor.parameters.keys()
    initial = DirectRunner(task, batch=BATCH).parameters
    elements = apart = 0
    for name, weight in runner.parameters.items():
        ours, theirs = weight.detach(), executor.parameters[name].detach().to(weight.dtype)
        assert not torch.equal(ours, initial[name].detach()), f"{name} was not updated"
        if optimizer == "adam":
            # Adam's first steps move each weight by about lr x the sign of its gradient: a gradient
            # that is zero up to rounding may take either sign in the two sums, nothing else differs.
            elements += ours.numel()
            apart += int((~torch.isclose(ours, theirs, rtol=1e-4, atol=1e-5)).sum())
            assert float((ours - theirs).abs().max()) <= 2 * 2 * lr + 1e-6, name
        else:
            torch.testing.assert_close(ours, theirs, rtol=1e-4, atol=1e-5)
    assert apart <= 1e-3 * elements  # a few dozen of 1.76 million on this graph
    # Each weight's state tensors (Adam's two moments, the velocity), by the executor's names.
    state = runner.optimizer_state
    if optimizer == "sgd":
        assert state == {}
    else:
        assert state.keys() == runner.parameters.keys() == executor.optimizer_state.keys()
        for name, tensors in state.items():
            assert tensors.keys() == executor.optimizer_state[name].keys()


def test_direct_runner_refuses_a_step_it_does_not_run():
    task = get_task(GRAPH, virtual_cpu_cluster(1), "train_step", precision="bf16")
    with pytest.raises(ValueError, match="fp32"):
        DirectRunner(task, batch=BATCH)
    with pytest.raises(ValueError, match="inference only"):
        DirectRunner(overhead_task(GRAPH, "train_step")[0], batch=BATCH).compiled_forward()


@pytest.mark.parametrize("objective", ["inference", "train_step"])
def test_an_overhead_row_has_the_documented_keys_and_arithmetic(objective):
    row = measure_overhead(GRAPH, objective, BATCH, repeats=2, warmup=0)
    assert tuple(row) == ROW_KEYS
    task, _ = overhead_task(GRAPH, objective)
    assert (row["graph"], row["objective"], row["batch"], row["device"]) == (GRAPH, objective, BATCH, "cpu")
    assert row["n_ops"] == task.graph.n_ops == 30 and row["n_jobs"] == task.n_ops
    assert row["n_jobs"] == (30 if objective == "inference" else 65)
    assert row["executor_ms"] > 0 and row["torch_ms"] > 0
    assert row["overhead_us_per_op"] == pytest.approx(
        (row["executor_ms"] - row["torch_ms"]) * 1e3 / row["n_jobs"])
    assert row["vs_torch"] == pytest.approx(row["executor_ms"] / row["torch_ms"])
    assert row["compiled_ms"] is None and row["vs_compiled"] is None and row["note"] == ""


def test_measure_overhead_refuses_bad_arguments_in_one_line():
    with pytest.raises(ValueError, match="unknown graph 'nope'"):
        measure_overhead("nope", "inference", 1)
    with pytest.raises(ValueError, match="unknown objective"):
        measure_overhead(GRAPH, "training", 1)
    with pytest.raises(ValueError, match="repeats"):
        measure_overhead(GRAPH, "inference", 1, repeats=0)


def test_the_one_gpu_cluster_maps_its_gpu_to_cuda_0():
    cluster = one_gpu_cluster(memory=80e9)
    assert cluster.device_names == ("gpu:0",) and cluster.device_kinds == ("gpu",)
    assert cluster_device_map(cluster) == {"gpu:0": "cuda:0"}
    assert float(cluster.memory_capacity[0]) == 80e9 and float(cluster.tensor_peak_flops[0]) == 989e12


def test_bench_real_overhead_json():
    done = _bench("--graphs", f"{GRAPH}:{BATCH}", "--objective", "inference", "--repeats", "1", "--json",
                  "--check")
    assert done.returncode in (0, 1), done.stderr  # 1: a target failed on this machine and load
    report = json.loads(done.stdout)  # --check's targets go to stderr
    assert "speed targets" in done.stderr
    assert set(report) == {"machine", "load_average_end", "rows"}
    (row,) = report["rows"]
    assert tuple(row) == ROW_KEYS and (row["graph"], row["batch"]) == (GRAPH, BATCH)
    assert "[1/1] cifar10_cnn inference" in done.stderr


def test_bench_real_overhead_table_and_check():
    done = _bench("--graphs", f"{GRAPH}:{BATCH}", "--objective", "train_step", "--repeats", "1", "--check")
    assert done.returncode in (0, 1), done.stderr  # 1: a target failed on this machine and load
    assert "overhead" in done.stdout and "summary: 1 row;" in done.stdout
    assert "executor overhead, us per task op" in done.stdout and "Traceback" not in done.stderr


@pytest.mark.parametrize("graphs, says", [
    ("nope", "unknown graph 'nope'"),
    ("cifar10_cnn:0", "positive integer"),
    ("resnet50:64", "at most the graph's own (32)"),
    ("all", "bundled graph names"),
])
def test_bench_real_overhead_bad_graphs_are_one_error_line(graphs, says):
    done = _bench("--graphs", graphs, "--json")
    assert done.returncode == 2 and done.stdout == ""
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("placement-gym: error:") and says in lines[0]


def test_bench_real_overhead_without_torch_names_the_extra():
    code = ("import sys; sys.modules['torch'] = None; from placement_gym.cli import main; "
            "sys.exit(main(['bench', '--real-overhead']))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "needs torch" in lines[0] and "[real]" in lines[0]


def test_the_tiny_chain_is_measured_like_a_bundled_graph():
    from placement_gym.cli import bench_command
    from placement_gym.real import overhead

    assert bench_command.TINY_CHAIN == overhead.TINY_CHAIN in bench_command.DEFAULT_OVERHEAD_GRAPHS
    task, model = overhead_task(overhead.TINY_CHAIN, "inference")
    assert task.graph.n_ops == overhead.TINY_CHAIN_OPS and model is not None
    runner = DirectRunner(task, model=model)
    runner.run(warmup=0, repeats=1)
    # 1,000 ops: a MatMul by its own (seeded random) weight, then nine Tanh, a hundred times
    expected = make_inputs(runner.program, 0)["x"]
    weights = make_parameters(runner.program, 0)
    for i in range(1000):
        expected = expected @ weights[f"w{i}"] if i % 10 == 0 else torch.tanh(expected)
    torch.testing.assert_close(next(iter(runner.outputs().values())), expected)
    row = measure_overhead(overhead.TINY_CHAIN, "train_step", None, repeats=1, warmup=0)
    assert row["n_ops"] == 1000 and row["n_jobs"] == 1000 + 1000 + 100
