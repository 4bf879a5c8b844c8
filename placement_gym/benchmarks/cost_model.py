"""The cost-model benchmark: the fast simulator, its batched call and the reference, side by side.

Each row is one task (``train_step`` on ``k80x4``): a bundled graph, or a synthetic layered graph of
``n`` ops (`layered_graph`), so that the time per op can be compared from 1k to 1M ops; or any task
named by its id (``tasks``: ``gnmt8/k40x8/train+mb4``, a pipelined step on another cluster). Before
timing, the row checks that the fast simulator, the batched call and the reference give the same
runtime (bit for bit, as docs/design.md requires) on the first placement. The timed calls all go
through the same ``batch`` seeded random placements: single calls (fast and reference) one after the
other, in turn, the batched call all at once (`placement_gym.benchmarks.simulators`).

Rates are throughputs: calls made / seconds spent (`time.perf_counter`). Each measurement runs for at
least ``seconds``; the fast and batched calls at least ``repeats`` times, the reference at least once
(its first, checking call is timed too, so a 100k-op row spends one reference call only).

Three optional measurements per row: ``incremental_ceiling`` and ``cutoff_speedup``
(`placement_gym.benchmarks.moves`) and, with ``against``, the same single calls timed with another
checkout's simulator in a subprocess, in alternating rounds (`placement_gym.benchmarks.against`).

Rates depend on the machine and on what else runs on it (the batched call spreads over the cores, so
a busy machine takes most of its gain away), so every run states both
(`placement_gym.benchmarks.machine`, with the load average at its start and end). The developers'
speed targets are `placement_gym.benchmarks.targets`; ``placement-gym bench`` shows them only with
``--check``.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable, Sequence
from typing import Any

from placement_gym.benchmarks.against import AgainstRunner, compare_against
from placement_gym.benchmarks.moves import cutoff_speedup, incremental_ceiling, start_agent, start_placement
from placement_gym.benchmarks.simulators import DEFAULT_BATCH, BenchRow, bench_task
from placement_gym.cluster import load_cluster
from placement_gym.graph import bundled_graph_names
from placement_gym.graph.synthetic import layered_graph
from placement_gym.task.compiled import Task, make_task
from placement_gym.task.named import get_task, parse_task_id

BENCH_CLUSTER = "k80x4"  # the papers' usual machine: a CPU + 4 K80 dies
BENCH_OBJECTIVE = "train_step"
DEFAULT_SIZES: tuple[int, ...] = (1_000, 10_000, 100_000)


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
