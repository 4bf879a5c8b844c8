"""RLlib's stock PPO trains on the flat observation of every env id (examples/rllib_ppo_flat.py).

RLlib pins its own gymnasium (1.2.x for ray 2.60), so it lives in a venv of its own
(docs/tutorials/rllib.md); these tests run where ``ray.rllib`` imports and are skipped elsewhere,
such as the project's main venv, where ray is installed without RLlib's dependencies."""

from __future__ import annotations

import runpy
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip(
    "ray.rllib", reason="RLlib is not installed here (it pins gymnasium 1.2.x: install it in its own venv)"
)

EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "rllib_ppo_flat.py"


@pytest.fixture(scope="module")
def example():
    import ray

    namespace = runpy.run_path(str(EXAMPLE), run_name="example")
    yield namespace
    ray.shutdown()


ENV_IDS = ["DevicePlacementStaged-v0", "DevicePlacementRefine-v0", "DevicePlacement-v0"]


@pytest.mark.parametrize("env_id", ENV_IDS)
def test_stock_ppo_trains_on_the_flat_observation(example, env_id, capsys):
    mean_return = example["main"](env_id, iterations=2, batch=128)
    assert np.isfinite(mean_return)
    out = capsys.readouterr().out
    assert f"{env_id} iteration 2: 128 env steps" in out


def test_the_config_is_stock_ppo_on_the_registered_id(example):
    from ray.rllib.algorithms.ppo import PPOConfig

    config = example["make_config"]("DevicePlacementStaged-v0")
    assert type(config) is PPOConfig
    assert config.env == "placement_gym:DevicePlacementStaged-v0"
    assert config.env_config["obs_mode"] == "flat"


def test_same_seed_same_returns(example):
    first = example["main"]("DevicePlacementStaged-v0", iterations=1, seed=3, batch=128)
    second = example["main"]("DevicePlacementStaged-v0", iterations=1, seed=3, batch=128)
    assert first == second
