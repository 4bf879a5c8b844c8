"""Every evaluator kind has the one `placement_gym.evaluation.evaluator.Evaluator` protocol: the cost model,
the profiled model, the real executor (virtual CPUs), a Ray pool, and the agents' budget wrapper."""

from __future__ import annotations

import numpy as np
import pytest
from profiles import synthetic_profile

from placement_gym.cost_model import simulate, simulate_batch, single_device
from placement_gym.evaluation.budget import Budget
from placement_gym.evaluation.evaluator import (
    SMALL_BATCH,
    CostModelEvaluator,
    Evaluator,
    SimulateOnlyEvaluator,
    as_evaluator,
    best_single_runtime,
    make_evaluator,
)
from placement_gym.real.evaluators import ProfiledEvaluator
from placement_gym.task.named import parse_task_id

SMALL = "cifar10_cnn/k80x2/train"


def _task():
    return parse_task_id(SMALL).independent_copy()  # counter at zero


def _rows(task, n, seed=0):
    return np.random.default_rng(seed).integers(0, task.n_devices, size=(n, task.n_forward))


def _check_protocol(evaluator, task, name):
    """The protocol's members, and counts that grow by one per placement, on the evaluator and the task."""
    assert isinstance(evaluator, Evaluator) and evaluator.name == name
    before, counted = evaluator.evaluations, task.evaluations
    one = evaluator.simulate(np.zeros(task.n_forward, dtype=np.int64))
    runtimes, feasible, peaks = evaluator.simulate_batch(_rows(task, 3))
    assert runtimes.shape == feasible.shape == (3,) and peaks.shape == (3, task.n_devices)
    assert runtimes.dtype == np.float64 and feasible.dtype == bool
    assert one.runtime > 0 and np.all(runtimes > 0)
    assert evaluator.evaluations == before + 4
    assert task.evaluations == counted + 4  # `Task.evaluations` stays the count the harness reads
    return runtimes


@pytest.mark.parametrize("n_rows", [3, SMALL_BATCH, 20])
def test_the_cost_model_evaluator_gives_the_cost_model_s_numbers(n_rows):
    task = _task()
    evaluator = CostModelEvaluator(task)
    _check_protocol(evaluator, task, "cost_model")
    rows = _rows(task, n_rows, seed=1)
    for got, expected in zip(evaluator.simulate_batch(rows), simulate_batch(task, rows)):
        np.testing.assert_array_equal(got, expected)
    for row in rows[:3]:
        assert evaluator.simulate(row).runtime == simulate(task, row).runtime
    assert evaluator.simulate(rows[0], schedule=True).schedule is not None
    assert best_single_runtime(evaluator, task) == single_device(task).runtime
    assert type(make_evaluator(task, "cost_model")) is CostModelEvaluator


def test_the_profiled_evaluator_is_the_cost_model_of_the_profiled_task():
    task = _task()
    profile = synthetic_profile(task.graph, list(task.cluster.device_names), seed=2)
    evaluator = ProfiledEvaluator(task, profile)
    runtimes = _check_protocol(evaluator, task, "profiled")  # the profiled task shares the counter
    rows = _rows(task, 3)
    assert runtimes.tolist() == [simulate(evaluator.task, row).runtime for row in rows]
    assert best_single_runtime(evaluator, task) == single_device(evaluator.task).runtime


def test_the_real_evaluator_runs_on_virtual_cpus():
    pytest.importorskip("torch")
    from placement_gym.cluster.machine import virtual_cpu_cluster
    from placement_gym.task.compiled import make_task

    task = make_task(parse_task_id(SMALL).graph, virtual_cpu_cluster(2), "inference")
    devices = {name: "cpu" for name in task.cluster.device_names}
    evaluator = make_evaluator(task, "real", devices=devices, batch=2)
    _check_protocol(evaluator, task, "real")
    assert evaluator.last_info is not None


@pytest.mark.slow
def test_a_ray_pool_is_an_evaluator():
    pytest.importorskip("ray")
    from placement_gym.real.distributed import RayEvaluatorPool

    task = _task()
    with RayEvaluatorPool(SMALL, n_actors=1, reward_mode="cost_model", num_cpus=1, task=task) as pool:
        runtimes = _check_protocol(pool, task, "cost_model")
        assert runtimes.tolist() == simulate_batch(task, _rows(task, 3))[0].tolist()
        assert as_evaluator(task, pool) is pool


def test_the_budget_wrapper_is_an_evaluator_counting_its_rows():
    task = _task()
    budgeted = Budget(task, 10)
    _check_protocol(budgeted, task, "cost_model")
    assert budgeted.used == budgeted.evaluations == 4


def test_as_evaluator_adapts_an_object_with_only_simulate():
    task = _task()

    class OnlySimulate:
        def __init__(self):
            self.task = task

        def simulate(self, placement, schedule=False):
            return simulate(self.task, placement, schedule=schedule)

    adapted = as_evaluator(task, OnlySimulate())
    assert isinstance(adapted, SimulateOnlyEvaluator)
    runtimes = _check_protocol(adapted, task, "OnlySimulate")
    assert runtimes.tolist() == simulate_batch(task, _rows(task, 3))[0].tolist()
    assert type(as_evaluator(task)) is CostModelEvaluator
    with pytest.raises(ValueError, match="simulate"):
        as_evaluator(task, object())
