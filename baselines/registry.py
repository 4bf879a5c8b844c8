"""The agent protocol and the registry every baseline registers in.

An agent is a callable ``agent(task, seed=0, budget=None) -> AgentResult``: it places the forward
ops of a `Task` and says how many cost-model evaluations it used (each `simulate` call and each row
of a `simulate_batch` call counts one). ``budget`` caps those evaluations for agents that search;
agents that construct a placement directly ignore it.

Register one with the decorator::

    @register("heft", "HEFT list scheduling (Topcuoglu et al. 2002)")
    def heft(task, seed=0, budget=None) -> AgentResult: ...

`get_agent(name)` finds an agent by name (``single:<device>`` names any device of the task's
cluster), `agent_names()` lists them all (importing every baselines module first so that each has
registered), and `evaluate_agent` runs one and scores its placement once more with `simulate`.
`provider` is what the entry-point group ``placement_gym.agents`` names (``pyproject.toml``): the CLI
(``evaluate``, ``train``), ``fidelity`` and the leaderboard harness find these agents through it.
"""

from __future__ import annotations

import functools
import importlib
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from placement_gym.agents import agent_report
from placement_gym.graph.bundled import unknown_name
from placement_gym.placements import SIMPLE_AGENT_DESCRIPTIONS, simple_agent
from placement_gym.task import Task


@dataclass(frozen=True)
class AgentResult:
    """What an agent returns.

    placement: int64 ``(n_forward,)``, a device index per forward op.
    evaluations: cost-model evaluations the agent used (`simulate` calls, `simulate_batch` rows).
    info: agent-specific extras (a solver bound, the agent's own schedule length...), JSON-able.
    """

    placement: np.ndarray
    evaluations: int
    info: dict = field(default_factory=dict)


Agent = Callable[..., AgentResult]  # agent(task, seed: int = 0, budget: int | None = None) -> AgentResult

# The modules of the baselines package whose agents register on import. A module whose optional
# third-party dependency is missing (or that is absent) is skipped.
AGENT_MODULES: tuple[str, ...] = (
    "baselines.experts",
    "baselines.partition",
    "baselines.scheduling",
    "baselines.baechi",
    "baselines.search",
    "baselines.exact",
    "baselines.portfolio",
    "baselines.learning.random_search",
    "baselines.learning.pg",
    "baselines.learning.spotlight",
    "baselines.learning.hierarchical",
    "baselines.learning.placeto",
    "baselines.learning.hsdag",
    "baselines.learning.sb3_agents",
    "baselines.learning.move_policy",
    "baselines.learning.move_bandit",
)
SINGLE_PREFIX = "single:"

# The agents registered only when their optional third-party modules import (all in the baselines
# extra): name -> (the module that registers it, the modules it needs). Without them the name is
# still known, so asking for it says what to install instead of calling it unknown.
OPTIONAL_AGENTS: dict[str, tuple[str, tuple[str, ...]]] = {
    "exact": ("baselines.exact", ("ortools",)),
    "pg": ("baselines.learning.pg", ("torch",)),
    "spotlight": ("baselines.learning.spotlight", ("torch",)),
    "hierarchical": ("baselines.learning.hierarchical", ("torch",)),
    "placeto": ("baselines.learning.placeto", ("torch",)),
    "hsdag": ("baselines.learning.hsdag", ("torch",)),
    "sb3-ppo": ("baselines.learning.sb3_agents", ("torch", "stable_baselines3")),
    "sb3-maskable-ppo": ("baselines.learning.sb3_agents", ("torch", "stable_baselines3", "sb3_contrib")),
}
INSTALL_HINT = "pip install 'placement-gym[baselines]'"

# `--agent all` runs `exact` (when it does not say otherwise through ``in_all``) only on graphs of at
# most this many forward ops, where an exact search can finish quickly.
EXACT_ALL_MAX_OPS = 40

_AGENTS: dict[str, Agent] = {}
_DESCRIPTIONS: dict[str, str] = {}
_IN_ALL: dict[str, Callable[[Task], bool]] = {}


def register(
    name: str, description: str, in_all: Callable[[Task], bool] | None = None
) -> Callable[[Agent], Agent]:
    """Decorator: register ``agent`` under ``name`` (re-registering a name replaces the agent, so
    that reloading a module in a session does not fail). ``in_all(task)`` says whether
    ``--agent all`` runs it on ``task`` (default: always; `exact` only on small graphs)."""
    if not name or name == "all" or name.startswith(SINGLE_PREFIX):
        raise ValueError(f"agent name {name!r} is reserved or empty")

    def decorate(agent: Agent) -> Agent:
        _AGENTS[name] = agent
        _DESCRIPTIONS[name] = description
        if in_all is not None:
            _IN_ALL[name] = in_all
        else:
            _IN_ALL.pop(name, None)
        return agent

    return decorate


