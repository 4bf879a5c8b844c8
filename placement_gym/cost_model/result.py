"""`SimulationResult`: what one evaluation of a placement returns."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True, eq=False)
class Schedule:
    """The simulated timeline of one placement of a task (all times in seconds).

    Per task op (length ``task.n_ops``; forward, backward and update ops, see `Task`):
        op_device (int32), op_start, op_finish (float64).
    Per transfer (one per (tensor, destination device) pair, in the order they were sent):
        transfer_tensor (int32 index into the task's tensors), transfer_src, transfer_dst (int32
        devices), transfer_start, transfer_finish (float64).
    """

    op_device: np.ndarray
    op_start: np.ndarray
    op_finish: np.ndarray
    transfer_tensor: np.ndarray
    transfer_src: np.ndarray
    transfer_dst: np.ndarray
    transfer_start: np.ndarray
    transfer_finish: np.ndarray


# Not frozen: a frozen dataclass sets each field through ``object.__setattr__`` in ``__init__``, which
# made building the result about a tenth of a `simulate` call on a small graph (docs/cost_model.md,
# Speed). Slots keep it small and make a misspelt attribute an error. Treat it as read-only.
@dataclass(eq=False, slots=True)
class SimulationResult:
    """Runtime (makespan, seconds), feasibility (no device over its memory), per-device peak memory
    (bytes: static parameters and optimizer state plus the peak of live tensors), and the schedule
    when it was asked for. ``cut``: the simulation stopped at a cutoff (`simulate`'s ``cutoff``):
    ``runtime`` is then a proven lower bound above the cutoff, ``feasible`` False (unknown) and
    ``peak_memory`` NaN. A value: read it, do not assign to it (it is not frozen, for speed)."""

    runtime: float
    feasible: bool
    peak_memory: np.ndarray
    schedule: Schedule | None = None
    cut: bool = False
