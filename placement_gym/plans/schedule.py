"""Pipeline schedules over stage-micro-batch units, simulated.

Device ``s`` of ``pp`` holds virtual stages ``j * pp + s`` for its ``vp`` chunks. A unit is one
virtual stage's forward or backward pass of one micro-batch, of the times given per virtual stage. Each
device runs its units in its schedule's order (`GPIPE`: every forward, then every backward; `ONE_F_ONE_B`:
pp - s - 1 warm-up forwards, then one forward and one backward in turn, then the remaining backwards
(Narayanan et al. 2021); `INTERLEAVED`: Megatron-LM's order over chunks, groups of pp micro-batches per
chunk, (pp - s - 1) x 2 + (vp - 1) x pp warm-up forwards). A forward starts when its device is free
and the previous virtual stage's forward of the micro-batch has arrived (its finish plus the send); a
backward when the next virtual stage's backward has arrived. The kept activations of a device are
counted as its forwards and backwards run, so the peak is the schedule's own (1F1B keeps at most pp - s
micro-batches on device s).
"""

from __future__ import annotations

import numpy as np
from numba import njit

GPIPE, ONE_F_ONE_B, INTERLEAVED = 0, 1, 2
SCHEDULE_CODES = {"gpipe": GPIPE, "1f1b": ONE_F_ONE_B, "interleaved": INTERLEAVED}


@njit(cache=True)
def _unit(device: int, index: int, backward: bool, pp: int, vp: int, kind: int, m: int):
    """(virtual stage, micro-batch) of a device's ``index``-th forward or backward unit."""
    if kind == INTERLEAVED:
        group = index // pp
        chunk = group % vp
        if backward:
            chunk = vp - 1 - chunk
        micro = (index // (pp * vp)) * pp + index % pp
    else:
        chunk = index // m
        micro = index % m
        if backward:
            chunk = vp - 1 - chunk
    return chunk * pp + device, micro


@njit(cache=True)
def simulate_pipeline(
    pp: int,
    vp: int,
    m: int,
    kind: int,
    forward: np.ndarray,
    backward: np.ndarray,
    send_forward: np.ndarray,
    send_backward: np.ndarray,
    kept: np.ndarray,
):
    """Per device: the finish of its last unit, its busy seconds, the most kept bytes, the finish of its
    first forward and the busy seconds of its last micro-batch's backward units. ``forward``,
    ``backward``, ``kept`` per virtual stage; ``send_forward[v]`` the time virtual stage ``v``'s output
    takes to reach ``v + 1``, ``send_backward[v]`` its input's gradient to reach ``v - 1``."""
    stages = pp * vp
    units = m * vp
    forward_done = np.full((stages, m), -1.0)
    backward_done = np.full((stages, m), -1.0)
    free = np.zeros(pp)
    busy = np.zeros(pp)
    alive = np.zeros(pp)
    peak = np.zeros(pp)
    first_forward = np.zeros(pp)
    last_backward = np.zeros(pp)
    step = np.zeros(pp, dtype=np.int64)  # position in the device's order
    done_f = np.zeros(pp, dtype=np.int64)
    done_b = np.zeros(pp, dtype=np.int64)
    warmup = np.zeros(pp, dtype=np.int64)
    for s in range(pp):
        if kind == GPIPE:
            warmup[s] = units
        elif kind == ONE_F_ONE_B:
            warmup[s] = min(pp - s - 1, m) * vp
        else:
            warmup[s] = min((pp - s - 1) * 2 + (vp - 1) * pp, units)
    total = 2 * units
    remaining = pp * total
    while remaining > 0:
        progressed = False
        for s in range(pp):
            while step[s] < total:
                k = step[s]
                if k < warmup[s]:
                    is_backward = False
                elif k >= warmup[s] + 2 * (units - warmup[s]):
                    is_backward = True
                else:
                    is_backward = (k - warmup[s]) % 2 == 1
                if is_backward:
                    v, micro = _unit(s, done_b[s], True, pp, vp, kind, m)
                    if forward_done[v, micro] < 0:
                        break
                    ready = forward_done[v, micro]
                    if v < stages - 1:
                        if backward_done[v + 1, micro] < 0:
                            break
                        ready = max(ready, backward_done[v + 1, micro] + send_backward[v + 1])
                    start = max(free[s], ready)
                    free[s] = start + backward[v]
                    backward_done[v, micro] = free[s]
                    busy[s] += backward[v]
                    alive[s] -= kept[v]
                    if micro == m - 1 or (kind == INTERLEAVED and micro >= m - pp):
                        last_backward[s] += backward[v]
                    done_b[s] += 1
                else:
                    v, micro = _unit(s, done_f[s], False, pp, vp, kind, m)
                    ready = 0.0
                    if v > 0:
                        if forward_done[v - 1, micro] < 0:
                            break
                        ready = forward_done[v - 1, micro] + send_forward[v - 1]
                    start = max(free[s], ready)
                    free[s] = start + forward[v]
                    forward_done[v, micro] = free[s]
                    busy[s] += forward[v]
                    alive[s] += kept[v]
                    peak[s] = max(peak[s], alive[s])
                    if done_f[s] == 0:
                        first_forward[s] = forward[v]
                    done_f[s] += 1
                step[s] += 1
                remaining -= 1
                progressed = True
        if not progressed:
            raise RuntimeError("pipeline schedule deadlocked")
    return free, busy, peak, first_forward, last_backward
