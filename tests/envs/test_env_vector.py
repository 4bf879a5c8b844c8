"""The natively vectorised DevicePlacement-v0 (`placement_gym.envs.vector`) against gymnasium's
SyncVectorEnv of the plain env: the same observations, rewards, terminations, truncations and infos,
step after step, in every autoreset mode and observation mode, with one batched evaluation per step."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.spaces import GraphInstance
from gymnasium.vector import AutoresetMode

import placement_gym  # noqa: F401  (registers the ids)
from placement_gym.envs.vector import DevicePlacementVectorEnv

SMALL = dict(graph="cifar10_cnn", cluster="k80x2", objective="inference")
N = 3


def _same(a, b, where: str = "") -> None:
    """Recursive equality of observations and infos (dicts, arrays, object arrays, graphs)."""
    assert type(a) is type(b), f"{where}: {type(a).__name__} vs {type(b).__name__}"
    if isinstance(a, dict):
        assert a.keys() == b.keys(), f"{where}: keys {sorted(a)} vs {sorted(b)}"
        for key in a:
            _same(a[key], b[key], f"{where}[{key!r}]")
    elif isinstance(a, (tuple, list)):
        assert len(a) == len(b), where
        for i, (x, y) in enumerate(zip(a, b)):
            _same(x, y, f"{where}[{i}]")
    elif isinstance(a, GraphInstance):
        for name in ("nodes", "edges", "edge_links"):
            _same(getattr(a, name), getattr(b, name), f"{where}.{name}")
    elif isinstance(a, np.ndarray) and a.dtype == object:
        assert a.shape == b.shape, where
        for i, (x, y) in enumerate(zip(a, b)):
            _same(x, y, f"{where}[{i}]")
    elif isinstance(a, np.ndarray):
        assert a.dtype == b.dtype and a.shape == b.shape, f"{where}: {a.dtype}{a.shape} vs {b.dtype}{b.shape}"
        assert np.array_equal(a, b), where
    else:
        assert a == b or (a is None and b is None), f"{where}: {a!r} vs {b!r}"


def _pair(mode: AutoresetMode, **kwargs):
    native = gym.make_vec("DevicePlacement-v0", num_envs=N, vectorization_mode="vector_entry_point",
                          autoreset_mode=mode, **SMALL, **kwargs)
    sync = gym.make_vec("DevicePlacement-v0", num_envs=N, vectorization_mode="sync",
                        vector_kwargs={"autoreset_mode": mode}, **SMALL, **kwargs)
    return native, sync


def test_make_vec_defaults_to_the_native_vector_env():
    """The id registers the native env as its vector entry point: gym.make_vec without a mode builds it
    (and then takes no vector_kwargs); "sync" and "async" still build Gymnasium's own."""
    spec = gym.spec("DevicePlacement-v0")
    assert spec.vector_entry_point == "placement_gym.envs.vector:DevicePlacementVectorEnv"
    native = gym.make_vec("placement_gym:DevicePlacement-v0", num_envs=2, **SMALL)
    assert isinstance(native.unwrapped, DevicePlacementVectorEnv) and native.num_envs == 2
    same_step = gym.make_vec("DevicePlacement-v0", num_envs=2, autoreset_mode="SameStep", **SMALL)
    assert same_step.metadata["autoreset_mode"] == AutoresetMode.SAME_STEP
    with pytest.raises(gym.error.Error, match="vector_kwargs"):
        gym.make_vec("DevicePlacement-v0", num_envs=2,
                     vector_kwargs={"autoreset_mode": AutoresetMode.SAME_STEP}, **SMALL)
    sync = gym.make_vec("DevicePlacement-v0", num_envs=2, vectorization_mode="sync", **SMALL)
    assert isinstance(sync, gym.vector.SyncVectorEnv)
    for other in ("DevicePlacementStaged-v0", "DevicePlacementRefine-v0"):
        assert gym.spec(other).vector_entry_point is None
        assert isinstance(gym.make_vec(other, num_envs=2, **SMALL), gym.vector.SyncVectorEnv)


