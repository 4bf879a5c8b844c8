"""Evaluations with a cutoff (`simulate(cutoff=)`, `Budget.scores(cutoff=)`, hill climbing): an uncut
result is the full simulation's bit for bit, a cut one's runtime is a proven bound above the cutoff,
and decisions "better than the cutoff" are the full result's."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import MS, OBJECTIVES, hand_cluster, hand_graph, random_cluster, random_task_sizes
from hypothesis import given, settings
from hypothesis import strategies as st

from baselines.search import anneal
from placement_gym.cost_model import simulate, simulate_batch
from placement_gym.evaluation.budget import Budget
from placement_gym.graph.synthetic import random_graph
from placement_gym.task.compiled import make_task

OVERHEAD = 1e-6  # hand_cluster's launch overhead
LATENCY = 1e-4  # hand_cluster's link latency


def op_time(gflops: float) -> float:  # hand_cluster: 1e12 FLOP/s
    return gflops * MS + OVERHEAD


def assert_cut_result_is_sound(result, full, cutoff: float) -> None:
    """``result`` (with ``cutoff``) against ``full`` (without): the contract of `simulate`'s cutoff."""
    if result.cut:
        assert cutoff < result.runtime <= full.runtime
        assert not result.feasible
        assert np.isnan(result.peak_memory).all()
    else:
        assert result.runtime == full.runtime
        assert result.feasible == full.feasible
        np.testing.assert_array_equal(result.peak_memory, full.peak_memory)
    if full.runtime <= cutoff:
        assert not result.cut
    # The decisions a search takes against the cutoff, infeasible counting as worse.
    assert (result.feasible and result.runtime < cutoff) == (full.feasible and full.runtime < cutoff)
    assert (result.feasible and result.runtime <= cutoff) == (full.feasible and full.runtime <= cutoff)


@settings(max_examples=80, deadline=None)
@given(**random_task_sizes((1, 40), (1, 5)),
       objective=OBJECTIVES,
       executor_costs=st.booleans(),
       microbatches=st.integers(1, 2),
       memory=st.sampled_from([None, 3e6, 3e7]),
       fraction=st.one_of(st.floats(0.0, 1.5), st.sampled_from([1.0, 0.999999, 1.000001])))
def test_cut_results_are_bounds_and_uncut_ones_the_full_simulation(
    n_ops, n_devices, seed, objective, executor_costs, microbatches, memory, fraction
):
    rng = np.random.default_rng(seed)
    graph = random_graph(n_ops, seed=seed, window=int(rng.integers(1, 6)))
    cluster = random_cluster(n_devices, rng, executor_costs, memory=memory)
    task = make_task(graph, cluster, objective, microbatches=microbatches)
    rows = rng.integers(0, n_devices, size=(9, n_ops))
    fulls = [simulate(task, row) for row in rows]
    cutoff = fulls[0].runtime * fraction
    counted = task.evaluations
    results = [simulate(task, row, cutoff=cutoff) for row in rows]
    assert task.evaluations == counted + len(rows)  # one evaluation each, cut or not
    for result, full in zip(results, fulls):
        assert_cut_result_is_sound(result, full, cutoff)
    # The batched call gives the single calls' numbers, row for row (9 rows: the parallel kernel).
    runtimes, feasible, peaks = simulate_batch(task, rows, cutoff=cutoff)
    assert runtimes.tolist() == [r.runtime for r in results]
    assert feasible.tolist() == [r.feasible for r in results]
    assert np.isnan(peaks[:, 0]).tolist() == [r.cut for r in results]
    np.testing.assert_array_equal(peaks, np.array([r.peak_memory for r in results]))


# A chain a -> b -> c of 1, 2 and 3 GFLOP (1, 2, 3 ms) with 1 MB tensors, on two identical devices.
CHAIN = hand_graph([("a", 1e9, 1e6, 0), ("b", 2e9, 1e6, 0), ("c", 3e9, 1e6, 0)], [("a", "b"), ("b", "c")])


