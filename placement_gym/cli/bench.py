"""Benchmark of the cost model: the fast simulator, its batched call and the reference, side by side.

Each row is one task (``train_step`` on ``k80x4``): a bundled graph, or a synthetic layered graph of
``n`` ops (`layered_graph`), so that the time per op can be compared from 1k to 1M ops; or any task
named by its id (``tasks``: ``gnmt8/k40x8/train+mb4``, a pipelined step on another cluster). Before
timing, the row checks that the fast simulator, the batched call and the reference give the same
runtime (bit for bit, as docs/design.md requires) on the first placement. The timed calls all go
through the same ``batch`` seeded random placements: single calls (fast and reference) one after the
other, in turn, the batched call all at once.

Rates are throughputs: calls made / seconds spent (`time.perf_counter`). Each measurement runs for at
least ``seconds``; the fast and batched calls at least ``repeats`` times, the reference at least once
(its first, checking call is timed too, so a 100k-op row spends one reference call only).

Three optional measurements per row: ``incremental_ceiling`` (`incremental_ceiling`: how much any exact
incremental evaluation of one-op moves could save at most), ``cutoff_speedup`` (`cutoff_speedup`: how
much faster one-op moves are evaluated with the start's runtime as cutoff, as a search asking "better
than the current placement?" does) and, with ``against``, the same single calls timed with another
checkout's simulator in a subprocess, in alternating rounds (`AgainstRunner`).

Rates depend on the machine and on what else runs on it (the batched call spreads over the cores, so
a busy machine takes most of its gain away), so every run states both (`machine_description`, with the
load average at its start and end). `bench_targets` are the developers' speed targets, each with why
it is set where it is; ``placement-gym bench`` shows them only with ``--check``.
"""

from __future__ import annotations

import dataclasses
import hashlib
import itertools
import json
import math
import os
import platform
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from placement_gym.cluster import load_cluster
from placement_gym.cost_model import Schedule, reference_simulate, simulate, simulate_batch
from placement_gym.evaluation.agents import Agent, AgentResult, lookup_agent
from placement_gym.graph import bundled_graph_names
from placement_gym.graph.synthetic import layered_graph
from placement_gym.task.compiled import Task, make_task
from placement_gym.task.named import get_task, parse_task_id

BENCH_CLUSTER = "k80x4"  # the papers' usual machine: a CPU + 4 K80 dies
BENCH_OBJECTIVE = "train_step"
DEFAULT_SIZES: tuple[int, ...] = (1_000, 10_000, 100_000)
DEFAULT_BATCH = 64
# Issue 15's speed targets (`bench_targets`), for developers: measured on an idle machine of 2 cores.
TARGET_RATIO = 300.0  # fast / reference on every bundled graph, at least
TARGET_LARGE_PER_OP = 1.3  # fast ns per op at 100k forward ops / at 1k, at most
TARGET_BATCH_GAIN = 1.7  # batched evaluations per second / single calls, at least (2 idle cores)
WHY_RATIO = ("issue 15's goal for the numba simulator over the pure-Python reference it is checked "
             "against, on every bundled graph; not reached yet (72-96x on an idle 2-core machine, "
             "docs/cost_model.md#speed), so it fails everywhere today; both run on one core, so load "
             "moves the ratio less than the rates")
WHY_LARGE_PER_OP = ("the time per op must not grow with the graph (no quadratic step): 100k ops may cost at "
                    "most 1.3x the time per op of 1k ops, the margin being cache misses on large arrays")
WHY_BATCH_GAIN = ("simulate_batch spreads placements over the cores: on 2 idle cores it must give at least "
                  "1.7x the single calls' rate; a busy machine, or one core, gives less and fails it "
                  "without anything being wrong")


