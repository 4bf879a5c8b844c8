"""Pipelined steps (``microbatches=M``): GPipe's fill-drain bubble, a hand-computed schedule, the
reference simulator, memory per micro-batch, ids, the envs and the CLI options."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
from conftest import MS, OBJECTIVES, hand_cluster, hand_graph, random_cluster, random_task_sizes
from hypothesis import given, settings
from hypothesis import strategies as st

import placement_gym as pg
from placement_gym.cost_model import reference_simulate, simulate
from placement_gym.envs.config import EnvConfig
from placement_gym.graph.synthetic import random_graph
from placement_gym.task.compiled import MAX_MICROBATCHES, make_task
from placement_gym.task.ids import split_task_id, task_identity
from placement_gym.task.step import Step

OVERHEAD = 1e-6  # hand_cluster's launch overhead per op


def op_time(gflops: float) -> float:
    """A hand_graph op (a matmul, no memory traffic) on hand_cluster (1e12 FLOP/s)."""
    return gflops * MS + OVERHEAD


def adam_update_time(param_bytes: float) -> float:
    """Adam's update op: 12 FLOPs per fp32 parameter element (compiled.py's OPTIMIZERS); its 7 bytes
    moved per parameter byte take far less at hand_cluster's 1e15 B/s."""
    return 12 * (param_bytes / 4) / 1e12 + OVERHEAD


def layer_stack(p: int, gflops: float, activation_bytes: float, param_bytes: float):
    """A chain of ``p`` identical layers reading a data input: one pipeline stage per layer."""
    ops = [(f"layer{i}", gflops * 1e9, activation_bytes, param_bytes) for i in range(p)]
    edges = [("x", "layer0")] + [(f"layer{i}", f"layer{i + 1}") for i in range(p - 1)]
    return hand_graph(ops, edges, inputs=[("x", activation_bytes)])


def both(task, placement):
    """The fast simulator's result (with its schedule), after checking that the reference agrees."""
    fast = simulate(task, placement, schedule=True)
    slow = reference_simulate(task, placement)
    assert fast.runtime == slow.runtime
    np.testing.assert_array_equal(fast.peak_memory, slow.peak_memory)
    return fast


@pytest.mark.parametrize("params", [0.0, 4e6])
@pytest.mark.parametrize("k", [1, 2, 3, 4])
@pytest.mark.parametrize("p, m", [(2, 1), (2, 4), (3, 2), (3, 6), (4, 8), (5, 3)])
def test_uniform_layer_stack_has_gpipes_bubble(p, m, k, params):
    # GPipe (Huang et al. 2019, section 2.3): with p equal stages and m micro-batches the fill-drain
    # step is (m + p - 1) stage times forward and backward, a bubble of (p - 1) / (m + p - 1).
    # Stages of k chained layers each: with three or more, the next micro-batch's first layer is
    # ready before the current one's last, and only the lowest-micro-batch rule keeps a stage
    # finishing one micro-batch before it starts the next.
    activation = 1e5
    graph = layer_stack(p * k, 1.0, activation, params)
    task = make_task(graph, hand_cluster(p), "train_step", microbatches=m)
    result = both(task, np.repeat(np.arange(p), k))
    t_f, t_b = k * op_time(1.0), k * op_time(2.0)  # a matmul's backward computes both operands' gradients
    transfer = 1e-4 + activation / 1e9  # hand_cluster's latency + bytes / bandwidth, below t_f and t_b
    # Each of the p - 1 cuts is crossed once on the way in (activations) and once back (gradients).
    # Updates (with parameters): layer j's update is ready when its last gradient is, as the gradient
    # of layer j - 1 of the same (last) micro-batch; the tie goes to the gradient (lower index), but
    # at the next choice the update is the earlier ready. So in each stage after the first, k - 2
    # updates run before the stage's last gradient and delay the gradient it sends back; the first
    # stage's k updates all lie on the path to the end.
    update = adam_update_time(params) if params else 0.0
    updates = (k + (p - 1) * max(k - 2, 0)) * update
    hand = (m + p - 1) * (t_f + t_b) + 2 * (p - 1) * transfer + updates
    assert result.runtime == pytest.approx(hand, rel=1e-12)
    pipeline = result.runtime - 2 * (p - 1) * transfer - updates
    busy = m * (t_f + t_b)  # each stage's own work
    assert (pipeline - busy) / pipeline == pytest.approx((p - 1) / (m + p - 1), rel=1e-9)
    # each stage runs one micro-batch's forward (then backward) layers as one unit, micro-batches in order
    s = result.schedule
    for kind in (0, 1):
        for d in range(p):
            ops = np.flatnonzero((task.op_kind == kind) & (s.op_device == d))
            ops = ops[np.argsort(s.op_start[ops], kind="stable")]
            assert np.all(np.diff(task.op_microbatch[ops]) >= 0)


