"""One-op moves from a placement, as a search makes them: how much an exact incremental evaluation
could save at most (`incremental_ceiling`) and how much faster a move is evaluated with the start's
runtime as cutoff (`cutoff_speedup`)."""

from __future__ import annotations

import time

import numpy as np

from placement_gym.cost_model import Schedule, simulate
from placement_gym.evaluation.agents import Agent, AgentResult, lookup_agent
from placement_gym.task.compiled import Task


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