def _cpu_model() -> str:
    """The CPU's model name (Linux: /proc/cpuinfo), else what `platform` knows."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as info:
            for line in info:
                if line.lower().startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:  # not Linux: platform's answer below
        pass
    return platform.processor() or platform.machine() or "unknown CPU"


def load_average() -> tuple[float, float, float] | None:
    """The 1, 5 and 15 minute load averages, or None where the system has none (Windows)."""
    try:
        return tuple(float(x) for x in os.getloadavg())  # type: ignore[return-value]
    except (AttributeError, OSError):
        return None


def machine_description() -> dict[str, Any]:
    """What a bench figure depends on: ``cpu`` (model name), ``logical_cores`` (``os.cpu_count``),
    ``usable_cores`` (those this process may run on), ``system`` and ``load_average`` (1, 5, 15 min;
    None where unknown)."""
    logical = os.cpu_count() or 1
    try:
        usable = len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        usable = logical
    return {"cpu": _cpu_model(), "logical_cores": logical, "usable_cores": usable,
            "system": f"{platform.system()} {platform.release()}", "load_average": load_average()}


def describe_machine(machine: dict[str, Any]) -> str:
    """``machine: <cpu>, N logical cores (M usable), <system>``."""
    cores, logical = machine["usable_cores"], machine["logical_cores"]
    usable = "" if cores == logical else f" ({cores} usable)"
    return f"machine: {machine['cpu']}, {machine['logical_cores']} logical cores{usable}, {machine['system']}"


def describe_load(load: tuple[float, float, float] | None, cores: int) -> str:
    """``load average 0.21, 0.80, 1.10 (1, 5, 15 min) on 2 cores``, with a note when busy."""
    if load is None:
        return "load average: unknown on this system"
    busy = (" (busy: rates, the batched one most, are lower than on an idle machine)"
            if load[0] > 0.5 * cores else "")
    return f"load average {load[0]:.2f}, {load[1]:.2f}, {load[2]:.2f} (1, 5, 15 min) on {cores} cores{busy}"


@dataclass(frozen=True)
class BenchRow:
    """Timings of one task. ``ops``: task ops (forward, backward, update); ``forward_ops``: the
    graph's ops, the length of a placement. Rates are evaluations per second; ``ns_per_op``: the
    single fast call's nanoseconds per task op; ``batch_speedup``: batched evaluations per second /
    single calls per second. The ``incremental_*`` and ``changed_fraction`` fields are None unless
    asked for (`incremental_ceiling`), the ``cutoff_*`` and ``cut_fraction`` fields unless asked for
    (`cutoff_speedup`), the ``*_against`` fields unless a checkout to compare with is given
    (`AgainstRunner`)."""

    graph: str
    task: str
    ops: int
    forward_ops: int
    agree: bool
    runtime: float
    ns_per_op: float
    batch_speedup: float
    fast_evals_per_s: float
    batch_evals_per_s: float
    reference_evals_per_s: float
    ratio: float
    batch: int
    reference_calls: int
    incremental_ceiling: float | None = None
    changed_fraction: float | None = None
    incremental_moves: int = 0
    incremental_from: str | None = None
    cutoff_speedup: float | None = None
    cut_fraction: float | None = None
    cutoff_moves: int = 0
    ns_per_op_against: float | None = None
    ns_per_op_alternating: float | None = None
    speedup_against: float | None = None
    identical_against: bool | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _rate(
    call: Callable[[], Any], min_calls: int, seconds: float, first_s: float | None = None
) -> tuple[float, int]:
    """Calls per second of ``call`` over at least ``min_calls`` calls and ``seconds`` seconds.

    ``first_s``: the duration of a call already made (counted as the first)."""
    calls, elapsed = (0, 0.0) if first_s is None else (1, first_s)
    while calls < min_calls or elapsed < seconds:
        start = time.perf_counter()
        call()
        elapsed += time.perf_counter() - start
        calls += 1
    return calls / elapsed, calls


def _in_turn(call: Callable[[np.ndarray], Any], placements: np.ndarray) -> Callable[[], Any]:
    """A no-argument call that applies ``call`` to the rows of ``placements`` in turn, cyclically."""
    rows = itertools.cycle(list(placements))
    return lambda: call(next(rows))


def bench_placements(task: Task, batch: int, seed: int) -> np.ndarray:
    """The ``batch`` seeded random placements every timing of a row goes through (`bench_task`,
    `compare_against`; the subprocess of `AgainstRunner` draws them the same way)."""
    return np.random.default_rng(seed).integers(0, task.n_devices, size=(batch, task.n_forward))


def bench_task(
    task: Task, label: str, repeats: int = 3, seconds: float = 1.0, batch: int = DEFAULT_BATCH, seed: int = 0
) -> BenchRow:
    """Time one task's fast, batched and reference evaluations of random placements (seeded)."""
    if repeats < 1:
        raise ValueError(f"repeats must be >= 1, got {repeats}")
    if batch < 1:
        raise ValueError(f"batch must be >= 1, got {batch}")
    placements = bench_placements(task, batch, seed)
    placement = placements[0]
    # Warm-up: numba compiles (or loads its cache) on the first call of each function.
    fast = simulate(task, placement)
    batch_runtimes, _, _ = simulate_batch(task, placements)
    start = time.perf_counter()
    reference = reference_simulate(task, placement)
    reference_first_s = time.perf_counter() - start
    agree = fast.runtime == reference.runtime == float(batch_runtimes[0]) and bool(
        np.array_equal(fast.peak_memory, reference.peak_memory))

    # Single calls go through the batch's placements in turn, as the batched call does: one placement
    # over and over runs up to 1.8x faster (the CPU's branch predictor learns its event sequence),
    # which no search sees and which would flatter the single calls against the batch.
    fast_rate, _ = _rate(_in_turn(lambda p: simulate(task, p), placements), repeats, seconds)
    batch_calls_rate, _ = _rate(lambda: simulate_batch(task, placements), repeats, seconds)
    after_first = np.roll(placements, -1, axis=0)  # the first reference call, timed above, ran row 0
    reference_rate, reference_calls = _rate(_in_turn(lambda p: reference_simulate(task, p), after_first),
                                            1, seconds, first_s=reference_first_s)
    return BenchRow(
        graph=label,
        task=task.id,
        ops=task.n_ops,
        forward_ops=task.n_forward,
        agree=agree,
        runtime=fast.runtime,
        fast_evals_per_s=fast_rate,
        batch_evals_per_s=batch_calls_rate * batch,
        reference_evals_per_s=reference_rate,
        ratio=fast_rate / reference_rate,
        ns_per_op=1e9 / fast_rate / task.n_ops,
        batch_speedup=batch_calls_rate * batch / fast_rate,
        batch=batch,
        reference_calls=reference_calls,
    )


