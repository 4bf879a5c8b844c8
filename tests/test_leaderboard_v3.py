"""Suite v3: v1's tasks with v1's frozen figures plus today's workloads in forms a heuristic fits in
memory (checked here by running that heuristic), accepted beside v2."""

from __future__ import annotations

import pytest

from placement_gym.cost_model import simulate
from placement_gym.evaluation.agents import run_installed_agent
from placement_gym.leaderboard import CURRENT_SUITE, SUITES
from placement_gym.leaderboard.harness import MAPPING_SUITES
from placement_gym.leaderboard.suite import (
    ACCEPTED_SUITES,
    V2_NEW_TASKS,
    V3,
    V3_FITTED_BY,
    V3_NEW_TASKS,
    fingerprint_problems,
)
from placement_gym.task.named import parse_task_id

# On the 2-core development machine: the 103k-op graph's dataset ~15 s to build on first use and its
# expert ~100 s; the 36-device Llama-2 step ~2 s to build and its expert ~3 s.
_SLOW_TASKS = ("unrolled-v1:gnmt-tf-4/k40x8/inference",)


def test_v3_is_accepted_beside_v2():
    assert CURRENT_SUITE == "v1"
    assert V3 in ACCEPTED_SUITES and V3 not in MAPPING_SUITES


def test_v3_holds_every_v1_task_with_v1s_frozen_figures_and_v2s_shared_ones():
    v1, v2, v3 = SUITES["v1"], SUITES["v2"], SUITES[V3]
    assert v3.task_ids == v1.task_ids + V3_NEW_TASKS
    for task_id in v1.task_ids:
        assert v3.get(task_id) == v1.get(task_id), task_id
    for task_id in set(V3_NEW_TASKS) & set(V2_NEW_TASKS):
        assert v3.get(task_id) == v2.get(task_id), task_id
    assert set(V3_FITTED_BY) == set(V3_NEW_TASKS)


def _tasks():
    return [pytest.param(t, marks=pytest.mark.slow) if t in _SLOW_TASKS else t for t in V3_NEW_TASKS]


@pytest.mark.parametrize("task_id", _tasks())
def test_the_new_tasks_reproduce_their_frozen_fingerprint(task_id):
    assert fingerprint_problems(SUITES[V3].get(task_id)) == []


@pytest.mark.parametrize("task_id", _tasks())
def test_a_heuristic_fits_every_new_task(task_id):
    """What `measure_v3` checks when it freezes the suite: the named heuristic's placement fits every
    device's memory (v2's 70B step and 103k-op training step fit none of the suite's baselines)."""
    task = parse_task_id(task_id)
    result = simulate(task, run_installed_agent(task, V3_FITTED_BY[task_id]).placement)
    assert result.feasible
    assert (result.peak_memory <= task.cluster.memory_capacity).all()
