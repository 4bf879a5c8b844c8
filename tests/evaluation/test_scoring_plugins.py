"""A scoring backend and a reward from outside the package: a third-party package registers a backend
through the entry-point group ``placement_gym.evaluators`` (no edit here), and the envs
(``gym.make(..., evaluator=..., reward=...)``) and ``placement-gym train --evaluator`` score with it."""

from __future__ import annotations

import json
import subprocess
import sys

import gymnasium as gym
import numpy as np
import pytest

import placement_gym  # noqa: F401 - registers the environments
from placement_gym.cost_model import simulate, single_device
from placement_gym.evaluation.evaluator import evaluator_names, make_evaluator
from placement_gym.task.named import get_task
from tests.plugin_package import install_package, subprocess_env

PLUGIN = "placement_gym_doubled_plugin"
GRAPH, CLUSTER = "cifar10_cnn", "k80x2"

# The package: a backend that scores with the cost model and doubles every runtime (as a slower
# machine would), and a reward function of its own.
MODULE = '''
"""A scoring backend of a third party: the cost model, every runtime times a factor."""
import dataclasses

from placement_gym.evaluation.evaluator import CostModelEvaluator, EvaluatorBackend


class Scaled:
    name = "doubled"

    def __init__(self, task, factor=2.0):
        self.inner, self.task, self.factor = CostModelEvaluator(task), task, float(factor)

    @property
    def evaluations(self):
        return self.inner.evaluations

    def simulate(self, placement, schedule=False):
        result = self.inner.simulate(placement, schedule=schedule)
        return dataclasses.replace(result, runtime=result.runtime * self.factor)

    def simulate_batch(self, rows):
        runtimes, feasible, peaks = self.inner.simulate_batch(rows)
        return runtimes * self.factor, feasible, peaks


def build(task, *, source=None, factor=None):
    return Scaled(task, 2.0 if factor is None else factor)


backend = EvaluatorBackend("doubled", build, ("factor",), "the cost model, every runtime doubled")


def half_speedup(runtime, best_single):
    return 0.5 * best_single / runtime
'''


@pytest.fixture
def plugin(tmp_path, monkeypatch):
    """The package installed in ``tmp_path`` (on sys.path, with the dist-info an installer writes)."""
    return install_package(tmp_path, monkeypatch, PLUGIN, MODULE,
                           {"placement_gym.evaluators": f"doubled = {PLUGIN}:backend"})


@pytest.mark.parametrize("env_id", ["DevicePlacement-v0", "DevicePlacementStaged-v0"])
def test_gym_make_scores_with_the_package_s_backend_and_rewards_with_its_function(plugin, env_id):
    import placement_gym_doubled_plugin as package

    assert "doubled" in evaluator_names()
    env = gym.make(env_id, graph=GRAPH, cluster=CLUSTER, evaluator="doubled", reward=package.half_speedup)
    task = get_task(GRAPH, CLUSTER)
    placement = np.arange(task.n_forward) % task.n_devices
    env.reset(seed=0)
    if env_id == "DevicePlacement-v0":
        _, reward, *_, info = env.step(placement)
    else:
        for device in placement:
            _, reward, terminated, _, info = env.step(int(device))
        assert terminated
    runtime = simulate(task, placement).runtime
    best_single = 2 * single_device(task).runtime  # the reference is scored by the backend too
    assert env.unwrapped.reward_mode == "doubled"
    assert info["runtime"] == 2 * runtime and env.unwrapped.best_single_runtime == best_single
    assert reward == 0.5 * best_single / (2 * runtime)


def test_an_evaluator_object_is_taken_as_given(plugin):
    import placement_gym_doubled_plugin as package

    task = get_task(GRAPH, CLUSTER)
    scorer = package.Scaled(task, factor=3.0)
    env = gym.make("DevicePlacement-v0", graph=GRAPH, cluster=CLUSTER, evaluator=scorer)
    env.reset(seed=0)
    placement = np.zeros(task.n_forward, dtype=np.int64)
    *_, info = env.step(placement)
    assert info["runtime"] == 3 * simulate(task, placement).runtime
    assert env.unwrapped.evaluator is scorer and scorer.evaluations == 2  # the reference, then the step


def test_backend_options_and_names_are_checked_by_the_registry(plugin):
    task = get_task(GRAPH, CLUSTER)
    assert make_evaluator(task, "doubled", factor=4.0).factor == 4.0
    with pytest.raises(ValueError, match='profile= is for evaluator="profiled", not "doubled"'):
        gym.make("DevicePlacement-v0", graph=GRAPH, cluster=CLUSTER, evaluator="doubled", profile={})
    allowed = "unknown evaluator 'tripled'; allowed: cost_model, profiled, real, doubled"
    with pytest.raises(ValueError, match=allowed):
        gym.make("DevicePlacement-v0", graph=GRAPH, cluster=CLUSTER, evaluator="tripled")
    with pytest.raises(ValueError, match="not both"):
        gym.make("DevicePlacement-v0", graph=GRAPH, cluster=CLUSTER, evaluator="doubled", reward_mode="real")
    with pytest.raises(ValueError, match="or a function reward"):
        gym.make("DevicePlacement-v0", graph=GRAPH, cluster=CLUSTER, reward="faster")


def test_without_the_package_the_backend_is_unknown():
    assert "doubled" not in evaluator_names()
    with pytest.raises(ValueError, match="unknown evaluator 'doubled'"):
        make_evaluator(get_task(GRAPH, CLUSTER), "doubled")


@pytest.mark.slow
def test_placement_gym_train_scores_with_the_package_s_backend(plugin, tmp_path):
    env = subprocess_env(plugin)
    done = subprocess.run(
        [sys.executable, "-m", "placement_gym", "train", "--agent", "random-search", "--graph", GRAPH,
         "--cluster", CLUSTER, "--budget", "16", "--evaluator", "doubled", "--out", str(tmp_path / "run"),
         "--json", "--quiet"],
        capture_output=True, text=True, env=env, timeout=600,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    summary = json.loads(done.stdout)
    task = get_task(GRAPH, CLUSTER)
    names = task.cluster.device_names
    placement = np.array([names.index(device) for device in summary["best_placement"].values()])
    assert summary["scored_by"] == "doubled" and summary["evaluations"] == 16
    assert summary["best_runtime"] == 2 * simulate(task, placement).runtime
    refused = subprocess.run(
        [sys.executable, "-m", "placement_gym", "train", "--agent", "random-search", "--graph", GRAPH,
         "--cluster", CLUSTER, "--budget", "16", "--evaluator", "doubled", "--profile", "p.json"],
        capture_output=True, text=True, env=env, timeout=600,
    )
    assert refused.returncode != 0
    assert "--profile is for --evaluator profiled, not doubled" in refused.stderr
