"""`random-search`: uniform random placements at the learned agents' budget, the floor every
learned agent must clear (Mirhoseini et al. 2017 and Placeto compare against it too)."""

from __future__ import annotations

from typing import Any

from baselines.learning.agent import LearnedAgent
from baselines.learning.trainer import register_learned
from placement_gym.evaluation.budget import Budget
from placement_gym.task.compiled import Task


@register_learned
class RandomSearch(LearnedAgent):
    """Draws ``batch`` uniform placements per iteration and keeps the best (no learning)."""

    name = "random-search"
    description = "uniform random placements, best kept (the budget-matched floor of the learned agents)"

    def __init__(self, task: Task, seed: int = 0, batch: int = 64, **config: Any) -> None:
        super().__init__(task, seed, **config)
        self.batch = int(batch)

    def iteration(self, evaluator: Budget) -> dict[str, float]:
        size = min(self.batch, evaluator.remaining)
        placements = self.rng.integers(0, self.task.n_devices, size=(size, self.task.n_forward))
        runtimes, _ = evaluator.evaluate(placements)
        return {"mean_runtime": float(runtimes.mean())}
