"""Search baselines: simulated annealing (`anneal`) and the cross-entropy method (`cem`).

Both search placements with the cost model itself, under a budget of evaluations (each `simulate`
call and each row of a `simulate_batch` call counts one, as `baselines.registry` defines), and both
return the best placement they evaluated, so neither is ever worse than its start.

Start. By default both start from the best of the cheap constructive baselines (`START_AGENTS`: the
expert, partition, scheduling and Baechi heuristics that are registered, plus best-single). Their own
evaluations and the one evaluation of each start placement are counted in the budget; the remaining
evaluations go to the search. ``start=`` gives an explicit start placement (or a list of agent names)
instead.

Objective (memory-aware). Placements are ranked feasible first; feasible ones by runtime, infeasible
ones by their memory overflow (the sum over devices of bytes above capacity / capacity), then by
runtime. An infeasible placement therefore never replaces a feasible best, and a search that starts
infeasible is pulled towards feasibility first.

Budget. Both spend a `placement_gym.evaluation.budget.Budget` through its clipping, memoised door
(`Budget.scores`): a placement proposed a second time is not simulated (nor counted) again, which matters
for hill climbing on small graphs, where the same rejected moves come back; the last evaluations that fit
are spent.

Who scores. By default the cost model of the task; ``evaluator=`` (either search) takes any
`placement_gym.evaluation.evaluator.Evaluator` instead
(`placement_gym.evaluation.evaluator.make_evaluator`'s profiled or real one, a
`placement_gym.real.distributed.RayEvaluatorPool` that spreads each batch over its actors...), each batch in
one ``simulate_batch`` call: the search's own evaluations, the start placements' included, are then that
evaluator's, counted and memoised the same way. The start agents still construct their placements with the
cost model (their evaluations are counted as before).

`anneal`: simulated annealing over single-op moves (an op to another device: half of the time a device
that one of its graph neighbours is on, since a random device mostly adds transfers) and group moves
(every op of a chain, or of a co-location group, to one device), and a few swaps (two ops exchange
devices, which keeps every device's load: on a balanced fork-join the single moves alone stopped one
transfer short of the optimum). Acceptance is Metropolis on the
runtime relative to the start's: a move ``delta`` (fraction of the start runtime) worse is accepted
with probability ``exp(-delta / T)``; ``T`` falls geometrically from ``t_start`` to ``t_end`` over the
budget. ``t_start=0`` is plain hill climbing: a step then asks only which moves beat the current
placement, so when that is feasible (and no ``move_mix`` learns from the scores) its moves are scored
with the current runtime as cutoff (`Budget.scores`; ``cutoffs=False``: in full): the simulation of a
move stops once its runtime is proven above the current one, and the step takes the same decision
as with full scores (docs/cost_model.md, "Evaluations with a cutoff"), unless a placement cut before
comes back under a higher cutoff after a kick, and is evaluated and counted again (``cut_again`` in
the result's info). When `ANNEAL_KICK_STEPS` steps in a row find nothing
new to evaluate (a small graph's local optimum), the search restarts from the best placement moved by
`ANNEAL_KICK_MOVES` random moves (iterated local search); it stops early only when even that finds
nothing new for `ANNEAL_STALE_STEPS` steps. ``batch`` moves are proposed from the current placement
at once, evaluated with one `simulate_batch` call, and the best of them goes through the acceptance
test. Measured (budget 2,000, from best-single, 2-4 seeds; mean runtime / start runtime): gnmt4/k80x4
batch 1: 0.54-0.58, 8: 0.49-0.50, 16: 0.47, 32: 0.49; inception_v3/k80x2 batch 8: 0.74, 16: 0.73,
32: 0.73; inception_v3/k80x4 0.69-0.70 for every batch size. Temperatures 0 to 1e-3 were within
noise of each other, 1e-2 worse (a random walk); 20% swaps cost 1-3% on these graphs, 10% about
nothing. Hence ``batch=16`` and ``t_start=1e-3``
(`ANNEAL_BATCH`, `ANNEAL_T_START`).

`cem`: the cross-entropy method, the search half of Post (Gao et al., NeurIPS 2018; docs/references.md):
independent categorical distributions over devices, one per op (or per group with ``groups=``);
each generation samples ``population`` placements, evaluates them in one `simulate_batch` call,
keeps the elite fraction (ranked as above; the best placement seen so far always joins the elite),
and moves the probabilities towards the elite's device frequencies with smoothing ``smoothing``, with a
floor so that no device is ever ruled out. Initialisation: around the start placement, with mass
``1 - min(0.5, CEM_START_CHANGES / units)`` on each unit's start device and the rest spread
evenly, so that a sample moves about `CEM_START_CHANGES` units on average (at least half the mass
stays on the start device, as for 8 or fewer units). Population 20 with smoothing 0.5 did best
for a 2,000-evaluation budget (inception_v3/k80x4 from best-single: 0.76-0.79 of the start runtime
against 0.78-0.82 with population 50; gnmt4/k80x4: 0.68-0.75 against 0.71-0.72). Uniform
initialisation (Post's choice, with thousands of samples; ``start_changes=None``) did slightly worse
with this budget (inception_v3/k80x4 from best-single, 3 seeds: 0.78-0.79 against 0.76-0.77; gnmt4:
0.72-0.76 against 0.67-0.77), and needs the elitism to come back to a good start at all.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from baselines.registry import get_agent, register
from placement_gym.evaluation.agents import AgentResult
from placement_gym.evaluation.budget import Budget, BudgetExhausted, Score
from placement_gym.evaluation.placements import best_single_placement
from placement_gym.task.compiled import Task
from placement_gym.task.groups import make_grouping

DEFAULT_BUDGET = 2_000
# The constructive baselines the searches start from (those registered are run; each is cheap).
START_AGENTS: tuple[str, ...] = (
    "best-single", "expert", "partition", "heft", "cpop", "m-topo", "m-etf", "m-sct",
)
ANNEAL_BATCH = 16  # moves evaluated per acceptance step (measured best; see the module docstring)
ANNEAL_T_START = 1e-3  # a move 0.1% of the start runtime worse passes with probability 1/e at first
ANNEAL_T_END = 1e-5
ANNEAL_GROUP_MOVE_PROB = 0.3  # share of moves that move a whole chain or co-location group
ANNEAL_NEIGHBOUR_PROB = 0.5  # share of single-op moves to a device a graph neighbour is on
ANNEAL_SWAP_PROB = 0.1  # share of moves that swap the devices of two ops
# The kinds of moves: two ops exchange devices; a chain or co-location group to one device; one op to
# another device (a neighbour's or any)
MOVE_KINDS: tuple[str, ...] = ("swap", "group", "single")
ANNEAL_KICK_STEPS = 20  # steps in a row with nothing new to evaluate before a kick
ANNEAL_KICK_MOVES = 3  # random moves in a kick
# A search stops early ("converged") when this many steps (generations) in a row found nothing new to
# evaluate: every proposal was a placement already evaluated (a local optimum of a small graph, or a
# distribution that has collapsed onto one placement).
ANNEAL_STALE_STEPS = 1_000
CEM_STALE_GENERATIONS = 20
CEM_POPULATION = 20
CEM_ELITE_FRACTION = 0.1
CEM_SMOOTHING = 0.5
CEM_START_CHANGES = 4.0  # units a first-generation sample moves away from the start, on average
CEM_FLOOR = 1e-3  # least probability of any device, before renormalising

# ---------------------------------------------------------------------------------------------------
# Start placements


@dataclass(frozen=True)
class Start:
    """The start of a search: its placement and score, where it came from, and the evaluations the
    start agents used (their own, plus one per start placement evaluated)."""

    placement: np.ndarray
    score: Score
    source: str
    evaluations: int
    candidates: dict


def _start_candidates(task: Task, start, seed: int) -> tuple[list[tuple[str, np.ndarray]], int]:
    """(name, placement) pairs to start from and the evaluations it took to construct them."""
    if start is None:
        start = START_AGENTS
    if isinstance(start, str):
        start = [start]
    if not (isinstance(start, Sequence) and start and all(isinstance(x, str) for x in start)):
        return [("given", task.check_placement(start))], 0
    names = list(start)
    candidates, used = [], 0
    for name in names:
        try:
            agent = get_agent(name)
        except ValueError:
            if name in START_AGENTS:  # a default start agent whose optional dependency is missing
                continue
            raise
        result = agent(task, seed=seed, budget=None)
        candidates.append((name, task.check_placement(result.placement)))
        used += int(result.evaluations)
    if not candidates:
        candidates, used = [("best-single", best_single_placement(task))], task.n_devices
    return candidates, used


def find_start(task: Task, budget: Budget, start, seed: int) -> Start:
    """Construct the start candidates, evaluate them (counted in ``budget``), and pick the best."""
    candidates, used = _start_candidates(task, start, seed)
    budget.used += used
    if budget.remaining < len(candidates):
        raise ValueError(
            f"budget {budget.limit} is too small: the start placements "
            f"({', '.join(n for n, _ in candidates)}) take {used + len(candidates)} evaluations; "
            "give a larger budget or start=<placement>"
        )
    scores = budget.scores(np.stack([p for _, p in candidates]))
    best = min(range(len(candidates)), key=lambda i: scores[i].key)
    table = {
        name: {"runtime": s.runtime, "feasible": s.feasible} for (name, _), s in zip(candidates, scores)
    }
    return Start(candidates[best][1], scores[best], candidates[best][0], budget.used, table)


def as_budget(task: Task, budget: int | Budget | None, evaluator: Any = None) -> Budget:
    """The `Budget` a search spends: ``budget`` itself when it is one (its own evaluator scores; the
    caller reads its curve), else a new one of ``budget`` evaluations (None: `DEFAULT_BUDGET`)
    scored by ``evaluator``."""
    if isinstance(budget, Budget):
        if evaluator is not None:
            raise ValueError("evaluator= goes to the Budget when a Budget is given, not beside it")
        if budget.task.id != task.id:
            raise ValueError(f"the budget is of task {budget.task.id}, not {task.id}")
        return budget
    return Budget(task, DEFAULT_BUDGET if budget is None else budget, evaluator)


def _result(budget: Budget, start: Start, extra: dict) -> AgentResult:
    best = budget.best_score
    if budget.evaluator is not None:  # the default's info stays as it always was
        extra = {**extra, "scored_by": budget.scored_by}
    info = {
        "start": start.source,
        "start_runtime": start.score.runtime,
        "start_feasible": start.score.feasible,
        "start_evaluations": start.evaluations,
        "start_candidates": start.candidates,
        "runtime": best.runtime,
        "feasible": best.feasible,
        **extra,
    }
    return AgentResult(budget.best_placement.astype(np.int64), budget.used, info)


# ---------------------------------------------------------------------------------------------------
# Simulated annealing


def forward_neighbours(task: Task) -> list[np.ndarray]:
    """Forward ops adjacent to each forward op (producer or consumer of a tensor it reads or makes)."""
    graph = task.graph
    src = np.asarray(graph.tensor_producer)[graph.edge_tensor].astype(np.int64)
    dst = np.asarray(graph.edge_dst, dtype=np.int64)
    keep = src >= 0
    a = np.concatenate([src[keep], dst[keep]])
    b = np.concatenate([dst[keep], src[keep]])
    order = np.lexsort((b, a))
    a, b = a[order], b[order]
    pointer = np.searchsorted(a, np.arange(task.n_forward + 1))
    return [np.unique(b[pointer[i] : pointer[i + 1]]) for i in range(task.n_forward)]


def multi_op_groups(task: Task) -> list[np.ndarray]:
    """The forward ops of every chain and every co-location group of more than one op (groups that
    both groupings make are listed once): the units of group moves."""
    groups = []
    for mode in ("chains", "colocate"):
        grouping = make_grouping(task.graph, mode)
        groups += [grouping.members(g) for g in range(grouping.n_groups) if grouping.sizes[g] > 1]
    return list({g.tobytes(): g for g in groups}.values())


class _MoveProposer:
    """Random single-op and group moves from a placement (each changes at least one op)."""

    def __init__(self, task: Task, rng: np.random.Generator, group_move_prob: float) -> None:
        self.task = task
        self.rng = rng
        self.n_devices = task.n_devices
        self.neighbours = forward_neighbours(task)
        self.groups = multi_op_groups(task)
        self.group_move_prob = group_move_prob if self.groups else 0.0

    def propose(
        self, placement: np.ndarray, over: np.ndarray | None,
        swap_prob: float = ANNEAL_SWAP_PROB, group_move_prob: float | None = None,
    ) -> np.ndarray:
        """A neighbour of ``placement``; ``over`` (devices over their memory) biases moves off them.
        ``swap_prob`` and ``group_move_prob`` (None: the proposer's own) set the mix of move kinds
        (`MOVE_KINDS`); the kind of the move returned is left in ``last_kind``."""
        rng = self.rng
        candidate = placement.copy()
        self.last_kind = "single"
        if self.n_devices == 1:
            return candidate
        group_prob = self.group_move_prob if group_move_prob is None or not self.groups else group_move_prob
        for _ in range(16):  # a group move may change nothing (the group is already there): retry
            if rng.random() < swap_prob:
                # Swap the devices of two ops: keeps each device's load, which single moves upset.
                op = int(rng.integers(len(placement)))
                others = np.flatnonzero(placement != placement[op])
                if len(others):
                    other = int(others[rng.integers(len(others))])
                    candidate[op], candidate[other] = placement[other], placement[op]
                    self.last_kind = "swap"
                    return candidate
                continue
            kind = "group" if rng.random() < group_prob else "single"
            if kind == "group":
                ops = self.groups[int(rng.integers(len(self.groups)))]
                device = int(rng.integers(self.n_devices))
            else:
                if over is not None and over.any() and rng.random() < 0.5:
                    pool = np.flatnonzero(over[placement])
                    pool = pool if len(pool) else np.arange(len(placement))
                    op = int(pool[rng.integers(len(pool))])
                else:
                    op = int(rng.integers(len(placement)))
                ops = np.array([op])
                here = int(placement[op])
                near = self.neighbours[op]
                near_devices = np.unique(placement[near]) if len(near) else near
                near_devices = near_devices[near_devices != here]
                if len(near_devices) and rng.random() < ANNEAL_NEIGHBOUR_PROB:
                    device = int(near_devices[rng.integers(len(near_devices))])
                else:
                    device = int(rng.integers(self.n_devices - 1))
                    device += device >= here
            if np.any(candidate[ops] != device):
                candidate[ops] = device
                self.last_kind = kind
                return candidate
        return candidate


class MoveMix(Protocol):
    """A policy over `anneal`'s move kinds that learns while the search runs (``anneal(move_mix=)``)."""

    def probabilities(self) -> tuple[float, float]:
        """For the next step's proposals: the share of swaps, and the share of group moves among the
        other moves."""

    def learn(self, kinds: list[str], scores: list[Score], current: Score, scale: float) -> None:
        """One step's proposals: their kinds (`MOVE_KINDS`), their scores, the score of the placement
        they were proposed from, and the start runtime (the scale of improvements)."""

    def describe(self) -> dict:
        """What the mix learned, for the result's info."""


class StaleSteps:
    """A local search's steps in a row that evaluated nothing new (the budget's memo knew every
    placement of the step): `scores` scores one step and counts it; ``count`` is the run so far, and
    the search has `converged` once more than ``limit`` steps in a row were stale."""

    def __init__(self, budget: Budget, limit: int) -> None:
        self.budget, self.limit, self.count = budget, limit, 0

    def scores(self, placements: np.ndarray, cutoff: float | None = None) -> list[Score]:
        """`Budget.scores` of one step's ``placements`` (with ``cutoff``), the step counted."""
        used = self.budget.used
        scores = self.budget.scores(placements, cutoff=cutoff)
        self.count = 0 if self.budget.used > used else self.count + 1
        return scores

    @property
    def converged(self) -> bool:
        return self.count > self.limit


@register("anneal", "simulated annealing over op and group moves from the best heuristic (budget: evals)",
          takes_budget=True)
def anneal(
    task: Task,
    seed: int = 0,
    budget: int | Budget | None = None,
    *,
    start=None,
    batch: int = ANNEAL_BATCH,
    t_start: float = ANNEAL_T_START,
    t_end: float = ANNEAL_T_END,
    group_move_prob: float = ANNEAL_GROUP_MOVE_PROB,
    move_mix: MoveMix | None = None,
    evaluator: Any = None,
    cutoffs: bool = True,
) -> AgentResult:
    """Simulated annealing (see the module docstring). ``budget``: evaluations in all, the start's
    included (default `DEFAULT_BUDGET`). ``start``: a placement, agent name(s), or None for
    `START_AGENTS`. ``batch``: moves per acceptance step. ``t_start``/``t_end``: temperatures as
    fractions of the start runtime (``t_start=0``: hill climbing). ``group_move_prob``: share of moves
    on a whole chain or co-location group. ``move_mix``: a `MoveMix` that sets the shares of swaps and
    group moves step by step and learns from each step's scores (None: the fixed `ANNEAL_SWAP_PROB` and
    ``group_move_prob``). ``evaluator``: who scores the placements (None: the cost model; see the
    module docstring). ``cutoffs``: in hill climbing (``t_start=0``, no ``move_mix``), score moves
    with the current runtime as cutoff (the module docstring; False: in full). ``budget`` may be a
    `placement_gym.evaluation.budget.Budget` (with its own evaluator),
    whose curve the caller then reads. Deterministic for ``seed`` (and a deterministic evaluator)."""
    if batch < 1:
        raise ValueError(f"batch must be >= 1, got {batch}")
    if t_start < 0 or t_end <= 0 or (t_start > 0 and t_end > t_start):
        raise ValueError(f"need t_start >= 0 and 0 < t_end <= t_start, got t_start={t_start}, t_end={t_end}")
    if not 0.0 <= group_move_prob <= 1.0:
        raise ValueError(f"group_move_prob must be in [0, 1], got {group_move_prob}")
    rng = np.random.default_rng(seed)
    budget = as_budget(task, budget, evaluator)
    begin = find_start(task, budget, start, seed)
    proposer = _MoveProposer(task, rng, group_move_prob)
    current, current_score = begin.placement.copy(), begin.score
    scale = begin.score.runtime
    search_budget = max(budget.remaining, 1)
    accepted = steps = kicks = 0
    stale = StaleSteps(budget, ANNEAL_STALE_STEPS)
    stopped = "budget"
    # Hill climbing only asks which moves beat the current placement (metropolis_accept at
    # temperature 0 compares keys, draws nothing): a cutoff at the current runtime decides the same.
    climbing = cutoffs and t_start == 0 and move_mix is None
    try:
        while budget.remaining > 0:
            progress = (budget.used - begin.evaluations) / search_budget
            temperature = t_start * (t_end / t_start) ** progress if t_start > 0 else 0.0
            over = None if current_score.feasible else current_score.over
            mix = () if move_mix is None else move_mix.probabilities()
            moves, kinds = [], []
            for _ in range(batch):
                moves.append(proposer.propose(current, over, *mix))
                kinds.append(proposer.last_kind)
            moves = np.stack(moves)
            cutoff = current_score.runtime if climbing and current_score.feasible else None
            scores = stale.scores(moves, cutoff=cutoff)
            if move_mix is not None:
                move_mix.learn(kinds, scores, current_score, scale)
            steps += 1
            if stale.converged:
                stopped = "converged"
                break
            if stale.count and stale.count % ANNEAL_KICK_STEPS == 0:
                # The neighbourhood is (nearly) all evaluated: a local optimum. Restart from the
                # best with a few random moves (iterated local search).
                kicked = budget.best_placement.copy()
                for _ in range(ANNEAL_KICK_MOVES):
                    kicked = proposer.propose(kicked, None)
                current, current_score = kicked, budget.scores(kicked[None])[0]
                kicks += 1
                continue
            pick = min(range(batch), key=lambda i: scores[i].key)
            score = scores[pick]
            if metropolis_accept(score, current_score, temperature, scale, rng):
                current, current_score = moves[pick], score
                accepted += 1
    except BudgetExhausted:
        pass
    return _result(
        budget,
        begin,
        {"steps": steps, "accepted": accepted, "kicks": kicks, "batch": batch, "stopped": stopped,
         **({} if move_mix is None else {"move_mix": move_mix.describe()}),
         **({"cut": budget.cut, "cut_again": budget.cut_again} if climbing else {})},
    )


ANNEAL_GROUPS_MOVE_PROB = 0.9  # `anneal-groups`: the share of moves on whole chains or co-location groups


@register("anneal-groups", "anneal with 90% of moves on whole chains and co-location groups (budget: evals)")
def anneal_groups(task: Task, seed: int = 0, budget: int | None = None, **options: Any) -> AgentResult:
    """`anneal` with ``group_move_prob=ANNEAL_GROUPS_MOVE_PROB`` (`anneal`'s default: 0.3). On the
    LSTM graphs (rnnlm, gnmt4), where a good placement keeps each layer's chain of time steps on one
    device, the group-heavy mix found faster placements at equal budgets (experiments/group_moves/);
    ``options``: any other keyword argument of `anneal`."""
    return anneal(task, seed=seed, budget=budget, group_move_prob=ANNEAL_GROUPS_MOVE_PROB, **options)


def metropolis_accept(
    score: Score, current: Score, temperature: float, scale: float, rng: np.random.Generator
) -> bool:
    """Metropolis between feasible placements; lexicographic (feasibility, overflow) otherwise."""
    if score.feasible != current.feasible or not score.feasible:
        return score.key < current.key
    delta = (score.runtime - current.runtime) / scale
    if delta <= 0:
        return True
    return temperature > 0 and rng.random() < np.exp(-delta / temperature)


# ---------------------------------------------------------------------------------------------------
# The cross-entropy method


@register("cem", "cross-entropy method over per-op device distributions, Post's search (budget: evaluations)",
          takes_budget=True)
def cem(
    task: Task,
    seed: int = 0,
    budget: int | Budget | None = None,
    *,
    start=None,
    groups=None,
    population: int = CEM_POPULATION,
    elite_fraction: float = CEM_ELITE_FRACTION,
    smoothing: float = CEM_SMOOTHING,
    start_changes: float = CEM_START_CHANGES,
    evaluator: Any = None,
) -> AgentResult:
    """The cross-entropy method (see the module docstring). ``budget``: evaluations in all, the start's
    included (default `DEFAULT_BUDGET`). ``start``: a placement, agent name(s), or None for
    `START_AGENTS`. ``groups``: one distribution per group (`make_grouping` modes) instead of per op.
    ``start_changes``: units a first-generation sample moves off the start on average (None: uniform
    initialisation, as Post). ``evaluator``: who scores the placements (None: the cost model; see the
    module docstring); ``budget`` may be a `placement_gym.evaluation.budget.Budget`, as `anneal`'s.
    Deterministic for ``seed`` (and a deterministic evaluator)."""
    if population < 2:
        raise ValueError(f"population must be >= 2, got {population}")
    if not 0.0 < elite_fraction <= 1.0:
        raise ValueError(f"elite_fraction must be in (0, 1], got {elite_fraction}")
    if not 0.0 < smoothing <= 1.0:
        raise ValueError(f"smoothing must be in (0, 1], got {smoothing}")
    rng = np.random.default_rng(seed)
    grouping = make_grouping(task.graph, groups)
    units, n_devices = grouping.n_groups, task.n_devices
    budget = as_budget(task, budget, evaluator)
    begin = find_start(task, budget, start, seed)
    if start_changes is None:
        probs = np.full((units, n_devices), 1.0 / n_devices)
    else:
        keep = 1.0 - min(0.5, float(start_changes) / units)
        probs = np.full((units, n_devices), (1.0 - keep) / max(n_devices - 1, 1))
        probs[np.arange(units), grouping.reduce(begin.placement)] = keep if n_devices > 1 else 1.0
    n_elite = max(1, int(round(elite_fraction * population)))
    generations = 0
    stale = StaleSteps(budget, CEM_STALE_GENERATIONS)
    stopped = "budget"
    try:
        while budget.remaining > 0:
            cumulative = np.cumsum(probs, axis=1)
            draws = rng.random((population, units, 1))
            samples = np.minimum((draws > cumulative[None]).sum(axis=2), n_devices - 1)
            placements = grouping.expand(samples)
            scores = stale.scores(placements)
            generations += 1
            if stale.converged:
                stopped = "converged"
                break
            # The elite: this generation's best plus the best seen so far (elitism keeps the
            # distribution from drifting away from it).
            order = sorted(range(population), key=lambda i: scores[i].key)[:n_elite]
            elite = np.concatenate([samples[order], grouping.reduce(budget.best_placement)[None]])
            frequency = np.zeros((units, n_devices))
            np.add.at(frequency, (np.tile(np.arange(units), len(elite)), elite.ravel()), 1.0)
            frequency /= len(elite)
            probs = (1.0 - smoothing) * probs + smoothing * frequency
            probs = np.maximum(probs, CEM_FLOOR)
            probs /= probs.sum(axis=1, keepdims=True)
    except BudgetExhausted:
        pass
    return _result(
        budget,
        begin,
        {"generations": generations, "population": population, "groups": grouping.name, "stopped": stopped},
    )