def _load_all() -> None:
    for module in AGENT_MODULES:
        try:
            importlib.import_module(module)
        except ModuleNotFoundError as error:
            # A module whose optional third-party dependency is missing is skipped, as is a listed module
            # that is absent; a module of this project missing inside a listed one is a bug.
            missing = error.name or ""
            if missing != module and missing.split(".")[0] in ("baselines", "placement_gym"):
                raise


def _first_missing(modules: tuple[str, ...]) -> str | None:
    """The first of ``modules`` that does not import, or None."""
    for module in modules:
        try:
            importlib.import_module(module)
        except ImportError:
            return module
    return None


def unavailable_agents() -> dict[str, str]:
    """The agents of `OPTIONAL_AGENTS` that are not registered (a module they need is missing), each
    with the one-line reason and the install command."""
    _load_all()
    missing = {}
    for name, (_, needs) in OPTIONAL_AGENTS.items():
        if name not in _AGENTS:
            module = _first_missing(needs) or ", ".join(needs)
            missing[name] = f"agent {name!r} needs {module}, which is not installed: {INSTALL_HINT}"
    return missing


def agent_names() -> list[str]:
    """Every registered agent name (after importing every baselines module), in registration order,
    with ``single:<device>`` standing for the single-device agents."""
    _load_all()
    return [f"{SINGLE_PREFIX}<device>", *_AGENTS]


def agent_descriptions() -> dict[str, str]:
    """Name -> one-line description of every registered agent."""
    _load_all()
    single = f"{SINGLE_PREFIX}<device>"
    return {single: SIMPLE_AGENT_DESCRIPTIONS[single], **_DESCRIPTIONS}


def agents_for_all(task: Task) -> list[str]:
    """The agents ``--agent all`` runs on ``task``: every registered agent (not the
    ``single:<device>`` variants), except those whose ``in_all`` predicate declines the task; an
    `exact` agent without one runs only on graphs of at most `EXACT_ALL_MAX_OPS` forward ops."""
    _load_all()
    default = {"exact": lambda t: t.n_forward <= EXACT_ALL_MAX_OPS}
    chosen = []
    for name in _AGENTS:
        accept = _IN_ALL.get(name, default.get(name))
        if accept is None or accept(task):
            chosen.append(name)
    return chosen


def get_agent(name: str) -> Agent:
    """The agent registered as ``name``; ``single:<device>`` places every op on that device (a name
    or index of the task's cluster, checked when it runs). ValueError names the known agents."""
    if isinstance(name, str) and name.startswith(SINGLE_PREFIX):
        device = name[len(SINGLE_PREFIX):]
        if not device:
            raise ValueError("agent 'single:<device>' needs a device name, such as single:gpu:0")
        return _simple(name)
    if name not in _AGENTS:
        _load_all()
    if name not in _AGENTS:
        reason = unavailable_agents().get(name) if isinstance(name, str) else None
        if reason is not None:
            raise ImportError(reason)
        raise ValueError(unknown_name("agent", name, agent_names()))
    return _AGENTS[name]


def run_agent(task: Task, name: str, seed: int = 0, budget: int | None = None) -> AgentResult:
    """Run agent ``name`` and check what it returns (a valid placement, a count of evaluations)."""
    result = get_agent(name)(task, seed=seed, budget=budget)
    if not isinstance(result, AgentResult):
        raise TypeError(f"agent {name!r} returned {type(result).__name__}, not an AgentResult")
    placement = task.check_placement(result.placement)
    return AgentResult(placement, int(result.evaluations), dict(result.info))


# Algorithms whose leaderboard entries a re-run cannot reproduce bit for bit, and why.
NOT_RERUNNABLE: dict[str, str] = {
    "exact": "its leaderboard fill (baselines/leaderboard_fill/classic.py) stops CP-SAT's parallel search "
             "at a wall-clock time limit, so a re-run may stop at another placement",
}


def leaderboard_agent(name: str) -> Callable[[Task, int, int | None], AgentResult] | None:
    """What this package's `provider` gives the leaderboard (``leaderboard validate --rerun``,
    through the entry-point group ``placement_gym.agents``): the harness agent
    ``agent(task, seed, budget)`` that made the leaderboard entries of algorithm ``name``, that is
    `run_agent` at the agent's default settings, the very agent baselines/leaderboard_fill/classic.py and
    baselines/leaderboard_fill/learned.py run; None for a name this registry does not know; ValueError
    for one of `NOT_RERUNNABLE`."""
    if name in NOT_RERUNNABLE:
        raise ValueError(f"the {name} entries cannot be re-run bit for bit: {NOT_RERUNNABLE[name]}")
    return default_agent(name)


