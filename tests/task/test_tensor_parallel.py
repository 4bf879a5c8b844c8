"""Tensor parallelism over an op graph (`Step.tensor_parallel`): the shardings found from the graph,
the collectives Megatron-LM's layers need, their times by hand, the view of a cluster in groups, and
the special case: a degree of 1 is one device per op, bit for bit."""

from __future__ import annotations

import collections
import dataclasses
import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import placement_gym as pg
from placement_gym.cluster.tensor_groups import tensor_groups
from placement_gym.cost_model import reference_simulate, simulate
from placement_gym.graph.bundled import load_graph
from placement_gym.graph.synthetic import random_graph
from placement_gym.task.compiled import make_task
from placement_gym.task.passes.tensor_parallel import SHARDINGS, shard
from placement_gym.task.step import Step
from tests.conftest import HAND_OVERHEAD, assert_simulators_agree, hand_cluster, hand_graph, random_cluster
from tests.task.tensor_parallel_reference import every_rank_placement, every_rank_task

REDUCE, GATHER = "ReduceFromTensorParallelRegion", "GatherFromTensorParallelRegion"
SEEDS, OBJECTIVES = st.integers(0, 2**32 - 1), st.sampled_from(["inference", "train_step"])
COPY = "CopyToTensorParallelRegion"
LATENCY, BANDWIDTH = 1e-4, 1e9  # hand_cluster's links


def mlp(x_bytes: float = 4e6, hidden_bytes: float = 16e6, out_bytes: float = 4e6):
    """x -> up (weights 8 MB, 4 GFLOP) -> down (weights 8 MB, 4 GFLOP) -> output."""
    return hand_graph([("up", 4e9, hidden_bytes, 8e6), ("down", 4e9, out_bytes, 8e6)],
                      [("x", "up"), ("up", "down")], inputs=[("x", x_bytes)])


def collectives(graph) -> collections.Counter:
    return collections.Counter(t for t in graph.op_types if t.endswith("TensorParallelRegion"))


def test_a_degree_of_one_is_one_device_per_op_bit_for_bit():
    graph, cluster = load_graph("bert_base"), pg.load_cluster("h100x8")
    for step in (Step("train_step", precision="bf16"), Step("inference", microbatches=2),
                 Step("train_step", recompute=True, microbatches=3)):
        before = make_task(graph, cluster, step)
        after = make_task(graph, cluster, dataclasses.replace(step, tensor_parallel=1))
        assert after.id == before.id and "tp" not in after.id
        assert after.graph is graph and after.cluster is cluster and after.made_from is None
        for field in dataclasses.fields(before):
            value = getattr(before, field.name)
            if isinstance(value, np.ndarray):
                np.testing.assert_array_equal(getattr(after, field.name), value)
        placement = np.random.default_rng(0).integers(0, cluster.n_devices, graph.n_ops)
        assert simulate(after, placement).runtime == simulate(before, placement).runtime


def test_an_mlp_is_column_then_row_split_with_one_all_reduce_each_way():
    graph = mlp()
    sharded = shard(graph, 2)
    assert [SHARDINGS[s] for s in sharded.sharding] == ["split", "partial"]
    assert list(sharded.graph.op_types) == [COPY, "MatMul", "MatMul", REDUCE]
    np.testing.assert_array_equal(sharded.graph.flops, [0.0, 2e9, 2e9, 0.0])
    np.testing.assert_array_equal(sharded.graph.param_bytes, [0.0, 4e6, 4e6, 0.0])
    # the column output is split, the row output a whole-size partial sum, reduced to the graph output
    by_name = dict(zip(sharded.graph.tensor_names, sharded.graph.tensor_bytes))
    assert by_name["up"] == 8e6 and by_name["down"] == 4e6
    assert sharded.graph.tensor_is_output.tolist() == [n.endswith(REDUCE) for n in sharded.graph.tensor_names]


