"""What an env draws and what scores it are injected, as Jumanji injects its generator: a task source
and an evaluator written here, registered nowhere, drive the three env ids (gymnasium's checker, the
runtimes they report, seeded resets that replay bit for bit); the deprecated keywords still work and
warn naming their replacement; the package's own scoring backends come from the same entry-point group
as another package's, and the evaluation stage imports none of them."""

from __future__ import annotations

import dataclasses
import subprocess
import sys
import warnings
from functools import cache

import gymnasium as gym
import numpy as np
import pytest
from conftest import hand_cluster
from gymnasium.utils.env_checker import check_env
from paths import ROOT
from profiles import synthetic_profile

import placement_gym  # noqa: F401  (registers the env ids)
from placement_gym.cost_model import simulate, single_device
from placement_gym.envs.single_shot import DevicePlacementEnv
from placement_gym.envs.sources import limits_of
from placement_gym.envs.vector import DevicePlacementVectorEnv
from placement_gym.evaluation.evaluator import (
    EVALUATOR_GROUP,
    CostModelEvaluator,
    EvaluatorBackend,
    checkout_entry_points,
    evaluator_backend,
)
from placement_gym.graph import load_graph
from placement_gym.task.named import get_task

IDS = ("DevicePlacement-v0", "DevicePlacementStaged-v0", "DevicePlacementRefine-v0")
OFFSET = 0.5  # seconds the test's evaluator adds to every runtime, as a slower machine would
STEPS = 12  # steps of an episode the replay compares (the staged and refine episodes are longer)


@cache
def two_tasks():
    """Two bundled graphs on clusters of different sizes (3 and 5 devices)."""
    return get_task("cifar10_cnn", "k80x2"), get_task("resnet50", "k80x4")


class TwoGraphs:
    """A task source of the test's own: one of two tasks drawn from the env's generator, or the one
    ``reset(options={"which": i})`` picks."""

    reset_options = ("which",)
    draws = True

    def __init__(self, tasks) -> None:
        self.tasks = tasks
        self.limits = limits_of(tasks)

    def sample(self, rng, options):
        which = options.get("which")
        return self.tasks[int(rng.integers(len(self.tasks))) if which is None else which]


class Slower:
    """An evaluator of the test's own: the cost model, every runtime `OFFSET` seconds longer; it counts
    the placements it is asked to score."""

    name = "slower"

    def __init__(self, task) -> None:
        self.task, self.inner, self.calls = task, CostModelEvaluator(task), 0

    @property
    def evaluations(self) -> int:
        return self.inner.evaluations

    def simulate(self, placement, schedule=False):
        self.calls += 1
        result = self.inner.simulate(placement, schedule=schedule)
        return dataclasses.replace(result, runtime=result.runtime + OFFSET)

    def simulate_batch(self, rows):
        self.calls += len(rows)
        runtimes, feasible, peaks = self.inner.simulate_batch(rows)
        return runtimes + OFFSET, feasible, peaks


def build_slower(task, *, source=None) -> Slower:
    return Slower(task)


SLOWER = EvaluatorBackend("slower", build_slower, description="the cost model, 0.5 s slower")


def _action(env, rng: np.random.Generator):
    masks = env.unwrapped.action_masks()
    if masks.ndim == 2:
        return np.array([rng.choice(np.flatnonzero(row)) for row in masks])
    return int(rng.choice(np.flatnonzero(masks)))


def _final_placement(env, env_id: str, actions: list) -> np.ndarray:
    """The forward-op placement an episode ended on (a padded device d is device d % n_devices)."""
    unwrapped = env.unwrapped
    if env_id == "DevicePlacement-v0":
        nodes = np.asarray(actions[0])[: unwrapped.n_nodes]
    elif env_id == "DevicePlacementStaged-v0":
        nodes = np.asarray(actions)
    else:
        nodes = unwrapped.placement()
    return nodes % unwrapped.task.n_devices