def test_fast_links_leave_the_bubble_alone():
    p, m = 4, 6
    cluster = hand_cluster(p, bandwidth=1e17, latency=1e-12)
    task = make_task(layer_stack(p, 1.0, 1e5, 0.0), cluster, "train_step", microbatches=m)
    result = both(task, np.arange(p))
    assert result.runtime == pytest.approx((m + p - 1) * (op_time(1.0) + op_time(2.0)), rel=1e-6)


def test_two_ops_two_devices_two_microbatches_by_hand():
    # a (3 GFLOP, 4 MB of parameters) on gpu:0 -> b (1 GFLOP) on gpu:1. A 3 MB activation (and its
    # gradient) takes 0.1 ms latency + 3 ms on a link, longer than a or b.grad: the second transfer each
    # way waits for the link. b[mb0] ends long before b[mb1] starts; the fill-drain barrier keeps b's
    # backward waiting for b[mb1] (without it, b.grad[mb0] would start when b[mb0] ends).
    graph = hand_graph([("a", 3e9, 3e6, 4e6), ("b", 1e9, 1e6, 0)], [("x", "a"), ("a", "b")],
                       inputs=[("x", 1e5)])
    task = make_task(graph, hand_cluster(2), "train_step", microbatches=2)
    result = both(task, [0, 1])
    s = result.schedule
    fa, fb, ba, bb = op_time(3), op_time(1), op_time(6), op_time(2)  # backward: 2x a matmul's FLOPs
    c = 1e-4 + 3e6 / 1e9
    assert c > fa and c > bb and fa + c + fb < fa + 2 * c and ba > c  # the premises of the times below
    expected = {}
    expected["a[mb0]"] = 0.0
    expected["a[mb1]"] = fa  # after a[mb0]: one op takes micro-batches in order
    expected["b[mb0]"] = fa + c
    expected["b[mb1]"] = fa + 2 * c  # a[mb1]'s activation ends at 2 fa, is sent at fa + c
    barrier = fa + 2 * c + fb  # every forward done: the backward of the sink starts
    expected["b.grad[mb0]"] = barrier
    expected["b.grad[mb1]"] = barrier + bb
    expected["a.grad[mb0]"] = barrier + bb + c
    # its gradient arrives at barrier + bb + 2c, before a.grad[mb0] ends
    expected["a.grad[mb1]"] = barrier + bb + c + ba
    expected["a.update"] = expected["a.grad[mb1]"] + ba  # one update, after both gradients
    duration = {"a": fa, "b": fb, "a.grad": ba, "b.grad": bb, "a.update": adam_update_time(4e6)}
    assert set(expected) == set(task.op_names)
    at = {name: i for i, name in enumerate(task.op_names)}
    for name, start in expected.items():
        op = at[name]
        assert s.op_start[op] == pytest.approx(start, rel=1e-12), name
        assert s.op_finish[op] == pytest.approx(start + duration[name.split("[")[0]], rel=1e-12), name
    assert result.runtime == pytest.approx(expected["a.update"] + adam_update_time(4e6), rel=1e-12)
    # transfers: two activations forward, two gradients back, each once, each link one at a time
    assert sorted(zip(s.transfer_src.tolist(), s.transfer_dst.tolist())) == [(0, 1), (0, 1), (1, 0), (1, 0)]
    producer = task.tensor_producer[s.transfer_tensor]
    sent = {task.op_names[op]: (begin, end)
            for op, begin, end in zip(producer, s.transfer_start, s.transfer_finish)}
    assert sent["a[mb0]"] == pytest.approx((fa, fa + c), rel=1e-12)
    assert sent["a[mb1]"] == pytest.approx((fa + c, fa + 2 * c), rel=1e-12)
    assert sent["b.grad[mb0]"] == pytest.approx((barrier + bb, barrier + bb + c), rel=1e-12)
    assert sent["b.grad[mb1]"] == pytest.approx((barrier + bb + c, barrier + bb + 2 * c), rel=1e-12)