@pytest.mark.parametrize("mode", list(AutoresetMode))
@pytest.mark.parametrize("kwargs", [{}, {"obs_mode": "flat", "mask_in_obs": True}, {"obs_mode": "graph"},
                                    {"groups": "chains", "reward": "neg_sqrt_runtime"}],
                         ids=["dict", "flat-mask", "graph", "chains"])
def test_the_native_vector_env_is_the_sync_vector_env(mode, kwargs):
    native, sync = _pair(mode, **kwargs)
    assert isinstance(native.unwrapped, DevicePlacementVectorEnv)
    assert native.single_action_space == sync.single_action_space
    assert native.single_observation_space == sync.single_observation_space
    assert native.metadata["autoreset_mode"] == sync.metadata["autoreset_mode"] == mode
    _same(native.reset(seed=5), sync.reset(seed=5), "reset")
    rng = np.random.default_rng(0)
    n_nodes = native.single_action_space.shape[0]
    for step in range(4):
        actions = rng.integers(0, 2, size=(N, n_nodes))
        got, expected = native.step(actions), sync.step(actions)
        _same(got[0], expected[0], f"step {step} obs")
        for k in (1, 2, 3):
            assert got[k].dtype == expected[k].dtype and np.array_equal(got[k], expected[k]), (step, k)
        _same(got[4], expected[4], f"step {step} info")
        if mode == AutoresetMode.DISABLED:
            mask = np.array([True, False, True])  # env 1 stays ended...
            _same(native.reset(options={"reset_mask": mask}), sync.reset(options={"reset_mask": mask}),
                  f"step {step} reset")
            _same(native.reset(options={"reset_mask": ~mask}), sync.reset(options={"reset_mask": ~mask}))
    native.close()
    sync.close()


def test_a_step_is_one_batched_evaluation_counted_on_the_task():
    env = DevicePlacementVectorEnv(num_envs=N, **SMALL)
    task = env.env.task
    calls = []
    batch = env.env.evaluator.simulate_batch
    env.env.evaluator.simulate_batch = lambda rows: calls.append(len(rows)) or batch(rows)
    env.env.evaluator.simulate = None  # a per-row evaluation would fail
    env.reset(seed=0)
    before = task.evaluations
    actions = np.zeros((N, env.env.n_nodes), dtype=np.int64)
    env.step(actions)
    env.step(actions)  # NEXT_STEP: every env resets, nothing is evaluated
    env.step(actions)
    assert calls == [N, N]
    assert task.evaluations - before == 2 * N == env.evaluations


def test_bad_actions_and_settings_get_clear_errors():
    env = DevicePlacementVectorEnv(num_envs=2, **SMALL)
    n = env.env.n_nodes
    with pytest.raises(RuntimeError, match="reset it first"):
        env.step(np.zeros((2, n), dtype=np.int64))
    env.reset()
    with pytest.raises(ValueError, match=rf"actions must have shape \(2, {n}\).*got shape \({n},\)"):
        env.step(np.zeros(n, dtype=np.int64))
    bad = np.zeros((2, n), dtype=np.int64)
    bad[1, 3] = 7
    with pytest.raises(ValueError, match="action of env 1: .*op 3"):
        env.step(bad)
    with pytest.raises(ValueError, match="num_envs must be a positive int"):
        DevicePlacementVectorEnv(num_envs=0, **SMALL)
    with pytest.raises(ValueError, match="unknown autoreset_mode"):
        DevicePlacementVectorEnv(num_envs=2, autoreset_mode="sometimes", **SMALL)
    with pytest.raises(ValueError, match='vectorization_mode="sync"'):
        DevicePlacementVectorEnv(num_envs=2, reward_mode="real", **SMALL)


def test_disabled_autoreset_refuses_to_step_an_ended_env():
    env = DevicePlacementVectorEnv(num_envs=2, autoreset_mode=AutoresetMode.DISABLED, **SMALL)
    env.reset()
    actions = np.zeros((2, env.env.n_nodes), dtype=np.int64)
    env.step(actions)
    with pytest.raises(RuntimeError, match="env 0 has no episode running"):
        env.step(actions)
    env.reset(options={"reset_mask": np.array([True, True])})
    env.step(actions)
