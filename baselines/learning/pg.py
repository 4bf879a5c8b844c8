"""`pg`: Mirhoseini et al. (ICML 2017), "Device Placement Optimization with Reinforcement Learning".

A seq2seq LSTM with attention (`baselines.learning.seq2seq.Seq2SeqPlacer`) reads the op groups in
topological order and emits one device per group; it is trained with REINFORCE (docs/references.md):

* Groups: the co-location groups (``groups="colocate"``), merged further into at most
  ``max_groups`` = min(256, 20 x devices) groups, the paper's group count, by a balanced
  partition when there are more (`baselines.learning.seq2seq.placer_grouping`).
* Reward ``-sqrt(runtime / best single-device runtime)``: the paper's -sqrt(runtime), with the
  runtime divided by the best single device's so that one learning rate fits every task. An
  out-of-memory placement counts as ``oom_runtime_factor`` (10) x the best single-device runtime (the
  paper's fixed 100 s, made task-free; `placement_gym.envs.rewards.OomPenalty.neg_sqrt_relative_runtimes`).
* Baseline: a moving average of the batch-mean reward, decay 0.9 (the paper's), subtracted before
  it is updated with the batch; it starts at the first batch's mean.
* Each iteration samples ``batch`` placements (one decoder pass for the whole batch), evaluates them
  at once and takes one Adam step on ``-(reward - baseline) x log p(placement)`` averaged over the
  batch, minus ``entropy_coef`` x the mean per-step entropy. The paper has no entropy term; without
  one the policy settled early (on inception_v3/k80x4, best 0.94 x the best single device after
  5,000 evaluations, against 0.85 after 10,000 with 0.1), so the default is 0.1. ``batch`` 32 and
  ``learning_rate`` 3e-3 were chosen the same way (one seed, inception_v3/k80x4).

Single-shot MDP (`DevicePlacement-v0` with the same grouping): one placement per sample.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from baselines.learning.options import check_number
from baselines.learning.seq2seq import Seq2SeqAgent
from baselines.learning.trainer import register_learned
from placement_gym.evaluation.budget import Budget
from placement_gym.task.compiled import Task

# Mirhoseini et al. 2017 (docs/references.md): moving-average baseline with decay 0.9.
BASELINE_DECAY = 0.9


@register_learned
class PolicyGradientPlacer(Seq2SeqAgent):
    """REINFORCE on a seq2seq placer (see the module docstring).

    Options: ``hidden`` (64) LSTM width; ``batch`` (32) placements per iteration; ``learning_rate`` (3e-3)
    Adam step; ``baseline_decay`` (0.9); ``entropy_coef`` (0.1); ``groups`` ("colocate", any
    ``groups=`` value of the envs); ``max_groups`` (None: min(256, 20 x devices)); ``oom_runtime_factor``
    (10.0) the penalty runtime of an out-of-memory placement in best-single-device runtimes."""

    name = "pg"

    def __init__(
        self, task: Task, seed: int = 0, baseline_decay: float = BASELINE_DECAY, entropy_coef: float = 0.1,
        **options: Any,
    ) -> None:
        super().__init__(task, seed, entropy_coef=entropy_coef, value_head=False, **options)
        self.baseline_decay = check_number("baseline_decay", baseline_decay, 0, 1, open_high=True)
        self.baseline: float | None = None

    def iteration(self, evaluator: Budget) -> dict[str, float]:
        size = min(self.batch, evaluator.remaining)
        actions = self.sample_groups(size)
        runtimes, feasible = evaluator.evaluate(self.grouping.expand(actions))
        rewards = self.oom_penalty.neg_sqrt_relative_runtimes(runtimes, feasible, self.best_single)
        mean_reward = float(rewards.mean())
        if self.baseline is None:
            self.baseline = mean_reward
        advantages = torch.from_numpy((rewards - self.baseline).astype(np.float32))
        self.baseline = self.baseline_decay * self.baseline + (1 - self.baseline_decay) * mean_reward
        log_probs, entropy, _ = self.evaluate_groups(actions)
        loss = -(advantages * log_probs.sum(dim=1)).mean() - self.entropy_coef * entropy.mean()
        self.step_optimizer(loss)
        return {"loss": float(loss.detach()), "mean_reward": mean_reward, "baseline": self.baseline}

    def state_dict(self) -> dict[str, Any]:
        return super().state_dict() | {"baseline": self.baseline}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        super().load_state_dict(state)
        self.baseline = state["baseline"]
