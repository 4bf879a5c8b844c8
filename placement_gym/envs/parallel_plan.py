"""`ParallelPlan-v0`: choose a whole parallel training plan in one step."""

from __future__ import annotations

from typing import Any

import numpy as np
from gymnasium import spaces

from placement_gym.envs.entry_point import gym_entry_point
from placement_gym.envs.plan_base import PlanEnvBase
from placement_gym.plans.space import OPTION_COUNTS

__all__ = ["ParallelPlanEnv", "make_env"]


class ParallelPlanEnv(PlanEnvBase):
    """Single-shot parallel planning: one action chooses how a large model's training step is split
    over a mesh of GPUs.

    ## Description
    The problem Megatron-LM's and NeMo's rules of thumb, Alpa, Galvatron and Calculon's sweep solve: a
    transformer (GPT, Llama or Mixtral-style), a mesh of DGX nodes and a global batch; the plan gives
    the tensor, pipeline (with virtual stages), context and expert degrees, the micro-batch size, the
    schedule, sequence parallelism, the ZeRO stage and the recomputation, the data-parallel degree
    being what the GPUs leave. It is priced by the calibrated plan model (`placement_gym.plans`,
    docs/cost_model.md, "Parallel plans"). Each episode is one step.

    ## Action Space
    `MultiDiscrete` of one value index per dimension of `placement_gym.plans.space.DIMENSIONS` (the
    same for every problem). `action_masks()` is the per-dimension masks concatenated (sb3-contrib's
    MaskablePPO takes it): values that no plan of the problem can use (a tensor degree that does not
    divide the heads, a pipeline deeper than the layers, experts on a dense model...). A plan whose
    values each pass their mask may still not run as a whole (the batch not dividing by the data
    degree) or not fit in memory: it is priced as infeasible.

    ## Observation Space
    A `Dict` (stable-baselines3's ``MultiInputPolicy``): ``model`` (log2 of the model's sizes and its
    family one-hot), ``mesh`` (log2 nodes and GPUs a node, the peak at the problem's precision, memory,
    bus bandwidths), ``batch`` (log2 global batch) and ``plan`` (the value index of each dimension:
    -1 before the step, the plan chosen after it). `placement_gym.envs.plan_base` documents each column.

    ## Rewards
    ``reward="mfu"`` (default): the plan's model-FLOP utilisation (0 to 1; faster is higher, for a
    given problem MFU is proportional to 1 / step time); ``"neg_step"``: minus the step's seconds over
    the step at 100% MFU. A plan that cannot run or does not fit: ``infeasible_reward`` (default -0.1).

    ## Episode End
    Terminates after the one step; never truncates.

    ## Arguments
    The keywords of `placement_gym.envs.plan_base.PlanEnvBase` (the problem or ``dataset=``, the reward,
    the render mode). ``info`` has the same keys at reset and after the step
    (`placement_gym.envs.plan_base.INFO_KEYS`): step seconds, MFU, tokens per second per GPU, peak
    memory of the fullest GPU, the step's breakdown, ``feasible`` and ``simulated``.

    ## Version History
    - v0: first version (issue 66's first part).
    """

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.action_space = spaces.MultiDiscrete(np.array(OPTION_COUNTS, dtype=np.int64))

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        super().reset(seed=seed)
        self._draw(options)
        return self._observation(), self._info()

    def action_masks(self) -> np.ndarray:
        return np.concatenate(self.task.value_masks)

    def step(self, action):
        if self.result is not None:
            raise RuntimeError("the episode has ended (one step a plan): call reset() first")
        self.choice = self.task.check_placement(np.asarray(action, dtype=np.int64))
        reward = self._price()
        return self._observation(), reward, True, False, self._info()


make_env = gym_entry_point(ParallelPlanEnv)
