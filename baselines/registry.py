"""The registry every baseline registers in (the bottom layer of `baselines`: it imports no agent).

An agent is a callable ``agent(task, seed=0, budget=None) -> AgentResult`` (the result type of
`placement_gym.evaluation.agents`, the agent protocol of the core): it places the forward
ops of a `Task` and says how many cost-model evaluations it used (each `simulate` call and each row
of a `simulate_batch` call counts one). ``budget`` caps those evaluations for agents that search;
agents that construct a placement directly ignore it.

Register one with the decorator::

    @register("heft", "HEFT list scheduling (Topcuoglu et al. 2002)")
    def heft(task, seed=0, budget=None) -> AgentResult: ...

`get_agent(name)` finds an agent by name (``single:<device>`` names any device of the task's
cluster), `registered_names()` lists them all (importing every baselines module first so that each
has registered), and `run_agent` runs one and checks its result. `baselines.provider` offers them to
the entry-point group ``placement_gym.agents`` (``pyproject.toml``), through which the CLI
(``evaluate``, ``train``), ``fidelity`` and the leaderboard harness find them.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import NamedTuple

from placement_gym.common.names import unknown_name
from placement_gym.evaluation.agents import INSTALL_HINT, AgentResult
from placement_gym.evaluation.placements import SIMPLE_AGENT_DESCRIPTIONS, simple_agent
from placement_gym.task.compiled import Task

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
    "baselines.learning.pretrained",
    "baselines.learning.pretrained_gnn",
)
SINGLE_PREFIX = "single:"



class OptionalAgent(NamedTuple):
    """An agent of `OPTIONAL_AGENTS`: the module that registers it, the third-party modules it needs,
    and its one-line description (the agent registers with it; kept here, outside the module, so that
    ``placement-gym agents`` describes the agent where those modules are missing)."""

    module: str
    needs: tuple[str, ...]
    description: str


# The agents registered only when their optional third-party modules import (all in the baselines
# extra). Without them the name is still known, so asking for it says what to install instead of
# calling it unknown.
OPTIONAL_AGENTS: dict[str, OptionalAgent] = {
    "exact": OptionalAgent(
        "baselines.exact", ("ortools",),
        "CP-SAT model of the cost model, <= 60 ops or groups (budget: time limit in seconds)"),
    "pg": OptionalAgent(
        "baselines.learning.pg", ("torch",),
        "seq2seq LSTM placer trained with REINFORCE (Mirhoseini et al. 2017)"),
    "spotlight": OptionalAgent(
        "baselines.learning.spotlight", ("torch",),
        "PPO on the multi-stage placement MDP with a seq2seq policy (Gao et al. 2018)"),
    "hierarchical": OptionalAgent(
        "baselines.learning.hierarchical", ("torch",),
        "feed-forward grouper + seq2seq placer with joint REINFORCE (Mirhoseini et al. 2018)"),
    "placeto": OptionalAgent(
        "baselines.learning.placeto", ("torch",),
        "Placeto (Addanki et al. 2019): GNN policy refining a placement node by node, REINFORCE"),
    "hsdag": OptionalAgent(
        "baselines.learning.hsdag", ("torch",),
        "HSDAG (Duan et al. 2024): chain coarsening, GNN, learned groups, a device per group"),
    "pretrained-gnn": OptionalAgent(
        "baselines.learning.pretrained_gnn", ("torch",),
        "graph network predicting which of a few list-scheduler layouts runs fastest, pre-trained on "
        "architectures-v1:train (zero-shot; with a budget, move-bandit from it)"),
    "sb3-ppo": OptionalAgent(
        "baselines.learning.sb3_agents", ("torch", "stable_baselines3"),
        "stable-baselines3 PPO, factorised graph policy, single-shot env (every step 1 evaluation)"),
    "sb3-maskable-ppo": OptionalAgent(
        "baselines.learning.sb3_agents", ("torch", "stable_baselines3", "sb3_contrib"),
        "sb3-contrib MaskablePPO on the refine env (every step and every reset 1 evaluation)"),
}
# `--agent all` runs `exact` (when it does not say otherwise through ``in_all``) only on graphs of at
# most this many forward ops, where an exact search can finish quickly.
EXACT_ALL_MAX_OPS = 40

_AGENTS: dict[str, Agent] = {}
_DESCRIPTIONS: dict[str, str] = {}
_IN_ALL: dict[str, Callable[[Task], bool]] = {}
_TAKES_BUDGET: set[str] = set()
_PRETRAINING: dict[str, Callable[[], dict]] = {}


def register(
    name: str, description: str, in_all: Callable[[Task], bool] | None = None,
    takes_budget: bool = False, pretraining: Callable[[], dict] | None = None,
) -> Callable[[Agent], Agent]:
    """Decorator: register ``agent`` under ``name`` (re-registering a name replaces the agent, so
    that reloading a module in a session does not fail). ``in_all(task)`` says whether
    ``--agent all`` runs it on ``task`` (default: always; `exact` only on small graphs).
    ``takes_budget``: the agent's ``budget`` may be a `placement_gym.evaluation.budget.Budget`, through
    which it then makes every evaluation, so that ``placement-gym train`` reads its learning curve from the
    budget (`budget_agents`). ``pretraining()``, for an agent shipped pre-trained outside the harness,
    gives the leaderboard's ``pretraining`` object its entries declare (`declared_pretraining`)."""
    if not name or name == "all" or name.startswith(SINGLE_PREFIX):
        raise ValueError(f"agent name {name!r} is reserved or empty")

    def decorate(agent: Agent) -> Agent:
        _AGENTS[name] = agent
        _DESCRIPTIONS[name] = description
        if in_all is not None:
            _IN_ALL[name] = in_all
        else:
            _IN_ALL.pop(name, None)
        if takes_budget:
            _TAKES_BUDGET.add(name)
        else:
            _TAKES_BUDGET.discard(name)
        if pretraining is not None:
            _PRETRAINING[name] = pretraining
        else:
            _PRETRAINING.pop(name, None)
        return agent

    return decorate


