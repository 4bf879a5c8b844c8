"""Small hand-made graphs and clusters, and random clusters, shared by the tests."""

from __future__ import annotations

import itertools
import json
import time
import zlib

import numpy as np
import pytest
from hypothesis import strategies as st

from placement_gym.cluster.cluster import Cluster
from placement_gym.graph.opgraph import CATEGORIES, CATEGORY_INDEX, OpGraph

MS = 1e-3

SEEDS = st.integers(0, 2**31 - 1)
"""Hypothesis's strategy for a seed of numpy's generators."""
OBJECTIVES = st.sampled_from(["inference", "train_step"])
"""Hypothesis's strategy for a task's objective."""


def random_task_sizes(ops: tuple[int, int], devices: tuple[int, int]) -> dict[str, st.SearchStrategy]:
    """The strategies of a random task's size for hypothesis's `given`, by keyword: ``n_ops`` in
    ``ops`` and ``n_devices`` in ``devices`` (both bounds included), and its ``seed`` (`SEEDS`)."""
    return {"n_ops": st.integers(*ops), "n_devices": st.integers(*devices), "seed": SEEDS}


def assert_simulators_agree(task, placements) -> None:
    """The fast simulator and the reference give the same runtime, peak memory and feasibility, bit for
    bit, on each of ``placements``."""
    from placement_gym.cost_model import reference_simulate, simulate

    for placement in placements:
        fast, slow = simulate(task, placement), reference_simulate(task, placement)
        assert fast.runtime == slow.runtime
        np.testing.assert_array_equal(fast.peak_memory, slow.peak_memory)
        assert fast.feasible == slow.feasible


