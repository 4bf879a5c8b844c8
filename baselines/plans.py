"""Plan agents: the planners of the field on `placement_gym.plans.space.PlanTask`s, each
``agent(task, seed=0, budget=None) -> AgentResult`` whose ``placement`` is the plan's choice (one value
index per dimension, `PlanTask.plan_of` reads it) and whose ``evaluations`` count the plans it priced.

- ``megatron``: Megatron-LM's and NeMo's rules of thumb (`placement_gym.plans.rules`, where a
  parallel-track suite's reference plan comes from): tensor parallelism inside a node, pipeline across
  nodes only as deep as the weights and optimizer state need, data parallelism over the rest with the
  distributed optimizer (ZeRO-1), sequence parallelism, selective recomputation, interleaving where it
  divides; when the plan does not fit, full recomputation, then a deeper pipeline.
- ``sweep``: Calculon's method: every uniform plan whose degrees divide (`PlanTask.choice_masks`'
  rules), those whose weights and optimizer state alone cannot fit skipped unpriced, the rest priced in
  a fixed order up to the budget; the fastest feasible one.
- ``plan-random``: choices drawn uniformly from the values each dimension allows, the fastest feasible.
- ``plan-anneal``: simulated annealing over choices, a move changing one dimension to another allowed
  value, on log step time (infeasible plans scored by a penalty).
"""

from __future__ import annotations

import itertools
import math
import multiprocessing
import os
import time
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor

import numpy as np

from placement_gym.evaluation.agents import AgentResult
from placement_gym.plans.rules import choice_of_values, rules_plan, state_bytes_lower_bound
from placement_gym.plans.space import DIMENSION_NAMES, DIMENSIONS, PlanTask

PlanAgent = Callable[..., AgentResult]
DEFAULT_BUDGET = 2_000
# A sweep of more plans than this prices them in several processes.
PARALLEL_FROM = 4_000
_PLAN_AGENTS: dict[str, PlanAgent] = {}
_DESCRIPTIONS: dict[str, str] = {}


def register_plan_agent(name: str, description: str) -> Callable[[PlanAgent], PlanAgent]:
    """Decorator: register a plan agent under ``name``."""

    def decorate(agent: PlanAgent) -> PlanAgent:
        _PLAN_AGENTS[name] = agent
        _DESCRIPTIONS[name] = description
        return agent

    return decorate


def plan_agent_descriptions() -> dict[str, str]:
    """Name -> description of every plan agent, in registration order."""
    return dict(_DESCRIPTIONS)


def get_plan_agent(name: str) -> PlanAgent | None:
    return _PLAN_AGENTS.get(name)


def _step(task: PlanTask, choice: np.ndarray) -> float:
    """The step seconds of a choice (inf when it cannot run or fit), one evaluation."""
    result = task.evaluate(choice)
    return result.step_s if result.feasible else math.inf


@register_plan_agent("megatron", "Megatron-LM's and NeMo's rules: TP in a node, PP as deep as memory "
                                 "needs, DP with ZeRO-1 over the rest, interleaving where it divides")
def megatron(task: PlanTask, seed: int = 0, budget: int | None = None) -> AgentResult:
    """`placement_gym.plans.rules.rules_plan` as an agent (deterministic: ``seed`` is unused)."""
    choice, step, evaluations = rules_plan(task, budget)
    return AgentResult(choice, evaluations, {"step_s": step})


def uniform_choices(task: PlanTask, budget: int | None = None) -> tuple[list[np.ndarray], int]:
    """Every choice whose degrees divide (`PlanTask.degree_combos`), degrees first and the options
    inner, but those whose weights and optimizer state alone exceed a GPU: ``(choices, skipped)``, the
    first ``budget`` choices (None: all) and the plans skipped until the last of them (in a whole sweep:
    all the skipped)."""
    masks = dict(zip(DIMENSION_NAMES, task.value_masks))
    values = {name: [v for v, ok in zip(DIMENSIONS[name], masks[name]) if ok] for name in DIMENSION_NAMES}
    choices: list[np.ndarray] = []
    skipped = 0
    for tp, pp, cp, vp, ep, mbs in task.degree_combos:
        dp = task.mesh.gpus // (tp * pp * cp)
        schedules = (("interleaved",) if vp > 1
                     else tuple(s for s in values["schedule"] if s != "interleaved"))
        for schedule, sp, zero, recompute in itertools.product(
                schedules, [s for s in values["sequence_parallel"] if tp > 1 or not s], values["zero"],
                values["recompute"]):
            if zero > 0 and dp == 1:
                continue  # ZeRO over one rank shards nothing: the same plan as stage 0
            plan = {"tp": tp, "pp": pp, "vp": vp, "cp": cp, "ep": ep, "microbatch_size": mbs,
                    "schedule": schedule, "sequence_parallel": sp, "zero": zero, "recompute": recompute}
            if state_bytes_lower_bound(task, plan) > task.mesh.gpu.memory:
                skipped += 1
                continue
            if budget is not None and len(choices) >= budget:
                return choices, skipped
            choices.append(choice_of_values(plan))
    return choices, skipped


