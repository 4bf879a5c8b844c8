"""`RayEvaluatorPool` on a local Ray instance with two actors: same numbers as the local evaluators,
the work spread over both actors, the env interface, clear errors."""

from __future__ import annotations

import importlib
import re
import sys

import gymnasium as gym
import numpy as np
import pytest

ray = pytest.importorskip("ray")

import placement_gym  # noqa: E402,F401  (registers the env ids)
from placement_gym.common.extras import install_command  # noqa: E402
from placement_gym.cost_model import simulate, simulate_batch  # noqa: E402
from placement_gym.evaluation.evaluator import Evaluator, as_evaluator  # noqa: E402
from placement_gym.real.distributed import RayEvaluatorPool, TaskSpec, as_task_spec  # noqa: E402
from placement_gym.task.named import get_task  # noqa: E402
from placement_gym.task.step import Step  # noqa: E402

SPEC = TaskSpec("cifar10_cnn", "k80x2", "train_step")


@pytest.mark.slow
def test_a_pool_that_starts_ray_shuts_it_down():
    """Runs before the module's shared instance exists (tests run in file order)."""
    if ray.is_initialized():
        pytest.skip("a Ray instance is already running in this process")
    with RayEvaluatorPool(SPEC, n_actors=1, reward_mode="cost_model", num_cpus=1) as pool:
        assert ray.is_initialized() and pool.simulate(np.zeros(pool.task.n_forward)).feasible
    assert not ray.is_initialized()
    pool.close()  # a second close is harmless
    with pytest.raises(RuntimeError, match="closed"):
        pool.simulate(np.zeros(pool.task.n_forward))


@pytest.fixture(scope="module")
def local_ray():
    """One local Ray instance for the module (start-up is the slow part), shut down at the end."""
    started = not ray.is_initialized()
    if started:
        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield ray
    if started:
        ray.shutdown()


@pytest.fixture(scope="module")
def pool(local_ray):
    with RayEvaluatorPool(SPEC, n_actors=2, reward_mode="cost_model") as pool:
        yield pool


def _random_placements(task, n, seed=0):
    return np.random.default_rng(seed).integers(0, task.n_devices, size=(n, task.n_forward))


@pytest.mark.slow
def test_evaluate_batch_equals_simulate_batch_and_uses_both_actors(pool):
    task = SPEC.build()
    before = {s["pid"]: s["evaluations"] for s in pool.actor_stats()}
    rows = _random_placements(task, 9)
    rows[0] = 0  # one single-device row among random ones
    got = pool.evaluate_batch(rows)
    expected = simulate_batch(task, rows)
    for g, e in zip(got, expected, strict=True):
        assert g.shape == e.shape and g.dtype == e.dtype
        np.testing.assert_array_equal(g, e)
    after = {s["pid"]: s["evaluations"] for s in pool.actor_stats()}
    assert len(after) == 2  # two actors, two processes
    done = {pid: after[pid] - before[pid] for pid in after}
    assert all(n > 0 for n in done.values()) and sum(done.values()) == len(rows)
    # The pool is an Evaluator: simulate_batch is the same method, and it refuses another task's shape.
    assert isinstance(pool, Evaluator) and pool.name == pool.reward_mode
    np.testing.assert_array_equal(pool.simulate_batch(rows)[0], expected[0])
    with pytest.raises(ValueError, match="scores task cifar10_cnn/k80x2/train"):
        as_evaluator(get_task("cifar10_cnn", "k80x4"), pool)


def test_simulate_equals_local_simulate(pool):
    task = pool.task
    for row in _random_placements(task, 3, seed=1):
        got, expected = pool.simulate(row), simulate(task, row)
        assert got.runtime == expected.runtime and got.feasible == expected.feasible
        np.testing.assert_array_equal(got.peak_memory, expected.peak_memory)
        assert got.schedule is None
    scheduled = pool.simulate(row, schedule=True)
    expected = simulate(task, row, schedule=True).schedule
    np.testing.assert_array_equal(scheduled.schedule.op_finish, expected.op_finish)
    assert pool.last_info is None  # only real runs have a summary


