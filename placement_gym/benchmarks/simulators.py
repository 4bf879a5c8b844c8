"""One row of the cost-model benchmark: the fast simulator, its batched call and the reference on one
task's seeded random placements, checked to agree bit for bit, then timed (`bench_task`, `BenchRow`)."""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from placement_gym.benchmarks.rows import BenchmarkRow
from placement_gym.benchmarks.timing import bench_placements, calls_per_second, in_turn
from placement_gym.cost_model import reference_simulate, simulate, simulate_batch
from placement_gym.task.compiled import Task

DEFAULT_BATCH = 64


@dataclass(frozen=True)
class BenchRow(BenchmarkRow):
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
    fast_rate, _ = calls_per_second(in_turn(lambda p: simulate(task, p), placements), repeats, seconds)
    batch_calls_rate, _ = calls_per_second(lambda: simulate_batch(task, placements), repeats, seconds)
    after_first = np.roll(placements, -1, axis=0)  # the first reference call, timed above, ran row 0
    reference_rate, reference_calls = calls_per_second(
        in_turn(lambda p: reference_simulate(task, p), after_first), 1, seconds, first_s=reference_first_s)
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