# --- the most an exact incremental evaluation could save ---------------------------------------------


def move_ceiling(before: Schedule, after: Schedule) -> tuple[float, float]:
    """``(ceiling, changed)`` of one move, from the schedules of a placement and of the moved one.

    Take the task ops in the order they start before the move (ties by index); ``k`` of them come
    before the first whose start time or device differs after it. An exact incremental evaluation
    that re-simulates from the first change must still simulate the other ``n - k``, so it is at most
    ``n / (n - k)`` times faster than a full simulation: the ceiling. The device counts because the
    moved op's ops change device even when their start stays, and re-simulating has to place them.
    A move that changes nothing counts as one op left to simulate (``k = n - 1``). ``changed``: the
    share of task ops whose start time differs."""
    n = len(before.op_start)
    order = np.lexsort((np.arange(n), before.op_start))
    differs = ((after.op_start[order] != before.op_start[order])
               | (after.op_device[order] != before.op_device[order]))
    k = int(np.argmax(differs)) if differs.any() else n - 1
    return n / (n - k), float(np.count_nonzero(after.op_start != before.op_start)) / n


def one_op_moves(task: Task, start: np.ndarray, moves: int, seed: int = 0):
    """``moves`` seeded random one-op moves from ``start``, one placement at a time: each puts one
    forward op (uniform) on another device (uniform among the others). Needs at least two devices."""
    if moves < 1:
        raise ValueError(f"moves must be >= 1, got {moves}")
    if task.n_devices < 2:
        raise ValueError(f"a move needs at least two devices, {task.id} has {task.n_devices}")
    start = task.check_placement(start)
    rng = np.random.default_rng(seed)
    for _ in range(moves):
        op = int(rng.integers(task.n_forward))
        device = int(rng.integers(task.n_devices - 1))
        moved = start.copy()
        moved[op] = device + (device >= start[op])  # any device but the op's own
        yield moved


def incremental_ceiling(task: Task, start: np.ndarray, moves: int, seed: int = 0) -> tuple[float, float]:
    """Medians of `move_ceiling` over ``moves`` seeded random one-op moves from ``start``
    (`one_op_moves`). Needs ``moves + 1`` simulations with their schedules, and at least two
    devices."""
    moved_placements = one_op_moves(task, start, moves, seed)  # checks moves and devices first
    before = simulate(task, start, schedule=True).schedule
    ceilings, changed = [], []
    for moved in moved_placements:
        ceiling, share = move_ceiling(before, simulate(task, moved, schedule=True).schedule)
        ceilings.append(ceiling)
        changed.append(share)
    return float(np.median(ceilings)), float(np.median(changed))


CUTOFF_REPEATS = 5  # timed calls of each kind per move (`cutoff_speedup`)


