"""`ParallelPlanStaged-v0`: choose a parallel training plan one dimension a step (Spotlight's form)."""

from __future__ import annotations

from typing import Any

import numpy as np
from gymnasium import spaces

from placement_gym.envs.entry_point import gym_entry_point
from placement_gym.envs.plan_base import PlanEnvBase
from placement_gym.plans.space import DIMENSION_NAMES, OPTION_COUNTS

__all__ = ["ParallelPlanStagedEnv", "make_env"]


class ParallelPlanStagedEnv(PlanEnvBase):
    """Staged parallel planning: one dimension of the plan a step, each step's choices masked by what
    the earlier ones leave possible.

    ## Description
    The problem of `ParallelPlan-v0` (a model, a mesh of DGX nodes, a global batch), decided as
    Spotlight decides a placement: a stage per dimension of `placement_gym.plans.space.DIMENSIONS` in
    its order (tensor, pipeline, virtual-stage, context and expert degrees, micro-batch size, schedule,
    sequence parallelism, ZeRO, recomputation). The masks follow every choice, so a policy that keeps
    to them always ends with a plan whose degrees divide (it may still not fit in memory).

    ## Action Space
    `Discrete(7)`, the most values a dimension has: the value index of the current dimension.
    `action_masks()` gives the values of the current dimension that some completion of the plan so far
    can use (`PlanTask.choice_masks`); indices past the dimension's values are always masked. An index
    outside the mask is taken as chosen and the plan priced as it ends up.

    ## Observation Space
    As `ParallelPlan-v0`'s, ``plan`` holding the value indices chosen so far (-1 for the dimensions to
    come).

    ## Rewards
    0 at every step but the last; at the last, the reward of `ParallelPlan-v0` for the plan chosen.

    ## Episode End
    Terminates after one step per dimension (10); never truncates.

    ## Arguments
    The keywords of `placement_gym.envs.plan_base.PlanEnvBase`; ``info`` as `ParallelPlan-v0`'s.

    ## Version History
    - v0: first version (issue 66's first part).
    """

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.action_space = spaces.Discrete(max(OPTION_COUNTS))
        self.stage = 0

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        super().reset(seed=seed)
        self._draw(options)
        self.stage = 0
        return self._observation(), self._info()

    def action_masks(self) -> np.ndarray:
        mask = np.zeros(max(OPTION_COUNTS), dtype=bool)
        if self.stage < len(DIMENSION_NAMES):
            chosen = {name: int(k) for name, k in zip(DIMENSION_NAMES, self.choice) if k >= 0}
            current = self.task.choice_masks(chosen)[self.stage]
            mask[: len(current)] = current
        return mask

    def step(self, action):
        if self.stage >= len(DIMENSION_NAMES):
            raise RuntimeError("the episode has ended (the plan is complete): call reset() first")
        index = int(action)
        if not 0 <= index < OPTION_COUNTS[self.stage]:
            # a padded index wraps, as an unmasked padded device does in the placement envs
            index = index % OPTION_COUNTS[self.stage]
        self.choice[self.stage] = index
        self.stage += 1
        if self.stage < len(DIMENSION_NAMES):
            return self._observation(), 0.0, False, False, self._info()
        reward = self._price()
        return self._observation(), reward, True, False, self._info()


make_env = gym_entry_point(ParallelPlanStagedEnv)