def load_agents(until: str | None = None) -> None:
    """Import the modules of `AGENT_MODULES` in order, so that each registers its agents: all of them, or
    only up to the one that registers ``until`` (so that asking for `heft` does not import torch)."""
    for module in AGENT_MODULES:
        if until is not None and until in _AGENTS:
            return
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


def missing_modules() -> dict[str, str]:
    """The agents of `OPTIONAL_AGENTS` that are not registered, each with the first module it needs
    that does not import (all it needs, comma-separated, where each imports alone)."""
    load_agents()
    return {name: _first_missing(agent.needs) or ", ".join(agent.needs)
            for name, agent in OPTIONAL_AGENTS.items() if name not in _AGENTS}


def missing_agents() -> dict[str, str]:
    """The agents of `OPTIONAL_AGENTS` that are not registered (a module they need is missing), each
    with the one-line reason and the install command."""
    return {name: f"agent {name!r} needs {module}, which is not installed: {INSTALL_HINT}"
            for name, module in missing_modules().items()}


def registered_names() -> list[str]:
    """Every registered agent name (after importing every baselines module), in registration order,
    with ``single:<device>`` standing for the single-device agents."""
    load_agents()
    return [f"{SINGLE_PREFIX}<device>", *_AGENTS]


def budget_agents() -> list[str]:
    """The registered agents that take a `placement_gym.evaluation.budget.Budget` as ``budget``
    (``register(..., takes_budget=True)``), in registration order."""
    load_agents()
    return [name for name in _AGENTS if name in _TAKES_BUDGET]


def agent_descriptions() -> dict[str, str]:
    """Name -> one-line description of every registered agent."""
    load_agents()
    single = f"{SINGLE_PREFIX}<device>"
    return {single: SIMPLE_AGENT_DESCRIPTIONS[single], **_DESCRIPTIONS}


def declared_pretraining(name: str) -> dict | None:
    """The ``pretraining`` object (evaluations, wall time, machine; ``counted: declared``) that the
    leaderboard entries of agent ``name`` declare, for an agent registered with ``pretraining``; None
    for any other agent, whose entries learn inside the harness or not at all."""
    load_agents()
    declare = _PRETRAINING.get(name)
    return declare() if declare is not None else None


def names_for_all(task: Task) -> list[str]:
    """The agents ``--agent all`` runs on ``task``: every registered agent (not the
    ``single:<device>`` variants), except those whose ``in_all`` predicate declines the task; an
    `exact` agent without one runs only on graphs of at most `EXACT_ALL_MAX_OPS` forward ops."""
    load_agents()
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
        load_agents(until=name if isinstance(name, str) else None)
    if name not in _AGENTS:
        reason = missing_agents().get(name) if isinstance(name, str) else None
        if reason is not None:
            raise ImportError(reason)
        raise ValueError(unknown_name("agent", name, registered_names()))
    return _AGENTS[name]


def run_agent(task: Task, name: str, seed: int = 0, budget: int | None = None) -> AgentResult:
    """Run agent ``name`` and check what it returns (`AgentResult.checked`)."""
    return AgentResult.checked(task, get_agent(name)(task, seed=seed, budget=budget))


# Algorithms whose leaderboard entries a re-run cannot reproduce bit for bit, and why.
NOT_RERUNNABLE: dict[str, str] = {
    "exact": "its leaderboard fill (baselines/leaderboard_fill/classic.py) stops CP-SAT's parallel search "
             "at a wall-clock time limit, so a re-run may stop at another placement",
}


def harness_agent(name: str) -> Callable[[Task, int, int | None], AgentResult] | None:
    """What this package's provider gives the leaderboard (``leaderboard validate --rerun``,
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


# ---------------------------------------------------------------------------------------------------
# The simple agents of `placement_gym.evaluation.placements` (placement and evaluation count from there), so
# that one registry knows every name.


def _simple(name: str) -> Agent:
    def agent(task: Task, seed: int = 0, budget: int | None = None) -> AgentResult:
        placement, evaluations = simple_agent(task, name, seed)
        return AgentResult(placement, evaluations)

    agent.__name__ = agent.__qualname__ = name.replace("-", "_").replace(":", "_")
    return agent


for _name in ("best-single", "round-robin", "random"):
    register(_name, SIMPLE_AGENT_DESCRIPTIONS[_name])(_simple(_name))