def cutoff_speedup(task: Task, start: np.ndarray, moves: int, seed: int = 0,
                   repeats: int = CUTOFF_REPEATS) -> tuple[float, float]:
    """``(speedup, cut share)`` of evaluating one-op moves with a cutoff: over ``moves`` seeded random
    one-op moves from ``start`` (`one_op_moves`), the median of each move's full `simulate` time over
    its time with ``cutoff=`` the start's runtime (each the median of ``repeats`` calls, the two kinds
    alternating so that both see the same load and the same warm caches), and the share of the moves
    that the cutoff cut (those proven slower than the start)."""
    moved_placements = one_op_moves(task, start, moves, seed)
    cutoff = simulate(task, task.check_placement(start)).runtime
    ratios, cut = [], 0
    for moved in moved_placements:
        simulate(task, moved)  # warm: the first call of a placement pays for its cache misses
        full_s, cut_s = [], []
        for _ in range(repeats):
            begin = time.perf_counter()
            simulate(task, moved)
            full_s.append(time.perf_counter() - begin)
            begin = time.perf_counter()
            result = simulate(task, moved, cutoff=cutoff)
            cut_s.append(time.perf_counter() - begin)
        ratios.append(float(np.median(full_s) / np.median(cut_s)))
        cut += bool(result.cut)
    return float(np.median(ratios)), cut / moves


def start_placement(task: Task, start: str, seed: int = 0) -> np.ndarray:
    """The placement moves start from: ``random`` (uniform, seeded) or the placement of the agent so
    named (an installed provider's, such as ``m-topo`` or ``m-etf``)."""
    if start == "random":
        return np.random.default_rng(seed).integers(0, task.n_devices, size=task.n_forward)
    return AgentResult.checked(task, start_agent(start)(task, seed, None)).placement


def start_agent(name: str) -> Agent:
    """The installed agent ``name`` (`lookup_agent`), or ValueError naming it."""
    agent = lookup_agent(name)
    if agent is None:
        raise ValueError(f"no installed agent provider has an agent named {name!r} (--incremental-from)")
    return agent


# --- the same single calls with another checkout's simulator ------------------------------------------

# Runs under the other checkout (PYTHONPATH), so it uses only what the project had at commit 4bd99e3:
# get_task, layered_graph, load_cluster, make_task, simulate (and, for a task id's row only,
# parse_task_id: a checkout without it or without that task answers that row with an error). Lines of
# JSON in, lines of JSON out.
AGAINST_SCRIPT = r"""
import hashlib, json, sys, time
import numpy as np
out, sys.stdout = sys.stdout, sys.stderr  # only the replies go to the pipe
import placement_gym
from placement_gym.cluster import load_cluster
from placement_gym.cost_model import simulate
from placement_gym.graph.synthetic import layered_graph
from placement_gym.task.compiled import make_task
from placement_gym.task.named import get_task
def reply(value):
    out.write(json.dumps(value) + "\n")
    out.flush()
reply({"module": placement_gym.__file__})
task = placements = None
turn = 0
for line in sys.stdin:
    ask = json.loads(line)
    if ask["do"] == "load":
        spec = ask["task"]
        try:  # a graph that commit does not have: that row goes without, the others still run
            if "task" in spec:
                from placement_gym.task.named import parse_task_id
                task = parse_task_id(spec["task"])
            else:
                task = (get_task(spec["graph"], spec["cluster"], spec["objective"]) if "graph" in spec else
                        make_task(layered_graph(spec["layered"]), load_cluster(spec["cluster"]),
                                  spec["objective"]))
        except Exception as error:
            reply({"error": f"{type(error).__name__}: {error}"})
            continue
        placements = np.random.default_rng(ask["seed"]).integers(
            0, task.n_devices, size=(ask["batch"], task.n_forward))
        runtimes = [simulate(task, p).runtime for p in placements]  # also the warm-up
        turn = 0
        reply({"ops": task.n_ops, "runtimes": runtimes,
               "placements": hashlib.sha256(placements.tobytes()).hexdigest()})
    elif ask["do"] == "time":
        start = time.perf_counter()
        for _ in range(ask["calls"]):
            simulate(task, placements[turn % len(placements)])
            turn += 1
        reply({"seconds": time.perf_counter() - start})
"""

AGAINST_ROUNDS = 5


