"""The fast simulator: list scheduling over a task's arrays, compiled with numba.

Semantics (DESIGN.md, "Cost-model semantics"), implemented so that the event-driven reference in
`reference.py` gives bit-identical results:

* each device runs one op at a time; a free device takes, among the ops whose inputs are all on
  it, the one that became ready first, ties by index; it waits when none is ready;
* a tensor is sent once per destination device on the directed link ``(src, dst)``; a link carries
  one transfer at a time, in the order the tensors were produced (for one op: by tensor index, then
  destination device); transfer time = latency + bytes / bandwidth;
* memory per device = static bytes (parameters, gradients, optimizer state) + the peak of live
  tensors: an output is allocated when its op starts and freed when its last local consumer and
  its last outgoing transfer have finished (graph outputs live to the end); a received copy is
  allocated when its transfer starts and freed when its last consumer on that device finishes; a
  graph data input is allocated at time 0 on every device that reads it. At equal times, frees
  come before allocations.

Why this is exact without an event queue: every op and transfer takes a positive time (a cluster
validates overheads and latencies as positive), so an op's finish time, and with it the arrival
of its outputs on other devices, can be settled when it starts. Devices commit their next op in
order of start time; when the earliest possible start is ``s``, every op that can become ready by
``s`` is already known, because its producers started before ``s``.
"""

from __future__ import annotations

import numba
import numpy as np

from placement_gym.cost_model.result import Schedule, SimulationResult


@numba.njit(cache=True, inline="always")
def _before(a: int, b: int, ready: np.ndarray) -> bool:
    return ready[a] < ready[b] or (ready[a] == ready[b] and a < b)


@numba.njit(cache=True)
def _heap_push(heap, base, size, op, ready):
    i = size
    while i > 0:
        parent = (i - 1) // 2
        above = heap[base + parent]
        if _before(above, op, ready):
            break
        heap[base + i] = above
        i = parent
    heap[base + i] = op


@numba.njit(cache=True)
def _heap_pop(heap, base, size, ready):
    top = heap[base]
    size -= 1
    if size == 0:
        return top
    last = heap[base + size]
    i = 0
    while True:
        child = 2 * i + 1
        if child >= size:
            break
        candidate = heap[base + child]
        if child + 1 < size:
            right = heap[base + child + 1]
            if _before(right, candidate, ready):
                child += 1
                candidate = right
        if _before(last, candidate, ready):
            break
        heap[base + i] = candidate
        i = child
    heap[base + i] = last
    return top


@numba.njit(cache=True)
def _time_order(times, horizon):
    """Indices that sort ``times`` (values in [0, horizon] or inf): a bucket sort, linear in the
    number of events because event times spread over the step, with insertion sort inside a bucket."""
    n = times.shape[0]
    n_buckets = n + 1
    bucket = np.empty(n, dtype=np.int64)
    first = np.zeros(n_buckets + 1, dtype=np.int64)
    scale = (n - 1) / horizon if horizon > 0.0 else 0.0
    for i in range(n):
        t = times[i]
        b = n if t == np.inf else min(int(t * scale), n - 1)
        bucket[i] = b
        first[b + 1] += 1
    for b in range(n_buckets):
        first[b + 1] += first[b]
    order = np.empty(n, dtype=np.int64)
    for i in range(n):
        b = bucket[i]
        order[first[b]] = i
        first[b] += 1
    low = 0
    for b in range(n_buckets):  # first[b] is now the end of bucket b
        high = first[b]
        for k in range(low + 1, high):
            item = order[k]
            j = k - 1
            while j >= low and times[order[j]] > times[item]:
                order[j + 1] = order[j]
                j -= 1
            order[j + 1] = item
        low = high
    return order


