"""Proven lower bounds (`placement_gym.cost_model.proven_bound`): on random small tasks no feasible
placement, found by enumerating every one with the simulator, beats any argument; hand-made tasks where
each new argument is the one that binds, with its value computed by hand."""

from __future__ import annotations

import itertools
from dataclasses import replace

import numpy as np
import pytest
from conftest import OBJECTIVES, SEEDS, hand_cluster, hand_graph, random_cluster, random_task_sizes
from hypothesis import given, settings
from hypothesis import strategies as st

from placement_gym.cost_model import Bound, lower_bound, proven_bound, simulate_batch
from placement_gym.cost_model.proven_bounds import (
    CRITICAL_PATH,
    ENERGETIC,
    LOAD_LP,
    NO_FEASIBLE,
    PHASES,
    PLACED_PATH,
    WORK,
    allowed_devices,
)
from placement_gym.graph.synthetic import random_graph
from placement_gym.task.compiled import make_task

pytest.importorskip("ortools")

SLACK = 1e-12  # relative: the simulator's and the bounds' float sums may differ in the last bits


def optimum(task) -> float:
    """The best runtime over every feasible placement (inf when none is feasible), by enumeration."""
    rows = np.array(list(itertools.product(range(task.n_devices), repeat=task.n_forward)), dtype=np.int64)
    runtimes, feasible, _ = simulate_batch(task, rows)
    return float(runtimes[feasible].min()) if feasible.any() else float("inf")


@settings(max_examples=120, deadline=None)
@given(**random_task_sizes((1, 6), (2, 3)),
       objective=OBJECTIVES,
       executor_costs=st.booleans(),
       tight=st.booleans())
def test_no_feasible_placement_beats_any_argument(n_ops, n_devices, seed, objective, executor_costs, tight):
    rng = np.random.default_rng(seed)
    graph = random_graph(n_ops, seed=seed, max_inputs=3)
    # tight: capacities around the task's static bytes, so that some placements run out of memory
    loose = make_task(graph, random_cluster(n_devices, np.random.default_rng(seed), False, 1e13), objective)
    scale = max(loose.static_bytes.sum(), loose.tensor_bytes.max(initial=1.0)) if tight else 1e13
    task = make_task(graph, random_cluster(n_devices, rng, executor_costs, scale), objective)
    best = optimum(task)
    bound = proven_bound(task)
    if bound.value == np.inf:
        assert best == np.inf, f"bound claims no feasible placement, but one runs in {best}"
        return
    assert set(bound.arguments) == {CRITICAL_PATH, WORK, PLACED_PATH, ENERGETIC, PHASES, LOAD_LP}
    for name, value in bound.arguments.items():
        assert value <= best * (1 + SLACK), f"{name} = {value} > optimum {best}"
    assert bound.value == max(bound.arguments.values())
    assert bound.value >= lower_bound(task) * (1 - SLACK)


@settings(max_examples=60, deadline=None)
@given(
    n_ops=st.integers(5, 9),
    seed=SEEDS,
    objective=OBJECTIVES,
    executor_costs=st.booleans(),
)
def test_phases_never_beat_the_optimum_on_deeper_graphs(n_ops, seed, objective, executor_costs):
    # deeper, narrower graphs on 2 devices, where chains split the work into phases
    rng = np.random.default_rng(seed)
    graph = random_graph(n_ops, seed=seed, max_inputs=2, window=3)
    task = make_task(graph, random_cluster(2, rng, executor_costs, 1e13), objective)
    best = optimum(task)
    bound = proven_bound(task)
    assert bound.arguments[PHASES] <= best * (1 + SLACK), f"phases {bound.arguments[PHASES]} > optimum {best}"


def double_fork_join_task(width, n_devices, **cluster):
    """``s -> a_1..a_width -> m -> b_1..b_width -> t``, every op 1 ms (+ 1 us overhead), 4-byte
    tensors, identical devices."""
    ops = [("s", 1e9, 4, 0), *[(f"a{i}", 1e9, 4, 0) for i in range(width)], ("m", 1e9, 4, 0),
           *[(f"b{i}", 1e9, 4, 0) for i in range(width)], ("t", 1e9, 4, 0)]
    edges = [("s", f"a{i}") for i in range(width)] + [(f"a{i}", "m") for i in range(width)]
    edges += [("m", f"b{i}") for i in range(width)] + [(f"b{i}", "t") for i in range(width)]
    return make_task(hand_graph(ops, edges), hand_cluster(n_devices, **cluster), "inference")


