"""`provider`: what the entry-point group ``placement_gym.agents`` names for this package
(``pyproject.toml``; the protocol is `placement_gym.evaluation.agents`). It sits above every agent module, the
registry (`baselines.registry`) and the trainer (`baselines.learning.trainer`), so that none of them
imports another layer's upward; it also says what ``placement-gym agents`` lists of each agent
(`describe`: kind, default budget, extra).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from baselines.registry import (
    OPTIONAL_AGENTS,
    agent_descriptions,
    default_agent,
    get_agent,
    harness_agent,
    missing_agents,
    missing_modules,
    names_for_all,
    registered_names,
)
from placement_gym.evaluation.agents import AgentResult
from placement_gym.task.compiled import Task

# What `placement-gym agents` says of each agent (`describe`): its kind. An agent not named here is
# "learned" when `baselines.learning` trains it, else "heuristic".
SEARCH_AGENTS = ("anneal", "anneal-groups", "cem", "exact", "move-bandit", "best-known", "random-search")
# Start from weights pre-trained on synthetic graphs (move-policy goes on learning online;
# pretrained-list and pretrained-gnn place zero-shot, or fine-tune by search with a budget).
PRETRAINED_AGENTS = ("move-policy", "pretrained-list", "pretrained-gnn")
# Agents that need the baselines extra beyond OPTIONAL_AGENTS' own: best-known runs hsdag (torch).
NEEDS_EXTRA = ("best-known",)


def _default_budget(name: str, kind: str) -> tuple[float | None, str | None]:
    """``(budget, unit)`` an agent uses when given none: evaluations, or seconds for `exact`; ``(None,
    None)`` for an agent that takes no budget (a heuristic places once); ``(None, unit)`` when the
    module that holds the figure does not import (its optional dependencies missing)."""
    try:
        return _budget_of(name, kind)
    except ImportError:
        return None, "seconds" if name == "exact" else "evaluations"


def _budget_of(name: str, kind: str) -> tuple[float | None, str | None]:
    if name == "exact":
        from baselines.exact import DEFAULT_TIME_LIMIT

        return DEFAULT_TIME_LIMIT, "seconds"
    if name == "best-known":
        from baselines.portfolio import BEST_KNOWN_BUDGET

        return BEST_KNOWN_BUDGET, "evaluations"
    if name == "move-policy":
        from baselines.learning.move_policy import DEFAULT_BUDGET as MOVE_POLICY_BUDGET

        return MOVE_POLICY_BUDGET, "evaluations"
    # zero-shot (one schedule and its memory retries) unless given one
    if name in ("pretrained-list", "pretrained-gnn"):
        return None, "evaluations"
    if kind == "learned" or name == "random-search":
        from baselines.learning.trainer import DEFAULT_BUDGET as LEARNED_BUDGET

        return LEARNED_BUDGET, "evaluations"
    if kind == "search":  # anneal, anneal-groups, cem and move-bandit (anneal's budget)
        from baselines.search import DEFAULT_BUDGET as SEARCH_BUDGET

        return SEARCH_BUDGET, "evaluations"
    return None, None


def describe() -> dict[str, dict[str, Any]]:
    """Name -> what `placement-gym agents` lists of every agent, installed or not: ``kind``
    (heuristic, search, learned or pretrained), ``default_budget`` and ``budget_unit`` (None for an
    agent without a budget), ``extra`` (the pip extra it needs beyond the core, or None),
    ``installed``, ``missing`` (for an agent not installed, the module it lacks; else None) and
    ``description`` (also of an agent not installed: `OPTIONAL_AGENTS` holds it)."""
    descriptions = agent_descriptions()
    missing = missing_modules()
    try:
        from baselines.learning.agent import LEARNED_AGENTS
    except ImportError:  # torch missing: the learned agents are among OPTIONAL_AGENTS
        LEARNED_AGENTS = {}
    torch_agents = {name for name, agent in OPTIONAL_AGENTS.items() if "torch" in agent.needs}
    facts = {}
    for name in [*descriptions, *(n for n in missing if n not in descriptions)]:
        if name in PRETRAINED_AGENTS:
            kind = "pretrained"
        elif name in SEARCH_AGENTS:
            kind = "search"
        elif name in LEARNED_AGENTS or name in torch_agents:
            kind = "learned"
        else:
            kind = "heuristic"
        budget, unit = _default_budget(name, kind)
        facts[name] = {
            "kind": kind, "default_budget": budget, "budget_unit": unit,
            "extra": "baselines" if name in OPTIONAL_AGENTS or name in NEEDS_EXTRA else None,
            "installed": name not in missing,
            "missing": missing.get(name),
            "description": descriptions.get(name) or OPTIONAL_AGENTS[name].description,
        }
    return facts


class Provider:
    """This package's provider of the entry-point group ``placement_gym.agents`` (the protocol:
    `placement_gym.evaluation.agents`), through which the CLI (``evaluate``, ``train``), ``fidelity`` and the
    leaderboard harness find the agents of `baselines.registry` and the learned agents of
    `baselines.learning`."""

    def names(self) -> list[str]:
        return registered_names()

    def agent(self, name: str) -> Callable[[Task, int, int | None], AgentResult] | None:
        """`default_agent`, but ImportError naming the extra for an agent whose dependencies are
        missing (`unavailable_agents`)."""
        if name in OPTIONAL_AGENTS:
            get_agent(name)  # raises ImportError when it is not installed
        return default_agent(name)

    def unavailable(self) -> dict[str, str]:
        return missing_agents()

    def describe(self) -> dict[str, dict[str, Any]]:
        return describe()

    def agents_for_all(self, task: Task) -> list[str]:
        return names_for_all(task)

    def leaderboard_agent(self, name: str) -> Callable[[Task, int, int | None], AgentResult] | None:
        return harness_agent(name)

    def trainable(self) -> list[str]:
        """The learned agents, and the search agents that report their evaluations (their curves)."""
        from baselines.learning.trainer import trainable_agents

        return trainable_agents()

    def plan_agents(self) -> dict[str, str]:
        """The plan agents (`baselines.plans`), name -> description: they answer a
        `placement_gym.plans.space.PlanTask`."""
        from baselines.plans import plan_agent_descriptions

        return plan_agent_descriptions()

    def plan_agent(self, name: str) -> Callable[..., AgentResult] | None:
        from baselines.plans import get_plan_agent

        return get_plan_agent(name)

    def trainer(self, name: str) -> Callable[..., Any] | None:
        """`baselines.learning.train` of agent ``name``; None for a name it cannot train; ImportError
        naming the extra for a learned agent whose dependencies are missing."""
        from baselines.learning import train
        from baselines.learning.trainer import trainable_agents

        if name not in trainable_agents():
            reason = missing_agents().get(name)
            if reason is not None:
                raise ImportError(reason)
            return None
        return functools.partial(train, name)


provider = Provider()