@pytest.mark.parametrize("env_id", IDS)
def test_a_task_source_and_a_backend_of_our_own_drive_every_id(env_id):
    tasks = two_tasks()
    env = gym.make(env_id, task_source=TwoGraphs(tasks), evaluator=SLOWER)
    check_env(env.unwrapped, skip_render_check=True)
    unwrapped = env.unwrapped
    # the spaces hold the larger graph and the larger cluster, whichever task is drawn
    assert unwrapped.max_ops == tasks[1].n_forward and unwrapped.max_devices == tasks[1].n_devices
    rng = np.random.default_rng(1)
    for which in (0, 1, 0):
        obs, info = env.reset(seed=which, options={"which": which})
        task = tasks[which]
        assert unwrapped.task is task and env.observation_space.contains(obs)
        # the reference is scored by the injected evaluator too, which was built for this task
        assert info["best_single_runtime"] == single_device(task).runtime + OFFSET
        assert isinstance(unwrapped.evaluator, Slower) and unwrapped.evaluator.task is task
        if which == 1:
            continue  # the large graph's episodes are long; its first observation is enough
        actions, done = [], False
        while not done:
            actions.append(_action(env, rng))
            _, _, terminated, truncated, info = env.step(actions[-1])
            done = terminated or truncated
        expected = simulate(task, _final_placement(env, env_id, actions))
        assert info["runtime"] == expected.runtime + OFFSET
        assert bool(info["feasible"]) == expected.feasible
    with pytest.raises(ValueError, match="unknown reset option 'graph'"):
        env.reset(options={"graph": "cifar10_cnn"})


def _replay(env, seed: int, episodes: int) -> list:
    """What ``episodes`` episodes after ``reset(seed=seed)`` give, as bytes: the task, every
    observation, reward and runtime (at most `STEPS` steps an episode), actions from a seeded
    generator of their own."""
    env.reset(seed=seed)
    rng = np.random.default_rng(7)
    seen = []
    for _ in range(episodes):
        obs, info = env.reset()
        seen.append(env.unwrapped.task.id)
        for _ in range(STEPS):
            seen.append(gym.spaces.flatten(env.observation_space, obs).tobytes())
            obs, reward, terminated, truncated, info = env.step(_action(env, rng))
            seen += [np.float64(reward).tobytes(), info["runtime"].tobytes()]
            if terminated or truncated:
                break
    return seen


@pytest.mark.parametrize("env_id", IDS)
def test_seeded_resets_replay_bit_for_bit(env_id):
    first = _replay(gym.make(env_id, task_source=TwoGraphs(two_tasks()), evaluator=SLOWER), 3, 6)
    env = gym.make(env_id, task_source=TwoGraphs(two_tasks()), evaluator=SLOWER)
    assert _replay(env, 3, 6) == first  # another env, the same seed
    assert _replay(env, 3, 6) == first  # the same env, seeded again
    drawn = [entry for entry in first if isinstance(entry, str)]
    assert set(drawn) == {task.id for task in two_tasks()}  # both tasks were drawn
    assert _replay(env, 4, 6) != first  # another seed, another run


@pytest.mark.parametrize("env_id", IDS)
def test_an_evaluator_object_scores_every_evaluation_as_given(env_id):
    task = get_task("cifar10_cnn", "k80x2")
    scorer = Slower(task)
    env = gym.make(env_id, graph="cifar10_cnn", cluster="k80x2", evaluator=scorer)
    check_env(env.unwrapped, skip_render_check=True)
    assert env.unwrapped.evaluator is scorer and env.unwrapped.reward_mode == "slower"
    calls, evaluations = scorer.calls, env.unwrapped.evaluations
    env.reset(seed=0)
    rng = np.random.default_rng(2)
    actions, done = [], False
    while not done:
        actions.append(_action(env, rng))
        _, _, terminated, _, info = env.step(actions[-1])
        done = terminated
    assert info["runtime"] == simulate(task, _final_placement(env, env_id, actions)).runtime + OFFSET
    # every evaluation the env counted was the object's, and it made no other
    assert scorer.calls - calls == env.unwrapped.evaluations - evaluations > 0
    with pytest.raises(ValueError, match="must build an evaluator per task.*not an evaluator object"):
        gym.make(env_id, task_source=TwoGraphs(two_tasks()), evaluator=scorer)


class Noted(Slower):
    """`Slower` that adds the count of its calls to an env's info."""

    info_keys = ("slower_calls",)

    def env_info(self, scored: bool) -> dict:
        return {"slower_calls": np.int64(self.calls if scored else 0)}