class AgainstRunner:
    """Another checkout's simulator in a subprocess (``python -c AGAINST_SCRIPT`` with PYTHONPATH set
    to the checkout), so that one run times both side by side; `close` ends it."""

    def __init__(self, path: str | os.PathLike) -> None:
        self.path = os.path.abspath(path)
        if not os.path.isdir(os.path.join(self.path, "placement_gym")):
            raise ValueError(f"{path} is not a checkout of placement-gym (no placement_gym folder in it)")
        env = {**os.environ, "PYTHONPATH": self.path}
        self.process = subprocess.Popen([sys.executable, "-c", AGAINST_SCRIPT], stdin=subprocess.PIPE,
                                        stdout=subprocess.PIPE, text=True, env=env, cwd=self.path)
        module = self._ask(None)["module"]
        if not os.path.abspath(module).startswith(os.path.join(self.path, "")):
            self.close()
            raise ValueError(f"the subprocess imported placement_gym from {module}, not from {self.path}")

    def _ask(self, request: dict[str, Any] | None) -> dict[str, Any]:
        assert self.process.stdin is not None and self.process.stdout is not None
        if request is not None:
            self.process.stdin.write(json.dumps(request) + "\n")
            self.process.stdin.flush()
        line = self.process.stdout.readline()
        if not line:
            code = self.process.wait()
            raise ValueError(f"the simulator of {self.path} stopped (exit code {code}; its error is above)")
        return json.loads(line)

    def load(self, spec: dict[str, Any], seed: int, batch: int) -> dict[str, Any]:
        """Build the task of ``spec`` and its ``batch`` placements of ``seed`` there: its op count, its
        runtimes of the placements and the placements' sha256; or ``error``, why it cannot."""
        return self._ask({"do": "load", "task": spec, "seed": seed, "batch": batch})

    def time(self, calls: int) -> float:
        """Seconds that ``calls`` single calls take there, over the placements in turn."""
        return float(self._ask({"do": "time", "calls": calls})["seconds"])

    def close(self) -> None:
        if self.process.stdin is not None:
            self.process.stdin.close()
        self.process.wait()


def compare_against(task: Task, spec: dict[str, Any], runner: AgainstRunner, row: BenchRow, seconds: float,
                    repeats: int, seed: int = 0) -> BenchRow:
    """``row`` with its ``*_against`` fields: the single calls of both simulators on the row's seeded
    placements, in `AGAINST_ROUNDS` alternating rounds of the same number of calls (ours first):
    ``ns_per_op_against`` theirs, ``ns_per_op_alternating`` ours in those rounds, ``speedup_against``
    the first over the second; ``identical_against``: whether both give the same runtimes of the
    placements, bit for bit (and the same placements and op count)."""
    placements = bench_placements(task, row.batch, seed)
    theirs = runner.load(spec, seed, row.batch)
    if "error" in theirs:
        print(f"{row.graph}: no comparison, {runner.path} cannot build it ({theirs['error']})",
              file=sys.stderr)
        return row
    ours = [simulate(task, p).runtime for p in placements]
    identical = (theirs["placements"] == hashlib.sha256(placements.tobytes()).hexdigest()
                 and theirs["ops"] == task.n_ops and theirs["runtimes"] == ours)
    calls = max(math.ceil(repeats / AGAINST_ROUNDS),
                math.ceil(seconds / AGAINST_ROUNDS * row.fast_evals_per_s))
    single = _in_turn(lambda p: simulate(task, p), placements)
    our_s = their_s = 0.0
    for _ in range(AGAINST_ROUNDS):
        start = time.perf_counter()
        for _ in range(calls):
            single()
        our_s += time.perf_counter() - start
        their_s += runner.time(calls)
    total = calls * AGAINST_ROUNDS
    against, alternating = 1e9 * their_s / total / theirs["ops"], 1e9 * our_s / total / task.n_ops
    return dataclasses.replace(row, ns_per_op_against=against, ns_per_op_alternating=alternating,
                               speedup_against=against / alternating, identical_against=bool(identical))


@dataclass(frozen=True)
class BenchTarget:
    """One speed target checked on a bench run: the ``measured`` value (``detail``: which row decides
    it) against ``target``; ``passed`` is None when the run has no row to measure it on."""

    name: str
    measured: float | None
    target: float
    at_least: bool
    detail: str
    why: str = ""  # what the target protects, and what else moves the figure

    @property
    def passed(self) -> bool | None:
        if self.measured is None:
            return None
        return self.measured >= self.target if self.at_least else self.measured <= self.target


