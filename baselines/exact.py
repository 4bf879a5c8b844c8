"""`exact`: a constraint-programming model of the cost model, solved with OR-Tools CP-SAT.

For graphs of up to `MAX_UNITS` ops, or the grouped form of larger ones (``groups=``, one device per
group), the solver chooses a device for every unit and a start time for every task op (forward,
backward and update ops; the latter two follow their forward op's device) and minimises the makespan.

The model
---------
* Device choice: booleans ``x[unit, device]``, exactly one per unit.
* Ops: start and end integer variables; ``end = start + sum_d duration[op, d] * x[unit, d]``; one
  optional interval per (op, device), present when the op is on that device; `NoOverlap` per device.
* Tensors: a consumer on the producer's device starts after the producer ends. A tensor needed on
  another device ``b`` is sent once to ``b`` (as the simulator does: one transfer per (tensor,
  destination device), shared by every reader on ``b``), over the directed link from the producer's
  device ``a``: an optional interval of ``latency[a, b] + bytes / bandwidth[a, b]`` that starts after
  the producer ends, present when the producer is on ``a`` and a reader is on ``b``; readers on ``b``
  start after it ends. Each directed link carries one transfer at a time (`NoOverlap` per link),
  as in the simulator. With ``links=False`` transfers are plain delays on the edges (no link
  contention): a smaller model that may solve faster.
* Graph data inputs are present on every device at time 0 (no constraint), as in the simulator.
* Memory: per device, the static bytes of its units (parameters; for train_step also gradients and
  optimizer state) plus the largest working set of any op on it (the bytes of the op's non-static
  input and output tensors, all of which are live while it runs in the simulator) must fit the
  device's capacity. This is a necessary condition of the simulator's feasibility, not a sufficient
  one: activations kept for backward ops and received copies add to the simulator's peak, so a
  solver placement can still be out of memory in the simulator (``info["feasible"]`` says).
* Interchangeable devices (same speeds, capacity and links, such as the GPUs of a preset) are
  ordered to break symmetry: the first unit on the k-th of them comes after the first unit on the
  (k-1)-th. This removes only solutions that are relabellings of others.
* Hint: a whole solution, the hint placement (default best-single) with its list schedule replayed
  in integer time, so the solver holds a solution from its first second. Above `_PROBING_MAX_OPS`
  task ops presolve probing is off (it used the whole 30 s on grouped inception_v3 here).
* Size: the model has a variable or constraint per device for every op and per link for every tensor
  read across units (`model_terms`); one of more than `MAX_MODEL_TERMS` terms is not built (memory
  grows about 1.6 kB per term), and the hint is the answer where asked (``fallback_to_hint``).
* Time is in integer units of `TIME_UNIT` (0.1 us); durations and transfer times are rounded
  down (after a 1e-6-unit allowance for floating-point noise), so that the model never charges more
  than the simulator.

How the model differs from the simulator
----------------------------------------
* Order: the simulator is list scheduling (a free device runs the earliest-ready op; links send in
  the order tensors were produced); the solver may run ops and transfers in any order and may leave
  a device idle. Every simulator schedule is a schedule of the model, not the reverse.
* Memory: only the necessary condition above.
* Rounding: the model's durations are the simulator's rounded down to 0.1 us.

What the numbers mean
---------------------
Because every simulator schedule of a memory-feasible placement is a schedule of the model (with
durations no longer), the model is a relaxation: the solver's best bound (``info["bound_s"]``) is
a lower bound on the simulated runtime of every memory-feasible placement of the same units, and
so is the objective when the status is OPTIMAL. The solver's objective (``info["objective_s"]``) for
its own placement is neither an upper nor a lower bound of that placement's simulated runtime in
general: the solver's order can beat list scheduling (objective below the simulated runtime, as
when the earliest-ready rule delays a critical op) and, when the search stopped at the time limit
(FEASIBLE), its schedule for that placement can be worse than the list schedule (objective above).
The agent's placement (the solver's, or the hint where the hint simulates faster), like every agent's, is
scored by `simulate` (``info["runtime"]``).

``budget`` is the solver's time limit in wall-clock seconds (default `DEFAULT_TIME_LIMIT`), not
evaluations; the agent reports 2 evaluations (the hint's and the result's). CP-SAT runs with
``num_workers`` = 2 threads and ``seed`` as its random seed; a run that stops at the time limit may
differ from one run to the next (``deterministic=True`` makes ``budget`` a deterministic time limit
with interleaved search, reproducible but slower in wall time).
"""

