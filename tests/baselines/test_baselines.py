"""The non-search baselines (expert, partition, HEFT, CPOP, Baechi m-*) and the agent registry."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import MS, hand_cluster, hand_graph

from baselines import registry
from baselines.registry import get_agent, register, registered_names, run_agent
from baselines.scheduling import ListSchedule, heft_schedule
from placement_gym.cost_model import simulate, single_device
from placement_gym.evaluation.agents import AgentResult, evaluate_agent
from placement_gym.task.compiled import make_task
from placement_gym.task.named import get_task

# The baselines of this module; every one is memory-aware.
MEMORY_AWARE = ("expert", "partition", "heft", "cpop", "m-topo", "m-etf", "m-sct")
SPLITTERS = ("heft", "m-etf")  # list schedulers that must split a fork-join where it pays


def fork_join(tensor_bytes: float):
    """a -> (b, c) -> d: b and c take 10 ms each, a and d 1 us; every tensor ``tensor_bytes``."""
    graph = hand_graph(
        [("a", 1e6, tensor_bytes, 0), ("b", 1e10, tensor_bytes, 0), ("c", 1e10, tensor_bytes, 0),
         ("d", 1e6, tensor_bytes, 0)],
        [("a", "b"), ("a", "c"), ("b", "d"), ("c", "d")],
    )
    return make_task(graph, hand_cluster(2), objective="inference")


def test_fork_join_is_split_when_transfers_are_cheap():
    # 1 kB tensors cost 0.1 ms + 1 us: running b and c side by side saves about 10 ms of 20.
    task = fork_join(1e3)
    one_device = single_device(task).runtime
    for name in SPLITTERS:
        placement = get_agent(name)(task).placement
        assert placement[1] != placement[2], name
        assert simulate(task, placement).runtime < 0.6 * one_device, name


def test_chain_stays_on_one_device_when_transfers_are_dear():
    # Four 10 ms ops in a chain with 1 GB tensors (1 s per transfer): splitting only adds transfers.
    graph = hand_graph(
        [(name, 1e10, 1e9, 0) for name in "abcd"], [("a", "b"), ("b", "c"), ("c", "d")]
    )
    task = make_task(graph, hand_cluster(2), objective="inference")
    for name in (*SPLITTERS, "cpop", "m-sct", "expert"):
        placement = get_agent(name)(task).placement
        assert len(set(placement.tolist())) == 1, name
        assert simulate(task, placement).runtime == pytest.approx(4 * (10 * MS + 1e-6)), name


def test_memory_bound_graph_gets_a_feasible_split():
    # Two 0.25 GB-parameter ops: training keeps weights, gradients and two Adam moments (4 x 0.25 GB
    # = 1 GB each), so one 1.5 GB device holds one op but not both.
    graph = hand_graph([("x", 1e9, 1e3, 2.5e8), ("y", 1e9, 1e3, 2.5e8)], [("x", "y")])
    task = make_task(graph, hand_cluster(2, memory=1.5e9), objective="train_step")
    assert not single_device(task).feasible.any()
    for name in MEMORY_AWARE:
        report = evaluate_agent(task, name)
        assert report["feasible"], name
        assert report["placement"][0] != report["placement"][1], name


def test_insertion_fills_an_idle_gap_and_changes_the_device():
    # Four independent ops. Device 0 runs p (1 ms) at 0 and q (1 ms) at 5 ms, leaving a 4 ms gap;
    # device 1 runs r (4 ms) from 0. The 2 ms op s finishes at 3 ms in device 0's gap, at 6 ms on
    # device 1, and at 8 ms after q without insertion: HEFT's insertion puts it into the gap.
    graph = hand_graph([("p", 1e9, 8, 0), ("q", 1e9, 8, 0), ("r", 4e9, 8, 0), ("s", 2e9, 8, 0)], [])
    task = make_task(graph, hand_cluster(2), objective="inference")  # op times + 1 us overhead
    schedule = ListSchedule(task)
    for op, device, start in ((0, 0, 0.0), (1, 0, 5 * MS), (2, 1, 0.0)):
        begin, gap = schedule.insertion_slot(device, start, float(task.duration[op, device]))
        assert begin == pytest.approx(start)
        schedule.place(op, device, begin, gap)
    schedule.insert_earliest_finish(3, np.arange(2))
    assert schedule.device[3] == 0
    assert schedule.start[3] == pytest.approx(1 * MS, rel=0.01)
    assert schedule.finish[3] == pytest.approx(3 * MS, rel=0.01)
    # The gap is now [3 ms, 5 ms): a 3 ms op no longer fits there and goes after q (6 ms).
    assert schedule.insertion_slot(0, 0.0, 3 * MS)[0] == pytest.approx(6 * MS, rel=0.01)
    assert schedule.insertion_slot(0, 0.0, 1.5 * MS)[0] == pytest.approx(3 * MS, rel=0.01)


def test_heft_own_schedule_never_overlaps_ops_on_a_device():
    task = get_task("inception_v3", "k80x4")
    schedule = heft_schedule(task)
    for d in range(task.n_devices):
        ops = np.flatnonzero(schedule.device == d)
        order = ops[np.argsort(schedule.start[ops])]
        assert np.all(schedule.start[order][1:] >= schedule.finish[order][:-1] - 1e-12)
    # Every op starts after its predecessors finish.
    dag = schedule.dag
    for op in range(task.n_ops):
        preds = dag.pred_op[dag.pred_pointer[op]:dag.pred_pointer[op + 1]]
        assert np.all(schedule.finish[preds] <= schedule.start[op] + 1e-12)


@pytest.mark.parametrize("graph", ["cifar10_cnn", "inception_v3"])
def test_every_baseline_gives_a_valid_placement_and_honest_flags(graph):
    task = get_task(graph, "k80x4", "train_step")
    for name in (*MEMORY_AWARE, "best-single", "round-robin", "random"):
        report = evaluate_agent(task, name)
        placement = task.check_placement(np.array(report["placement"]))
        result = simulate(task, placement)
        assert report["feasible"] == result.feasible, name
        assert report["runtime"] == result.runtime, name
        assert report["speedup"] == pytest.approx(single_device(task).runtime / result.runtime), name
        assert report["gap"] >= 0, name
        if name in MEMORY_AWARE:
            assert report["evaluations"] >= 1 and result.feasible, name
        if "simulated_runtime" in report["info"]:
            assert report["info"]["simulated_runtime"] == result.runtime, name


def test_baselines_are_deterministic():
    task = get_task("inception_v3", "k80x4")
    for name in MEMORY_AWARE:
        first = get_agent(name)(task, seed=3).placement
        assert np.array_equal(get_agent(name)(task, seed=3).placement, first), name


def test_expert_puts_each_rnnlm_layer_on_its_own_gpu():
    task = get_task("rnnlm", "k80x4")
    result = get_agent("expert")(task)
    assert result.info["layout"] == "lstm-layers"
    placement = result.placement
    types = np.array(task.graph.op_types)
    # The exporter emits cells step by step, layer by layer: Split k belongs to layer k mod 2.
    splits = np.flatnonzero(types == "Split")
    assert len(splits) == 40
    layer0, layer1 = placement[splits[0::2]], placement[splits[1::2]]
    assert len(set(layer0.tolist())) == 1 and len(set(layer1.tolist())) == 1
    assert layer0[0] != layer1[0]
    assert set(placement[types == "LogSoftmax"].tolist()) == {task.cluster.device_index("gpu:3")}
    # Every Gemm feeding a layer's gate Split (through the gate Add) sits with that layer.
    src = task.graph.edge_src
    for split, device in zip(splits.tolist(), placement[splits].tolist()):
        feeding = src[task.graph.edge_dst == split]
        assert np.all(placement[feeding] == device)


def lstm_layer_devices(task, placement) -> dict[tuple[str, int], set[str]]:
    """The devices of the ops reading each (stack, layer) LSTM weight of a GNMT graph, by tensor name."""
    g = task.graph
    names = np.array(g.tensor_names)
    devices: dict[tuple[str, int], set[str]] = {}
    for tensor, op in zip(g.edge_tensor.tolist(), g.edge_dst.tolist()):
        stack, _, rest = str(names[tensor]).partition(".")
        if g.tensor_is_parameter[tensor] and stack in ("encoder", "decoder") and "_proj." in rest:
            layer = int(rest.split(".")[0])
            devices.setdefault((stack, layer), set()).add(task.cluster.device_names[placement[op]])
    return devices


@pytest.mark.parametrize("graph,cluster,layers", [("gnmt8", "k40x8", 8), ("gnmt4", "k80x4", 4),
                                                  ("gnmt2", "k80x2", 2), ("gnmt8", "k80x4", 8)])
def test_expert_puts_gnmt_layer_i_on_gpu_i_mod_the_gpu_count(graph, cluster, layers):
    # Encoder layer i and decoder layer i alike. The GPU count divides the layer count in every case
    # here, where numbering the decoder's layers after the encoder's gives the same GPUs.
    task = get_task(graph, cluster)
    result = get_agent("expert")(task)
    assert result.info["layout"] == "lstm-layers"
    gpus = task.cluster.device_kinds.count("gpu")
    expected = {(stack, i): {f"gpu:{i % gpus}"} for stack in ("encoder", "decoder") for i in range(layers)}
    assert lstm_layer_devices(task, result.placement) == expected


def test_expert_layouts_of_cnns_and_transformers():
    cnn = get_task("inception_v3", "k80x4")
    result = get_agent("expert")(cnn)
    assert result.info["layout"] == "single-gpu"
    assert set(result.placement.tolist()) == {single_device(cnn).best}
    resnet = get_task("resnet152", "k40x8")
    result = get_agent("expert")(resnet)
    assert result.info["layout"] == "single-gpu"
    assert set(result.placement.tolist()) == {single_device(resnet).best}
    bert = get_task("bert_base", "k80x4")
    result = get_agent("expert")(bert)
    assert result.info["layout"] == "gpipe"
    placement = result.placement
    assert np.all(np.diff(placement) >= 0)  # contiguous stages in topological order
    assert len(set(placement.tolist())) > 1
    norms = np.flatnonzero(np.array(bert.graph.op_types) == "LayerNormalization")
    for cut in np.flatnonzero(np.diff(placement)).tolist():  # stages end at a layer's output norm
        assert cut in norms[::2].tolist()


def test_registry_knows_every_agent_and_rejects_unknown_names():
    names = registered_names()
    for name in (*MEMORY_AWARE, "best-single", "round-robin", "random", "single:<device>"):
        assert name in names
    with pytest.raises(ValueError, match="heft"):
        get_agent("no-such-agent")
    with pytest.raises(ValueError, match="device"):
        get_agent("single:")
    task = get_task("cifar10_cnn", "k80x2")
    assert set(run_agent(task, "single:gpu:1").placement.tolist()) == {task.cluster.device_index("gpu:1")}
    with pytest.raises(ValueError, match="gpu:9"):
        run_agent(task, "single:gpu:9")
    for reserved in ("all", "single:x", ""):
        with pytest.raises(ValueError):
            register(reserved, "reserved")


def test_run_agent_checks_what_an_agent_returns(monkeypatch):
    task = get_task("cifar10_cnn", "k80x2")
    monkeypatch.setitem(registry._AGENTS, "bad-type", lambda task, seed=0, budget=None: [0] * task.n_forward)
    with pytest.raises(TypeError, match="AgentResult"):
        run_agent(task, "bad-type")
    monkeypatch.setitem(registry._AGENTS, "bad-shape",
                        lambda task, seed=0, budget=None: AgentResult(np.zeros(3, dtype=np.int64), 0))
    with pytest.raises(ValueError, match="shape"):
        run_agent(task, "bad-shape")


def test_all_runs_exact_only_on_small_graphs(monkeypatch):
    monkeypatch.setitem(registry._AGENTS, "exact", lambda task, seed=0, budget=None: None)
    monkeypatch.delitem(registry._IN_ALL, "exact", raising=False)
    small, large = get_task("cifar10_cnn", "k80x2"), get_task("inception_v3", "k80x2")
    assert "exact" in registry.names_for_all(small)
    assert "exact" not in registry.names_for_all(large)
    assert "heft" in registry.names_for_all(large)


def test_partition_on_many_different_gpus_tries_one_assignment():
    # dgx-h100x4: 32 GPUs on four nodes (links differ within and between nodes), so the GPUs are not
    # interchangeable and 32! assignments are far over the limit: one order per device pool is tried.
    # The count must be exact: 21! and more overflow int64.
    task = get_task("cifar10_cnn", "dgx-h100x4", "inference")
    result = get_agent("partition")(task)
    assert result.evaluations <= 2
    assert len(set(result.placement.tolist())) > 1