def default_agent(name: str) -> Callable[[Task, int, int | None], AgentResult] | None:
    """``agent(task, seed, budget)``: `run_agent` of ``name`` at its default settings, or None for a
    name this registry does not know."""
    try:
        get_agent(name)
    except (ValueError, ImportError):  # the leaderboard names the install hint itself
        return None

    def agent(task: Task, seed: int, budget: int | None) -> AgentResult:
        return run_agent(task, name, seed, budget)

    return agent


# What `placement-gym agents` says of each agent (`describe`): its kind. An agent not named here is
# "learned" when `baselines.learning` trains it, else "heuristic".
SEARCH_AGENTS = ("anneal", "anneal-groups", "cem", "exact", "move-bandit", "best-known", "random-search")
# Starts from weights pre-trained on synthetic graphs (and goes on learning online).
PRETRAINED_AGENTS = ("move-policy",)
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
    ``installed`` and ``description``."""
    descriptions = agent_descriptions()
    missing = unavailable_agents()
    try:
        from baselines.learning.trainer import LEARNED_AGENTS
    except ImportError:  # torch missing: the learned agents are among OPTIONAL_AGENTS
        LEARNED_AGENTS = {}
    torch_agents = {name for name, (_, needs) in OPTIONAL_AGENTS.items() if "torch" in needs}
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
            "description": descriptions.get(name) or missing[name],
        }
    return facts


class Provider:
    """This package's provider of the entry-point group ``placement_gym.agents`` (the protocol:
    `placement_gym.agents`), through which the CLI (``evaluate``, ``train``), ``fidelity`` and the
    leaderboard harness find the agents registered here and the learned agents of
    `baselines.learning`."""

    def names(self) -> list[str]:
        return agent_names()

    def agent(self, name: str) -> Callable[[Task, int, int | None], AgentResult] | None:
        """`default_agent`, but ImportError naming the extra for an agent whose dependencies are
        missing (`unavailable_agents`)."""
        if name in OPTIONAL_AGENTS:
            get_agent(name)  # raises ImportError when it is not installed
        return default_agent(name)

    def unavailable(self) -> dict[str, str]:
        return unavailable_agents()

    def describe(self) -> dict[str, dict[str, Any]]:
        return describe()

    def agents_for_all(self, task: Task) -> list[str]:
        return agents_for_all(task)

    def leaderboard_agent(self, name: str) -> Callable[[Task, int, int | None], AgentResult] | None:
        return leaderboard_agent(name)

    def trainable(self) -> list[str]:
        """The learned agents, and the search agents that report their evaluations (their curves)."""
        from baselines.learning.trainer import trainable_agents

        return trainable_agents()

    def trainer(self, name: str) -> Callable[..., Any] | None:
        """`baselines.learning.train` of agent ``name``; None for a name it cannot train; ImportError
        naming the extra for a learned agent whose dependencies are missing."""
        from baselines.learning import train
        from baselines.learning.trainer import trainable_agents

        if name not in trainable_agents():
            reason = unavailable_agents().get(name)
            if reason is not None:
                raise ImportError(reason)
            return None
        return functools.partial(train, name)


provider = Provider()


def evaluate_agent(task: Task, name: str, seed: int = 0, budget: int | None = None) -> dict[str, Any]:
    """Run agent ``name`` on ``task`` and simulate its placement once more (not counted in
    ``evaluations``, which are the agent's own): the JSON-able dict of
    `placement_gym.agents.agent_report` (agent, runtime, feasible, peak_memory, lower_bound,
    best_single_runtime, speedup, gap, evaluations, wall_s, info, placement...)."""
    start = time.perf_counter()
    result = run_agent(task, name, seed, budget)
    return agent_report(task, name, seed, result, time.perf_counter() - start)


# ---------------------------------------------------------------------------------------------------
# The simple agents of `placement_gym.placements` (placement and evaluation count from there), so that
# one registry knows every name.


def _simple(name: str) -> Agent:
    def agent(task: Task, seed: int = 0, budget: int | None = None) -> AgentResult:
        placement, evaluations = simple_agent(task, name, seed)
        return AgentResult(placement, evaluations)

    agent.__name__ = agent.__qualname__ = name.replace("-", "_").replace(":", "_")
    return agent


for _name in ("best-single", "round-robin", "random"):
    register(_name, SIMPLE_AGENT_DESCRIPTIONS[_name])(_simple(_name))
