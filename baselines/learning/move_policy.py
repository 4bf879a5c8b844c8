"""`move-policy`: local search whose move proposals come from a learned policy.

Simulated annealing (`baselines.search.anneal`) proposes its moves uniformly: a random op to a random
device (or to a neighbour's device), a random chain or co-location group, a random swap. On a graph of
thousands of ops most of those moves cannot shorten the makespan (the op is nowhere near the critical
path, or the target device is already the busiest), and each costs one evaluation. `move-policy`
learns which moves are worth an evaluation.

Each step it draws ``candidates`` moves from a fixed, uniform generator (the five kinds of `KINDS`:
single op to a random device, single op to a neighbour's device, a chain or co-location group, a
swap, a segment of the current critical path), describes each by the cheap features of `FEATURES`
(is the op on the critical path of the current schedule, how busy are the source and target devices,
how many of its graph neighbours are already on the target, how full is the target's memory, did
moving this op pay recently...) and scores it with a linear policy ``logit = w . features``. It
evaluates the ``batch`` moves the policy picks (Gumbel top-k: sampling without replacement from
``softmax(logits)``) in one `simulate_batch` call, takes the best through a Metropolis test as anneal
does (the same geometric temperature, the same kicks out of local optima), and updates ``w`` by
REINFORCE: reward = the move's improvement of the current runtime, normalised by a running scale,
minus the batch mean, times ``features - E_policy[features]``.

Learned parts. (1) ``w`` is learned online on the task, from the evaluations the budget pays for;
(2) its start value, `PRETRAINED_WEIGHTS`, was learned beforehand on synthetic graphs only (layered
and random DAGs on the suite's cluster presets; never a suite graph), by
``experiments/learned_agent/pretrain.py``, whose output lists the evaluations and CPU seconds it
took; (3) a per-op credit (a decaying trace of the moves that improved) is one of the features.
``learning_rate=0`` with ``weights="zero"`` switches all learning off: the same search with uniform
proposals among the same candidates, the ablation ``experiments/learned_agent`` reports.

Schedule features. The critical path and the device loads come from the schedule of the current
placement (`simulate(task, p, schedule=True)`), which is an evaluation like any other: counted in the
budget, refreshed at most once every ``refresh_every`` steps and only when the current placement
changed.

Budget. ``budget`` counts every evaluation, the start agents' and the schedules' included; the
search never makes more. Placements evaluated twice are memoised (not counted again). Deterministic
for a seed.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from baselines.registry import register
from baselines.search import (
    START_AGENTS,
    StaleSteps,
    find_start,
    forward_neighbours,
    metropolis_accept,
    multi_op_groups,
)
from placement_gym.evaluation.agents import AgentResult
from placement_gym.evaluation.budget import Budget, BudgetExhausted, Score
from placement_gym.task.compiled import Task

DEFAULT_BUDGET = 2_000  # as the search baselines (anneal, cem); the leaderboard passes its own
KINDS: tuple[str, ...] = ("single", "neighbour", "group", "swap", "segment")
FEATURES: tuple[str, ...] = (
    *(f"kind_{k}" for k in KINDS),
    "critical",  # share of the moved ops on the critical path of the current schedule
    "near_target",  # share of the moved ops' graph neighbours already on the target device
    "busy_target",  # busy time of the target device / makespan
    "busy_source",  # busy time of the source device(s) / makespan
    "size",  # log(1 + ops moved) / log(65)
    "memory_target",  # peak memory of the target device / its capacity (current placement)
    "credit",  # decaying trace of improvements found by moving these ops
    "work",  # the moved ops' time on their devices (backward and update ops included), log-scaled
)
# Learned on synthetic graphs only (experiments/learned_agent/pretrain.py; the figures of that run are
# in experiments/learned_agent/README.md).
PRETRAINED_WEIGHTS: tuple[float, ...] = (
    0.3364, 0.4258, -0.1675, -0.2723, -0.3223, 0.2958, 1.8244, 0.0418, -0.6173, -1.647, -0.4745, 1.3537,
    -3.9116,
)

CANDIDATES = 128  # moves drawn per step, among which the policy picks `BATCH`
BATCH = 16  # moves evaluated per step (anneal's measured best batch, so the two compare step for step)
LEARNING_RATE = 0.3
WEIGHT_CLIP = 6.0
REFRESH_EVERY = 2  # steps between two schedule refreshes (each one evaluation)
T_START, T_END = 1e-3, 1e-5  # Metropolis temperatures, fractions of the start runtime (as anneal)
KICK_STEPS, KICK_MOVES = 20, 3  # stale steps before a kick; random moves in a kick
STALE_STEPS = 1_000  # stale steps before stopping early
CREDIT_DECAY = 0.98  # per step
SEGMENT_MAX = 8  # longest critical-path segment moved at once
NEIGHBOUR_PROB = 0.5  # share of swaps and segment moves whose target is a neighbour's device


# ---------------------------------------------------------------------------------------------------
# The graph's static structure and the critical path (evaluation, neighbours and the acceptance test are
# `baselines.search`'s)


def _op_inputs(task: Task) -> tuple[np.ndarray, np.ndarray]:
    """CSR of the produced tensors each task op reads: (pointer, tensors)."""
    counts = np.diff(task.tensor_consumer_pointer)
    tensors = np.repeat(np.arange(task.n_tensors), counts)
    consumers = np.asarray(task.tensor_consumers, dtype=np.int64)
    produced = task.tensor_producer[tensors] >= 0
    tensors, consumers = tensors[produced], consumers[produced]
    order = np.argsort(consumers, kind="stable")
    pointer = np.searchsorted(consumers[order], np.arange(task.n_ops + 1))
    return pointer, tensors[order]


def critical_ops(task: Task, schedule, inputs: tuple[np.ndarray, np.ndarray] | None = None) -> np.ndarray:
    """Task ops on the critical path of ``schedule``, in time order: from the op that finishes last,
    back through whichever made each op wait longest (the op before it on its device, or an input,
    the input's transfer included), to an op that waited for nothing."""
    pointer, tensors = _op_inputs(task) if inputs is None else inputs
    device = schedule.op_device
    finish = schedule.op_finish
    arrival = {}
    for t, dst, f in zip(schedule.transfer_tensor, schedule.transfer_dst, schedule.transfer_finish):
        arrival[(int(t), int(dst))] = float(f)
    # the op before each op on its device, in the order the device ran them
    order = np.lexsort((finish, device))
    previous = np.full(task.n_ops, -1, dtype=np.int64)
    same = device[order[1:]] == device[order[:-1]]
    previous[order[1:][same]] = order[:-1][same]
    chain = []
    op = int(np.argmax(finish))
    seen = np.zeros(task.n_ops, dtype=bool)
    while op >= 0 and not seen[op]:
        seen[op] = True
        chain.append(op)
        best, best_time = -1, -math.inf
        for t in tensors[pointer[op]: pointer[op + 1]]:
            producer = int(task.tensor_producer[t])
            ready = finish[producer]
            if device[producer] != device[op]:  # it waited for the transfer
                ready = arrival.get((int(t), int(device[op])), ready)
            if ready > best_time:
                best, best_time = producer, ready
        p = int(previous[op])
        if p >= 0 and finish[p] > best_time:
            best, best_time = p, finish[p]
        op = best
    return np.array(chain[::-1], dtype=np.int64)


# ---------------------------------------------------------------------------------------------------
# Moves and their features


@dataclass
class _State:
    """What the features read about the current placement (refreshed from its schedule)."""

    critical: np.ndarray  # float (n_forward,): 1 for forward ops with an op on the critical path
    chain: np.ndarray  # forward ops of the critical path, in time order, each once
    busy: np.ndarray  # busy time per device / makespan
    memory: np.ndarray  # peak memory per device / capacity


class _Moves:
    """Draws candidate moves uniformly over `KINDS` and computes their features."""

    def __init__(self, task: Task, rng: np.random.Generator) -> None:
        self.task = task
        self.rng = rng
        self.n_devices = task.n_devices
        self.n_ops = task.n_forward
        self.neighbours = forward_neighbours(task)
        self.groups = multi_op_groups(task)
        self.credit = np.zeros(self.n_ops)
        # seconds each forward op (with its backward and update ops) takes on each device
        self.work = np.zeros((self.n_ops, self.n_devices))
        np.add.at(self.work, task.op_forward, task.duration)
        self.mean_work = max(float(self.work.mean()), 1e-30)
        self.work_scale = math.log1p(self.n_ops)

    def _other_device(self, here: int) -> int:
        device = int(self.rng.integers(self.n_devices - 1))
        return device + (device >= here)

    def _neighbour_device(self, placement: np.ndarray, ops: np.ndarray) -> int | None:
        # Python sets: numpy's unique / setdiff1d cost more than the rest of a draw on these sizes.
        near = set()
        for o in ops:
            near.update(placement[self.neighbours[o]].tolist())
        devices = sorted(near.difference(placement[ops].tolist()))
        return devices[self.rng.integers(len(devices))] if devices else None

    def draw(self, placement: np.ndarray, state: _State) -> tuple[int, np.ndarray, int] | None:
        """One move ``(kind, ops, device)`` (a swap: ``device`` is -1, ``ops`` the pair), or None when
        the kind drawn has nothing to move."""
        rng = self.rng
        kind = int(rng.integers(len(KINDS)))
        name = KINDS[kind]
        if name == "single":
            op = int(rng.integers(self.n_ops))
            return kind, np.array([op]), self._other_device(int(placement[op]))
        if name == "neighbour":
            op = int(rng.integers(self.n_ops))
            device = self._neighbour_device(placement, np.array([op]))
            return None if device is None else (kind, np.array([op]), device)
        if name == "group":
            if not self.groups:
                return None
            ops = self.groups[int(rng.integers(len(self.groups)))]
            return kind, ops, int(rng.integers(self.n_devices))
        if name == "swap":
            op = int(rng.integers(self.n_ops))
            others = np.flatnonzero(placement != placement[op])
            if not len(others):
                return None
            return kind, np.array([op, int(others[rng.integers(len(others))])]), -1
        # segment: consecutive forward ops of the critical path to one device
        chain = state.chain
        if len(chain) < 2:
            return None
        length = int(rng.integers(2, min(SEGMENT_MAX, len(chain)) + 1))
        first = int(rng.integers(len(chain) - length + 1))
        ops = chain[first: first + length]
        device = self._neighbour_device(placement, ops) if rng.random() < NEIGHBOUR_PROB else None
        return kind, ops, int(rng.integers(self.n_devices)) if device is None else device

    def apply(self, placement: np.ndarray, move: tuple[int, np.ndarray, int]) -> np.ndarray:
        """The placement after ``move``."""
        kind, ops, device = move
        row = placement.copy()
        if device < 0:
            row[ops[0]], row[ops[1]] = placement[ops[1]], placement[ops[0]]
        else:
            row[ops] = device
        return row

    def features(self, placement: np.ndarray, move: tuple[int, np.ndarray, int], state: _State) -> np.ndarray:
        """The `FEATURES` of ``move`` from ``placement``. Means are written as sum / count: the same
        figures as ``ndarray.mean`` (which sums the same way), without its Python-level wrapper, which
        took a quarter of the agent's time."""
        kind, ops, device = move
        n = len(ops)
        x = np.zeros(len(FEATURES))
        x[kind] = 1.0
        k = len(KINDS)
        x[k] = state.critical[ops].sum() / n
        if device < 0:  # a swap: each op goes to the other's device
            targets = placement[ops[::-1]]
        else:
            targets = np.full(n, device)
        near_share, shares = 0.0, 0
        for op, target in zip(ops[:4], targets[:4]):  # the first few ops are enough for a share
            near = self.neighbours[op]
            near_share += np.count_nonzero(placement[near] == target) / len(near) if len(near) else 0.0
            shares += 1
        x[k + 1] = near_share / shares
        x[k + 2] = state.busy[targets].sum() / n
        x[k + 3] = state.busy[placement[ops]].sum() / n
        x[k + 4] = math.log1p(n) / math.log(65.0)
        x[k + 5] = state.memory[targets].sum() / n
        x[k + 6] = float(self.credit[ops].max())
        x[k + 7] = math.log1p(float(self.work[ops, placement[ops]].sum()) / self.mean_work) / self.work_scale
        return x


def _state(task: Task, schedule, score: Score, inputs: tuple[np.ndarray, np.ndarray]) -> _State:
    """Features of the current placement from its schedule."""
    critical = np.zeros(task.n_forward)
    chain = np.zeros(0, dtype=np.int64)
    busy = np.zeros(task.n_devices)
    if schedule is not None:
        path = critical_ops(task, schedule, inputs)
        forward = task.op_forward[path]
        critical[forward] = 1.0
        chain = np.asarray(list(dict.fromkeys(int(f) for f in forward)), dtype=np.int64)
        makespan = max(float(schedule.op_finish.max()), 1e-30)
        busy = np.bincount(schedule.op_device, weights=schedule.op_finish - schedule.op_start,
                           minlength=task.n_devices) / makespan
    memory = np.asarray(score.peaks, dtype=float) / task.cluster.memory_capacity
    return _State(critical, chain, busy, np.minimum(memory, 2.0))


# ---------------------------------------------------------------------------------------------------
# The agent


def _check(budget: int | None, weights, learning_rate: float, candidates: int, batch: int,
           refresh_every: int) -> tuple[int, np.ndarray]:
    budget = DEFAULT_BUDGET if budget is None else budget
    if isinstance(budget, bool) or not isinstance(budget, (int, np.integer)) or budget < 1:
        raise ValueError(f"budget must be a positive number of evaluations, got {budget!r}")
    if isinstance(weights, str):
        if weights not in ("pretrained", "zero"):
            raise ValueError(
                f"weights must be 'pretrained', 'zero' or {len(FEATURES)} numbers, got {weights!r}"
            )
        w = np.array(PRETRAINED_WEIGHTS if weights == "pretrained" else [0.0] * len(FEATURES), dtype=float)
    else:
        w = np.asarray(weights, dtype=float)
        if w.shape != (len(FEATURES),) or not np.all(np.isfinite(w)):
            raise ValueError(f"weights must be 'pretrained', 'zero' or {len(FEATURES)} finite numbers "
                             f"(one per feature: {', '.join(FEATURES)}), got shape {w.shape}")
    if not (learning_rate >= 0 and math.isfinite(learning_rate)):
        raise ValueError(f"learning_rate must be a finite number >= 0, got {learning_rate}")
    if batch < 1 or candidates < batch:
        raise ValueError(f"need 1 <= batch <= candidates, got batch={batch}, candidates={candidates}")
    if refresh_every < 1:
        raise ValueError(f"refresh_every must be >= 1, got {refresh_every}")
    return int(budget), w.copy()


@register("move-policy", "local search whose moves a linear policy picks, learned online by REINFORCE "
          "from synthetic-graph pre-training (budget: evaluations)")
def move_policy(
    task: Task,
    seed: int = 0,
    budget: int | None = None,
    *,
    weights="pretrained",
    learning_rate: float = LEARNING_RATE,
    candidates: int = CANDIDATES,
    batch: int = BATCH,
    refresh_every: int = REFRESH_EVERY,
    start=None,
    on_step: Callable[[np.ndarray, np.ndarray], None] | None = None,
) -> AgentResult:
    """Local search with learned move proposals (module docstring). ``budget``: evaluations in all
    (default `DEFAULT_BUDGET`). ``weights``: the policy's start (``"pretrained"``:
    `PRETRAINED_WEIGHTS`; ``"zero"``: uniform; or one number per `FEATURES`). ``learning_rate``: of
    the online REINFORCE updates (0: no online learning). ``start``: as `baselines.search.anneal`'s
    (None: the best of `START_AGENTS`). ``on_step(features, gains)``: told of each evaluated batch
(pre-training collects them; it only watches). The result's info holds the final weights."""
    budget, w = _check(budget, weights, learning_rate, candidates, batch, refresh_every)
    rng = np.random.default_rng(seed)
    budget = Budget(task, budget)
    begin = find_start(task, budget, START_AGENTS if start is None else start, seed)
    moves = _Moves(task, rng)
    inputs = _op_inputs(task)
    current, current_score = begin.placement.copy(), begin.score
    scale = begin.score.runtime
    search_budget = max(budget.remaining, 1)
    if task.n_devices == 1:
        return _finish(budget, begin, w, {"steps": 0, "stopped": "one device"})
    state = _state(task, budget.schedule(current), current_score, inputs)
    since_refresh, changed = 0, False
    reward_scale = 1e-3  # running mean of the positive relative improvements
    steps = accepted = kicks = updates = 0
    stale = StaleSteps(budget, STALE_STEPS)
    stopped = "budget"
    try:
        while budget.remaining > 0:
            progress = (budget.used - begin.evaluations) / search_budget
            temperature = T_START * (T_END / T_START) ** min(progress, 1.0)
            drawn = [m for m in (moves.draw(current, state) for _ in range(candidates)) if m is not None]
            if not drawn:
                stopped = "no moves"
                break
            x = np.stack([moves.features(current, m, state) for m in drawn])
            logits = x @ w
            pick = np.argsort(-(logits + rng.gumbel(size=len(drawn))))[:batch]
            rows = np.stack([moves.apply(current, drawn[i]) for i in pick])
            scores = stale.scores(rows)
            steps += 1
            if stale.converged:
                stopped = "converged"
                break
            gains = np.array([_gain(s, current_score) for s in scores])
            if on_step is not None:
                on_step(x[pick], gains)
            moves.credit *= CREDIT_DECAY
            for i, gain in zip(pick, gains):
                if gain > 0:
                    moves.credit[drawn[i][1]] = 1.0
            if learning_rate > 0 and stale.count == 0:  # the step evaluated something new
                positive = gains[gains > 0]
                if len(positive):
                    reward_scale = 0.9 * reward_scale + 0.1 * float(positive.mean())
                reward = np.minimum(np.maximum(gains, 0.0) / reward_scale, 3.0)
                advantage = reward - reward.mean()
                if np.any(advantage != 0):
                    prob = np.exp(logits - logits.max())
                    prob /= prob.sum()
                    grad = (advantage[:, None] * (x[pick] - prob @ x)).sum(axis=0) / len(pick)
                    w = np.clip(w + learning_rate * grad, -WEIGHT_CLIP, WEIGHT_CLIP)
                    updates += 1
            if stale.count and stale.count % KICK_STEPS == 0:
                # nearly every proposal was evaluated before: a local optimum; restart near the best
                kicked = budget.best_placement.copy()
                for _ in range(KICK_MOVES):
                    move = moves.draw(kicked, state)
                    if move is not None:
                        kicked = moves.apply(kicked, move)
                current, current_score = kicked, budget.scores(kicked[None])[0]
                kicks += 1
                changed = True
            else:
                best = min(range(len(scores)), key=lambda i: scores[i].key)
                if metropolis_accept(scores[best], current_score, temperature, scale, rng):
                    current, current_score = rows[best], scores[best]
                    accepted += 1
                    changed = True
            since_refresh += 1
            if changed and since_refresh >= refresh_every:
                schedule = budget.schedule(current)
                if schedule is None:
                    break
                state = _state(task, schedule, current_score, inputs)
                since_refresh, changed = 0, False
    except BudgetExhausted:
        pass
    info = {"steps": steps, "accepted": accepted, "kicks": kicks, "updates": updates, "stopped": stopped}
    return _finish(budget, begin, w, info)


def _gain(score: Score, current: Score) -> float:
    """Relative improvement of ``score`` over the current placement (0 for a worse or infeasible one;
    a feasible one from an infeasible current gains 1)."""
    if not score.feasible:
        return 0.0
    if not current.feasible:
        return 1.0
    return max(0.0, (current.runtime - score.runtime) / current.runtime)


def _finish(budget: Budget, begin, w: np.ndarray, extra: dict) -> AgentResult:
    best = budget.best_score
    info = {
        "start": begin.source,
        "start_runtime": begin.score.runtime,
        "runtime": best.runtime,
        "feasible": best.feasible,
        "weights": {name: round(float(v), 4) for name, v in zip(FEATURES, w)},
        **extra,
    }
    return AgentResult(budget.best_placement.astype(np.int64), budget.used, info)