@numba.njit(cache=True)
def _simulate(
    device,
    duration,
    output_pointer,
    outputs,
    consumer_pointer,
    consumers,
    tensor_producer,
    tensor_bytes,
    tensor_static,
    tensor_persistent,
    input_count,
    static_bytes,
    link_bandwidth,
    link_latency,
    n_devices,
):
    n_ops = device.shape[0]
    n_tensors = tensor_bytes.shape[0]
    ready = np.zeros(n_ops)
    start = np.empty(n_ops)
    finish = np.empty(n_ops)
    pending = input_count.copy()
    base = np.zeros(n_devices, dtype=np.int64)
    size = np.zeros(n_devices, dtype=np.int64)
    for op in range(n_ops):
        size[device[op]] += 1
    for d in range(1, n_devices):
        base[d] = base[d - 1] + size[d - 1]
    size[:] = 0
    heap = np.empty(n_ops, dtype=np.int64)
    for op in range(n_ops):
        if pending[op] == 0:
            d = device[op]
            _heap_push(heap, base[d], size[d], op, ready)
            size[d] += 1
    device_free = np.zeros(n_devices)
    link_free = np.zeros((n_devices, n_devices))
    arrival = np.empty(n_devices)
    needed = np.zeros(n_devices, dtype=np.bool_)
    max_transfers = consumers.shape[0]
    transfer_tensor = np.empty(max_transfers, dtype=np.int64)
    transfer_dst = np.empty(max_transfers, dtype=np.int64)
    transfer_start = np.empty(max_transfers)
    transfer_finish = np.empty(max_transfers)
    first_transfer = np.zeros(n_tensors + 1, dtype=np.int64)  # filled per tensor as it is sent
    n_transfers = 0
    makespan = 0.0
    for _ in range(n_ops):
        best = -1
        best_start = np.inf
        for d in range(n_devices):
            if size[d] > 0:
                s = max(device_free[d], ready[heap[base[d]]])
                if s < best_start:
                    best_start = s
                    best = d
        if best < 0:  # cannot happen for a DAG in topological order
            return (
                -1.0,
                start,
                finish,
                transfer_tensor[:0],
                transfer_dst[:0],
                transfer_start[:0],
                transfer_finish[:0],
                np.zeros(n_devices),
            )
        d = best
        op = _heap_pop(heap, base[d], size[d], ready)
        size[d] -= 1
        s = best_start
        f = s + duration[op, d]
        start[op] = s
        finish[op] = f
        device_free[d] = f
        if f > makespan:
            makespan = f
        for k in range(output_pointer[op], output_pointer[op + 1]):
            t = outputs[k]
            first_transfer[t] = n_transfers
            for j in range(consumer_pointer[t], consumer_pointer[t + 1]):
                needed[device[consumers[j]]] = True
            for e in range(n_devices):
                if needed[e]:
                    needed[e] = False
                    if e == d:
                        arrival[e] = f
                    else:
                        begin = max(link_free[d, e], f)
                        end = begin + (link_latency[d, e] + tensor_bytes[t] / link_bandwidth[d, e])
                        link_free[d, e] = end
                        arrival[e] = end
                        transfer_tensor[n_transfers] = t
                        transfer_dst[n_transfers] = e
                        transfer_start[n_transfers] = begin
                        transfer_finish[n_transfers] = end
                        n_transfers += 1
            for j in range(consumer_pointer[t], consumer_pointer[t + 1]):
                c = consumers[j]
                a = arrival[device[c]]
                if a > ready[c]:
                    ready[c] = a
                pending[c] -= 1
                if pending[c] == 0:
                    e = device[c]
                    _heap_push(heap, base[e], size[e], c, ready)
                    size[e] += 1
    # Memory: one allocation and one free per live buffer, swept per device in time order.
    n_inputs = 0
    for t in range(n_tensors):
        if tensor_producer[t] < 0:
            n_inputs += 1
    n_buffers = n_tensors + n_transfers + n_inputs * n_devices
    buffer_device = np.empty(n_buffers, dtype=np.int64)
    buffer_bytes = np.empty(n_buffers)
    buffer_alloc = np.empty(n_buffers)
    buffer_free = np.empty(n_buffers)
    n_buffers = 0
    last_use = np.empty(n_devices)
    for t in range(n_tensors):
        last_use[:] = -1.0
        for j in range(consumer_pointer[t], consumer_pointer[t + 1]):
            c = consumers[j]
            e = device[c]
            if finish[c] > last_use[e]:
                last_use[e] = finish[c]
        p = tensor_producer[t]
        if p < 0:
            for e in range(n_devices):
                if last_use[e] >= 0.0:
                    buffer_device[n_buffers] = e
                    buffer_bytes[n_buffers] = tensor_bytes[t]
                    buffer_alloc[n_buffers] = 0.0
                    buffer_free[n_buffers] = last_use[e]
                    n_buffers += 1
            continue
        d = device[p]
        release = last_use[d] if last_use[d] >= 0.0 else finish[p]
        for k in range(first_transfer[t], n_transfers):
            if transfer_tensor[k] != t:
                break
            if transfer_finish[k] > release:
                release = transfer_finish[k]
            e = transfer_dst[k]
            buffer_device[n_buffers] = e
            buffer_bytes[n_buffers] = tensor_bytes[t]
            buffer_alloc[n_buffers] = transfer_start[k]
            buffer_free[n_buffers] = last_use[e]
            n_buffers += 1
        if not tensor_static[t]:
            buffer_device[n_buffers] = d
            buffer_bytes[n_buffers] = tensor_bytes[t]
            buffer_alloc[n_buffers] = start[p]
            buffer_free[n_buffers] = np.inf if tensor_persistent[t] else release
            n_buffers += 1
    alloc_order = _time_order(buffer_alloc[:n_buffers], makespan)
    free_order = _time_order(buffer_free[:n_buffers], makespan)
    usage = np.zeros(n_devices)
    peak = np.zeros(n_devices)
    j = 0
    for i in range(n_buffers):
        b = alloc_order[i]
        while j < n_buffers and buffer_free[free_order[j]] <= buffer_alloc[b]:
            usage[buffer_device[free_order[j]]] -= buffer_bytes[free_order[j]]
            j += 1
        e = buffer_device[b]
        usage[e] += buffer_bytes[b]
        if usage[e] > peak[e]:
            peak[e] = usage[e]
    for op in range(n_ops):
        peak[device[op]] += static_bytes[op]
    return (
        makespan,
        start,
        finish,
        transfer_tensor[:n_transfers],
        transfer_dst[:n_transfers],
        transfer_start[:n_transfers],
        transfer_finish[:n_transfers],
        peak,
    )