def bench_targets(rows: Sequence[BenchRow]) -> list[BenchTarget]:
    """Issue 15's three targets, measured on ``rows`` (one bench run): the least fast / reference ratio
    over the bundled graphs, the fast time per op of the 100k-op layered graph over the 1k one's, and
    the least batched / single rate over all rows."""
    bundled = [r for r in rows if r.graph in bundled_graph_names()]
    worst = min(bundled, key=lambda r: r.ratio, default=None)
    by_label = {r.graph: r for r in rows}
    small, large = by_label.get("layered1000"), by_label.get("layered100000")
    gains = {r.graph: r.batch_speedup for r in rows}
    least_gain = min(gains, key=gains.__getitem__, default=None)
    return [
        BenchTarget("fast / reference, every bundled graph", None if worst is None else worst.ratio,
                    TARGET_RATIO, True, "no bundled graph" if worst is None else f"least: {worst.graph}",
                    WHY_RATIO),
        BenchTarget("ns per op, synthetic 100k-op graph / 1k-op graph",
                    None if small is None or large is None else large.ns_per_op / small.ns_per_op,
                    TARGET_LARGE_PER_OP, False,
                    "needs --sizes 1000,100000" if small is None or large is None else
                    f"{large.ns_per_op:.0f} / {small.ns_per_op:.0f} ns", WHY_LARGE_PER_OP),
        BenchTarget("batch / single evaluations per second, every row",
                    None if least_gain is None else gains[least_gain], TARGET_BATCH_GAIN, True,
                    "no rows" if least_gain is None else f"least: {least_gain} (batch of {rows[0].batch})",
                    WHY_BATCH_GAIN),
    ]


def bench_cases(graphs: Sequence[str] | None, sizes: Sequence[int],
                tasks: Sequence[str] = ()) -> list[tuple[str, dict[str, Any]]]:
    """(label, task spec for `build_case`) for each bundled graph named (None: all), each synthetic
    size and each task id of ``tasks`` (`parse_task_id`; an unknown one fails here, before any row)."""
    known = bundled_graph_names()
    names = known if graphs is None else list(graphs)
    unknown = [name for name in names if name not in known]
    if unknown:
        raise ValueError(f"unknown bundled graph(s) {', '.join(unknown)}; allowed: all, "
                         f"{', '.join(known) or '(no bundled graphs found)'}")
    bad = [n for n in sizes if n < 1]
    if bad:
        raise ValueError(f"synthetic graph sizes must be positive op counts, got {bad}")
    for task_id in tasks:
        parse_task_id(task_id)
    common = {"cluster": BENCH_CLUSTER, "objective": BENCH_OBJECTIVE}
    return ([(name, {"graph": name, **common}) for name in names]
            + [(f"layered{n}", {"layered": n, **common}) for n in sizes]
            + [(task_id, {"task": task_id}) for task_id in tasks])


def build_case(spec: dict[str, Any]) -> Task:
    """The task of a `bench_cases` spec: a bundled ``graph``, a ``layered`` graph of that many ops or a
    ``task`` id (the subprocess of `AgainstRunner` builds it the same way)."""
    if "task" in spec:
        return parse_task_id(spec["task"])
    if "graph" in spec:
        return get_task(spec["graph"], spec["cluster"], spec["objective"])
    return make_task(layered_graph(spec["layered"]), load_cluster(spec["cluster"]), spec["objective"])


