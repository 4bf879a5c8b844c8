"""Agents found through the entry-point group ``placement_gym.agents``: the core never imports an agent
package, and a third-party package adds agents that ``evaluate``, ``train``, ``fidelity`` and the
leaderboard harness (``leaderboard validate --rerun``) run, with no edit here.

A package registers a *provider* in its ``pyproject.toml``::

    [project.entry-points."placement_gym.agents"]
    baselines = "baselines.provider:provider"

The entry point names an object (an instance, or a module of functions) with these methods; all but
``leaderboard_agent`` are optional, and a provider without one simply offers nothing there:

``names() -> Sequence[str]``
    The agents ``evaluate --agent NAME`` runs (listed in the CLI's help and errors).
``agent(name) -> Agent | None``
    The agent called ``name`` (None: not one of this provider's): ``agent(task, seed, budget)``
    returning an `AgentResult` (or any object with ``.placement``, a device index per forward op,
    ``.evaluations``, the evaluations it made, and optionally ``.info``, a JSON-able dict).
``agents_for_all(task) -> Sequence[str]``
    The agents ``evaluate --agent all`` runs on ``task``.
``leaderboard_agent(name) -> Agent | None``
    The harness agent ``agent(task, seed, budget)`` that made the leaderboard entries of algorithm
    ``name`` (exactly as the entries were made); None for a name it does not know; ValueError for
    a name whose entries cannot be re-run (such as a solver stopped by a wall-clock limit).
``unavailable() -> Mapping[str, str]``
    The agents the provider would offer but cannot, their optional dependencies missing: name ->
    the one-line reason naming what to install. ``agent(name)`` and ``trainer(name)`` raise
    ImportError with that reason for such a name, so that the CLI says what to install instead of
    calling the name unknown.
``describe() -> Mapping[str, Mapping]``
    What ``placement-gym agents`` lists of each agent: name -> ``kind`` (`AGENT_KINDS`),
    ``default_budget`` and ``budget_unit`` (None for an agent that takes no budget), ``extra`` (the
    pip extra it needs, or None), and optionally ``installed``, ``missing`` (for an agent not
    installed: the modules it lacks, such as ``"torch"``) and ``description`` (what the agent does,
    installed or not: ``placement-gym agents`` shows what is missing in a column of its own).
``trainable() -> Sequence[str]`` and ``trainer(name) -> Callable | None``
    The learned agents ``train --agent NAME`` trains, and the function that trains one:
    ``train(task, budget, *, seed, out_dir, resume, progress, threads, evaluator)`` returning a
    result with ``to_dict(task)``, ``best_runtime``, ``best_feasible``, ``evaluations``,
    ``iterations``, ``wall_s``, ``evaluations_per_s``, ``scored_by`` and ``files``
    (as `baselines.learning.train` does). A trainer that also takes ``tensorboard`` (a folder, or
    None) serves ``train --tensorboard DIR``.

An entry point that names a plain callable is a provider of ``leaderboard_agent`` alone (the
protocol of the first version of the group). Providers are asked in entry-point name order; one
whose import fails (its optional dependencies missing) is skipped and named in the errors.
"""

from __future__ import annotations

import inspect
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from importlib.metadata import entry_points
from typing import Any

import numpy as np

from placement_gym.common.extras import install_command
from placement_gym.common.names import unknown_name
from placement_gym.task.compiled import Task

AGENT_GROUP = "placement_gym.agents"

Agent = Callable[[Task, int, "int | None"], Any]  # agent(task, seed, budget) -> result with .placement



def baselines_hint() -> str:
    """The command that installs the baselines extra where the user is (`install_command`)."""
    return install_command("baselines")


def __getattr__(name: str) -> str:
    # ``INSTALL_HINT``: `baselines_hint`, computed when first read (it looks for the checkout).
    if name == "INSTALL_HINT":
        return baselines_hint()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


@dataclass(frozen=True)
class Providers:
    """The providers that loaded (``(entry-point name, provider)`` in name order) and those that did
    not (``"name (error)"``)."""

    loaded: tuple[tuple[str, Any], ...]
    unloadable: tuple[str, ...] = ()

    def note(self) -> str:
        """``"; could not load: ..."`` when some provider did not load, else ``""``."""
        return f"; could not load: {', '.join(self.unloadable)}" if self.unloadable else ""

    def having(self, method: str) -> list[tuple[str, Any]]:
        """The loaded providers that offer ``method``."""
        return [(name, provider) for name, provider in self.loaded
                if callable(getattr(provider, method, None))]


class _LookupOnly:
    """A provider given as a plain callable: ``leaderboard_agent`` alone."""

    def __init__(self, lookup: Callable[[str], Agent | None]) -> None:
        self.leaderboard_agent = lookup


def providers() -> Providers:
    """Every provider of `AGENT_GROUP`, loaded (not cached: a package installed in the session counts)."""
    loaded, unloadable = [], []
    for point in sorted(entry_points(group=AGENT_GROUP), key=lambda point: point.name):
        try:
            provider = point.load()
        except ImportError as error:  # a provider whose optional dependencies are missing
            unloadable.append(f"{point.name} ({error})")
            continue
        plain = callable(provider) and not inspect.isclass(provider)
        if plain and not hasattr(provider, "leaderboard_agent"):
            provider = _LookupOnly(provider)
        loaded.append((point.name, provider))
    return Providers(tuple(loaded), tuple(unloadable))


