"""What every timing of the benchmarks shares: calls per second over a least number of calls and
seconds, calls over a batch of placements in turn, CPU and wall seconds of one call, and the seeded
random placements a cost-model row goes through."""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from placement_gym.task.compiled import Task


def calls_per_second(
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


def in_turn(call: Callable[[np.ndarray], Any], placements: np.ndarray) -> Callable[[], Any]:
    """A no-argument call that applies ``call`` to the rows of ``placements`` in turn, cyclically."""
    rows = itertools.cycle(list(placements))
    return lambda: call(next(rows))


def bench_placements(task: Task, batch: int, seed: int) -> np.ndarray:
    """The ``batch`` seeded random placements every timing of a row goes through (`bench_task`,
    `compare_against`; the subprocess of `AgainstRunner` draws them the same way)."""
    return np.random.default_rng(seed).integers(0, task.n_devices, size=(batch, task.n_forward))


def timed(call: Callable[[], Any]) -> tuple[Any, float, float]:
    """``call()``, its CPU seconds and its wall seconds."""
    cpu, wall = time.process_time(), time.perf_counter()
    result = call()
    return result, time.process_time() - cpu, time.perf_counter() - wall