from __future__ import annotations

import math
import time

import numpy as np
from ortools.sat.python import cp_model

from baselines.registry import OPTIONAL_AGENTS, register
from placement_gym.cost_model import simulate
from placement_gym.evaluation.agents import AgentResult
from placement_gym.evaluation.placements import best_single_placement
from placement_gym.task.compiled import Task
from placement_gym.task.groups import Grouping, make_grouping

MAX_UNITS = 60  # units (ops or groups) above which the model is refused: CP-SAT rarely proves it
DEFAULT_TIME_LIMIT = 30.0  # seconds
# Terms (see `model_terms`) above which the model is not built: building it takes about 1.6 kB per term
# (gnmt4/k40x8 grouped 40 ways: 175,266 terms, 0.28 GB, and CP-SAT found no solution of it in 60 s on
# 2 cores); a 70B training step on 36 devices has 7.4 million and was killed for memory at 18 GB.
MAX_MODEL_TERMS = 1_000_000
TIME_UNIT = 1e-7  # seconds per integer time unit
_ROUNDING_SLACK = 1e-6  # units: floating-point noise allowed before rounding down
NUM_WORKERS = 2
_AUTO_PARTITION = 40
_PROBING_MAX_OPS = 300  # task ops above which presolve probing is switched off (see `exact`)


def default_grouping(task: Task, groups="auto") -> Grouping:
    """The grouping `exact` uses: ``groups`` as given (`make_grouping` modes); ``"auto"``: one unit per
    op up to `MAX_UNITS` ops, else chains if they give at most `MAX_UNITS` groups, else a
    40-way partition."""
    if isinstance(groups, str) and groups == "auto":
        if task.n_forward <= MAX_UNITS:
            return make_grouping(task.graph, None)
        chains = make_grouping(task.graph, "chains")
        if chains.n_groups <= MAX_UNITS:
            return chains
        return make_grouping(task.graph, _AUTO_PARTITION)
    return make_grouping(task.graph, groups)


def _units(task: Task, groups, max_units: int) -> Grouping:
    grouping = default_grouping(task, groups)
    if grouping.n_groups > max_units:
        chains = make_grouping(task.graph, "chains").n_groups
        raise ValueError(
            f"exact: task {task.id} has {grouping.n_groups} units to place ({task.n_forward} forward "
            f"ops, grouping {grouping.name!r}); the CP-SAT model takes at most {max_units}. Pass groups= "
            f"('chains' gives {chains} groups here; an int k gives a k-way partition, such as "
            f"groups={_AUTO_PARTITION}; 'auto' picks one) or raise max_units"
        )
    return grouping


def model_terms(task: Task, grouping: Grouping, links: bool = True) -> int:
    """The size of `exact`'s model of ``task`` placed as ``grouping``, in terms that each cost the model a
    variable or constraint per device or per link: one optional interval per (op, device), and per
    directed link one transfer interval for every tensor read outside its producer's unit
    (``links=True``) or one conditional delay for every (tensor, reader) pair across units
    (``links=False``). Linear in the graph's size; the model is not built."""
    unit = grouping.group_of_op[task.op_forward]
    pointer = task.tensor_consumer_pointer
    tensor = np.repeat(np.arange(task.n_tensors, dtype=np.int64), np.diff(pointer))
    reader = task.tensor_consumers[pointer[0] : pointer[-1]].astype(np.int64)
    producer = task.tensor_producer[tensor]
    across = producer >= 0
    across[across] = unit[reader[across]] != unit[producer[across]]
    if links:
        crossing = np.unique(tensor[across]).size
    else:
        crossing = np.unique(tensor[across] * task.n_ops + reader[across]).size
    n_dev = task.n_devices
    return int(task.n_ops * n_dev + crossing * n_dev * (n_dev - 1))


