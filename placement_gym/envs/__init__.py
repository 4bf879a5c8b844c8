"""Gymnasium environments. `register_envs` runs on ``import placement_gym``."""

from __future__ import annotations

import gymnasium as gym

ENV_IDS = {"DevicePlacement-v0": "placement_gym.envs.single_shot:DevicePlacementEnv"}


def register_envs() -> None:
    """Register every env id (idempotent), so ``gym.make("DevicePlacement-v0")`` works after
    ``import placement_gym`` and ``gym.make("placement_gym:DevicePlacement-v0")`` without it."""
    for env_id, entry_point in ENV_IDS.items():
        if env_id not in gym.registry:
            gym.register(id=env_id, entry_point=entry_point)