def test_a_device_does_not_wait_for_a_lower_microbatch():
    # x -> a (3 GFLOP) on gpu:0 -> b (1 GFLOP) on gpu:1; y -> c (1 GFLOP) on gpu:1. When gpu:1 is free
    # after c[mb0], b[mb0] is still on its way (a ends at fa, its 0.1 MB activation arrives at fa +
    # tr): c[mb1] is the only op ready by then and runs at once. The lowest micro-batch is preferred
    # among the ops ready when the device can start, never waited for.
    graph = hand_graph([("a", 3e9, 1e5, 0), ("b", 1e9, 1e3, 0), ("c", 1e9, 1e3, 0)],
                       [("x", "a"), ("a", "b"), ("y", "c")], inputs=[("x", 1e3), ("y", 1e3)])
    task = make_task(graph, hand_cluster(2), "inference", microbatches=2)
    s = both(task, [0, 1, 1]).schedule
    fa, fb, fc = op_time(3), op_time(1), op_time(1)
    tr = 1e-4 + 1e5 / 1e9
    assert fa + tr > 2 * fc and tr < fa  # the premises of the times below
    expected = {"a[mb0]": 0.0, "a[mb1]": fa, "c[mb0]": 0.0, "c[mb1]": fc, "b[mb0]": fa + tr,
                "b[mb1]": 2 * fa + tr}
    assert set(expected) == set(task.op_names)
    for op, name in enumerate(task.op_names):
        assert s.op_start[op] == pytest.approx(expected[name], rel=1e-12), name
    assert s.op_finish.max() == pytest.approx(2 * fa + tr + fb, rel=1e-12)


def check_fill_drain(task, schedule):
    """GPipe's order in a schedule: no backward op before every forward op has finished (a pipelined
    step; the plain step, M = 1, has no barrier); every op takes its micro-batches in order; each
    update after every backward copy of its op."""
    kind, forward, batch = task.op_kind, task.op_forward, task.op_microbatch
    start, finish = schedule.op_start, schedule.op_finish
    if np.any(kind == 1) and task.microbatches > 1:
        assert start[kind == 1].min() >= finish[kind == 0].max()
    for k in (0, 1):
        ops = np.flatnonzero(kind == k)
        order = np.lexsort((batch[ops], forward[ops]))
        same = forward[ops][order][1:] == forward[ops][order][:-1]
        assert np.all(start[ops][order][1:][same] >= finish[ops][order][:-1][same])
    for op in np.flatnonzero(kind == 2):
        grads = (kind == 1) & (forward == forward[op])
        assert start[op] >= finish[grads].max()


@settings(max_examples=40, deadline=None)
@given(**random_task_sizes((1, 16), (1, 4)),
       m=st.integers(1, 3),
       objective=OBJECTIVES,
       executor_costs=st.booleans())
def test_reference_agrees_on_random_pipelined_tasks(n_ops, n_devices, seed, m, objective, executor_costs):
    graph = random_graph(n_ops, seed=seed, window=4)
    rng = np.random.default_rng(seed)
    task = make_task(graph, random_cluster(n_devices, rng, executor_costs), objective, microbatches=m)
    n_train = 2 * m * n_ops + int(np.count_nonzero(graph.param_bytes > 0))
    assert task.n_ops == (m * n_ops if objective == "inference" else n_train)
    stages = np.arange(n_ops) * n_devices // n_ops  # contiguous stages, a pipeline
    for placement in (rng.integers(0, n_devices, n_ops), np.zeros(n_ops, dtype=int), stages):
        fast = both(task, placement)
        check_fill_drain(task, fast.schedule)


