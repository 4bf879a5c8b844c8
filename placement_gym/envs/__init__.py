"""Gymnasium environments. `register_envs` runs on ``import placement_gym``.

* ``DevicePlacement-v0`` (`single_shot.DevicePlacementEnv`): one step places every op or group.
* ``DevicePlacementStaged-v0`` (`staged.DevicePlacementStagedEnv`): Spotlight's one node per stage.
* ``DevicePlacementRefine-v0`` (`refine.DevicePlacementRefineEnv`): Placeto's refinement of a full
  placement, node by node.
* ``ParallelPlan-v0`` (`parallel_plan.ParallelPlanEnv`) and ``ParallelPlanStaged-v0``
  (`parallel_plan_staged.ParallelPlanStagedEnv`): a parallel training plan of a large model over a
  mesh of GPUs, in one step or one dimension a step (their shared part: `plan_base`).

Shared by all three (`base.PlacementEnvBase`): ``obs_mode`` ``"dict"`` (padded `Box` arrays),
``"flat"`` (those arrays in one 1-D float32 `Box`, layout in `flat`) or ``"graph"`` (a Gymnasium
`Graph`, `observation`); ``mask_in_obs=True`` puts `action_masks()` in the observation; ``info`` has
one key set of numpy values at reset and at every step (`base.INFO_KEYS`), so it batches;
``max_devices`` pads every per-device axis (padded devices masked out, `base.PlacementEnvBase`).

What is injected, as Jumanji injects its generator, viewer and reward function: the task source each
reset draws from (`sources`: one task from ``graph=``/``cluster=``; ``dataset="<name>:<split>"`` and/or
``clusters=`` draw a graph and/or a cluster from the env's seeded generator; ``task_source=`` a source of
your own), the evaluator that scores placements (``evaluator=``, a backend's name with
``evaluator_options=`` or an object: `placement_gym.evaluation.evaluator.evaluator_for`) and the reward
(``reward=``). Rendering is `render`'s.
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
# The parallel-plan ids: another problem (a plan of a model over a mesh), other keywords.
PLAN_ENV_IDS: dict[str, str] = {
    "ParallelPlan-v0": "placement_gym.envs.parallel_plan:make_env",
    "ParallelPlanStaged-v0": "placement_gym.envs.parallel_plan_staged:make_env",
}

# Natively vectorised versions (`gym.make_vec(id, vectorization_mode="vector_entry_point")`).
VECTOR_ENTRY_POINTS: dict[str, str] = {
    "DevicePlacement-v0": "placement_gym.envs.vector:DevicePlacementVectorEnv",
}


def register_envs() -> None:
    """Register every env id (idempotent), so ``gym.make("DevicePlacement-v0")`` works after
    ``import placement_gym`` and ``gym.make("placement_gym:DevicePlacement-v0")`` without it."""
    for env_id, entry_point in {**ENV_IDS, **PLAN_ENV_IDS}.items():
        if env_id not in gym.registry:
            gym.register(id=env_id, entry_point=entry_point,
                         vector_entry_point=VECTOR_ENTRY_POINTS.get(env_id))
