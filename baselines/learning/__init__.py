"""Learned placement agents and the machinery that trains them on an evaluation budget."""

from baselines.learning.agent import LEARNED_AGENTS, LearnedAgent, get_learned
from baselines.learning.trainer import DEFAULT_BUDGET, TrainResult, register_learned, train

__all__ = [
    "DEFAULT_BUDGET",
    "LEARNED_AGENTS",
    "LearnedAgent",
    "TrainResult",
    "get_learned",
    "register_learned",
    "train",
]
