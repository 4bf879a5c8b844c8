"""`Budget.scores` remembers the placements it scored: a repeat is neither evaluated nor counted again,
and what it keeps per placement does not grow with the graph (a 100,000-evaluation search of a
100,000-op graph must fit in memory)."""

from __future__ import annotations

import tracemalloc

import numpy as np
from conftest import hand_cluster, hand_graph

from placement_gym.evaluation.budget import Budget
from placement_gym.task.compiled import make_task

N_OPS = 20_000


def chain_task(n_ops: int):
    ops = [(f"op{i}", 1e6, 1e3, 0) for i in range(n_ops)]
    edges = [(f"op{i}", f"op{i + 1}") for i in range(n_ops - 1)]
    return make_task(hand_graph(ops, edges), hand_cluster(2), objective="inference")


def test_a_repeated_placement_is_answered_by_the_memo_without_an_evaluation():
    task = chain_task(50)
    rows = np.random.default_rng(0).integers(0, 2, (6, task.n_forward), dtype=np.int64)
    budget = Budget(task, 10)
    first = budget.scores(rows)
    counted = task.evaluations
    again = budget.scores(rows[::-1].copy())
    assert budget.used == 6 and task.evaluations == counted
    assert [s.runtime for s in again] == [s.runtime for s in first][::-1]
    # The same devices in another integer type are the same placement.
    assert budget.scores(rows[:1].astype(np.int32))[0].runtime == first[0].runtime and budget.used == 6


def test_what_the_memo_keeps_per_placement_does_not_grow_with_the_graph():
    task = chain_task(N_OPS)
    rng = np.random.default_rng(1)
    budget = Budget(task, 1_000)
    budget.scores(rng.integers(0, 2, (4, task.n_forward), dtype=np.int64))  # the first allocations
    batches = [rng.integers(0, 2, (50, task.n_forward), dtype=np.int64) for _ in range(4)]
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    for batch in batches:
        budget.scores(batch)
    kept = tracemalloc.get_traced_memory()[0] - before
    tracemalloc.stop()
    per_placement = kept / 200
    # A placement is 8 bytes an op (160 kB here); the memo may keep a score and a digest (some hundreds of
    # bytes with the per-device peaks), the curve a row.
    assert budget.used == 204 and per_placement < 2_000, per_placement
