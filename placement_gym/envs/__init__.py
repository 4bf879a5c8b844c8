"""Gymnasium environments. `register_envs` runs on ``import placement_gym``.

* ``DevicePlacement-v0`` (`single_shot.DevicePlacementEnv`): one step places every op or group.
* ``DevicePlacementStaged-v0`` (`staged.DevicePlacementStagedEnv`): Spotlight's one node per stage.
* ``DevicePlacementRefine-v0`` (`refine.DevicePlacementRefineEnv`): Placeto's refinement of a full
  placement, node by node.

Shared by all three (`base.PlacementEnvBase`): ``obs_mode`` ``"dict"`` (padded `Box` arrays),
``"flat"`` (those arrays in one 1-D float32 `Box`, layout in `flat`) or ``"graph"`` (a Gymnasium
`Graph`, `observation`); ``mask_in_obs=True`` puts `action_masks()` in the observation; ``info`` has
one key set of numpy values at reset and at every step (`base.INFO_KEYS`), so it batches;
``max_devices`` pads every per-device axis (padded devices masked out, `base.PlacementEnvBase`).

Each id also takes ``dataset="<name>:<split>"`` and/or ``clusters=`` (``"random-v1:train"`` or a list
of cluster names): each reset then draws a graph and/or a cluster from the env's seeded generator
(`dataset.DatasetPlacementEnv`).
"""

from __future__ import annotations

import gymnasium as gym

# Entry points are functions that build the classes (`entry_point.gym_entry_point`: so that gym.make refuses
# render_mode="human" instead of wrapping the env in a pygame window).
ENV_IDS: dict[str, str] = {
    "DevicePlacement-v0": "placement_gym.envs.single_shot:make_env",
    "DevicePlacementStaged-v0": "placement_gym.envs.staged:make_env",
    "DevicePlacementRefine-v0": "placement_gym.envs.refine:make_env",
}

# Natively vectorised versions (`gym.make_vec(id, vectorization_mode="vector_entry_point")`).
VECTOR_ENTRY_POINTS: dict[str, str] = {
    "DevicePlacement-v0": "placement_gym.envs.vector:DevicePlacementVectorEnv",
}


def register_envs() -> None:
    """Register every env id (idempotent), so ``gym.make("DevicePlacement-v0")`` works after
    ``import placement_gym`` and ``gym.make("placement_gym:DevicePlacement-v0")`` without it."""
    for env_id, entry_point in ENV_IDS.items():
        if env_id not in gym.registry:
            gym.register(id=env_id, entry_point=entry_point,
                         vector_entry_point=VECTOR_ENTRY_POINTS.get(env_id))
