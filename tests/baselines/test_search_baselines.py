"""The search baselines: `anneal`, `cem` (baselines/search.py) and the CP-SAT `exact` (baselines/exact.py)."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from conftest import hand_cluster, hand_graph

import baselines.search as search
import placement_gym.evaluation.evaluator as rows_module
from baselines.registry import get_agent
from baselines.search import anneal, cem
from placement_gym.cost_model import simulate, simulate_batch
from placement_gym.graph.synthetic import random_graph
from placement_gym.task.compiled import make_task
from placement_gym.task.named import get_task

SEARCHES = [anneal, cem]


def _fork_join(branches: int = 4, length: int = 3):
    """A source, ``branches`` chains of ``length`` 10 ms ops, and a join; tiny tensors."""
    ops = [("src", 1e9, 1e3, 0)]
    edges = [("x", "src")]
    for b in range(branches):
        for k in range(length):
            ops.append((f"b{b}_{k}", 1e10, 1e3, 0))
            edges.append((f"b{b}_{k - 1}" if k else "src", f"b{b}_{k}"))
    ops.append(("join", 1e9, 1e3, 0))
    edges += [(f"b{b}_{length - 1}", "join") for b in range(branches)]
    return hand_graph(ops, edges, inputs=[("x", 1e3)], name="forkjoin")


def _random_task(n_ops: int = 24, seed: int = 3, n_devices: int = 3):
    return make_task(random_graph(n_ops, seed=seed), hand_cluster(n_devices, memory=1e12), "train_step")


def _brute_force(task):
    """Best simulated runtime over every memory-feasible placement, and that placement."""
    rows = np.array(list(itertools.product(range(task.n_devices), repeat=task.n_forward)), dtype=np.int64)
    runtimes, feasible, _ = simulate_batch(task, rows)
    runtimes = np.where(feasible, runtimes, np.inf)
    best = int(np.argmin(runtimes))
    return float(runtimes[best]), rows[best]


# ---------------------------------------------------------------------------------------------------
# anneal and cem


@pytest.mark.parametrize("agent", SEARCHES)
def test_never_worse_than_start_on_cifar10(agent):
    task = get_task("cifar10_cnn", "k80x4", "train_step")
    start = np.arange(task.n_forward, dtype=np.int64) % task.n_devices  # a poor start: round robin
    result = agent(task, seed=0, budget=300, start=start)
    before, after = simulate(task, start), simulate(task, result.placement)
    assert after.feasible or not before.feasible
    assert after.runtime <= before.runtime
    assert result.info["start"] == "given"


@pytest.mark.parametrize("agent", SEARCHES)
def test_never_worse_than_best_heuristic_start(agent):
    # Default start: the best registered constructive baseline; the search only improves on it.
    task = get_task("cifar10_cnn", "k80x2", "train_step")
    result = agent(task, seed=1, budget=400)
    starts = result.info["start_candidates"]
    best_start = min(v["runtime"] for v in starts.values() if v["feasible"])
    simulated = simulate(task, result.placement)
    assert simulated.feasible and simulated.runtime <= best_start
    assert "best-single" in starts


@pytest.mark.parametrize("agent", SEARCHES)
@pytest.mark.parametrize("seed", [0, 1])
def test_never_worse_than_start_on_random_case(agent, seed):
    task = _random_task(seed=seed + 10)
    start = np.random.default_rng(seed).integers(0, task.n_devices, task.n_forward)
    result = agent(task, seed=seed, budget=150, start=start)
    assert simulate(task, result.placement).runtime <= simulate(task, start).runtime


class _Counter:
    """Counts evaluations through the simulator functions the searches reach (through
    `placement_gym.evaluation.evaluator.CostModelEvaluator.simulate_batch`)."""

    def __init__(self, monkeypatch) -> None:
        self.count = 0
        real_one, real_batch = rows_module.simulate, rows_module.simulate_batch

        def one(task, placement, **kwargs):
            self.count += 1
            return real_one(task, placement, **kwargs)

        def batch(task, placements):
            self.count += len(placements)
            return real_batch(task, placements)

        monkeypatch.setattr(rows_module, "simulate", one)
        monkeypatch.setattr(rows_module, "simulate_batch", batch)


@pytest.mark.parametrize("agent", SEARCHES)
@pytest.mark.parametrize("budget", [1, 7, 64, 301])
def test_budget_is_respected_exactly(agent, budget, monkeypatch):
    task = _random_task(n_ops=40, seed=5, n_devices=4)  # 4^40 placements: the budget, not convergence, stops
    counter = _Counter(monkeypatch)
    start = np.zeros(task.n_forward, dtype=np.int64)
    result = agent(task, seed=0, budget=budget, start=start)
    assert counter.count == result.evaluations == budget


def test_budget_counts_the_start_agents():
    task = get_task("cifar10_cnn", "k80x2", "train_step")
    result = anneal(task, seed=0, budget=50)
    assert result.info["start_evaluations"] >= len(result.info["start_candidates"])
    assert result.evaluations <= 50
    with pytest.raises(ValueError, match="budget"):
        anneal(task, seed=0, budget=2)


@pytest.mark.parametrize("agent", SEARCHES)
def test_deterministic_for_a_seed(agent):
    task = _random_task(n_ops=30, seed=7)
    start = np.zeros(task.n_forward, dtype=np.int64)
    first = agent(task, seed=4, budget=200, start=start)
    second = agent(task, seed=4, budget=200, start=start)
    assert np.array_equal(first.placement, second.placement)
    assert first.evaluations == second.evaluations
    assert first.info == second.info


@pytest.mark.parametrize("agent", SEARCHES)
def test_finds_the_split_of_a_fork_join(agent):
    # Four independent 3-op branches of 10 ms each on four devices: one branch per device runs the
    # step in src + one branch + join + two transfers; all on one device takes src + 12 ops + join.
    task = make_task(_fork_join(), hand_cluster(4), "inference")
    op = 1e10 / 1e12 + 1e-6
    end_op = 1e9 / 1e12 + 1e-6
    transfer = 1e-4 + 1e3 / 1e9
    split = end_op + transfer + 3 * op + transfer + end_op
    start = np.zeros(task.n_forward, dtype=np.int64)
    assert simulate(task, start).runtime > 3 * split
    result = agent(task, seed=0, budget=1500, start=start)
    runtime = simulate(task, result.placement).runtime
    # The split is found: within one extra transfer (a 0.3% plateau) for cem, exactly for anneal,
    # whose swaps and kicks leave that plateau.
    assert split <= runtime <= split + transfer * 1.01
    if agent is anneal:
        assert runtime == pytest.approx(split, rel=1e-9)


@pytest.mark.parametrize("agent", SEARCHES)
def test_memory_bound_case_ends_feasible(agent):
    # Six ops of 1 GB parameters, devices of 3.5 GB: no single device holds the model (inference:
    # static memory = parameters), any 3/3 split does.
    ops = [(f"op{i}", 1e9, 1e3, 1e9) for i in range(6)]
    edges = [("x", "op0")] + [(f"op{i}", f"op{i + 1}") for i in range(5)]
    graph = hand_graph(ops, edges, inputs=[("x", 1e3)], name="memory")
    task = make_task(graph, hand_cluster(2, memory=3.5e9), "inference")
    start = np.zeros(task.n_forward, dtype=np.int64)
    assert not simulate(task, start).feasible
    result = agent(task, seed=0, budget=300, start=start)
    assert simulate(task, result.placement).feasible
    assert result.info["feasible"]


def test_registered_and_bad_arguments():
    assert get_agent("anneal") is anneal and get_agent("cem") is cem
    task = _random_task()
    with pytest.raises(ValueError, match="budget"):
        anneal(task, budget=0)
    with pytest.raises(ValueError, match="placement"):
        cem(task, budget=10, start=np.zeros(3, dtype=np.int64))
    with pytest.raises(ValueError, match="unknown agent"):
        anneal(task, budget=10, start=["no-such-agent"])


# ---------------------------------------------------------------------------------------------------
# exact (CP-SAT)


@pytest.mark.parametrize("objective", ["inference", "train_step"])
def test_exact_finds_the_brute_force_optimum(objective):
    pytest.importorskip("ortools")
    from baselines.exact import exact

    # A 5-op fork-join on 2 devices: one tensor per link direction, so list scheduling and the
    # solver's free order agree; 32 placements to brute-force.
    flops = {"a": 1e9, "b": 1e10, "c": 8e9, "d": 1e9, "e": 2e9}
    ops = [(name, f, 1e3, 0) for name, f in flops.items()]
    edges = [("x", "a"), ("a", "b"), ("a", "c"), ("b", "d"), ("c", "d"), ("d", "e")]
    task = make_task(hand_graph(ops, edges, inputs=[("x", 1e3)]), hand_cluster(2), objective)
    optimum, _ = _brute_force(task)
    result = exact(task, seed=0, budget=20)
    assert result.info["status"] == "OPTIMAL"
    assert simulate(task, result.placement).runtime == pytest.approx(optimum, rel=1e-12)
    assert result.info["runtime"] == pytest.approx(optimum, rel=1e-12)
    # durations are rounded down to 0.1 us: the bound is at most the optimum, and close to it
    assert result.info["bound_s"] <= optimum
    assert result.info["bound_s"] == pytest.approx(optimum, abs=1e-6)
    assert optimum < simulate(task, np.zeros(5, dtype=np.int64)).runtime  # splitting wins here


@pytest.mark.parametrize("seed", [0, 1])
def test_exact_bound_never_exceeds_the_best_simulated_runtime(seed):
    # The model is a relaxation of the simulator (any order, rounded-down times, a necessary memory
    # condition), so its proven optimum cannot beat every placement's simulated runtime.
    pytest.importorskip("ortools")
    from baselines.exact import exact

    task = make_task(random_graph(7, seed=seed), hand_cluster(3, memory=1e12), "train_step")
    optimum, _ = _brute_force(task)
    result = exact(task, seed=0, budget=20)
    assert result.info["status"] == "OPTIMAL"
    assert result.info["bound_s"] <= optimum * (1 + 1e-12)
    assert result.info["objective_s"] <= result.info["runtime"] * (1 + 1e-12)


def test_exact_never_returns_a_placement_slower_than_its_hint():
    # p's large output keeps a and b with it; a (10 ms) is listed before b (1 ms), which feeds c (10 ms).
    # The solver's optimum runs b first and c on the other device (11 ms in its free order), but the
    # simulator's list schedule runs a first (21.2 ms), slower than everything on one device (21.1 ms).
    pytest.importorskip("ortools")
    from baselines.exact import exact

    ops = [("p", 1e8, 1e8, 0), ("a", 1e10, 1e3, 0), ("b", 1e9, 1e3, 0), ("c", 1e10, 1e3, 0)]
    edges = [("x", "p"), ("p", "a"), ("p", "b"), ("b", "c")]
    task = make_task(hand_graph(ops, edges, inputs=[("x", 1e3)]), hand_cluster(2), "inference")
    optimum, _ = _brute_force(task)
    result = exact(task, seed=0, budget=10)
    assert result.info["status"] == "OPTIMAL" and result.info["objective_s"] < 0.6 * optimum
    assert result.info["runtime"] == simulate(task, result.placement).runtime
    assert result.info["runtime"] <= result.info["hint_runtime"]
    assert result.info["runtime"] == pytest.approx(optimum, rel=1e-12) and result.info["kept_hint"]


def test_exact_respects_static_memory():
    pytest.importorskip("ortools")
    from baselines.exact import exact

    ops = [(f"op{i}", 1e9, 1e3, 1e9) for i in range(4)]
    edges = [("x", "op0")] + [(f"op{i}", f"op{i + 1}") for i in range(3)]
    task = make_task(hand_graph(ops, edges, inputs=[("x", 1e3)]), hand_cluster(2, memory=2.5e9), "inference")
    result = exact(task, seed=0, budget=10)
    assert result.info["feasible"]
    assert np.bincount(result.placement, minlength=2).tolist() == [2, 2]


def test_exact_refuses_large_graphs_without_groups():
    pytest.importorskip("ortools")
    from baselines.exact import exact

    task = make_task(random_graph(80, seed=0), hand_cluster(2), "inference")
    with pytest.raises(ValueError, match=r"80 units.*groups="):
        exact(task, budget=1)
    result = exact(task, seed=0, budget=2, groups=8)  # an 8-way partition: 8 units
    assert result.info["units"] == 8
    labels = search.make_grouping(task.graph, 8).group_of_op
    for group in range(8):
        assert len(np.unique(result.placement[labels == group])) == 1
    assert result.info["status"] in ("OPTIMAL", "FEASIBLE")
    assert get_agent("exact") is exact
