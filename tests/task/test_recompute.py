"""Activation recomputation (``recompute=True``): a hand-computed schedule, the reference simulator on
random tasks, index order, work and memory invariants, ids, the envs and the CLI, and the 70B step it
makes fit four DGX H100 nodes."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
from conftest import hand_cluster, hand_graph, random_cluster, random_task_sizes
from hypothesis import given, settings
from hypothesis import strategies as st

import placement_gym as pg
from placement_gym.cost_model import reference_simulate, simulate
from placement_gym.graph.synthetic import random_graph
from placement_gym.task.compiled import OP_KINDS, make_task, recompute_segments
from placement_gym.task.ids import split_task_id, task_identity
from placement_gym.task.step import Step

RECOMPUTE = OP_KINDS.index("recompute")


def chain(n: int, gflops: float = 1.0, activation: float = 1e6):
    """``n`` identical matmul layers in a chain reading one data input, no parameters."""
    ops = [(f"l{i}", gflops * 1e9, activation, 0.0) for i in range(n)]
    edges = [("x", "l0")] + [(f"l{i}", f"l{i + 1}") for i in range(n - 1)]
    return hand_graph(ops, edges, inputs=[("x", activation)])


def test_segments_are_about_sqrt_n_contiguous_ranges():
    assert recompute_segments(4).tolist() == [0, 0, 1, 1]
    assert recompute_segments(9).tolist() == [0, 0, 0, 1, 1, 1, 2, 2, 2]
    assert recompute_segments(1).tolist() == [0]
    segment = recompute_segments(4975)
    assert segment[-1] + 1 == 71 and np.all(np.diff(segment) >= 0)
    assert np.bincount(segment).max() - np.bincount(segment).min() <= 1


def test_four_layers_on_one_device_by_hand():
    # Segments {l0, l1} and {l2, l3}; the last is never replayed. On one device the step runs
    # l0..l3, l3.grad, l2.grad, then l0 and l1 again (their replay waits for l2.grad, the gradient
    # entering their segment), then l1.grad and l0.grad.
    task = make_task(chain(4), hand_cluster(1), "train_step", recompute=True)
    result = simulate(task, [0, 0, 0, 0], schedule=True)
    slow = reference_simulate(task, [0, 0, 0, 0])
    assert slow.runtime == result.runtime
    s = result.schedule
    f, b = 1e-3 + 1e-6, 2e-3 + 1e-6  # a matmul of 1 GFLOP and its backward (2x the FLOPs)
    order = ["l0", "l1", "l2", "l3", "l3.grad", "l2.grad", "l0.recompute", "l1.recompute", "l1.grad",
             "l0.grad"]
    assert sorted(task.op_names) == sorted(order)
    at = {name: i for i, name in enumerate(task.op_names)}
    clock = 0.0
    for name in order:
        assert s.op_start[at[name]] == pytest.approx(clock, rel=1e-12, abs=1e-15), name
        clock += b if name.endswith(".grad") else f
    assert result.runtime == pytest.approx(6 * f + 4 * b, rel=1e-12)
    plain = simulate(make_task(chain(4), hand_cluster(1), "train_step"), [0, 0, 0, 0])
    assert result.runtime - plain.runtime == pytest.approx(2 * f, rel=1e-9)


def test_replay_waits_for_the_gradient_across_devices():
    # Stages {l0, l1} on gpu:0 and {l2, l3} on gpu:1: gpu:0 is idle after the forward pass, yet its
    # replay starts only once l2.grad's gradient (and the token with it) can have reached it.
    task = make_task(chain(4), hand_cluster(2), "train_step", recompute=True)
    result = simulate(task, [0, 0, 1, 1], schedule=True)
    assert reference_simulate(task, [0, 0, 1, 1]).runtime == result.runtime
    at = {name: i for i, name in enumerate(task.op_names)}
    s = result.schedule
    assert s.op_start[at["l0.recompute"]] >= s.op_finish[at["l2.grad"]] + 1e-4  # a link's latency
    assert s.op_start[at["l1.grad"]] >= s.op_finish[at["l1.recompute"]]


def consumers(task, tensor):
    pointer = task.tensor_consumer_pointer
    return task.tensor_consumers[pointer[tensor]:pointer[tensor + 1]]


@settings(max_examples=40, deadline=None)
@given(**random_task_sizes((1, 20), (1, 4)),
       m=st.integers(1, 3),
       executor_costs=st.booleans(),
       shared=st.booleans())
def test_reference_agrees_and_indices_stay_topological(n_ops, n_devices, seed, m, executor_costs, shared):
    graph = random_graph(n_ops, seed=seed, window=4, shared_parameter_prob=0.5 if shared else 0.0)
    rng = np.random.default_rng(seed)
    cluster = random_cluster(n_devices, rng, executor_costs)
    task = make_task(graph, cluster, "train_step", microbatches=m, recompute=True)
    plain = make_task(graph, cluster, "train_step", microbatches=m)
    segment = recompute_segments(n_ops)
    replayed = int(np.count_nonzero(segment < segment[-1]))
    assert task.n_ops == plain.n_ops + m * replayed
    assert np.count_nonzero(task.op_kind == RECOMPUTE) == m * replayed
    np.testing.assert_array_equal(task.static_bytes, plain.static_bytes)
    # every tensor is read only by ops after its producer: the index order is topological
    for tensor in np.flatnonzero(task.tensor_producer >= 0):
        assert np.all(consumers(task, tensor) > task.tensor_producer[tensor])
    # each replayed op runs what its forward op runs, on the same device
    replay = np.flatnonzero(task.op_kind == RECOMPUTE)
    np.testing.assert_array_equal(task.duration[replay], task.duration[task.op_forward[replay]])
    for placement in (rng.integers(0, n_devices, n_ops), np.zeros(n_ops, dtype=int),
                      np.arange(n_ops) * n_devices // n_ops):
        fast = simulate(task, placement)
        slow = reference_simulate(task, placement)
        assert fast.runtime == slow.runtime and fast.feasible == slow.feasible
        np.testing.assert_array_equal(fast.peak_memory, slow.peak_memory)


def test_one_device_pays_the_replayed_forward_ops_and_keeps_less():
    graph = chain(16, activation=50e6)  # 4 segments of 4 layers: 12 layers replayed
    cluster = hand_cluster(1)
    plain = simulate(make_task(graph, cluster, "train_step"), np.zeros(16, dtype=int))
    rc = simulate(make_task(graph, cluster, "train_step", recompute=True), np.zeros(16, dtype=int))
    f = 1e-3 + 1e-6
    assert rc.runtime - plain.runtime == pytest.approx(12 * f, rel=1e-9)
    # without recomputation all 16 activations (and the input) are alive when the backward pass
    # begins; with it, at most the input, the segments' 3 boundary activations and one segment's
    # activations twice (originals of the last segment, or a replayed segment's copies and gradients)
    assert plain.peak_memory[0] >= 17 * 50e6
    assert rc.peak_memory[0] <= (1 + 3 + 2 * 4 + 2) * 50e6
    assert rc.peak_memory[0] < 0.9 * plain.peak_memory[0]


def test_ids_round_trip_and_malformed_ones_are_refused():
    task = pg.get_task("cifar10_cnn", "k80x2",
                       Step(optimizer="sgd", precision="bf16", microbatches=2, recompute=True))
    assert task.id == "cifar10_cnn/k80x2/train+sgd+bf16+rc+mb2"
    assert split_task_id(task.id) == ("cifar10_cnn", "k80x2", task.step)
    assert pg.parse_task_id(task.id) is task
    assert task_identity(task)["recompute"] is True
    assert "recompute" not in task_identity(pg.get_task("cifar10_cnn", "k80x2"))
    for bad in ("train+rc+bf16", "train+rc+rc", "train+mb2+rc", "train+rc+sgd"):
        with pytest.raises(ValueError, match="is not the objective of a task id"):
            split_task_id(f"cifar10_cnn/k80x2/{bad}")
    with pytest.raises(ValueError, match="only a training step recomputes"):
        pg.parse_task_id("cifar10_cnn/k80x2/inference+rc")


@pytest.mark.parametrize("bad", [1, "yes", None])
def test_bad_recompute_values_are_refused_in_one_line(bad):
    with pytest.raises(ValueError, match="recompute must be True or False") as error:
        make_task(chain(3), hand_cluster(1), recompute=bad)
    assert "\n" not in str(error.value)
    with pytest.raises(ValueError, match="applies to a training step"):
        make_task(chain(3), hand_cluster(1), "inference", recompute=True)


def test_envs_and_cli_take_recompute(capsys):
    env = gym.make("DevicePlacement-v0", graph="cifar10_cnn", cluster="k80x2", recompute=True)
    env.reset(seed=0)
    assert env.unwrapped.task.recompute and env.unwrapped.task.id.endswith("+rc")
    from placement_gym.cli import main

    assert main(["evaluate", "--graph", "cifar10_cnn", "--cluster", "k80x2", "--agent", "heft", "--recompute",
                 "--json"]) == 0
    out = capsys.readouterr().out
    assert "cifar10_cnn/k80x2/train+rc" in out


def test_the_70b_pipelined_step_fits_four_dgx_h100_nodes_only_with_recomputation():
    # Llama-2 70B, bf16, 4 micro-batches, on 32 H100s: GPipe keeps every micro-batch's activations
    # (attention scores included) until its backward pass. The GPipe expert's stages (layer
    # boundaries, every op on a GPU) fit 80 GB per GPU with recomputation; the same stages without it
    # need more than a GPU holds.
    from baselines.experts import expert

    graph = pg.load_graph("llama2_70b")
    tasks = {recompute: pg.get_task(graph, "dgx-h100x4", "train_step", precision="bf16", microbatches=4,
                                    recompute=recompute) for recompute in (False, True)}
    found = expert(tasks[True])
    gpus = np.flatnonzero(np.array(tasks[True].cluster.device_kinds) == "gpu")
    capacity = np.asarray(tasks[True].cluster.memory_capacity)[gpus]
    with_rc, without = simulate(tasks[True], found.placement), simulate(tasks[False], found.placement)
    assert with_rc.feasible and np.all(with_rc.peak_memory[gpus] <= capacity)
    assert not without.feasible and np.any(without.peak_memory[gpus] > capacity)