def test_a_split_chain_is_cut_as_its_first_op_finishes():
    # The path after a holds the copy a -> b: a's finish plus the copy and b and c is the runtime.
    task = make_task(CHAIN, hand_cluster(), "inference")
    placement = [0, 1, 1]
    full = simulate(task, placement).runtime
    assert full == pytest.approx(op_time(1) + LATENCY + 1e6 / 1e9 + op_time(2) + op_time(3), rel=1e-12)
    cut = simulate(task, placement, cutoff=op_time(1))
    assert cut.cut and cut.runtime == pytest.approx(full, rel=1e-9)
    at = simulate(task, placement, cutoff=full)  # at the runtime: never cut, the full result
    assert not at.cut and at.runtime == full and at.feasible


# src (1 ms) feeds p (3 ms) and q (1 ms) on device 0; q's 1 kB output feeds r (2 ms) on device 1. Device
# 0 runs src, then p (ready with q, lower index), then q; the copy q -> r waits for q.
FORK = hand_graph([("src", 1e9, 1e3, 0), ("p", 3e9, 1e3, 0), ("q", 1e9, 1e3, 0), ("r", 2e9, 1e3, 0)],
                  [("src", "p"), ("src", "q"), ("q", "r")])


def test_a_fork_is_cut_at_the_op_whose_bound_first_passes_the_cutoff():
    task = make_task(FORK, hand_cluster(), "inference")
    placement = [0, 0, 0, 1]
    copy = LATENCY + 1e3 / 1e9
    full = simulate(task, placement).runtime
    assert full == pytest.approx(op_time(1) + op_time(3) + op_time(1) + copy + op_time(2), rel=1e-12)
    # As src and then p commit, the best bound is device 0's work: src, p, q (5 ms), above the path
    # src, q, copy, r (4.1 ms). As q commits, q's finish plus the copy and r is the runtime.
    device_work = op_time(1) + op_time(3) + op_time(1)
    early = simulate(task, placement, cutoff=0.9 * device_work)
    assert early.cut and early.runtime == pytest.approx(device_work, rel=1e-9)
    late = simulate(task, placement, cutoff=(device_work + full) / 2)
    assert late.cut and late.runtime == pytest.approx(full, rel=1e-9)
    assert not simulate(task, placement, cutoff=full).cut


def test_a_device_bound_counts_the_ops_still_to_run_there():
    # Two independent ops on one device: no path joins them, so only the device's load bounds the
    # makespan once the first (1 ms, ready at 0 like the other, lower index) is committed.
    graph = hand_graph([("a", 1e9, 1e3, 0), ("b", 3e9, 1e3, 0)], [])
    task = make_task(graph, hand_cluster(), "inference")
    full = simulate(task, [0, 0]).runtime
    assert full == pytest.approx(op_time(1) + op_time(3), rel=1e-12)
    result = simulate(task, [0, 0], cutoff=op_time(1) * 1.5)
    assert result.cut and result.runtime == pytest.approx(full, rel=1e-9)


def test_bad_cutoffs_are_refused_in_one_line():
    task = make_task(CHAIN, hand_cluster(), "inference")
    for bad in (float("nan"), "1.0", True):
        with pytest.raises(ValueError, match="cutoff must be a number of seconds"):
            simulate(task, [0, 0, 0], cutoff=bad)
    with pytest.raises(ValueError, match="schedule=True"):
        simulate(task, [0, 0, 0], schedule=True, cutoff=1.0)


def _task_and_moves(seed: int, n_moves: int = 12):
    """A random training step on three devices, a start placement and one-op moves from it."""
    rng = np.random.default_rng(seed)
    task = make_task(random_graph(30, seed=seed, window=4), hand_cluster(3, memory=1e12), "train_step")
    start = rng.integers(0, 3, task.n_forward)
    moves = np.repeat(start[None], n_moves, axis=0)
    ops = rng.integers(0, task.n_forward, n_moves)
    moves[np.arange(n_moves), ops] = (start[ops] + rng.integers(1, 3, n_moves)) % 3
    return task, start, moves