def check_cli_heft_runtime(graph: str, cluster: str, capsys) -> None:
    """``placement-gym evaluate --agent heft --json`` on a named graph and cluster reports the runtime
    that simulating its placement gives."""
    import placement_gym as pg
    from placement_gym.cli import main
    from placement_gym.cost_model import simulate

    assert main(["evaluate", "--graph", graph, "--cluster", cluster, "--agent", "heft", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    task = pg.get_task(graph, cluster)
    placement = [task.cluster.device_index(report["placement"][op]) for op in task.graph.op_names]
    assert report["runtime"] == simulate(task, placement).runtime


def hand_graph(ops, edges, inputs=(), outputs=None, name="hand") -> OpGraph:
    """An OpGraph from ``ops = [(name, flops, output_bytes, param_bytes)]`` in topological order and
    ``edges = [(producer name or data input name, consumer name)]``. Each op has one output tensor;
    ``inputs = [(name, bytes)]`` are data inputs; ``outputs`` (default: ops nobody reads) are graph
    outputs. Every op is a matmul with no memory traffic, so its time is FLOPs / peak + overhead."""
    index = {op[0]: i for i, op in enumerate(ops)}
    tensor_names = [op[0] for op in ops] + [name_ for name_, _ in inputs]
    producer = list(range(len(ops))) + [-1] * len(inputs)
    tensor_bytes = [float(op[2]) for op in ops] + [float(b) for _, b in inputs]
    tensor_of = {n: i for i, n in enumerate(tensor_names)}
    read = {tensor_of[src] for src, _ in edges}
    if outputs is None:
        outputs = [op[0] for op in ops if tensor_of[op[0]] not in read]
    keep = [i for i, n in enumerate(tensor_names) if i in read or n in outputs]
    remap = {old: new for new, old in enumerate(keep)}
    return OpGraph(
        name=name,
        op_names=tuple(op[0] for op in ops),
        op_types=("MatMul",) * len(ops),
        category=np.full(len(ops), CATEGORY_INDEX["matmul"]),
        flops=np.array([float(op[1]) for op in ops]),
        bytes_accessed=np.zeros(len(ops)),
        param_bytes=np.array([float(op[3]) for op in ops]),
        tensor_names=tuple(tensor_names[i] for i in keep),
        tensor_producer=np.array([producer[i] for i in keep]),
        tensor_bytes=np.array([tensor_bytes[i] for i in keep]),
        tensor_is_parameter=np.zeros(len(keep), dtype=bool),
        tensor_is_output=np.array([tensor_names[i] in outputs for i in keep]),
        edge_tensor=np.array([remap[tensor_of[src]] for src, _ in edges], dtype=np.int64),
        edge_dst=np.array([index[dst] for _, dst in edges], dtype=np.int64),
    )


HAND_OVERHEAD = 1e-6
"""`hand_cluster`'s default per-op launch overhead (seconds)."""
ONE_OP = 1 * MS + HAND_OVERHEAD
"""The runtime of an op of 1e9 FLOPs on a default `hand_cluster` device."""


def hand_cluster(
    n_devices=2, flops=1e12, memory=1e12, bandwidth=1e9, latency=1e-4, overhead=HAND_OVERHEAD
) -> Cluster:
    """Identical devices at ``flops`` FLOP/s (efficiency 1): an op of 1e9 FLOPs takes 1 ms + overhead;
    links of ``bandwidth`` bytes/s and ``latency`` s."""
    n = n_devices
    return Cluster(
        name="hand",
        device_names=tuple(f"gpu:{i}" for i in range(n)),
        device_kinds=("gpu",) * n,
        peak_flops=np.full(n, flops),
        memory_bandwidth=np.full(n, 1e15),
        memory_capacity=np.full(n, float(memory)),
        launch_overhead=np.full(n, overhead),
        efficiency=np.ones((n, len(CATEGORIES))),
        link_bandwidth=np.full((n, n), bandwidth),
        link_latency=np.full((n, n), latency),
    )


def two_independent_ops(env_class, **kwargs):
    """An env of ``env_class`` over two independent ops of 1e9 FLOPs on two identical `hand_cluster`
    devices (inference; ``kwargs`` go to the env): on one device they take 2 x `ONE_OP`, split `ONE_OP`."""
    graph = hand_graph([("a", 1e9, 1e3, 0), ("b", 1e9, 1e3, 0)], edges=[])
    return env_class(graph=graph, cluster=hand_cluster(2), objective="inference", **kwargs)


def play_episode(env, actions, seed=0) -> tuple[list[float], list[bool], list[dict], list]:
    """Reset ``env`` with ``seed`` and take ``actions`` (none may truncate): the rewards, the
    terminated flags, the infos (the reset's first) and the observations (the reset's first)."""
    obs, info = env.reset(seed=seed)
    rewards, ends, infos, observations = [], [], [info], [obs]
    for action in actions:
        obs, reward, terminated, truncated, info = env.step(action)
        assert not truncated
        rewards.append(reward)
        ends.append(terminated)
        infos.append(info)
        observations.append(obs)
    return rewards, ends, infos, observations


@pytest.fixture(scope="module")
def one_torch_thread():
    """torch at one intra-op thread for a test module, restored afterwards (the RL-library tests: small
    MLPs on a shared 2-core machine, where intra-op threads only wait for each other; skrl's per-node
    softmaxes ran 30x slower with 2 threads under load)."""
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def random_cluster(
    n: int, rng: np.random.Generator, executor_costs: bool = False, memory: float | None = None
) -> Cluster:
    """Random speeds (a slow first device, as a CPU), links and, with ``executor_costs``, hosts with
    dispatch threads, transfer synchronisation and shared segments (some links share several);
    capacities ``memory`` bytes scaled by a random factor per device (None: 0.1 to 10 GB)."""
    extra = {}
    if executor_costs:
        n_hosts = int(rng.integers(1, n + 1))
        n_segments = int(rng.integers(1, 4))
        segments = np.full((n, n, 2), -1)
        for i, j in itertools.permutations(range(n), 2):
            route = rng.permutation(n_segments)[: rng.integers(0, 3)]
            segments[i, j, : len(route)] = route
        extra = dict(
            dispatch_time=rng.choice([0.0, 1e-6, 3e-5, 3e-4], n),
            device_host=rng.integers(0, n_hosts, n),
            host_names=tuple(f"host{h}" for h in range(n_hosts)),
            host_dispatch_threads=tuple(int(k) for k in rng.integers(1, 3, n_hosts)),
            transfer_sync=rng.choice([0.0, 2e-6, 5e-4], n),
            segment_names=tuple(f"s{k}" for k in range(n_segments)),
            link_segments=segments,
        )
    return Cluster(
        name=f"random{n}",
        device_names=tuple(f"d{i}" for i in range(n)),
        device_kinds=tuple("cpu" if i == 0 else "gpu" for i in range(n)),
        peak_flops=rng.uniform(5e11, 1e13, n) * np.where(np.arange(n) == 0, 0.2, 1.0),
        memory_bandwidth=rng.uniform(5e10, 1e12, n),
        memory_capacity=np.round(
            rng.uniform(1e8, 1e10, n) if memory is None else memory * rng.uniform(0.3, 1.5, n)),
        launch_overhead=rng.uniform(1e-6, 2e-5, n),
        efficiency=rng.uniform(0.2, 1.0, (n, len(CATEGORIES))),
        link_bandwidth=rng.uniform(1e8, 3e11, (n, n)),
        link_latency=rng.uniform(1e-6, 1e-3, (n, n)),
        **extra,
    )


# --- slow tests: every one runs, a fifth of them a day -------------------------------------------------
# A test marked ``slow`` (over about 3 s on the 2-core development machine: the tutorials, the RL
# libraries, Ray, subprocess CLI runs) runs when its bucket (CRC-32 of its node id, modulo
# `SLOW_BUCKETS`) is the day's (days since 1970-01-01 UTC, modulo `SLOW_BUCKETS`), so that plain
# ``pytest`` (README's command, and CI) stays short and every slow test still runs every fifth day.
# ``--slow=all`` runs every one, ``--slow=none`` none, ``--slow=K/N`` bucket K of N; naming tests
# (``file::test``), ``-k`` or ``-m`` runs every slow test selected.
SLOW_BUCKETS = 5


def pytest_addoption(parser):
    parser.addoption(
        "--slow", default="sample", metavar="WHICH",
        help="tests marked slow to run: sample (default: the day's fifth, as CI), all, none, or K/N "
             "(bucket K of N, K from 0)",
    )


def _slow_choice(config) -> str | tuple[int, int]:
    """'all', 'none' or (bucket, buckets), or a UsageError naming what --slow takes."""
    value = config.getoption("--slow")
    explicit = (config.option.keyword or config.option.markexpr
                or any("::" in str(arg) for arg in config.args))
    if value == "all" or (value == "sample" and explicit):
        return "all"
    if value == "none":
        return "none"
    if value == "sample":
        return int(time.time() // 86400) % SLOW_BUCKETS, SLOW_BUCKETS
    try:
        bucket, buckets = (int(part) for part in value.split("/"))
        if not 0 <= bucket < buckets:
            raise ValueError
    except ValueError:
        raise pytest.UsageError(
            f"--slow takes sample, all, none or K/N with 0 <= K < N, got {value!r}"
        ) from None
    return bucket, buckets


def pytest_report_header(config):
    choice = _slow_choice(config)
    if isinstance(choice, str):
        return f"slow tests: {choice}"
    return (f"slow tests: bucket {choice[0]} of {choice[1]} (a fifth of them each day; --slow=all runs "
            "every one)")


def pytest_collection_modifyitems(config, items):
    choice = _slow_choice(config)
    if choice == "all":
        return
    kept, dropped = [], []
    for item in items:
        slow = item.get_closest_marker("slow") is not None
        runs = not slow or (choice != "none" and zlib.crc32(item.nodeid.encode()) % choice[1] == choice[0])
        (kept if runs else dropped).append(item)
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = kept


# --- the quick tier: `pytest -m quick`, a check of the common paths in a few minutes -------------------
# For each package of placement_gym and baselines, the test modules (or single tests, `file::test`) that
# exercise it, chosen for their speed: 1 to 2 minutes for all of them on a 2-core machine under load
# (docs/contributing.md has the measurements). Each test they name that is not marked slow gets the
# `quick` marker as it is collected; a marker selects only under `-m`, so plain `pytest` (README's
# command, and CI) runs exactly what it ran before. tests/project/test_quick_tier.py checks that every
# package has an entry here, that each entry's module imports its package, and that `pytest -m quick`
# selects them.
QUICK_TIER: dict[str, tuple[str, ...]] = {
    "placement_gym": ("tests/envs/test_env.py",),
    "placement_gym.calibration": ("tests/calibration/test_calibration.py",),
    "placement_gym.cli": ("tests/cli/test_cli.py",),
    "placement_gym.benchmarks": (
        "tests/benchmarks/test_bench.py::test_move_ceiling_on_a_chain_by_hand",
        "tests/benchmarks/test_bench.py::test_json_states_machine_load_and_the_documented_keys",
    ),
    "placement_gym.cluster": ("tests/cluster/test_cluster.py",),
    "placement_gym.cluster.presets": ("tests/cluster/test_cluster_preset_files.py",),
    "placement_gym.common": ("tests/common/test_untrusted_files.py",),
    "placement_gym.cost_model": ("tests/cost_model/test_cost_model.py",),
    "placement_gym.datasets": ("tests/datasets/test_datasets.py",),
    "placement_gym.envs": ("tests/envs/test_env.py",),
    "placement_gym.evaluation": ("tests/evaluation/test_evaluator_protocol.py",),
    "placement_gym.export": ("tests/export/test_export.py",),
    "placement_gym.export.models": ("tests/export/test_export.py",),
    "placement_gym.graph": ("tests/graph/test_onnx_import.py",),
    "placement_gym.leaderboard": ("tests/leaderboard/test_leaderboard.py",),
    "placement_gym.real": ("tests/real/test_real_executor.py",),
    "placement_gym.task": ("tests/task/test_task_identity.py",),
    "placement_gym.task.passes": ("tests/task/test_task_passes.py",),
    "placement_gym.plans": ("tests/plans/test_plan_costs.py",),
    "baselines": ("tests/baselines/test_baselines.py",),
    # the whole module resumes four learned agents (about 25 s): the refusal and the counter's arithmetic
    "baselines.leaderboard_fill": (
        "tests/baselines/test_fill_resume.py::"
        "test_the_fill_refuses_checkpoints_for_an_agent_that_keeps_none",
        "tests/baselines/test_fill_resume.py::"
        "test_a_counter_resumed_from_what_a_stopped_run_counted_reads_as_one_run",
    ),
    "baselines.learning": ("tests/baselines/test_learning.py",),
}
QUICK_NODES = frozenset(entry for entries in QUICK_TIER.values() for entry in entries)


def in_quick_tier(nodeid: str) -> bool:
    """Whether a test's node id (``tests/folder/x.py::Class::test[param]``) falls under an entry of
    `QUICK_TIER`: its module, its class or the test itself, whatever its parameters."""
    parts = nodeid.split("[", 1)[0].split("::")
    return any("::".join(parts[:k]) in QUICK_NODES for k in range(1, len(parts) + 1))


def pytest_itemcollected(item):
    if item.get_closest_marker("slow") is None and in_quick_tier(item.nodeid):
        item.add_marker(pytest.mark.quick)