def fork_join_task(width, n_devices, out_bytes, **cluster):
    """``s -> u_1..u_width -> t``, every op 1 ms (+ 1 us overhead) on identical devices."""
    branches = [(f"u{i}", 1e9, out_bytes, 0) for i in range(width)]
    ops = [("s", 1e9, out_bytes, 0), *branches, ("t", 1e9, 4, 0)]
    edges = [("s", f"u{i}") for i in range(width)] + [(f"u{i}", "t") for i in range(width)]
    return make_task(hand_graph(ops, edges), hand_cluster(n_devices, **cluster), "inference")


OP = 1e-3 + 1e-6  # 1e9 FLOPs at 1e12 FLOP/s plus the hand cluster's overhead


def test_placement_aware_path_binds_where_branches_cannot_afford_a_transfer():
    # fork-join of 2 on 2 devices, 1 GB tensors over 1 GB/s links: splitting the branches pays 1 s, so
    # they run one after the other: s, u0, u1, t
    task = fork_join_task(2, 2, 1e9)
    bound = proven_bound(task)
    assert bound.source == PLACED_PATH
    assert bound.value == pytest.approx(4 * OP, rel=1e-12)
    assert bound.arguments[CRITICAL_PATH] == pytest.approx(3 * OP, rel=1e-12)
    assert optimum(task) == pytest.approx(4 * OP, rel=1e-12)


def test_energetic_binds_where_parallel_branches_outnumber_devices():
    # fork-join of 6 on 3 devices with cheap transfers: in [1, C - 1] ms the 6 branches need 6 ms of
    # work and 3 devices give 3 x (C - 2) ms, so C >= 4 ms; the path arguments see 3 ms + a transfer.
    # The phases (the branches run between s and t) prove the same 4 ms exactly, the bisection a hair
    # less, so the source is phases.
    task = fork_join_task(6, 3, 4, latency=1e-6)
    bound = proven_bound(task)
    assert bound.arguments[ENERGETIC] == pytest.approx(4 * OP, rel=1e-6)
    assert bound.arguments[PHASES] == pytest.approx(4 * OP, rel=1e-12)
    assert bound.value == pytest.approx(4 * OP, rel=1e-6)
    assert bound.arguments[PLACED_PATH] < 3.1 * OP
    assert optimum(task) >= bound.value


def test_phases_bind_where_a_join_separates_two_fans():
    # s, 4 ops a, m, 4 ops b, t on 2 devices: the a's run inside [finish s, start m] and need 2 ms
    # there, the b's inside [finish m, start t], 2 ms: C >= 1 + 2 + 1 + 2 + 1 = 7 ms. Energetic
    # windows see the a's and b's as one pool of 9 ops in [1, C - 1] (C >= 6.5 ms), the load 5.5 ms,
    # the critical path 5 ms.
    task = double_fork_join_task(4, 2, latency=1e-6)
    bound = proven_bound(task)
    assert bound.source == PHASES
    assert bound.value == pytest.approx(7 * OP, rel=1e-12)
    assert bound.arguments[ENERGETIC] < 6.6 * OP
    assert bound.arguments[CRITICAL_PATH] == pytest.approx(5 * OP, rel=1e-12)
    best = optimum(task)
    assert 7 * OP <= best <= 7 * OP + 2e-4  # two transfers each way, 1 us latency + 4 ns