@pytest.mark.parametrize("seed", range(4))
def test_budget_decisions_against_the_current_placement_are_the_full_scores(seed):
    task, start, moves = _task_and_moves(seed)
    full_budget, cut_budget = Budget(task, 100), Budget(task, 100)
    current = full_budget.scores(start[None])[0]
    assert current.feasible and cut_budget.scores(start[None])[0].key == current.key
    full = full_budget.scores(moves)
    cut = cut_budget.scores(moves, cutoff=current.runtime)
    assert cut_budget.used == full_budget.used == 1 + len(np.unique(moves, axis=0))  # one each
    assert cut_budget.cut == sum(s.cut for s in {m.tobytes(): s for m, s in zip(moves, cut)}.values()) > 0
    for f, c in zip(full, cut):
        assert (c.key < current.key) == (f.key < current.key)
        assert (c.key <= current.key) == (f.key <= current.key)
        if c.cut:
            assert current.runtime < c.runtime <= f.runtime and c.key > current.key
        else:
            assert (c.runtime, c.feasible, c.overflow) == (f.runtime, f.feasible, f.overflow)
    # The first least key is the same move when any is no worse than the current placement.
    first = min(range(len(moves)), key=lambda i: full[i].key)
    if full[first].key <= current.key:
        assert min(range(len(moves)), key=lambda i: cut[i].key) == first
    assert cut_budget.best_score.key == full_budget.best_score.key  # a cut score is never the best
    np.testing.assert_array_equal(cut_budget.best_placement, full_budget.best_placement)


def test_the_memo_answers_lower_cutoffs_and_evaluates_again_above_a_cut_bound():
    task, start, moves = _task_and_moves(1)
    budget = Budget(task, 100)
    runtime = budget.scores(start[None])[0].runtime
    first = budget.scores(moves, cutoff=runtime)
    cut = [s for s in first if s.cut]
    assert cut
    used = budget.used
    lower = budget.scores(moves, cutoff=runtime * 0.5)  # below every cut bound: the memo answers
    assert all(a is b for a, b in zip(lower, first))
    assert budget.used == used and budget.cut_again == 0
    again = budget.scores(moves)  # no cutoff: the cut placements are evaluated again, and counted
    n_cut = len({m.tobytes() for m, s in zip(moves, first) if s.cut})
    assert budget.used == used + n_cut and budget.cut_again == n_cut
    assert not any(s.cut for s in again)


def test_the_budget_evaluates_in_full_through_an_evaluator_without_cutoffs():
    task, start, moves = _task_and_moves(2)

    class Plain:  # the Evaluator protocol, no ``takes_cutoff``
        name = "plain"

        def __init__(self):
            self.task, self.evaluations = task, 0

        def simulate(self, placement, schedule=False):
            return simulate(task, placement, schedule=schedule)

        def simulate_batch(self, rows):
            return simulate_batch(task, rows)

    budget = Budget(task, 100, Plain())
    assert not any(s.cut for s in budget.scores(moves, cutoff=0.0))


def test_hill_climbing_with_cutoffs_takes_the_same_steps():
    # anneal at t_start=0 is hill climbing; with cutoffs it must return the same placement after the
    # same evaluations, and the cutoffs must have cut something.
    task = make_task(random_graph(40, seed=5, window=4), hand_cluster(3, memory=1e12), "train_step")
    for seed in range(3):
        plain = anneal(task, seed=seed, budget=300, t_start=0.0, cutoffs=False)
        cut = anneal(task, seed=seed, budget=300, t_start=0.0)
        assert cut.info["cut"] > 0 and cut.info["cut_again"] == 0
        np.testing.assert_array_equal(cut.placement, plain.placement)
        assert (cut.evaluations, cut.info["runtime"], cut.info["steps"], cut.info["accepted"]) == (
            plain.evaluations, plain.info["runtime"], plain.info["steps"], plain.info["accepted"])
