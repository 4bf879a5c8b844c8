"""Each info key keeps one Python type and shape at reset and at every step, and a scalar value is a
scalar (a numpy number or a bool), never a 0-d array: ``info["feasible"]`` reads like ``info["runtime"]``."""

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
def test_each_info_key_keeps_its_type_and_shape_and_scalars_are_scalars(env_id):
    infos = _infos(env_id)
    kinds = [{key: (type(value), np.shape(value)) for key, value in info.items()} for info in infos]
    assert all(kind == kinds[0] for kind in kinds[1:])
    for key, (kind, shape) in kinds[0].items():
        assert issubclass(kind, np.ndarray) == (shape != ()), f"info[{key!r}]: {kind.__name__} {shape}"
    assert kinds[0]["feasible"][0] is bool and kinds[0]["simulated"][0] is bool
    assert issubclass(kinds[0]["runtime"][0], float)
