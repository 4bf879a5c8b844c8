"""What each device runs in a real step of a placement, and in which order: the executor's plan.

`plan_step` turns a task and a placement into one list of `Unit` per device, built once per placement
and run at every step (`placement_gym.real.executor`):

* **Order**: each device runs its jobs (the task's ops: forward, backward, update, replayed) in the
  order of the cost model's schedule of the same placement (start time, then task op index), so a
  real step follows the timeline the model predicts; micro-batches and recomputation come with the
  task's own layout and dependencies (`placement_gym.task.compiled`). An update op is held back to the
  end of the run of backward jobs it falls in: nothing waits for an update, so this delays only the
  update itself, and the run stays one autograd call.
* **Units**: a device's order is cut into maximal runs of jobs of one kind and micro-batch; a run ends
  before a job that waits for another device and after a job another device waits for. A unit waits
  (for the units of other devices it needs) only before it starts and tells the others it is done
  only when it ends, so there is no synchronisation inside a unit.
* **Blocks** (train steps): the ops whose backward jobs share a backward unit and whose forward (or
  replayed) jobs share a forward unit form a block. Inside a block a forward op reads its producer's
  output as it is (one autograd graph); across blocks it reads a detached copy. A backward unit runs
  one ``torch.autograd.grad`` call per block, the blocks from the last forward unit to the first, so
  the gradient of a block is complete before the block that feeds it runs. A one-device train step
  is thus one forward loop and one backward call, as torch runs a module.

The plan is pure Python and numpy; it checks nothing about devices (the executor does).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from placement_gym.task.compiled import Task
from placement_gym.task.passes.recompute import recompute_segments
from placement_gym.task.passes.step_graph import OP_KINDS

FORWARD, BACKWARD, UPDATE, RECOMPUTE = (OP_KINDS.index(k)
                                        for k in ("forward", "backward", "update", "recompute"))


@dataclass(frozen=True)
class Unit:
    """A run of jobs one device runs without waiting in between.

    kind: ``"forward"``, ``"recompute"``, ``"backward"`` or ``"update"``; jobs: task op indices in the
    order they run; microbatch: theirs (-1 for updates); grad: whether a forward or replayed unit builds
    the autograd graph a backward unit differentiates; waits: task ops of other devices that must have
    finished before the unit starts; signals: whether a unit of another device waits for this one;
    blocks: for a backward unit, the forward ops of each block in the order their gradients are taken.
    """

    kind: str
    jobs: tuple[int, ...]
    microbatch: int
    grad: bool
    waits: tuple[int, ...]
    signals: bool
    blocks: tuple[tuple[int, ...], ...] = ()


@dataclass(frozen=True)
class StepPlan:
    """The units of every used device (`units`: device index -> its units in order) and, per forward
    op and micro-batch, the block its grad-building job belongs to (`block`: (op, micro-batch) ->
    block id; a forward op reads an input as it is, not detached, exactly when its producer has the
    same block id). `job_unit`: task op -> (device, index of its unit)."""

    units: dict[int, tuple[Unit, ...]]
    block: dict[tuple[int, int], int]
    job_unit: dict[int, tuple[int, int]]


def replayed_ops(task: Task) -> tuple[np.ndarray, np.ndarray]:
    """Per forward op, its recomputation segment (`recompute_segments`; all 0 without recomputation)
    and whether the step replays it (a train step with ``recompute=True``: every segment but the
    last)."""
    n = task.n_forward
    if task.objective != "train_step" or not task.recompute:
        return np.zeros(n, dtype=np.int64), np.zeros(n, dtype=bool)
    segment = recompute_segments(n)
    return segment, segment < segment[-1]


def task_dependencies(task: Task) -> list[set[int]]:
    """Per task op, the task ops it waits for (the producers of the tensors it reads, tokens included)."""
    deps: list[set[int]] = [set() for _ in range(task.n_ops)]
    producer = task.tensor_producer
    pointer, consumers = task.tensor_consumer_pointer, task.tensor_consumers
    for t in np.flatnonzero(producer >= 0).tolist():
        p = int(producer[t])
        for c in consumers[pointer[t]:pointer[t + 1]].tolist():
            if c != p:
                deps[c].add(p)
    return deps


def device_orders(task: Task, placement: np.ndarray) -> dict[int, list[int]]:
    """Per used device, its task ops in the order of the cost model's schedule (start, then index).
    The schedule is computed on an independent copy of the task, so that planning a real run does not
    count as an evaluation of the task."""
    from placement_gym.cost_model.fast import simulate

    schedule = simulate(task.independent_copy(), placement, schedule=True).schedule
    assert schedule is not None
    device = schedule.op_device
    order = np.lexsort((np.arange(task.n_ops), schedule.op_start))
    orders: dict[int, list[int]] = {}
    for j in order.tolist():
        orders.setdefault(int(device[j]), []).append(j)
    return orders


def plan_step(task: Task, placement: np.ndarray, value_deps: list[set[int]] | None = None) -> StepPlan:
    """The units each device runs for ``placement`` (module docstring). ``value_deps``: per task op,
    further task ops whose values it reads (the executor's program); joined to the task's own
    dependencies, so that a unit never reads a value another device has not made yet."""
    deps = task_dependencies(task)
    if value_deps is not None:
        for j, extra in enumerate(value_deps):
            deps[j] |= extra - {j}
    kind = task.op_kind
    forward = task.op_forward
    microbatch = task.op_microbatch
    device = np.asarray(placement)[forward]
    train = task.objective == "train_step"
    replayed = replayed_ops(task)[1]
    waits = [tuple(sorted(p for p in deps[j] if device[p] != device[j])) for j in range(task.n_ops)]
    signals = np.zeros(task.n_ops, dtype=bool)
    for j in range(task.n_ops):
        for p in waits[j]:
            signals[p] = True

    def klass(j: int) -> tuple[str, bool]:
        k = int(kind[j])
        if k == BACKWARD:
            return "backward", True
        if k == RECOMPUTE:
            return "recompute", True
        return "forward", train and not replayed[forward[j]]

    units: dict[int, list[Unit]] = {}
    job_unit: dict[int, tuple[int, int]] = {}
    for d, order in device_orders(task, np.asarray(placement)).items():
        out: list[Unit] = units.setdefault(d, [])
        run: list[int] = []
        pending: list[int] = []

        def close(signal: bool, run: list[int] = run, pending: list[int] = pending, out: list[Unit] = out,
                  d: int = d) -> None:
            if run:
                name, grad = klass(run[0])
                unit = Unit(name, tuple(run), int(microbatch[run[0]]), grad, waits[run[0]], signal)
                for j in run:
                    job_unit[j] = (d, len(out))
                out.append(unit)
                run.clear()
            if pending:
                needed = tuple(sorted({p for j in pending for p in waits[j]}))
                for j in pending:
                    job_unit[j] = (d, len(out))
                out.append(Unit("update", tuple(pending), -1, False, needed, False))
                pending.clear()

        for j in order:
            if kind[j] == UPDATE:
                pending.append(j)
                if not run:
                    close(False)
                continue
            if run and (klass(j) != klass(run[0]) or microbatch[j] != microbatch[run[0]] or waits[j]):
                close(False)
            run.append(j)
            if signals[j]:
                close(True)
        close(False)
    block, block_unit = _blocks(task, job_unit, replayed) if train else ({}, {})
    final = {d: tuple(_with_blocks(task, us, block, block_unit)) for d, us in units.items()}
    return StepPlan(units=final, block=block, job_unit=job_unit)


def _blocks(task: Task, job_unit: dict[int, tuple[int, int]], replayed: np.ndarray
            ) -> tuple[dict[tuple[int, int], int], dict[int, int]]:
    """Block id of every (forward op, micro-batch) of a train step: one per pair (unit of the job that
    builds its autograd graph, unit of its backward job); and per block id the position of that
    grad-building unit in its device's order."""
    kind, forward, microbatch = task.op_kind, task.op_forward, task.op_microbatch
    grad_unit: dict[tuple[int, int], tuple[int, int]] = {}
    backward_unit: dict[tuple[int, int], tuple[int, int]] = {}
    for j in range(task.n_ops):
        f, b, k = int(forward[j]), int(microbatch[j]), int(kind[j])
        if k == BACKWARD:
            backward_unit[(f, b)] = job_unit[j]
        elif (k == RECOMPUTE) == bool(replayed[f]) and k in (FORWARD, RECOMPUTE):
            grad_unit[(f, b)] = job_unit[j]
    ids: dict[tuple[tuple[int, int], tuple[int, int]], int] = {}
    block: dict[tuple[int, int], int] = {}
    block_unit: dict[int, int] = {}
    for key, unit in grad_unit.items():
        pair = (unit, backward_unit[key])
        block[key] = ids.setdefault(pair, len(ids))
        block_unit[block[key]] = unit[1]
    return block, block_unit


def _with_blocks(task: Task, units: list[Unit], block: dict[tuple[int, int], int],
                 block_unit: dict[int, int]) -> list[Unit]:
    """Each backward unit with its blocks: the forward ops of its jobs grouped by block, the blocks
    ordered from the latest grad-building unit of the device down. A producer and its consumer in
    two blocks of one backward unit sit on one device, the producer's forward unit before the
    consumer's, so the consumer's block comes first."""
    if not block:
        return units
    result = []
    for unit in units:
        if unit.kind != "backward":
            result.append(unit)
            continue
        groups: dict[int, list[int]] = {}
        for j in unit.jobs:
            f = int(task.op_forward[j])
            groups.setdefault(block[(f, unit.microbatch)], []).append(f)
        ordered = sorted(groups, key=lambda b: -block_unit[b])
        result.append(Unit(unit.kind, unit.jobs, unit.microbatch, unit.grad, unit.waits, unit.signals,
                           tuple(tuple(sorted(groups[b])) for b in ordered)))
    return result