def _ticks(seconds: np.ndarray) -> np.ndarray:
    """Seconds as integer time units, rounded down (never more than the simulator charges)."""
    return np.floor(np.asarray(seconds) / TIME_UNIT + _ROUNDING_SLACK).astype(np.int64)


def _interchangeable_classes(task: Task) -> list[list[int]]:
    """Classes of devices that any permutation within leaves the task unchanged."""
    c = task.cluster
    n = task.n_devices

    def swap_invariant(i: int, j: int) -> bool:
        perm = np.arange(n)
        perm[[i, j]] = [j, i]
        return (
            np.array_equal(task.duration[:, i], task.duration[:, j])
            and c.memory_capacity[i] == c.memory_capacity[j]
            and np.array_equal(c.link_bandwidth[np.ix_(perm, perm)], c.link_bandwidth)
            and np.array_equal(c.link_latency[np.ix_(perm, perm)], c.link_latency)
        )

    classes: list[list[int]] = []
    for d in range(n):
        for cls in classes:
            if swap_invariant(cls[0], d):
                cls.append(d)
                break
        else:
            classes.append([d])
    return classes


def _working_set(task: Task) -> np.ndarray:
    """Per task op: bytes of its distinct non-static input and output tensors (live while it runs)."""
    live = ~task.tensor_static & (task.tensor_bytes > 0)
    ws = np.zeros(task.n_ops)
    for t in np.flatnonzero(live):
        pointer = task.tensor_consumer_pointer
        readers = np.unique(task.tensor_consumers[pointer[t] : pointer[t + 1]])
        ws[readers] += task.tensor_bytes[t]
        if task.tensor_producer[t] >= 0:
            ws[task.tensor_producer[t]] += task.tensor_bytes[t]
    return ws


