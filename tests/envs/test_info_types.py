"""Each info key keeps one type and shape at reset and at every step, and every value carries a numpy
dtype: a numpy number, or a 0-d bool array for ``simulated`` and ``feasible``. Neither a Python bool (no
dtype: torchrl's ``auto_register_info_dict`` reads one) nor ``np.bool_`` (no ``np.number``: gymnasium's
vector envs batch it into an object array) would do (placement_gym/envs/base.py, `PlacementEnvBase`)."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

import placement_gym  # noqa: F401  (registers the ids)
from placement_gym.envs import ENV_IDS

SMALL = dict(graph="cifar10_cnn", cluster="k80x2", objective="inference", groups=3)


def _infos(env_id: str) -> list[dict]:
    """The infos of one seeded random episode: at reset, then after every step."""
    env = gym.make(env_id, **SMALL)
    env.action_space.seed(0)
    _, info = env.reset(seed=0)
    infos, done = [info], False
    while not done:
        _, _, terminated, truncated, info = env.step(env.action_space.sample())
        infos.append(info)
        done = terminated or truncated
    return infos


@pytest.mark.parametrize("env_id", list(ENV_IDS))
def test_each_info_key_keeps_its_type_and_shape_and_every_value_has_a_dtype(env_id):
    infos = _infos(env_id)
    kinds = [{key: (type(value), np.shape(value)) for key, value in info.items()} for info in infos]
    assert all(kind == kinds[0] for kind in kinds[1:])
    for key, value in infos[0].items():
        assert isinstance(value, (np.number, np.ndarray)), f"info[{key!r}] is a {type(value).__name__}"
    assert infos[0]["feasible"].dtype == bool and infos[0]["simulated"].shape == ()


def test_the_vector_env_batches_every_info_key_into_a_typed_array():
    envs = gym.make_vec("DevicePlacement-v0", num_envs=2, vectorization_mode="sync", **SMALL)
    envs.reset(seed=0)
    _, _, _, _, info = envs.step(envs.action_space.sample())
    for key in ("simulated", "feasible", "runtime"):
        assert info[key].dtype != object and info[key].shape == (2,), (key, info[key])