def test_an_evaluator_adds_the_info_keys_it_declares():
    backend = EvaluatorBackend("noted", lambda task, source=None: Noted(task), info_keys=Noted.info_keys)
    env = DevicePlacementEnv(graph="cifar10_cnn", cluster="k80x2", evaluator=backend)
    _, at_reset = env.reset(seed=0)
    assert at_reset["slower_calls"] == 0
    *_, at_step = env.step(np.zeros(env.n_nodes, dtype=np.int64))
    assert at_step["slower_calls"] == env.evaluator.calls == 2  # the reference, then the step
    assert set(at_step) == set(at_reset)
    with pytest.raises(ValueError, match="adds slower_calls to each step's info.*vectorization_mode="):
        DevicePlacementVectorEnv(num_envs=2, graph="cifar10_cnn", cluster="k80x2", evaluator=backend)


def test_the_deprecated_keywords_warn_and_score_as_their_replacements():
    cifar, cluster = load_graph("cifar10_cnn"), hand_cluster(2)
    profile = synthetic_profile(cifar, cluster.device_names)
    with pytest.warns(DeprecationWarning) as caught:
        old = DevicePlacementEnv(graph=cifar, cluster=cluster, reward_mode="profiled", profile=profile)
    said = " | ".join(str(w.message) for w in caught)
    assert "reward_mode= is deprecated" in said and "give evaluator=" in said
    assert 'profile= is deprecated' in said and 'evaluator_options={"profile": ...}' in said
    with warnings.catch_warnings():
        warnings.simplefilter("error", DeprecationWarning)
        new = DevicePlacementEnv(graph=cifar, cluster=cluster, evaluator="profiled",
                                 evaluator_options={"profile": profile})
    np.testing.assert_array_equal(old.task.duration, new.task.duration)
    placement = np.arange(cifar.n_ops) % 2
    old.reset(seed=0)
    new.reset(seed=0)
    assert old.step(placement)[4]["runtime"] == new.step(placement)[4]["runtime"] == simulate(
        old.task, placement).runtime
    with pytest.raises(ValueError, match='profile= is for evaluator="profiled", not "cost_model"'):
        DevicePlacementEnv(graph=cifar, cluster=cluster, evaluator_options={"profile": profile})
    with pytest.raises(ValueError, match="an evaluator object .* comes built"):
        DevicePlacementEnv(graph=cifar, cluster=cluster, evaluator=Slower(new.task),
                           evaluator_options={"batch": 2})
    with pytest.raises(ValueError, match="profile is given twice"), pytest.warns(DeprecationWarning):
        DevicePlacementEnv(graph=cifar, cluster=cluster, evaluator="profiled", profile=profile,
                           evaluator_options={"profile": profile})


def test_a_task_source_makes_its_tasks_whole():
    with pytest.raises(ValueError, match="task_source=, which makes them whole: graph=, step= are not taken"):
        DevicePlacementEnv(graph="cifar10_cnn", precision="bf16", task_source=TwoGraphs(two_tasks()))
    with pytest.raises(ValueError, match="task_source must have sample"):
        DevicePlacementEnv(task_source=two_tasks()[0])


def test_the_deprecated_dataset_wrapper_builds_the_env_itself():
    from placement_gym.envs import dataset

    with pytest.warns(DeprecationWarning, match="the envs take dataset= and clusters= themselves"):
        env = dataset.DatasetPlacementEnv(DevicePlacementEnv, graph="cifar10_cnn",
                                          clusters=["k80x2", "k80x4"])
    assert type(env) is DevicePlacementEnv and env.max_devices == 5
    with pytest.warns(DeprecationWarning, match="placement_gym.envs.sources.cluster_pool"):
        assert dataset.cluster_pool(["k80x2"])[2] == 3


def test_the_package_s_backends_come_from_its_entry_point_group():
    pyproject = ROOT / "pyproject.toml"
    points = checkout_entry_points(EVALUATOR_GROUP, pyproject)
    assert [point.name for point in points] == ["cost_model", "profiled", "real"]
    for point in points:
        assert point.load() is evaluator_backend(point.name) and point.load().name == point.name
    from placement_gym.real.evaluators import REAL_BACKEND

    assert evaluator_backend("real") is REAL_BACKEND and REAL_BACKEND.info_keys
    # the evaluation stage imports no backend module: listing and the cost model import none of real/
    code = ("import sys\nfrom placement_gym.evaluation.evaluator import evaluator_names, make_evaluator\n"
            "from placement_gym.task.named import get_task\n"
            "assert evaluator_names()[:3] == ('cost_model', 'profiled', 'real')\n"
            "make_evaluator(get_task('cifar10_cnn', 'k80x2'), 'cost_model')\n"
            "print(sorted(m for m in sys.modules if m.startswith('placement_gym.real')))\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "[]"
