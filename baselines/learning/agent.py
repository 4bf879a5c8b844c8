"""The base class of the learned agents and their registry (`LEARNED_AGENTS`, filled by
`baselines.learning.trainer.register_learned`)."""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np

from baselines.registry import load_agents
from placement_gym.evaluation.budget import Budget
from placement_gym.task.compiled import Task


class LearnedAgent:
    """A placement policy trained against the cost model.

    Subclasses set `name` and `description` (an agent of `baselines.registry.OPTIONAL_AGENTS` gets
    its description from there: `register_learned`), build their networks in ``__init__(task, seed,
    **config)`` (config keys are the documented hyper-parameters), and implement `iteration`:
    sample placements, evaluate them through the evaluator (never `simulate` directly: the budget
    counts every evaluation), update. All state needed to resume (networks, optimisers, the numpy
    generator, baselines) goes through `state_dict` / `load_state_dict`: the attributes named in
    `checkpointed` are saved and restored there, a subclass adds what else it keeps. Agents that can
    move to another graph keeping their weights (GNNs) implement `set_task`."""

    name: ClassVar[str] = ""
    description: ClassVar[str] = ""
    checkpointed: ClassVar[tuple[str, ...]] = ()
    """The attributes (networks, optimisers: anything with ``state_dict`` and ``load_state_dict``) that a
    checkpoint carries, each under its attribute's name."""

    def __init__(self, task: Task, seed: int = 0, **config: Any) -> None:
        self.task = task
        self.seed = seed
        self.rng = np.random.default_rng(seed)
        if config:
            raise ValueError(f"agent {self.name!r} takes no option(s) {', '.join(sorted(config))}")

    def iteration(self, evaluator: Budget) -> dict[str, float]:
        """One training iteration; returns scalars worth logging (loss, mean reward...)."""
        raise NotImplementedError

    def state_dict(self) -> dict[str, Any]:
        """The numpy generator's state and the state dict of every `checkpointed` attribute."""
        networks = {name: getattr(self, name).state_dict() for name in self.checkpointed}
        return {"rng": self.rng.bit_generator.state} | networks

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restores what `state_dict` gave."""
        self.rng.bit_generator.state = state["rng"]
        for name in self.checkpointed:
            getattr(self, name).load_state_dict(state[name])

    def set_task(self, task: Task) -> None:
        raise NotImplementedError(f"agent {self.name!r} cannot move to another graph")


LEARNED_AGENTS: dict[str, type[LearnedAgent]] = {}


def get_learned(name: str) -> type[LearnedAgent]:
    load_agents()
    if name not in LEARNED_AGENTS:
        raise ValueError(f"unknown learned agent {name!r}; allowed: {', '.join(sorted(LEARNED_AGENTS))}")
    return LEARNED_AGENTS[name]