@numba.njit(cache=True, parallel=True)
def _simulate_batch(
    devices,
    duration,
    output_pointer,
    outputs,
    consumer_pointer,
    consumers,
    tensor_producer,
    tensor_bytes,
    tensor_static,
    tensor_persistent,
    input_count,
    static_bytes,
    link_bandwidth,
    link_latency,
    n_devices,
):
    n = devices.shape[0]
    runtimes = np.empty(n)
    peaks = np.empty((n, n_devices))
    for i in numba.prange(n):
        result = _simulate(
            devices[i],
            duration,
            output_pointer,
            outputs,
            consumer_pointer,
            consumers,
            tensor_producer,
            tensor_bytes,
            tensor_static,
            tensor_persistent,
            input_count,
            static_bytes,
            link_bandwidth,
            link_latency,
            n_devices,
        )
        runtimes[i] = result[0]
        peaks[i] = result[7]
    return runtimes, peaks


def _static_per_op(task) -> np.ndarray:
    cached = task._cache.get("static_per_op")
    if cached is None:
        cached = np.zeros(task.n_ops)
        cached[: task.n_forward] = task.static_bytes
        task._cache["static_per_op"] = cached
    return cached


def _arguments(task) -> tuple:
    return (
        task.duration,
        task.op_output_pointer,
        task.op_outputs,
        task.tensor_consumer_pointer,
        task.tensor_consumers,
        task.tensor_producer,
        task.tensor_bytes,
        task.tensor_static,
        task.tensor_persistent,
        task.op_input_count,
        _static_per_op(task),
        task.cluster.link_bandwidth,
        task.cluster.link_latency,
        task.n_devices,
    )


def simulate(task, placement, schedule: bool = False) -> SimulationResult:
    """Evaluate one placement (one device index per forward op) of ``task`` with the cost model.

    Returns runtime (makespan, seconds), feasibility (no device over its memory capacity), peak
    memory per device (bytes) and, with ``schedule=True``, the full `Schedule`."""
    device = task.expand(placement).astype(np.int64)
    makespan, start, finish, t_tensor, t_dst, t_start, t_finish, peak = _simulate(device, *_arguments(task))
    feasible = bool(np.all(peak <= task.cluster.memory_capacity))
    timeline = None
    if schedule:
        timeline = Schedule(
            op_device=device.astype(np.int32),
            op_start=start,
            op_finish=finish,
            transfer_tensor=t_tensor.astype(np.int32),
            transfer_src=device[task.tensor_producer[t_tensor]].astype(np.int32),
            transfer_dst=t_dst.astype(np.int32),
            transfer_start=t_start,
            transfer_finish=t_finish,
        )
    return SimulationResult(runtime=float(makespan), feasible=feasible, peak_memory=peak, schedule=timeline)


def simulate_batch(task, placements) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Evaluate many placements of one task at once (parallel over the machine's cores).

    ``placements``: int array ``(batch, n_forward)``. Returns ``(runtimes, feasible, peak_memory)``
    with shapes ``(batch,)``, ``(batch,)``, ``(batch, n_devices)``."""
    rows = task.check_placement(placements, batch=True)
    devices = np.ascontiguousarray(rows[:, task.op_forward], dtype=np.int64)
    runtimes, peaks = _simulate_batch(devices, *_arguments(task))
    feasible = np.all(peaks <= task.cluster.memory_capacity[None, :], axis=1)
    return runtimes, feasible, peaks