def run_bench(
    graphs: Sequence[str] | None = None,
    sizes: Sequence[int] = DEFAULT_SIZES,
    repeats: int = 3,
    seconds: float = 1.0,
    batch: int = DEFAULT_BATCH,
    seed: int = 0,
    progress: Callable[[int, int, str, BenchRow | None], None] | None = None,
    incremental_moves: int = 0,
    incremental_from: str = "random",
    against: str | os.PathLike | None = None,
    cutoff_moves: int = 0,
    tasks: Sequence[str] = (),
) -> list[BenchRow]:
    """Benchmark the bundled ``graphs`` (None: all), synthetic layered graphs of ``sizes`` ops and the
    tasks of the ids ``tasks``.

    ``incremental_moves`` > 0: each bundled graph's row gets `incremental_ceiling` over that many moves
    from the placement ``incremental_from`` (`start_placement`); ``cutoff_moves`` > 0: each row (bundled
    or layered) gets `cutoff_speedup` over that many moves from the same start. ``against``: a checkout
    of another commit of this project, whose simulator `compare_against` times side by side with this one.
    ``progress(i, total, label, row)`` is called before each row (row None) and after it."""
    cases = bench_cases(graphs, sizes, tasks)
    if (incremental_moves > 0 or cutoff_moves > 0) and incremental_from != "random":
        start_agent(incremental_from)  # an unknown name fails before the first row, not after it
    runner = AgainstRunner(against) if against is not None else None
    rows = []
    try:
        for i, (label, spec) in enumerate(cases):
            if progress is not None:
                progress(i, len(cases), label, None)
            task = build_case(spec)
            row = bench_task(task, label, repeats=repeats, seconds=seconds, batch=batch, seed=seed)
            if incremental_moves > 0 and "graph" in spec and task.n_devices > 1:
                ceiling, changed = incremental_ceiling(
                    task, start_placement(task, incremental_from, seed), incremental_moves, seed)
                row = dataclasses.replace(row, incremental_ceiling=ceiling, changed_fraction=changed,
                                          incremental_moves=incremental_moves,
                                          incremental_from=incremental_from)
            if cutoff_moves > 0 and task.n_devices > 1:
                speedup, share = cutoff_speedup(
                    task, start_placement(task, incremental_from, seed), cutoff_moves, seed)
                row = dataclasses.replace(row, cutoff_speedup=speedup, cut_fraction=share,
                                          cutoff_moves=cutoff_moves, incremental_from=incremental_from)
            if runner is not None:
                row = compare_against(task, spec, runner, row, seconds, repeats, seed)
            rows.append(row)
            if progress is not None:
                progress(i, len(cases), label, row)
    finally:
        if runner is not None:
            runner.close()
    return rows


# --- ONNX import scaling ------------------------------------------------------------------------------

DEFAULT_IMPORT_SIZES: tuple[int, ...] = (25_000, 50_000, 100_000, 200_000)


@dataclass(frozen=True)
class ImportRow:
    """The import of one synthetic ONNX chain (`onnx_chain_model`) of ``nodes`` nodes, side by side with
    what ONNX itself does with the same file: ``baseline`` is ``onnx.load`` plus
    ``onnx.shape_inference.infer_shapes`` (the importer's call: strict, type-checked, with data
    propagation), ``import`` is `graph_from_onnx` of the path (which does both, and the rest). Seconds are
    this process's CPU seconds (``time.process_time``: other processes' load moves them less than wall
    seconds) and wall seconds; ``ratio`` = import / baseline CPU seconds."""

    nodes: int
    file_mb: float
    ops: int
    edges: int
    baseline_cpu_s: float
    import_cpu_s: float
    ratio: float
    baseline_wall_s: float
    import_wall_s: float

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _timed(call: Callable[[], Any]) -> tuple[Any, float, float]:
    """``call()``, its CPU seconds and its wall seconds."""
    cpu, wall = time.process_time(), time.perf_counter()
    result = call()
    return result, time.process_time() - cpu, time.perf_counter() - wall


def bench_import(nodes: int, directory: str | os.PathLike) -> ImportRow:
    """Write an ONNX chain of ``nodes`` nodes to ``directory`` and time its baseline and its import
    (`ImportRow`), the baseline first."""
    import onnx

    from placement_gym.graph.onnx_import import graph_from_onnx
    from placement_gym.graph.synthetic import onnx_chain_model

    path = os.path.join(directory, f"chain{nodes}.onnx")
    onnx.save(onnx_chain_model(nodes), path)

    def baseline() -> None:
        model = onnx.load(path)
        onnx.shape_inference.infer_shapes(model, check_type=True, strict_mode=True, data_prop=True)

    _, base_cpu, base_wall = _timed(baseline)
    graph, cpu, wall = _timed(lambda: graph_from_onnx(path))
    return ImportRow(nodes, os.path.getsize(path) / 1e6, graph.n_ops, graph.n_edges, base_cpu, cpu,
                     cpu / base_cpu if base_cpu > 0 else float("inf"), base_wall, wall)


def run_import_bench(sizes: Sequence[int] = DEFAULT_IMPORT_SIZES,
                     progress: Callable[[int, int, str, ImportRow | None], None] | None = None,
                     ) -> list[ImportRow]:
    """`bench_import` of each size in turn, in a temporary directory removed afterwards."""
    import tempfile

    bad = [n for n in sizes if n < 1]
    if bad:
        raise ValueError(f"import sizes must be positive node counts, got {bad}")
    rows = []
    with tempfile.TemporaryDirectory(prefix="placement-gym-import-") as directory:
        for i, n in enumerate(sizes):
            if progress is not None:
                progress(i, len(sizes), f"chain{n}", None)
            rows.append(bench_import(n, directory))
            if progress is not None:
                progress(i, len(sizes), f"chain{n}", rows[-1])
            os.remove(os.path.join(directory, f"chain{n}.onnx"))
    return rows