def test_one_microbatch_is_the_plain_task():
    graph = random_graph(30, seed=3, window=5)
    cluster = random_cluster(3, np.random.default_rng(3), True)
    plain, one = make_task(graph, cluster), make_task(graph, cluster, microbatches=1)
    assert one.id == plain.id and one.microbatches == 1
    for name in ("op_kind", "op_forward", "duration", "tensor_producer", "tensor_bytes", "tensor_consumers",
                 "tensor_consumer_pointer", "op_outputs", "op_input_count", "static_bytes"):
        assert np.array_equal(getattr(one, name), getattr(plain, name)), name
    assert pg.get_task("resnet50", "k80x4").id == "resnet50/k80x4/train"


def test_copies_share_parameters_and_take_new_inputs():
    graph = random_graph(24, seed=11, window=6, shared_parameter_prob=0.5)
    assert graph.tensor_is_parameter.any()
    one = make_task(graph, hand_cluster(3))
    three = make_task(graph, hand_cluster(3), microbatches=3)
    np.testing.assert_array_equal(three.static_bytes, one.static_bytes)
    shared, inputs = graph.tensor_is_parameter.sum(), (graph.tensor_producer < 0).sum()
    assert (three.tensor_static & (three.op_kind[three.tensor_producer] == 0)).sum() == shared
    assert (three.tensor_producer < 0).sum() == 3 * inputs
    # a parameter read on another device is sent there once for the three micro-batches
    placement = np.random.default_rng(0).integers(0, 3, graph.n_ops)
    s = simulate(three, placement, schedule=True).schedule
    parameters = np.flatnonzero(three.tensor_static & (three.tensor_producer >= 0)
                                & (three.op_kind[three.tensor_producer] == 0))
    sent = s.transfer_tensor[np.isin(s.transfer_tensor, parameters)]
    pairs = set(zip(sent.tolist(), s.transfer_dst[np.isin(s.transfer_tensor, parameters)].tolist()))
    assert len(pairs) == len(sent)


def test_activation_memory_grows_with_microbatches_and_static_memory_does_not():
    activation, params = 3e6, 8e6
    graph = layer_stack(2, 1.0, activation, params)
    placement = np.array([0, 1])
    static, live = [], []
    for m in (1, 2, 4, 8):
        task = make_task(graph, hand_cluster(2), "train_step", microbatches=m)
        static.append(task.static_memory(placement))
        peak = both(task, placement).peak_memory
        live.append(peak - static[-1])
        # fill-drain: when the last forward ends, every micro-batch's input and activation on gpu:0 is
        # still held for its backward op
        assert live[-1][0] >= m * (activation + activation)
    for s in static[1:]:
        np.testing.assert_array_equal(s, static[0])
    assert np.all(np.diff([row[0] for row in live]) > 0)
    assert np.all(np.diff([row[1] for row in live]) > 0)


def test_bundled_graph_with_four_microbatches_builds_evaluates_and_round_trips():
    task = pg.get_task("cifar10_cnn", "k80x4", "train_step", microbatches=4)
    one = pg.get_task("cifar10_cnn", "k80x4", "train_step")
    assert task.id == "cifar10_cnn/k80x4/train+mb4"
    assert pg.parse_task_id(task.id) is task
    updates = int(np.count_nonzero(one.op_kind == 2))
    assert task.n_forward == one.n_forward and task.n_ops == 4 * (one.n_ops - updates) + updates
    placement = np.arange(task.n_forward) * task.n_devices // task.n_forward
    result = both(task, placement)
    check_fill_drain(task, result.schedule)
    assert result.runtime > simulate(one, placement).runtime
    assert task_identity(task)["microbatches"] == 4 and "microbatches" not in task_identity(one)
    sgd = pg.get_task("cifar10_cnn", "k80x4", "train+sgd+mb2")
    assert sgd.id == "cifar10_cnn/k80x4/train+sgd+mb2" and pg.parse_task_id(sgd.id) is sgd
    inference = pg.get_task("cifar10_cnn", "k80x4", "inference", microbatches=3)
    assert inference.id == "cifar10_cnn/k80x4/inference+mb3" and inference.n_ops == 3 * one.n_forward
    assert pg.parse_task_id(inference.id) is inference


@pytest.mark.parametrize("objective", ["train+mb1", "train+mb04", "train+mb4+sgd", "train+mb2+mb2",
                                       "train+adam+mb2", "train+sgd+sgd", "train+mb"])
def test_malformed_microbatch_ids_are_refused(objective):
    with pytest.raises(ValueError, match="not the objective of a task id") as error:
        split_task_id(f"cifar10_cnn/k80x4/{objective}")
    assert "\n" not in str(error.value)


