"""`move-bandit`: simulated annealing whose mix of move kinds a bandit learns while it searches.

`baselines.search.anneal` proposes three kinds of moves in a fixed mix: a swap of two ops' devices
(10%), a whole chain or co-location group to one device (27%), and a single op to another device
(63%). Which mix pays depends on the graph: on the LSTM graphs (rnnlm, gnmt4), where a good placement
keeps each layer's chain of time steps on one device, 90% group moves found faster placements at equal
budgets, and on inception_v3 and bert_large slightly slower ones (experiments/group_moves/). No fixed
mix is best everywhere, so `move-bandit` learns the mix per task, from the evaluations its budget pays
for.

The policy is a three-armed bandit over the move kinds, learned by adaptive pursuit (Thierens, GECCO
2005; docs/references.md). Each step anneal draws its ``batch`` proposals with the current
probabilities, evaluates them in one `simulate_batch` call, and tells the bandit each proposal's kind
and score. A proposal's reward is its improvement over the placement it was proposed from, as a
fraction of the start runtime (0 when it is no better, or when either is infeasible). Each kind's
value is a recency-weighted mean of its step rewards (``value += learning_rate * (reward - value)``);
the probability of the kind of highest value moves towards ``1 - 2 * floor`` and the others towards
``floor`` by ``pursuit_rate`` per step, so that no kind is ever ruled out. It starts from anneal's
mix and moves only once some kind has paid.

Two simplifications, kept because the measured configuration has them (experiments/learned_agent/
README.md, where the alternatives tried are listed): a single move that undoes a worse step Metropolis
accepted earns reward like any improvement, and a kind not drawn in a step keeps its value while the
drawn ones decay towards their (often zero) rewards, so the pursued kind can flip late in a search.

Everything else (the start from the best constructive heuristic, Metropolis acceptance, temperatures,
kicks, memoisation, the budget count) is anneal's. With ``pursuit_rate=0`` it is anneal, draw for
draw: the ablation without learning.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from baselines.registry import register
from baselines.search import (
    ANNEAL_GROUP_MOVE_PROB,
    ANNEAL_SWAP_PROB,
    MOVE_KINDS,
    anneal,
    multi_op_groups,
)
from placement_gym.evaluation.agents import AgentResult
from placement_gym.evaluation.budget import Score
from placement_gym.task.compiled import Task

# The bandit's arms: anneal's move kinds (single-op moves go to a neighbour's device or any device half
# and half, as anneal draws them)
ARMS: tuple[str, ...] = MOVE_KINDS
FLOOR = 0.05  # least probability of a kind
PURSUIT_RATE = 0.05  # per step, the share of the way the probabilities move towards the pursued mix
LEARNING_RATE = 0.2  # per step, the weight of the step's mean reward in a kind's value


class PursuitMix:
    """Adaptive pursuit over `ARMS`, starting from anneal's mix (a `baselines.search.MoveMix`).
    ``groups``: whether the task has chains or co-location groups to move (else the group arm is off)."""

    def __init__(self, groups: bool, floor: float = FLOOR, pursuit_rate: float = PURSUIT_RATE,
                 learning_rate: float = LEARNING_RATE) -> None:
        if not 0.0 <= floor < 1.0 / len(ARMS):
            raise ValueError(f"floor must be in [0, {1 / len(ARMS):.3f}), got {floor}")
        if not 0.0 <= pursuit_rate <= 1.0 or not 0.0 < learning_rate <= 1.0:
            raise ValueError(
                f"need 0 <= pursuit_rate <= 1 and 0 < learning_rate <= 1, got {pursuit_rate}, {learning_rate}"
            )
        group = (1.0 - ANNEAL_SWAP_PROB) * ANNEAL_GROUP_MOVE_PROB if groups else 0.0
        self.active = np.array([True, groups, True])
        self.probs = np.array([ANNEAL_SWAP_PROB, group, 1.0 - ANNEAL_SWAP_PROB - group])
        self.values = np.zeros(len(ARMS))
        self.floor, self.pursuit_rate, self.learning_rate = floor, pursuit_rate, learning_rate
        self.history: list[list[float]] = []

    def probabilities(self) -> tuple[float, float]:
        swap, group, single = self.probs
        return float(swap), float(group / (group + single)) if group + single > 0 else 0.0

    def learn(self, kinds: list[str], scores: list[Score], current: Score, scale: float) -> None:
        rewards = np.zeros(len(ARMS))
        counts = np.zeros(len(ARMS))
        for kind, score in zip(kinds, scores):
            k = ARMS.index(kind)
            counts[k] += 1
            if score.feasible and current.feasible:
                rewards[k] += max(0.0, (current.runtime - score.runtime) / scale)
        seen = counts > 0
        self.values[seen] += self.learning_rate * (rewards[seen] / counts[seen] - self.values[seen])
        if self.values.max() > 0.0:
            target = np.where(self.active, self.floor, 0.0)
            leader = int(np.argmax(np.where(self.active, self.values, -np.inf)))
            target[leader] = 1.0 - (int(self.active.sum()) - 1) * self.floor
            self.probs += self.pursuit_rate * (target - self.probs)
        self.history.append([float(p) for p in self.probs])

    def describe(self) -> dict:
        # the learned mix at the end, and at each tenth of the steps (how it moved)
        marks = self.history[:: max(1, len(self.history) // 10)]
        return {
            "arms": list(ARMS),
            "final": [round(float(p), 4) for p in self.probs],
            "trajectory": [[round(p, 3) for p in row] for row in marks],
        }


@register("move-bandit", "anneal whose mix of move kinds (swap, group, single op) a bandit learns online "
          "(budget: evaluations)")
def move_bandit(
    task: Task,
    seed: int = 0,
    budget: int | None = None,
    *,
    floor: float = FLOOR,
    pursuit_rate: float = PURSUIT_RATE,
    learning_rate: float = LEARNING_RATE,
    **options: Any,
) -> AgentResult:
    """`anneal` with a `PursuitMix` over its move kinds (see the module docstring). ``budget``:
    evaluations in all, the start's included. ``floor``: least probability of a kind.
    ``pursuit_rate``: how fast the mix moves towards the best kind (0: anneal's fixed mix).
    ``learning_rate``: weight of each step's reward in a kind's value. ``options``: any other keyword
    argument of `anneal` (``start``, ``batch``, ``t_start``, ``t_end``, ``evaluator``).
    Deterministic for ``seed``."""
    if "group_move_prob" in options or "move_mix" in options:
        raise ValueError("move-bandit learns its move mix: group_move_prob and move_mix are not options")
    mix = PursuitMix(bool(multi_op_groups(task)), floor, pursuit_rate, learning_rate)
    return anneal(task, seed=seed, budget=budget, move_mix=mix, **options)