# --- evaluate --agent, fidelity ---------------------------------------------------------------------


def agent_names() -> list[str]:
    """The agents of every provider (``names()``), in provider order, without repeats."""
    names: list[str] = []
    for _, provider in providers().having("names"):
        names.extend(provider.names())
    return list(dict.fromkeys(names))


def lookup_agent(name: str) -> Agent | None:
    """The agent ``name`` of the first provider that has one, or None; ImportError (naming what to
    install) when no provider has it but one would, were its optional dependencies installed."""
    missing: ImportError | None = None
    for _, provider in providers().having("agent"):
        try:
            agent = provider.agent(name)
        except ImportError as error:  # another provider may still have it: remember, go on
            missing = missing or error
            continue
        if agent is not None:
            return agent
    if missing is not None:
        raise missing
    return None


def plan_agents() -> dict[str, str]:
    """Name -> description of the plan agents of every provider (``plan_agents()``: agents that answer a
    `placement_gym.plans.space.PlanTask` with a plan's choice), in provider order; the first provider's
    description wins for a name offered twice."""
    found: dict[str, str] = {}
    for _, provider in providers().having("plan_agents"):
        for name, description in dict(provider.plan_agents()).items():
            found.setdefault(name, description)
    return found


def lookup_plan_agent(name: str) -> Agent | None:
    """The plan agent ``name`` of the first provider that has one (``plan_agent(name)``), or None."""
    for _, provider in providers().having("plan_agent"):
        agent = provider.plan_agent(name)
        if agent is not None:
            return agent
    return None


def plan_leaderboard_agent(name: str) -> Agent:
    """The plan agent ``name`` (`lookup_plan_agent`) as the leaderboard's harness runs it; ValueError
    naming the plan agents when no provider has it."""
    agent = lookup_plan_agent(name)
    if agent is None:
        raise ValueError(f"no agent provider of entry-point group {AGENT_GROUP} has a plan agent "
                         f"{name!r}; plan agents: {', '.join(plan_agents()) or 'none'}{providers().note()}")
    return agent


def unavailable_agents() -> dict[str, str]:
    """Agents that providers would offer were their optional dependencies installed: name -> the
    reason, naming what to install (every provider's ``unavailable()``)."""
    found: dict[str, str] = {}
    for _, provider in providers().having("unavailable"):
        for name, reason in dict(provider.unavailable()).items():
            found.setdefault(name, reason)
    return found


AGENT_KINDS = ("heuristic", "search", "learned", "pretrained")
_FACT_KEYS = ("kind", "default_budget", "budget_unit", "extra", "installed", "missing", "description")


def describe_agents() -> list[dict[str, Any]]:
    """Every agent of the providers, one dict each (``placement-gym agents``): ``name`` and the facts
    of `_FACT_KEYS`, in provider order (``describe()``; an agent of a provider without it has None
    where the provider says nothing); the first provider's facts win for a name offered twice."""
    rows: dict[str, dict[str, Any]] = {}
    for _, provider in providers().loaded:
        described = dict(provider.describe()) if callable(getattr(provider, "describe", None)) else {}
        names = list(provider.names()) if callable(getattr(provider, "names", None)) else []
        for name in dict.fromkeys([*names, *described]):
            if name in rows:
                continue
            facts = dict(described.get(name, {}))
            rows[name] = {"name": name, **{key: facts.get(key) for key in _FACT_KEYS}}
            rows[name]["installed"] = facts.get("installed", True)
    return list(rows.values())


def unknown_agent_error(name: str, known: list[str], note: str = "") -> ValueError:
    """The error of an agent name no provider knows: a guess at the name meant, the known names,
    ``note`` (such as the providers that did not load) and the agents that are not installed."""
    missing = unavailable_agents()
    allowed = ", ".join(known) or f"none installed ({baselines_hint()})"
    if missing:
        allowed += f"; not installed: {', '.join(missing)} ({baselines_hint()})"
    return ValueError(unknown_name("agent", name, [*known, *missing], allowed + note))


@dataclass(frozen=True)
class AgentResult:
    """What an agent returns, the one result type of every agent.

    placement: int64 ``(n_forward,)``, a device index per forward op; a plan agent's is the plan's
    choice (`placement_gym.plans.space.PlanTask`) or, where it sets values per stage, the `Plan`.
    evaluations: the evaluations the agent used (`simulate` calls, `simulate_batch` rows).
    info: agent-specific extras (a solver bound, the agent's own schedule length...), JSON-able.
    """

    placement: np.ndarray
    evaluations: int
    info: dict = field(default_factory=dict)

    @classmethod
    def checked(cls, task: Task, result: Any) -> AgentResult:
        """``result`` of an agent run on ``task`` (an `AgentResult`, or any object with ``placement``,
        ``evaluations`` and optionally ``info``), its placement checked (`Task.check_placement`) and
        its count an int; TypeError for anything else."""
        if not (hasattr(result, "placement") and hasattr(result, "evaluations")):
            raise TypeError(f"an agent returned {type(result).__name__}, not an AgentResult "
                            "(an object with placement and evaluations)")
        return cls(task.check_placement(result.placement), int(result.evaluations),
                   dict(getattr(result, "info", None) or {}))