class PlacementModel:
    """The CP-SAT model of one task and grouping (see the module docstring)."""

    def __init__(self, task: Task, grouping: Grouping, links: bool, memory: bool) -> None:
        self.task = task
        self.grouping = grouping
        m = self.model = cp_model.CpModel()
        n_units, n_dev = grouping.n_groups, task.n_devices
        unit = grouping.group_of_op[task.op_forward]  # unit of every task op
        duration = _ticks(task.duration)
        bandwidth, latency = task.cluster.link_bandwidth, task.cluster.link_latency
        # Horizon: every op and every possible transfer one after the other (a valid schedule).
        transfer_max = np.zeros(task.n_tensors, dtype=np.int64)
        off = ~np.eye(n_dev, dtype=bool)
        for t in range(task.n_tensors):
            if task.tensor_producer[t] >= 0:
                delay = latency[off] + task.tensor_bytes[t] / bandwidth[off]
                transfer_max[t] = int(_ticks(delay).max()) if n_dev > 1 else 0
        horizon = int(duration.max(axis=1).sum() + transfer_max.sum() * max(n_dev - 1, 1)) + 1
        self.horizon = horizon

        x = [[m.new_bool_var(f"x{u}_{d}") for d in range(n_dev)] for u in range(n_units)]
        for u in range(n_units):
            m.add_exactly_one(x[u])
        self.x = x
        start = [m.new_int_var(0, horizon, f"s{o}") for o in range(task.n_ops)]
        end = [m.new_int_var(0, horizon, f"e{o}") for o in range(task.n_ops)]
        self.start, self.end, self.duration = start, end, duration
        # (tensor, destination) -> (needed, sent, arrived, {source: (present, delay)}, remote readers)
        self.transfers: dict[tuple[int, int], tuple] = {}
        device_intervals: list[list] = [[] for _ in range(n_dev)]
        for o in range(task.n_ops):
            u = unit[o]
            m.add(end[o] == start[o] + sum(int(duration[o, d]) * x[u][d] for d in range(n_dev)))
            for d in range(n_dev):
                device_intervals[d].append(
                    m.new_optional_fixed_size_interval_var(
                        start[o], int(duration[o, d]), x[u][d], f"i{o}_{d}"
                    )
                )
        for d in range(n_dev):
            m.add_no_overlap(device_intervals[d])

        link_intervals: dict[tuple[int, int], list] = {}
        for t in range(task.n_tensors):
            p = int(task.tensor_producer[t])
            if p < 0:
                continue  # a graph data input: on every device at time 0
            readers = np.unique(
                task.tensor_consumers[task.tensor_consumer_pointer[t] : task.tensor_consumer_pointer[t + 1]]
            )
            up = unit[p]
            for c in readers:
                m.add(start[c] >= end[p])
            remote = [int(c) for c in readers if unit[c] != up]  # readers that may sit elsewhere
            if not remote or n_dev == 1:
                continue
            delay = _ticks(latency + task.tensor_bytes[t] / np.where(off, bandwidth, 1.0))
            if not links:
                for c in remote:
                    for a in range(n_dev):
                        for b in range(n_dev):
                            if a != b:
                                m.add(start[c] >= end[p] + int(delay[a, b])).only_enforce_if(
                                    [x[up][a], x[unit[c]][b]]
                                )
                continue
            for b in range(n_dev):
                # needed: some remote reader is on b (the producer then is not, or no transfer).
                needed = m.new_bool_var(f"y{t}_{b}")
                on_b = [x[unit[c]][b] for c in remote]
                for v in on_b:
                    m.add_implication(v, needed)
                m.add_bool_or(on_b).only_enforce_if(needed)
                sent = m.new_int_var(0, horizon, f"ts{t}_{b}")
                arrived = m.new_int_var(0, horizon, f"te{t}_{b}")
                m.add(sent >= end[p])
                presence = {}
                self.transfers[(t, b)] = (needed, sent, arrived, presence, remote)
                for a in range(n_dev):
                    if a == b:
                        continue
                    present = m.new_bool_var(f"z{t}_{a}_{b}")
                    m.add_bool_and([x[up][a], needed]).only_enforce_if(present)
                    m.add_bool_or([x[up][a].Not(), needed.Not(), present])
                    presence[a] = (present, int(delay[a, b]))
                    interval = m.new_optional_interval_var(
                        sent, int(delay[a, b]), arrived, present, f"l{t}_{a}_{b}"
                    )
                    link_intervals.setdefault((a, b), []).append(interval)
                for c in remote:
                    m.add(start[c] >= arrived).only_enforce_if([x[unit[c]][b], x[up][b].Not()])
        for intervals in link_intervals.values():
            m.add_no_overlap(intervals)

        if memory:
            static = np.zeros(n_units)
            np.add.at(static, grouping.group_of_op, task.static_bytes)
            working = np.zeros(n_units)
            np.maximum.at(working, unit, _working_set(task))
            capacity = task.cluster.memory_capacity
            for d in range(n_dev):
                cap = int(math.floor(capacity[d]))
                holders = [u for u in range(n_units) if static[u] > 0]
                used = cp_model.LinearExpr.weighted_sum(
                    [x[u][d] for u in holders], [int(static[u]) for u in holders]
                )
                m.add(used <= cap)
                for u in range(n_units):
                    m.add(used + int(working[u]) <= cap).only_enforce_if(x[u][d])

        for cls in _interchangeable_classes(task):
            for k in range(1, len(cls)):
                earlier, later = cls[k - 1], cls[k]
                m.add(x[0][later] == 0)
                for u in range(1, n_units):
                    m.add(x[u][later] <= sum(x[v][earlier] for v in range(u)))

        self.makespan = m.new_int_var(0, horizon, "makespan")
        m.add_max_equality(self.makespan, end)
        m.minimize(self.makespan)

    def hint(self, unit_placement: np.ndarray) -> None:
        """Hint a whole solution: the placement and a schedule of it in the model's integer times,
        replayed in the simulator's order (ops by simulated start; each transfer when its first
        reader needs it), so that every constraint of the model holds."""
        m, task = self.model, self.task
        for u, device in enumerate(unit_placement.tolist()):
            for d, var in enumerate(self.x[u]):
                m.add_hint(var, d == device)
        placement = self.grouping.expand(unit_placement).astype(np.int64)
        schedule = simulate(task, placement, schedule=True).schedule
        device = schedule.op_device
        begin = np.zeros(task.n_ops, dtype=np.int64)
        finish = np.zeros(task.n_ops, dtype=np.int64)
        device_free = np.zeros(task.n_devices, dtype=np.int64)
        link_free = np.zeros((task.n_devices, task.n_devices), dtype=np.int64)
        sent_at: dict[tuple[int, int], tuple[int, int, int]] = {}  # (tensor, dst) -> (src, sent, arrived)
        readers_of: dict[int, list[int]] = {}
        pointer = task.tensor_consumer_pointer
        for t in range(task.n_tensors):
            for c in task.tensor_consumers[pointer[t] : pointer[t + 1]].tolist():
                readers_of.setdefault(c, []).append(t)
        for o in np.lexsort((np.arange(task.n_ops), schedule.op_start)).tolist():
            d = int(device[o])
            ready = int(device_free[d])
            for t in readers_of.get(o, ()):
                p = int(task.tensor_producer[t])
                if p < 0:
                    continue
                a = int(device[p])
                if a == d:
                    ready = max(ready, int(finish[p]))
                    continue
                if (t, d) not in sent_at:
                    sent = max(int(link_free[a, d]), int(finish[p]))
                    arrived = sent + self.transfers[(t, d)][3][a][1]
                    link_free[a, d] = arrived
                    sent_at[(t, d)] = (a, sent, arrived)
                ready = max(ready, sent_at[(t, d)][2])
            begin[o] = ready
            finish[o] = ready + int(self.duration[o, d])
            device_free[d] = finish[o]
            m.add_hint(self.start[o], int(begin[o]))
            m.add_hint(self.end[o], int(finish[o]))
        m.add_hint(self.makespan, int(finish.max()))
        for key, (needed, sent, arrived, presence, remote) in self.transfers.items():
            record = sent_at.get(key)
            # "needed": a reader in another unit is on the destination (the producer may be too)
            m.add_hint(needed, any(int(device[c]) == key[1] for c in remote))
            for a, (present, _) in presence.items():
                m.add_hint(present, record is not None and record[0] == a)
            # an unused transfer's times are free: hint them at the producer's end (a complete
            # hint is checked as a whole solution at once)
            idle = int(finish[task.tensor_producer[key[0]]])
            m.add_hint(sent, record[1] if record else idle)
            m.add_hint(arrived, record[2] if record else idle)

    def placement(self, solver: cp_model.CpSolver) -> np.ndarray:
        units = np.array([[solver.boolean_value(v) for v in row] for row in self.x]).argmax(axis=1)
        return self.grouping.expand(units).astype(np.int64)