def test_split_task_id_reads_microbatches():
    assert split_task_id("gnmt8/k40x8/train+sgd+mb16") == (
        "gnmt8", "k40x8", Step(optimizer="sgd", microbatches=16))
    assert split_task_id("gnmt8/k40x8/train") == ("gnmt8", "k40x8", Step())
    assert split_task_id("a/b/train+sgd+bf16+mb8") == ("a", "b", Step("train_step", "sgd", "bf16", 8))
    assert split_task_id("a/b/inference+fp16+mb2") == (
        "a", "b", Step("inference", precision="fp16", microbatches=2))


@pytest.mark.parametrize("bad", [0, -1, MAX_MICROBATCHES + 1, 2.0, True, "4"])
def test_bad_microbatch_counts_are_refused_in_one_line(bad):
    for build in (lambda: make_task(random_graph(4, seed=0), hand_cluster(2), microbatches=bad),
                  lambda: pg.get_task("cifar10_cnn", "k80x4", microbatches=bad),
                  lambda: EnvConfig(graph="cifar10_cnn", microbatches=bad)):
        with pytest.raises(ValueError, match="microbatches must be an integer from 1 to 1024") as error:
            build()
        assert "\n" not in str(error.value)


def test_a_task_over_the_allocation_limit_is_refused(monkeypatch):
    monkeypatch.setenv("PLACEMENT_GYM_MAX_ALLOCATION_BYTES", "1e6")
    make_task(random_graph(20, seed=0), hand_cluster(2), microbatches=1)  # 61 ops at most: fits
    with pytest.raises(ValueError, match="allocation limit"):
        make_task(random_graph(20, seed=0), hand_cluster(2), microbatches=1000)


@pytest.mark.parametrize(
    "env_id", ["DevicePlacement-v0", "DevicePlacementStaged-v0", "DevicePlacementRefine-v0"]
)
def test_envs_run_a_pipelined_step(env_id):
    env = gym.make(env_id, graph="cifar10_cnn", cluster="k80x4", microbatches=4)
    task = env.unwrapped.task
    assert task.id == "cifar10_cnn/k80x4/train+mb4"
    env.reset(seed=0)
    for _ in range(3):
        _, reward, terminated, truncated, _ = env.step(env.action_space.sample())
        assert np.isfinite(reward)
        if terminated or truncated:
            env.reset()
    env.close()
    with pytest.raises(ValueError, match="microbatches=2 is not the task's"):
        gym.make(env_id, graph=task, microbatches=2)


def test_cli_takes_microbatches(capsys):
    from placement_gym.cli import main

    argv = ["evaluate", "--graph", "cifar10_cnn", "--cluster", "k80x2", "--agent", "round-robin"]
    assert main([*argv, "--microbatches", "2", "--json"]) == 0
    assert '"cifar10_cnn/k80x2/train+mb2"' in capsys.readouterr().out
    assert main([*argv, "--microbatches", "0"]) == 2
    err = capsys.readouterr().err.strip()
    assert "--microbatches" in err and "from 1 to 1024" in err and "\n" not in err


def test_half_precision_and_micro_batches_compose():
    """A bf16 pipelined step: every micro-batch copy costs what the one-copy bf16 step's op costs, the
    static memory is the bf16 step's (16 bytes per parameter with Adam, once), and both simulators agree."""
    task = pg.get_task("cifar10_cnn", "v100x8", precision="bf16", microbatches=2)
    assert task.id == "cifar10_cnn/v100x8/train+bf16+mb2" and pg.parse_task_id(task.id) is task
    half = pg.get_task("cifar10_cnn", "v100x8", precision="bf16")
    n = task.n_forward
    for k in range(2):
        assert np.array_equal(task.duration[k * n:(k + 1) * n], half.duration[:n])
    assert np.array_equal(task.static_bytes, half.static_bytes)
    assert task.static_bytes.sum() == 16 * task.graph.param_bytes.sum() / 4
    placement = np.arange(n) * task.n_devices // n
    fast, slow = simulate(task, placement), reference_simulate(task, placement)
    assert fast.runtime == slow.runtime and np.array_equal(fast.peak_memory, slow.peak_memory)