def test_env_with_the_pool_gives_the_same_reward(pool):
    kwargs = {"graph": SPEC.graph, "cluster": SPEC.cluster, "step": SPEC.step}
    local, remote = gym.make("DevicePlacement-v0", **kwargs), gym.make("DevicePlacement-v0", **kwargs)
    remote.unwrapped.evaluator = pool
    before = sum(s["evaluations"] for s in pool.actor_stats())
    for action in _random_placements(pool.task, 2, seed=2):
        local.reset(seed=0)
        remote.reset(seed=0)
        _, reward_local, *_, info_local = local.step(action)
        _, reward_remote, *_, info_remote = remote.step(action)
        assert reward_remote == reward_local and info_remote["runtime"] == info_local["runtime"]
    assert sum(s["evaluations"] for s in pool.actor_stats()) == before + 2  # the steps went to the pool


def test_bad_input_is_a_clear_error(pool, local_ray):
    with pytest.raises(ValueError, match="must have shape \\(batch, "):
        pool.evaluate_batch(np.zeros((2, 3), dtype=np.int64))
    with pytest.raises(ValueError, match="out of range"):
        pool.simulate(np.full(pool.task.n_forward, 7))
    empty = pool.evaluate_batch(np.zeros((0, pool.task.n_forward), dtype=np.int64))
    assert [a.shape[0] for a in empty] == [0, 0, 0] and empty[2].shape[1] == pool.task.n_devices
    with pytest.raises(ValueError, match="unknown evaluator"):
        RayEvaluatorPool(SPEC, reward_mode="fast")
    with pytest.raises(ValueError, match="n_actors"):
        RayEvaluatorPool(SPEC, n_actors=0, reward_mode="cost_model")
    with pytest.raises(ValueError, match="not the Task"):
        RayEvaluatorPool(pool.task, reward_mode="cost_model")
    with pytest.raises(ValueError, match="one per actor"):
        RayEvaluatorPool(SPEC, n_actors=2, devices=[{"cpu:0": "cpu"}])
    # An actor that cannot build its evaluator: the evaluator's own message, not a Ray traceback.
    with pytest.raises(ValueError, match="failed to start.*needs devices="):
        RayEvaluatorPool(SPEC, n_actors=1, reward_mode="real")


def test_task_specs():
    assert as_task_spec("cifar10_cnn/k80x2/train") == TaskSpec("cifar10_cnn", "k80x2", "train")
    assert as_task_spec({"graph": "g", "cluster": "c"}) == TaskSpec("g", "c")
    assert as_task_spec(("g", "c", "train+sgd")) == TaskSpec("g", "c", Step(optimizer="sgd"))
    mapping = {"graph": "g", "cluster": "c", "objective": "inference", "precision": "bf16"}
    assert as_task_spec(mapping) == TaskSpec("g", "c", "inference+bf16")
    with pytest.warns(DeprecationWarning, match="by position is deprecated"):
        assert as_task_spec(("g", "c", "train_step", "sgd", "bf16")) == TaskSpec("g", "c", "train+sgd+bf16")
    with pytest.raises(ValueError, match="graph/cluster/objective"):
        as_task_spec("cifar10_cnn/k80x2")
    with pytest.raises(ValueError, match="needs graph and cluster"):
        as_task_spec({"graph": "g", "devices": 2})


def test_missing_ray_names_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "ray", None)
    # The module imports without Ray; only building a pool needs it.
    monkeypatch.delitem(sys.modules, "placement_gym.real.distributed")
    module = importlib.import_module("placement_gym.real.distributed")
    assert module.RayEvaluatorPool is not RayEvaluatorPool
    with pytest.raises(ImportError, match=re.escape(install_command("distributed"))):
        RayEvaluatorPool(SPEC, reward_mode="cost_model")


@pytest.mark.slow
def test_real_mode_on_two_virtual_cpu_devices(local_ray):
    pytest.importorskip("torch")
    spec = TaskSpec("cifar10_cnn", "cpu2", "inference")
    devices = {"cpu:0": "cpu", "cpu:1": "cpu"}
    with RayEvaluatorPool(spec, n_actors=2, reward_mode="real", devices=devices,
                          evaluator_options={"batch": 2}) as pool:
        rows = _random_placements(pool.task, 4, seed=3)
        runtimes, feasible, peaks = pool.evaluate_batch(rows)
        assert feasible.all() and np.all(runtimes > 0) and np.all(np.isfinite(runtimes))
        assert peaks.shape == (4, 2) and np.all(peaks.sum(axis=1) > 0)
        result = pool.simulate(rows[0])
        assert result.feasible and result.runtime > 0
        # The measured run's summary travels back for the env's info["real"].
        assert pool.last_info["runtime"] == result.runtime and len(pool.last_info["runtimes"]) >= 1
        assert sum(s["evaluations"] for s in pool.actor_stats()) == 5