def _canonical_hint(task: Task, grouping: Grouping, hint: np.ndarray) -> np.ndarray:
    """The hint's unit placement with interchangeable devices relabelled in order of first use, so that
    it satisfies the symmetry-breaking constraints (a relabelling does not change its runtime)."""
    units = grouping.reduce(hint).copy()
    for cls in _interchangeable_classes(task):
        if len(cls) < 2:
            continue
        used = [d for d in dict.fromkeys(units.tolist()) if d in cls]
        unused = [d for d in cls if d not in used]
        relabel = dict(zip(used + unused, cls))
        units = np.array([relabel.get(d, d) for d in units.tolist()])
    return units


@register("exact", OPTIONAL_AGENTS["exact"].description)
def exact(
    task: Task,
    seed: int = 0,
    budget: float | None = None,
    *,
    groups=None,
    hint=None,
    links: bool = True,
    memory: bool = True,
    max_units: int = MAX_UNITS,
    max_model_terms: int = MAX_MODEL_TERMS,
    num_workers: int = NUM_WORKERS,
    deterministic: bool = False,
    fallback_to_hint: bool = False,
) -> AgentResult:
    """Solve the CP-SAT model of ``task`` (see the module docstring).

    ``budget``: time limit in seconds (default `DEFAULT_TIME_LIMIT`). ``groups``: the units to place
    (`make_grouping` modes, or ``"auto"``: ops, else chains, else a 40-way partition, whichever
    first has at most `MAX_UNITS` units); the default (None) places single ops and refuses
    (ValueError) a graph of more than ``max_units`` ops. ``hint``: a placement to start the search from
    (default best-single). ``links``: model link contention. ``memory``: the memory constraints.
    ``fallback_to_hint``: when CP-SAT finds no solution within the time limit (it can spend all of it
    in presolve on the largest graphs), return the hint placement (``info["fallback"]`` is True, and
    objective_s and bound_s are None) instead of raising RuntimeError. ``max_model_terms``: a model of
    more terms (`model_terms`) is not built: ValueError, or with ``fallback_to_hint`` the hint with
    status ``MODEL_TOO_LARGE``.
    Returns the solver's placement, or the hint where that simulates faster (``info["kept_hint"]``: the
    solver's order is not the simulator's); ``info`` has status, objective_s, bound_s, runtime
    (simulated), feasible, hint_runtime, units, model_terms, fallback, kept_hint, wall_s."""
    limit = DEFAULT_TIME_LIMIT if budget is None else float(budget)
    if not limit > 0:
        raise ValueError(f"exact: budget is a time limit in seconds and must be > 0, got {budget!r}")
    grouping = _units(task, groups, max_units)
    terms = model_terms(task, grouping, links)
    if terms > max_model_terms and not fallback_to_hint:
        raise ValueError(
            f"exact: the model of task {task.id} would have {terms:,} terms (ops x devices plus transfers "
            f"x links), more than max_model_terms={max_model_terms:,}; pass groups= with fewer units, "
            "links=False, a larger max_model_terms, or fallback_to_hint=True"
        )
    began = time.perf_counter()
    hint = best_single_placement(task) if hint is None else task.check_placement(hint)
    solver = cp_model.CpSolver()
    status_name = "MODEL_TOO_LARGE"
    solved = False
    if terms <= max_model_terms:
        model = PlacementModel(task, grouping, links, memory)
        model.hint(_canonical_hint(task, grouping, hint))
        solver.parameters.num_workers = num_workers
        solver.parameters.random_seed = int(seed)
        if task.n_ops > _PROBING_MAX_OPS:
            # CP-SAT's presolve probing took the whole 30 s on inception_v3 (807 task ops) on 2 shared
            # cores, before the search could use the hint; without it the search starts within seconds.
            solver.parameters.cp_model_probing_level = 0
        if deterministic:
            solver.parameters.interleave_search = True
            solver.parameters.max_deterministic_time = limit
        else:
            solver.parameters.max_time_in_seconds = limit
        status = solver.solve(model.model)
        status_name = solver.status_name(status)
        solved = status in (cp_model.OPTIMAL, cp_model.FEASIBLE)
        if not solved and not fallback_to_hint:
            raise RuntimeError(
                f"exact: CP-SAT found no placement of task {task.id} within {limit} s "
                f"(status {status_name}); raise budget, pass groups= to shrink the model, or "
                "fallback_to_hint=True"
            )
    placement = model.placement(solver) if solved else hint
    result = simulate(task, placement)
    hint_result = simulate(task, hint)
    # The model's schedule is not the simulator's list schedule, so the solver's placement can simulate
    # slower than the hint (cifar10_resnet56/k80x2: OPTIMAL at 0.1026 s, the hint 0.1018 s); the agent
    # returns the better of the two placements it evaluated.
    hint_faster = (not hint_result.feasible, hint_result.runtime) < (not result.feasible, result.runtime)
    kept_hint = not solved or hint_faster
    placement, result = (hint, hint_result) if kept_hint else (placement, result)
    info = {
        "status": status_name,
        "fallback": not solved,
        "kept_hint": kept_hint,
        "objective_s": solver.objective_value * TIME_UNIT if solved else None,
        "bound_s": solver.best_objective_bound * TIME_UNIT if solved else None,
        "runtime": result.runtime,
        "feasible": result.feasible,
        "hint_runtime": hint_result.runtime,
        "units": grouping.n_groups,
        "model_terms": terms,
        "grouping": grouping.name,
        "links": links,
        "time_limit_s": limit,
        "wall_s": time.perf_counter() - began,
    }
    return AgentResult(placement, 2, info)