def run_installed_agent(task: Task, name: str, seed: int = 0, budget: int | None = None) -> AgentResult:
    """Run the agent ``name`` of the providers on ``task`` and check its placement. ValueError naming
    the known agents when no provider has it."""
    agent = lookup_agent(name)
    if agent is None:
        raise unknown_agent_error(name, agent_names(), providers().note())
    return AgentResult.checked(task, agent(task, seed, budget))


def agent_report(task: Task, name: str, seed: int, result: Any, wall_s: float) -> dict[str, Any]:
    """What ``evaluate --agent all`` shows of agent ``name``'s ``result`` on ``task``, its placement
    simulated once more (not counted in ``evaluations``, which are the agent's own). A JSON-able
    dict: agent, task, seed, runtime (s), feasible, peak_memory (bytes per device), lower_bound,
    best_single_runtime, speedup (best single device runtime / runtime), gap (runtime / lower bound
    - 1), evaluations, wall_s (the agent's wall-clock seconds), info, placement (device index per
    forward op)."""
    # The cost model (numba, about 0.3 s) loads where a report is made, not where agents are listed.
    from placement_gym.cost_model import lower_bound, simulate, single_device

    simulated = simulate(task, result.placement)
    bound = lower_bound(task)
    single = single_device(task)
    return {
        "agent": name,
        "task": task.id,
        "seed": seed,
        "runtime": simulated.runtime,
        "feasible": simulated.feasible,
        "peak_memory": simulated.peak_memory.tolist(),
        "lower_bound": bound,
        "best_single_runtime": single.runtime,
        "speedup": single.runtime / simulated.runtime,
        "gap": simulated.runtime / bound - 1.0,
        "evaluations": result.evaluations,
        "wall_s": wall_s,
        "info": result.info,
        "placement": result.placement.tolist(),
    }


def evaluate_agent(task: Task, name: str, seed: int = 0, budget: int | None = None) -> dict[str, Any]:
    """Run the agent ``name`` of the providers on ``task`` and report it (`agent_report`)."""
    start = time.perf_counter()
    result = run_installed_agent(task, name, seed, budget)
    return agent_report(task, name, seed, result, time.perf_counter() - start)


def agents_for_all(task: Task) -> list[str] | None:
    """The agents ``evaluate --agent all`` runs on ``task`` (every provider's ``agents_for_all``), or
    None when no provider offers the choice."""
    offering = providers().having("agents_for_all")
    if not offering:
        return None
    names: list[str] = []
    for _, provider in offering:
        names.extend(provider.agents_for_all(task))
    return list(dict.fromkeys(names))


# --- the leaderboard ----------------------------------------------------------------------------------


def leaderboard_agent(name: str) -> Agent:
    """The harness agent of algorithm ``name`` from the providers (in name order); ValueError when
    none knows it (naming the providers) or when its provider says it cannot be re-run."""
    found = providers()
    for _, provider in found.having("leaderboard_agent"):
        agent = provider.leaderboard_agent(name)
        if agent is not None:
            return agent
    known = ", ".join(point for point, _ in found.loaded) or "none installed"
    raise ValueError(
        f"no agent provider of entry-point group {AGENT_GROUP} knows algorithm {name!r} "
        f"(providers: {known}{found.note()}; a provider leaves out agents whose optional dependencies are "
        f"missing, such as the learned agents without torch: {baselines_hint()})"
    )


# --- train ----------------------------------------------------------------------------------------------


def find_trainer(name: str) -> Callable[..., Any]:
    """The function that trains learned agent ``name`` (first provider whose ``trainer`` has it).
    ValueError naming the learned agents when none has it; ImportError when no provider can train
    (their optional dependencies missing)."""
    found = providers()
    offering = found.having("trainer")
    names: list[str] = []
    refused: list[str] = []
    for point, provider in offering:
        try:
            trainer = provider.trainer(name)
            if trainer is not None:
                return trainer
            names.extend(provider.trainable() if callable(getattr(provider, "trainable", None)) else ())
        except ImportError as error:  # the provider's training (or this agent) needs a missing module
            refused.append(f"{point} ({error})")
    if not names:
        detail = ", ".join([*found.unloadable, *refused]) or (
            f"no provider of entry-point group {AGENT_GROUP} trains agents")
        raise ImportError(f"training needs the baselines extra: {baselines_hint()} ({detail})")
    if refused:
        # A provider would train it with its optional dependencies installed: say what to install
        # rather than call it unknown.
        raise ImportError(f"cannot train {name!r}: {'; '.join(refused)}")
    known = sorted(dict.fromkeys(names))
    raise ValueError(unknown_name("learned agent", name, known, ", ".join(known) + found.note()))