@pytest.mark.parametrize("objective", ["inference", "train_step"])
def test_collective_times_by_hand(objective):
    """On one group of 2 of hand_cluster's devices: the matmuls at half their FLOPs, the forward
    all-reduce of the output (2 ring steps of half the buffer) and, training, the backward all-reduce
    of x's gradient; the copy's forward and the reduction's backward take nothing."""
    task = make_task(mlp(), hand_cluster(4), Step(objective, tensor_parallel=2))
    assert task.n_devices == 2 and task.cluster.device_names == ("gpu:0-1", "gpu:2-3")
    names = task.op_names
    duration = dict(zip(names, task.duration[:, 0]))
    matmul = 2e9 / 1e12 + HAND_OVERHEAD
    assert duration["up"] == pytest.approx(matmul) and duration["down"] == pytest.approx(matmul)
    reduce_out = 2 * (LATENCY + 4e6 / 2 / BANDWIDTH)
    assert duration[f"down/{REDUCE}"] == pytest.approx(reduce_out)
    assert duration[f"x/{COPY}"] == 0.0
    if objective == "train_step":
        assert duration[f"x/{COPY}.grad"] == pytest.approx(2 * (LATENCY + 4e6 / 2 / BANDWIDTH))
        assert duration[f"down/{REDUCE}.grad"] == 0.0
        assert duration["up.grad"] == pytest.approx(2 * 2e9 / 1e12 + HAND_OVERHEAD)
    else:
        # one group runs the chain: its ops one after another
        runtime = simulate(task, np.zeros(task.n_forward, dtype=int)).runtime
        assert runtime == pytest.approx(2 * matmul + reduce_out)


def test_a_split_tensor_read_whole_is_gathered_and_its_gradient_reduce_scattered():
    graph = hand_graph([("head", 4e9, 6e6, 8e6)], [("x", "head")], inputs=[("x", 4e6)])
    task = make_task(graph, hand_cluster(4), Step("train_step", tensor_parallel=4))
    assert collectives(task.graph) == {COPY: 1, GATHER: 1}
    duration = dict(zip(task.op_names, task.duration[:, 0]))
    ring = 3 * (LATENCY + 6e6 / 4 / BANDWIDTH)  # T - 1 steps of a quarter of the gathered logits
    assert duration[f"head/{GATHER}"] == pytest.approx(ring)
    assert duration[f"head/{GATHER}.grad"] == pytest.approx(ring)


@pytest.mark.parametrize("name,layers", [("bert_base", 12), ("llama2_7b", 32), ("gpt3_175b", 96)])
def test_transformer_layers_have_one_all_reduce_per_attention_and_mlp_block(name, layers):
    graph = load_graph(name)
    sharded = shard(graph, 8)
    assert collectives(sharded.graph)[REDUCE] == 2 * layers
    # FLOPs and parameters are conserved: a split op's share times 8, a replicated op's whole
    origin = sharded.origin
    kept = origin >= 0
    split = sharded.sharding[origin[kept]] != 0
    share = np.where(split, 8.0, 1.0)
    assert (sharded.graph.flops[kept] * share).sum() == pytest.approx(graph.flops.sum(), rel=1e-12)
    params = (sharded.graph.param_bytes[kept] * share).sum()
    assert params == pytest.approx(graph.param_bytes.sum(), rel=1e-9)  # shards rounded up to whole bytes
    # every matmul with weights is split one way or the other
    weighted = (graph.param_bytes > 0) & (np.asarray(graph.op_types) == "MatMul")
    assert (sharded.sharding[weighted] != 0).all()


def test_constants_need_no_gradient_reduction():
    """An attention mask built from nothing the step learns is read by the split scores without a
    copy; the activation the projections read gets one."""
    graph = hand_graph(
        [("mask", 1e6, 1e6, 0), ("proj", 4e9, 8e6, 8e6), ("scores", 1e9, 8e6, 0), ("out", 4e9, 4e6, 8e6)],
        [("mask", "scores"), ("x", "proj"), ("proj", "scores"), ("scores", "out")], inputs=[("x", 4e6)])
    sharded = shard(graph, 2)
    assert [SHARDINGS[s] for s in sharded.sharding] == ["replicated", "split", "split", "partial"]
    assert collectives(sharded.graph) == {COPY: 1, REDUCE: 1}
    assert f"x/{COPY}" in sharded.graph.op_names


def test_groups_view():
    cluster = pg.load_cluster("dgx-h100x2")  # 2 CPUs and 16 GPUs on two hosts
    groups = tensor_groups(cluster, 8)
    assert groups.cluster.device_names == ("gpu:0-7", "gpu:8-15")
    gpu = cluster.device_index("gpu:0")
    np.testing.assert_array_equal(groups.cluster.link_bandwidth[0, 1],
                                  cluster.link_bandwidth[gpu, cluster.device_index("gpu:8")])
    inside = cluster.link_bandwidth[gpu, cluster.device_index("gpu:1")]
    assert groups.ring_bandwidth.tolist() == [inside, inside]
    with pytest.raises(ValueError, match="must divide the cluster's 16 GPUs"):
        tensor_groups(cluster, 3)
    with pytest.raises(ValueError, match="mixes hosts"):
        tensor_groups(cluster, 16)
    mixed = dataclasses.replace(hand_cluster(4), peak_flops=np.array([1e12, 2e12, 1e12, 1e12]))
    with pytest.raises(ValueError, match="mixes peak_flops"):
        tensor_groups(mixed, 2)
    assert tensor_groups(pg.load_cluster("h100-a100"), 8).cluster.peak_flops[1] > \
        tensor_groups(pg.load_cluster("h100-a100"), 8).cluster.peak_flops[0]