def cpsat_bound(
    task: Task,
    time_limit_s: float = DEFAULT_TIME_LIMIT,
    *,
    max_ops: int = MAX_UNITS,
    num_workers: int = NUM_WORKERS,
    deterministic: bool = False,
) -> tuple[float, str]:
    """A proven lower bound (seconds) on the runtime of every feasible placement of ``task``: CP-SAT's
    objective bound on the ungrouped model (one unit per forward op, links and memory on), and the
    solver's status. ``inf`` when the model is INFEASIBLE (no placement meets even the necessary
    memory condition, so none is feasible).

    Why it is a proof: the model is a relaxation of the simulator (module docstring, "What the numbers
    mean"): it omits host dispatch, transfer synchronisation and shared segments (each only delays the
    simulator), lets ops and transfers run in any order, keeps only a necessary memory condition, and
    rounds every duration down. Symmetry breaking removes only relabellings of interchangeable devices,
    under which the model (durations, capacities, links) is invariant. Rounding down allows
    ``_ROUNDING_SLACK`` units of floating-point noise per duration; mapping a simulator schedule to
    integer times adds that much per op or transfer along its start order, so the bound subtracts it
    for every op and every possible transfer (about 1e-13 s each). A grouped model would bound only
    placements that respect the groups, so a task with more than ``max_ops`` forward ops is refused
    (ValueError). ``deterministic``: ``time_limit_s`` as a deterministic time limit (reproducible)."""
    if not time_limit_s > 0:
        raise ValueError(f"cpsat_bound: time_limit_s must be > 0 seconds, got {time_limit_s!r}")
    if task.n_forward > max_ops:
        raise ValueError(
            f"cpsat_bound: task {task.id} has {task.n_forward} forward ops; the ungrouped CP-SAT model "
            f"takes at most max_ops={max_ops} (a grouped model bounds only grouped placements)"
        )
    grouping = make_grouping(task.graph, None)
    model = PlacementModel(task, grouping, links=True, memory=True)
    model.hint(_canonical_hint(task, grouping, best_single_placement(task)))
    solver = cp_model.CpSolver()
    solver.parameters.num_workers = num_workers
    if deterministic:
        solver.parameters.interleave_search = True
        solver.parameters.max_deterministic_time = float(time_limit_s)
    else:
        solver.parameters.max_time_in_seconds = float(time_limit_s)
    status = solver.solve(model.model)
    name = solver.status_name(status)
    if status == cp_model.INFEASIBLE:
        return float("inf"), name
    if status == cp_model.OPTIMAL:
        ticks = solver.objective_value
    elif status == cp_model.FEASIBLE:
        ticks = solver.best_objective_bound
    else:  # UNKNOWN: no solution yet; the bound, when the search produced one, still holds
        ticks = max(solver.best_objective_bound, 0.0)
    # 2 x slack per rank: the allowance itself plus the float error of the simulator's sums
    ranks = task.n_ops + task.n_tensors * task.n_devices + 1
    return max(0.0, (ticks - 2 * _ROUNDING_SLACK * ranks) * TIME_UNIT), name