# `bench --startup`: the wall time a user waits for a command, each run a fresh process as a user starts it.
# name -> the command's arguments, and the exit code it must end with.
STARTUP_COMMANDS: dict[str, tuple[tuple[str, ...], int]] = {
    "help": (("--help",), 0),
    "evaluate": (("evaluate", "--graph", "inception_v3", "--agent", "heft"), 0),
    "unknown-graph": (("evaluate", "--graph", "inceptionv3", "--agent", "heft"), 2),
}
# Issue 63's targets, warm, on an idle 2-core machine (seconds of wall time).
STARTUP_TARGETS: dict[str, float] = {"help": 0.5, "evaluate": 2.0, "unknown-graph": 1.0}


@dataclass(frozen=True)
class StartupRow:
    """One command of `STARTUP_COMMANDS`: ``cold_s``, the wall seconds of its first run with numba's
    cache and the package's caches empty (fresh ``NUMBA_CACHE_DIR`` and ``PLACEMENT_GYM_OUTPUT``
    folders: kernels compile, bundled graphs are imported from ONNX); ``warm_s``, the least and
    ``warm_median_s`` the median wall seconds of the runs after it (same folders, caches filled);
    ``exit_code`` of the last run and whether it is the expected one (``ok``)."""

    name: str
    command: str
    cold_s: float
    warm_s: float
    warm_median_s: float
    warm_runs: int
    target_s: float
    exit_code: int
    ok: bool

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _run_cli(args: Sequence[str], env: dict[str, str]) -> tuple[float, int]:
    """Wall seconds and exit code of ``python -m placement_gym <args>`` in a fresh process (what the
    ``placement-gym`` script runs), its output discarded."""
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "placement_gym", *args], env=env, stdin=subprocess.DEVNULL,
                          stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
    return time.perf_counter() - start, done.returncode


def bench_startup_command(name: str, warm_runs: int, directory: str | os.PathLike) -> StartupRow:
    """Time command ``name`` of `STARTUP_COMMANDS` once cold and ``warm_runs`` times warm, its caches in
    fresh folders under ``directory`` (`StartupRow`). Python's bytecode and the operating system's file
    cache stay as they are: cold here is a first run after installing, not after a reboot."""
    args, expected = STARTUP_COMMANDS[name]
    env = dict(os.environ)
    env.update(NUMBA_CACHE_DIR=os.path.join(directory, name, "numba"),
               PLACEMENT_GYM_OUTPUT=os.path.join(directory, name, "output"), COLUMNS="80")
    cold, code = _run_cli(args, env)
    warm = []
    for _ in range(warm_runs):
        seconds, code = _run_cli(args, env)
        warm.append(seconds)
    return StartupRow(name, " ".join(("placement-gym", *args)), cold, min(warm), float(np.median(warm)),
                      warm_runs, STARTUP_TARGETS[name], code, code == expected)


def run_startup_bench(names: Sequence[str] | None = None, warm_runs: int = 3,
                      progress: Callable[[int, int, str, StartupRow | None], None] | None = None,
                      ) -> list[StartupRow]:
    """`bench_startup_command` of each of ``names`` (default: all of `STARTUP_COMMANDS`), in a temporary
    directory removed afterwards."""
    import tempfile

    names = list(STARTUP_COMMANDS) if names is None else list(names)
    unknown = [name for name in names if name not in STARTUP_COMMANDS]
    if unknown or not names or warm_runs < 1:
        raise ValueError(f"startup commands must be some of {', '.join(STARTUP_COMMANDS)} and the warm runs "
                         f"at least 1, got {', '.join(map(str, unknown or names)) or 'none'} and {warm_runs}")
    rows = []
    with tempfile.TemporaryDirectory(prefix="placement-gym-startup-") as directory:
        for i, name in enumerate(names):
            if progress is not None:
                progress(i, len(names), name, None)
            rows.append(bench_startup_command(name, warm_runs, directory))
            if progress is not None:
                progress(i, len(names), name, rows[-1])
    return rows