def test_tensor_parallel_tasks_agree_with_the_reference_simulator():
    graph, cluster = load_graph("bert_base"), pg.load_cluster("dgx-h100x2")
    rng = np.random.default_rng(1)
    for step in (Step("train_step", precision="bf16", tensor_parallel=4),
                 Step("train_step", recompute=True, microbatches=2, tensor_parallel=8),
                 Step("inference", tensor_parallel=2)):
        task = make_task(graph, cluster, step)
        assert task.id.endswith(f"+tp{step.tensor_parallel}") and task.source_graph is graph
        placements = [rng.integers(0, task.n_devices, task.n_forward) for _ in range(3)]
        placements.append(np.minimum(np.arange(task.n_forward) * task.n_devices // task.n_forward,
                                     task.n_devices - 1))
        assert_simulators_agree(task, placements)


def test_splitting_llama_70b_over_tensor_groups_beats_one_gpu_per_op():
    """Suite v3's Llama-2 70B step on four DGX H100: the same contiguous pipeline of layers over the
    GPUs is several times faster when each of four stages is a group of 8 (Megatron's TP8 x PP4)."""
    graph, cluster = load_graph("llama2_70b"), pg.load_cluster("dgx-h100x4")
    runtimes = {}
    for degree in (1, 8):
        task = make_task(graph, cluster, Step("train_step", precision="bf16", recompute=True, microbatches=4,
                                              tensor_parallel=degree))
        gpus = np.flatnonzero(np.asarray(task.cluster.device_kinds) == "gpu")
        share = np.cumsum(task.graph.flops) / task.graph.flops.sum()
        placement = gpus[np.minimum((share * len(gpus)).astype(int), len(gpus) - 1)]
        result = simulate(task, placement)
        assert result.feasible
        runtimes[degree] = result.runtime
    assert runtimes[8] < runtimes[1] / 3


def test_the_real_executor_refuses_a_split_step():
    pytest.importorskip("torch")
    from placement_gym.real.executor import Executor

    task = pg.get_task("cifar10_cnn", "dgx-h100x2", Step("inference", tensor_parallel=2))
    with pytest.raises(ValueError, match="not split over groups of 2 GPUs"):
        Executor(task)


def test_the_command_line_takes_a_degree(capsys):
    from placement_gym.cli import main

    argv = ["evaluate", "--graph", "bert_base", "--cluster", "dgx-h100x2", "--tensor-parallel", "8",
            "--agent", "round-robin", "--json"]
    assert main(argv) == 0
    report = json.loads(capsys.readouterr().out)
    task = pg.get_task("bert_base", "dgx-h100x2", Step(tensor_parallel=8))
    assert report["task"] == task.id == "bert_base/dgx-h100x2/train+tp8"
    placement = [task.cluster.device_index(report["placement"][op]) for op in task.graph.op_names]
    assert report["runtime"] == simulate(task, placement).runtime
    assert main(["evaluate", "--graph", "bert_base", "--tensor-parallel", "0"]) == 2
    assert "--tensor-parallel: expected an integer from 1 to 72, got '0'" in capsys.readouterr().err


@settings(max_examples=40, deadline=None)
@given(n_ops=st.integers(2, 40), seed=SEEDS, degree=st.sampled_from([2, 3, 4]),
       objective=OBJECTIVES, microbatches=st.integers(1, 3))
