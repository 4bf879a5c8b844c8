"""The reference simulator: a plain discrete-event simulation in Python, kept as the oracle.

This is the classic design of the Placeto and Baechi simulators: a heap of timed events (an op
finishes, a transfer arrives), a ready queue per device, a FIFO queue per directed link. It is
deliberately simple and slow; `fast.simulate` must agree with it exactly (tests/test_cost_model.py).
The semantics are those stated in `fast.py`'s docstring and docs/design.md (section 3).
"""

from __future__ import annotations

import heapq
from collections import defaultdict, deque

import numpy as np

from placement_gym.cost_model.result import SimulationResult

_OP_DONE, _TRANSFER_DONE = 0, 1


def reference_simulate(task, placement) -> SimulationResult:
    """Evaluate one placement of ``task`` by event simulation (same result as `fast.simulate`, and
    counted the same way in ``task.evaluations``)."""
    device = task.expand(placement).tolist()
    n_ops, n_devices = task.n_ops, task.n_devices
    duration = task.duration.tolist()
    bandwidth = task.cluster.link_bandwidth.tolist()
    latency = task.cluster.link_latency.tolist()
    size = task.tensor_bytes.tolist()
    outputs = [
        task.op_outputs[task.op_output_pointer[o] : task.op_output_pointer[o + 1]].tolist()
        for o in range(n_ops)
    ]
    readers = [
        task.tensor_consumers[task.tensor_consumer_pointer[t] : task.tensor_consumer_pointer[t + 1]].tolist()
        for t in range(task.n_tensors)
    ]

    missing = task.op_input_count.tolist()
    ready_time = [0.0] * n_ops
    start, finish = [0.0] * n_ops, [0.0] * n_ops
    queue: list[list[tuple[float, int]]] = [[] for _ in range(n_devices)]
    busy = [False] * n_devices
    link_queue: dict[tuple[int, int], deque] = defaultdict(deque)
    link_busy: set[tuple[int, int]] = set()
    events: list[tuple[float, int, int, tuple]] = []
    sequence = 0
    transfers = []  # (tensor, src, dst, start, end)

    def push(time: float, kind: int, payload: tuple) -> None:
        nonlocal sequence
        heapq.heappush(events, (time, sequence, kind, payload))
        sequence += 1

    def arrive(tensor: int, dst: int, time: float) -> None:
        for op in readers[tensor]:
            if device[op] == dst:
                ready_time[op] = max(ready_time[op], time)
                missing[op] -= 1
                if missing[op] == 0:
                    heapq.heappush(queue[dst], (ready_time[op], op))

    def start_transfer(link: tuple[int, int], time: float) -> None:
        tensor = link_queue[link].popleft()
        link_busy.add(link)
        end = time + (latency[link[0]][link[1]] + size[tensor] / bandwidth[link[0]][link[1]])
        transfers.append((tensor, link[0], link[1], time, end))
        push(end, _TRANSFER_DONE, (tensor, link))

    def dispatch(time: float) -> None:
        for d in range(n_devices):
            if not busy[d] and queue[d]:
                _, op = heapq.heappop(queue[d])
                busy[d] = True
                start[op] = time
                finish[op] = time + duration[op][d]
                push(finish[op], _OP_DONE, (op,))

    for op in range(n_ops):
        if missing[op] == 0:
            heapq.heappush(queue[device[op]], (0.0, op))
    dispatch(0.0)
    now = 0.0
    while events:
        now = events[0][0]
        while events and events[0][0] == now:
            _, _, kind, payload = heapq.heappop(events)
            if kind == _OP_DONE:
                (op,) = payload
                src = device[op]
                busy[src] = False
                for tensor in outputs[op]:
                    for dst in sorted({device[r] for r in readers[tensor]}):
                        if dst == src:
                            arrive(tensor, dst, now)
                        else:
                            link = (src, dst)
                            link_queue[link].append(tensor)
                            if link not in link_busy:
                                start_transfer(link, now)
            else:
                tensor, link = payload
                link_busy.discard(link)
                arrive(tensor, link[1], now)
                if link_queue[link]:
                    start_transfer(link, now)
        dispatch(now)
    if any(m > 0 for m in missing):
        raise RuntimeError("reference simulation stalled: the task graph is not a DAG")

    peak = _peak_memory(task, device, start, finish, transfers)
    feasible = bool(np.all(peak <= task.cluster.memory_capacity))
    task.count_evaluations(1)
    return SimulationResult(runtime=max(finish), feasible=feasible, peak_memory=peak)


def _peak_memory(task, device, start, finish, transfers) -> np.ndarray:
    """Static bytes plus the peak of live buffers per device (frees before allocations at a tie)."""
    n_devices = task.n_devices
    events: list[list[tuple[float, int, float]]] = [
        [] for _ in range(n_devices)
    ]  # (time, 0 free/1 alloc, bytes)
    readers_on: dict[tuple[int, int], float] = {}
    for t in range(task.n_tensors):
        for op in task.tensor_consumers[
            task.tensor_consumer_pointer[t] : task.tensor_consumer_pointer[t + 1]
        ]:
            key = (t, device[op])
            readers_on[key] = max(readers_on.get(key, -1.0), finish[op])
    sent_until: dict[int, float] = {}
    for tensor, _src, dst, begin, end in transfers:
        sent_until[tensor] = max(sent_until.get(tensor, -1.0), end)
        size = float(task.tensor_bytes[tensor])
        events[dst] += [(begin, 1, size), (readers_on[(tensor, dst)], 0, -size)]
    for t in range(task.n_tensors):
        size = float(task.tensor_bytes[t])
        p = int(task.tensor_producer[t])
        if p < 0:
            for d in range(n_devices):
                if (t, d) in readers_on:
                    events[d] += [(0.0, 1, size), (readers_on[(t, d)], 0, -size)]
        elif not task.tensor_static[t]:
            d = device[p]
            if task.tensor_persistent[t]:
                events[d].append((start[p], 1, size))
                continue
            release = max(readers_on.get((t, d), finish[p]), sent_until.get(t, -1.0))
            events[d] += [(start[p], 1, size), (release, 0, -size)]
    peak = np.zeros(n_devices)
    for d in range(n_devices):
        live = 0.0
        for _, _, change in sorted(events[d]):
            live += change
            peak[d] = max(peak[d], live)
    static = np.zeros(n_devices)
    for op in range(task.n_ops):
        if task.op_kind[op] == 0:
            static[device[op]] += task.static_bytes[task.op_forward[op]]
    return static + peak