def _price_chunk(problem: tuple, choices: np.ndarray) -> np.ndarray:
    """Step seconds of ``choices`` (inf where infeasible) on a new task of ``problem`` (a worker's)."""
    task = PlanTask(*problem)
    return np.array([_step(task, choice) for choice in choices])


@register_plan_agent("sweep", "Calculon's method: every uniform plan that divides, those that cannot fit "
                              "skipped unpriced, the fastest priced")
def sweep(task: PlanTask, seed: int = 0, budget: int | None = None,
          workers: int | None = None) -> AgentResult:
    """``workers``: processes that price the plans (None: the machine's cores, at most 8, for sweeps of
    more than `PARALLEL_FROM` plans); the result is the same for any number."""
    start = time.perf_counter()
    choices, skipped = uniform_choices(task, budget)
    if not choices:  # nothing could fit: the rules' answer, priced
        return megatron(task, seed, budget)
    workers = workers or (min(os.cpu_count() or 1, 8) if len(choices) > PARALLEL_FROM else 1)
    if workers > 1:
        problem = (task.model, task.mesh, task.global_batch, task.precision)
        chunks = np.array_split(np.array(choices), workers * 4)
        with ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("fork")) as pool:
            steps = np.concatenate(list(pool.map(_price_chunk, [problem] * len(chunks), chunks)))
        task.count_evaluations(len(steps), steps, np.isfinite(steps))
    else:
        steps = np.array([_step(task, choice) for choice in choices])
    best = int(np.argmin(steps))  # the first of the fastest, in the sweep's fixed order
    seconds = time.perf_counter() - start
    return AgentResult(choices[best], len(choices), {
        "step_s": float(steps[best]), "skipped": skipped, "seconds": seconds, "workers": workers,
        "plans_per_s": (len(choices) + skipped) / max(seconds, 1e-9)})


def _random_choice(task: PlanTask, rng: np.random.Generator) -> np.ndarray:
    return np.array([rng.choice(np.flatnonzero(mask)) for mask in task.value_masks], dtype=np.int64)


@register_plan_agent("plan-random", "random search: choices drawn from the values each dimension allows")
def plan_random(task: PlanTask, seed: int = 0, budget: int | None = None) -> AgentResult:
    rng = np.random.default_rng(seed)
    best, best_step = None, math.inf
    for _ in range(budget or DEFAULT_BUDGET):
        choice = _random_choice(task, rng)
        step = _step(task, choice)
        if step < best_step or best is None:
            best, best_step = choice, step
    return AgentResult(best, budget or DEFAULT_BUDGET, {"step_s": best_step})


@register_plan_agent("plan-anneal", "simulated annealing over plans, one dimension changed a move, "
                                    "from the rules' plan")
def plan_anneal(task: PlanTask, seed: int = 0, budget: int | None = None) -> AgentResult:
    rng = np.random.default_rng(seed)
    total = budget or DEFAULT_BUDGET
    start = megatron(task, seed, min(total, 8))
    current, evaluations = start.placement.copy(), start.evaluations
    current_step = start.info["step_s"]
    best, best_step = current.copy(), current_step
    penalty = 10.0  # an infeasible plan scores as ten times the slowest step seen
    worst = current_step if math.isfinite(current_step) else 1.0
    masks = task.value_masks
    movable = [k for k, mask in enumerate(masks) if mask.sum() > 1]
    while evaluations < total and movable:
        k = int(rng.choice(movable))
        candidate = current.copy()
        candidate[k] = int(rng.choice(np.flatnonzero(masks[k] & (np.arange(len(masks[k])) != current[k]))))
        step = _step(task, candidate)
        evaluations += 1
        if math.isfinite(step):
            worst = max(worst, step)
        score = math.log(step if math.isfinite(step) else penalty * worst)
        now = math.log(current_step if math.isfinite(current_step) else penalty * worst)
        temperature = 0.3 * (1.0 - evaluations / total) + 1e-3
        if score <= now or rng.random() < math.exp((now - score) / temperature):
            current, current_step = candidate, step
        if step < best_step:
            best, best_step = candidate.copy(), step
    return AgentResult(best, evaluations, {"step_s": best_step})
from baselines import plan_planners  # noqa: E402, F401  (alpa, galvatron, plan-move-bandit register here too)