def test_random_graphs_every_read_in_a_sharding_its_reader_takes(n_ops, seed, degree, objective,
                                                                  microbatches):
    """On random graphs: a whole op never reads a split or partial tensor, a split op never a partial
    one, each is reached through the collective its rule names; the FLOPs add up; and the tasks of
    random groups agree with the reference simulator."""
    graph = random_graph(n_ops, seed=seed, n_data_inputs=2)
    sharded = shard(graph, degree)
    rank = sharded.graph
    state = np.full(rank.n_tensors, -1)
    for tensor, producer in enumerate(rank.tensor_producer.tolist()):
        if producer < 0:
            state[tensor] = 0
        elif sharded.origin[producer] >= 0:
            state[tensor] = sharded.sharding[sharded.origin[producer]]
        else:
            state[tensor] = 0  # every collective's output is whole on every rank
    for tensor, op in zip(rank.edge_tensor.tolist(), rank.edge_dst.tolist()):
        if rank.tensor_is_parameter[tensor]:
            continue
        if sharded.origin[op] < 0:
            kind = rank.op_types[op]
            expected = {REDUCE: [2], GATHER: [1], COPY: [0]}[kind]
            assert state[tensor] in expected
        elif sharded.sharding[sharded.origin[op]] == 0:
            assert state[tensor] == 0
        else:
            assert state[tensor] in (0, 1)
    kept = sharded.origin >= 0
    share = np.where(sharded.sharding[sharded.origin[kept]] != 0, degree, 1)
    assert (rank.flops[kept] * share).sum() == pytest.approx(graph.flops.sum(), rel=1e-9)
    rng = np.random.default_rng(seed)
    cluster = random_cluster(2 * degree, rng)
    cluster = dataclasses.replace(cluster, device_kinds=("gpu",) * cluster.n_devices,
                                  **{key: np.full(cluster.n_devices, getattr(cluster, key)[1])
                                     for key in ("peak_flops", "memory_bandwidth", "memory_capacity",
                                                 "launch_overhead")},
                                  efficiency=np.tile(cluster.efficiency[1], (cluster.n_devices, 1)))
    task = make_task(graph, cluster, Step(objective, microbatches=microbatches, tensor_parallel=degree))
    assert task.n_devices == 2
    assert_simulators_agree(task, [rng.integers(0, 2, task.n_forward) for _ in range(3)])


@settings(max_examples=30, deadline=None)
@given(n_ops=st.integers(2, 30), seed=SEEDS, degree=st.sampled_from([2, 3]), groups=st.integers(1, 3),
       objective=OBJECTIVES, microbatches=st.integers(1, 3), precision=st.sampled_from(["fp32", "bf16"]))
def test_one_rank_per_group_is_every_rank(n_ops, seed, degree, groups, objective, microbatches, precision):
    """Every rank of every group simulated on its own GPU of the whole cluster (the oracle of
    tests/task/tensor_parallel_reference.py) gives the representative rank's runtime, and each GPU the
    peak memory of its group, on random graphs, groups and placements; the links between two groups are
    as fast for every rank (rail-aligned, the view's assumption)."""
    rng = np.random.default_rng(seed)
    n = degree * groups
    base = random_cluster(n, rng)
    group_of = np.arange(n) // degree
    pair = rng.uniform(1e9, 1e11, (groups, groups)), rng.uniform(1e-6, 1e-4, (groups, groups))
    inside = rng.uniform(1e10, 3e11)
    same = group_of[:, None] == group_of[None, :]
    bandwidth = np.where(same, inside, pair[0][group_of][:, group_of])
    latency = np.where(same, pair[1].min() / 3, pair[1][group_of][:, group_of])
    cluster = dataclasses.replace(
        base, device_kinds=("gpu",) * n,
        **{key: np.repeat(getattr(base, key)[::degree], degree)
           for key in ("peak_flops", "memory_bandwidth", "memory_capacity", "launch_overhead")},
        efficiency=np.repeat(base.efficiency[::degree], degree, axis=0),
        link_bandwidth=bandwidth, link_latency=latency)
    graph = random_graph(n_ops, seed=seed, n_data_inputs=2)
    step = Step(objective, precision=precision, microbatches=microbatches, tensor_parallel=degree)
    task, whole = every_rank_task(graph, cluster, step)
    for placement in (rng.integers(0, groups, task.n_forward), np.zeros(task.n_forward, dtype=int)):
        one = simulate(task, placement)
        every = reference_simulate(whole, every_rank_placement(task, placement))
        assert every.runtime == one.runtime
        np.testing.assert_array_equal(every.peak_memory, np.repeat(one.peak_memory, degree))
        assert every.feasible == one.feasible


def test_the_view_assumes_every_rank_has_the_first_ranks_link():
    """Where one rank's link between two groups is slower than the first rank's, every rank waits for
    it: the oracle sees it, the view (timed on the first GPUs' link) does not. The documented limit."""
    n = 4
    cluster = hand_cluster(n)
    slow = cluster.link_bandwidth.copy()
    slow[1, 3] = slow[3, 1] = cluster.link_bandwidth[0, 2] / 1000
    graph = random_graph(30, seed=5, n_data_inputs=2)
    runtimes = []
    for links in (cluster, dataclasses.replace(cluster, link_bandwidth=slow)):
        task, whole = every_rank_task(graph, links, Step("inference", tensor_parallel=2))
        placement = (np.arange(task.n_forward) >= task.n_forward // 2).astype(int)
        runtimes.append((simulate(task, placement).runtime,
                         reference_simulate(whole, every_rank_placement(task, placement)).runtime))
    assert runtimes[0][1] == runtimes[0][0]
    assert runtimes[1][0] == runtimes[0][0] and runtimes[1][1] > 2 * runtimes[1][0]