def test_load_lp_binds_where_one_device_is_slow():
    # 4 independent ops of 1 ms on a fast device, 10 ms on a slow one: the fractional optimum puts
    # x of the work on the slow one with 10 x = 4 - x ms, C = 40/11 ms; work / devices sees 2 ms
    ops = [(f"op{i}", 1e9, 4, 0) for i in range(4)]
    graph = hand_graph(ops, [("in", f"op{i}") for i in range(4)], inputs=[("in", 4)])
    cluster = replace(hand_cluster(2, overhead=1e-9), peak_flops=np.array([1e11, 1e12]))
    task = make_task(graph, cluster, "inference")
    slow, fast = 1e-2 + 1e-9, 1e-3 + 1e-9
    bound = proven_bound(task)
    assert bound.source == LOAD_LP
    assert bound.value == pytest.approx(4 * fast * slow / (slow + fast), rel=1e-9)
    assert bound.arguments[WORK] == pytest.approx(2 * fast, rel=1e-12)
    assert optimum(task) >= bound.value


def test_load_lp_counts_memory_the_fast_device_cannot_hold():
    # two independent 1 ms ops with 6 GB of parameters each; the fast device holds 8 GB, the slow one
    # (10x slower) 100 GB: the fast device holds at most 8/6 of a group's parameters, so C >= the slow
    # device's share of the work
    ops = [("a", 1e9, 4, 6e9), ("b", 1e9, 4, 6e9)]
    graph = hand_graph(ops, [("in", "a"), ("in", "b")], inputs=[("in", 4)])
    cluster = replace(
        hand_cluster(2, overhead=1e-9),
        peak_flops=np.array([1e11, 1e12]),
        memory_capacity=np.array([1e11, 8e9]),
    )
    task = make_task(graph, cluster, "inference")
    slow = 1e-2 + 1e-9
    # groups on the fast device: 6e9 x <= 8e9 -> x <= 4/3; the slow one does (2 - 4/3) x its 10 ms
    bound = proven_bound(task)
    assert bound.arguments[LOAD_LP] == pytest.approx(2 / 3 * slow, rel=1e-9)
    assert bound.source == LOAD_LP
    assert optimum(task) == pytest.approx(slow, rel=1e-12)  # one group must go to the slow device


def test_a_group_that_fits_nowhere_makes_every_placement_infeasible():
    graph = hand_graph([("a", 1e9, 4, 2e6), ("b", 1e9, 4, 0)], [("a", "b")])
    task = make_task(graph, hand_cluster(2, memory=1e6), "inference")
    assert not allowed_devices(task)[0].any()
    bound = proven_bound(task)
    assert bound.value == np.inf and bound.source.startswith(NO_FEASIBLE) and "'a'" in bound.source
    assert optimum(task) == np.inf


def test_same_task_same_bound_and_bound_type():
    graph = random_graph(40, seed=3, window=5)
    task = make_task(graph, random_cluster(3, np.random.default_rng(3), True, 1e10), "train_step")
    first, second = proven_bound(task), proven_bound(task)
    assert isinstance(first, Bound) and first == second
    without_lp = proven_bound(task, lp=False)
    assert LOAD_LP not in without_lp.arguments
    assert without_lp.value <= first.value


@pytest.mark.parametrize("seed", range(12))
def test_cpsat_bound_of_the_ungrouped_model_is_below_the_optimum(seed):
    from baselines.exact import cpsat_bound

    rng = np.random.default_rng(seed)
    graph = random_graph(int(rng.integers(2, 6)), seed=seed, window=2)
    objective = ["inference", "train_step"][seed % 2]
    loose = make_task(graph, random_cluster(2, np.random.default_rng(seed), False, 1e13), objective)
    scale = loose.static_bytes.sum() + loose.tensor_bytes.max() if seed % 3 == 0 else 1e13
    task = make_task(graph, random_cluster(int(rng.integers(2, 4)), rng, seed % 4 < 2, scale), objective)
    bound, status = cpsat_bound(task, 10.0, deterministic=True)
    best = optimum(task)
    assert status in ("OPTIMAL", "FEASIBLE", "INFEASIBLE")
    if status == "INFEASIBLE":
        assert best == np.inf
    else:
        assert bound <= best * (1 + SLACK)


def test_cpsat_bound_refuses_a_grouped_model():
    from baselines.exact import cpsat_bound

    task = make_task(random_graph(61, seed=0), hand_cluster(2), "inference")
    with pytest.raises(ValueError, match="at most max_ops=60"):
        cpsat_bound(task, 1.0)
