"""Gymnasium's `check_env` on every env id x observation mode (dict, flat, graph) x grouping (none and
"chains") x ``mask_in_obs``, with the staged env's sparse and dense rewards, on cifar10_cnn / k80x2."""

from __future__ import annotations

import gymnasium as gym
import pytest
from gymnasium.utils.env_checker import check_env

import placement_gym  # noqa: F401  (registers the ids)
from placement_gym.envs import ENV_IDS

TASK = dict(graph="cifar10_cnn", cluster="k80x2")
# The sparse staged env's first step simulates nothing: its info must still compare equal (no NaN).
SETTINGS = [(env_id, {}) for env_id in ENV_IDS] + [("DevicePlacementStaged-v0", {"dense": True})]
MODES = [("dict", False), ("dict", True), ("flat", False), ("flat", True), ("graph", False)]


@pytest.mark.filterwarnings("error")  # the checker reports most problems as warnings
@pytest.mark.parametrize("groups", [None, "chains"], ids=str)
@pytest.mark.parametrize(("obs_mode", "mask_in_obs"), MODES, ids=[f"{m}-mask{k}" for m, k in MODES])
@pytest.mark.parametrize(("env_id", "extra"), SETTINGS,
                         ids=[e + ("-dense" if x else "") for e, x in SETTINGS])
def test_gymnasium_check_env_passes(env_id, extra, obs_mode, mask_in_obs, groups):
    env = gym.make(env_id, **TASK, obs_mode=obs_mode, mask_in_obs=mask_in_obs, groups=groups, **extra)
    check_env(env.unwrapped, skip_render_check=True)
