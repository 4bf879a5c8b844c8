"""The fast simulator: list scheduling over a task's arrays, compiled with numba.

Semantics (docs/design.md, section 3), implemented so that the event-driven reference in
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
from placement_gym.task_cache import TaskCache


@numba.njit(cache=True)
def _peak_live_bytes(buffer_device, buffer_bytes, buffer_alloc, buffer_free, horizon, peak):
    """Add to ``peak`` the most bytes live at once on each device.

    One event per allocation (+bytes) and per free (-bytes; a buffer freed at ``inf`` never is,
    an empty buffer changes nothing), swept in time order with frees first at equal times, the
    peak taken after every event (a free never raises it). Byte counts are whole numbers, so the
    sums do not depend on the order of events at equal times.

    The sort is a bucket sort over [0, horizon], linear because event times spread over the step:
    events are copied into their buckets, all frees before all allocations, then one insertion
    sort (stable, so frees stay first at equal times) finishes each bucket. Buffers are made
    roughly in time order, so the copies are nearly sequential and few events move."""
    n_buffers = buffer_device.shape[0]
    n_events = 0
    for b in range(n_buffers):
        if buffer_bytes[b] > 0.0:
            n_events += 2 if buffer_free[b] < np.inf else 1
    n_buckets = n_events + 1
    scale = (n_buckets - 1) / horizon if horizon > 0.0 else 0.0
    end = np.zeros(n_buckets + 1, dtype=np.int64)  # end[k + 1]: events in buckets <= k, then ends
    for b in range(n_buffers):
        if buffer_bytes[b] > 0.0:
            end[min(int(buffer_alloc[b] * scale), n_buckets - 1) + 1] += 1
            if buffer_free[b] < np.inf:
                end[min(int(buffer_free[b] * scale), n_buckets - 1) + 1] += 1
    for k in range(n_buckets):
        end[k + 1] += end[k]
    time = np.empty(n_events)
    change = np.empty(n_events)
    device = np.empty(n_events, dtype=np.int32)
    for b in range(n_buffers):
        if buffer_bytes[b] > 0.0 and buffer_free[b] < np.inf:
            k = min(int(buffer_free[b] * scale), n_buckets - 1)
            i = end[k]
            end[k] = i + 1
            time[i] = buffer_free[b]
            change[i] = -buffer_bytes[b]
            device[i] = buffer_device[b]
    for b in range(n_buffers):
        if buffer_bytes[b] > 0.0:
            k = min(int(buffer_alloc[b] * scale), n_buckets - 1)
            i = end[k]
            end[k] = i + 1
            time[i] = buffer_alloc[b]
            change[i] = buffer_bytes[b]
            device[i] = buffer_device[b]
    # One pass over the whole array: an event never moves past a bucket boundary (the bucket index
    # grows with time), so this sorts every bucket without walking the many empty ones.
    for i in range(1, n_events):
        t = time[i]
        if time[i - 1] > t:
            c, e = change[i], device[i]
            j = i - 1
            while j >= 0 and time[j] > t:
                time[j + 1] = time[j]
                change[j + 1] = change[j]
                device[j + 1] = device[j]
                j -= 1
            time[j + 1] = t
            change[j + 1] = c
            device[j + 1] = e
    usage = np.zeros(peak.shape[0])
    for i in range(n_events):
        e = device[i]
        usage[e] += change[i]
        peak[e] = max(peak[e], usage[e])


# Status codes of `_run` (returned in place of the makespan, which is always positive).
_BAD_DEVICE = -2.0  # a placement entry is not a device index: `Task.check_placement` names it
_STALLED = -1.0  # no device can start an op: the graph is not a DAG in topological order


@numba.njit(cache=True)
def _run(
    placement,
    op_forward,
    duration,
    output_pointer,
    outputs,
    consumer_pointer,
    consumers,
    reader_pointer,
    edge_slot,
    data_inputs,
    tensor_bytes,
    tensor_static,
    tensor_persistent,
    static_bytes,
    link_bandwidth,
    link_latency,
    input_count,
    dispatch_time,
    device_host,
    thread_pointer,
    transfer_sync,
    link_segments,
    n_segments,
    record,
):
    """Simulate one placement of the forward ops. Returns ``(makespan or status, peak, device,
    start, finish, transfer_tensor, transfer_dst, transfer_start, transfer_finish)``; the arrays
    after ``device`` are empty unless ``record`` (the `Schedule` is asked for)."""
    n_ops = op_forward.shape[0]
    n_devices = duration.shape[1]
    n_edges = consumers.shape[0]
    n_records = n_ops if record else 0
    start = np.empty(n_records)
    finish = np.empty(n_records)
    peak = np.zeros(n_devices)
    # Backward and update ops follow their forward op. The range is checked here so that the
    # common call (an int64 array) needs no validation in Python. Each op's time on its device is
    # gathered in this sequential pass: in the schedule loop a row of `duration` would be a cache
    # miss per op on large graphs.
    device = np.empty(n_ops, dtype=np.int32)
    op_time = np.empty(n_ops)
    for op in range(n_ops):
        d = placement[op_forward[op]]
        if d < 0 or d >= n_devices:
            return _BAD_DEVICE, peak, device, start, finish, device[:0], device[:0], start[:0], start[:0]
        device[op] = d
        op_time[op] = duration[op, d]
    # Synchronisation per copy issued (on the producer's device) and per input received from
    # another device (on the reader's): both follow from the placement alone, so they join the op's
    # time here, as ``sync x count`` (the reference computes the same expression).
    # Clusters without sync costs (most presets) skip the pass.
    if transfer_sync.max() > 0.0:
        n_syncs = np.zeros(n_ops)
        sent_to = np.full(n_devices, -1, dtype=np.int64)  # the last tensor counted as sent to a device
        for op in range(n_ops):
            d = device[op]
            for k in range(output_pointer[op], output_pointer[op + 1]):
                t = outputs[k]
                for j in range(consumer_pointer[t], consumer_pointer[t + 1]):
                    c = consumers[j]
                    e = device[c]
                    if e != d:
                        n_syncs[c] += 1.0
                        if sent_to[e] != t:
                            sent_to[e] = t
                            n_syncs[op] += 1.0
        for op in range(n_ops):
            if n_syncs[op] > 0.0:
                op_time[op] = op_time[op] + transfer_sync[device[op]] * n_syncs[op]

    # Live buffers (memory): one per (tensor, device holding it), made as soon as its allocation
    # time is known; its free time grows to the finish of each reader as readers are scheduled.
    # At most one per produced tensor plus one per consumer edge (a received or data-input copy).
    # `reader_buffer` holds, for each consumer edge in reader order (`reader_pointer` ranges),
    # the buffer the reader reads; `edge_slot` maps a consumer edge to that position.
    capacity = tensor_bytes.shape[0] + n_edges
    buffer_device = np.empty(capacity, dtype=np.int32)
    buffer_bytes = np.empty(capacity)
    buffer_alloc = np.empty(capacity)
    buffer_free = np.empty(capacity)
    reader_buffer = np.empty(n_edges, dtype=np.int64)  # -1: none (a static tensor's own copy)
    holder = np.full(n_devices, -1, dtype=np.int64)  # the tensor whose copy on a device is in `copy`
    copy = np.empty(n_devices, dtype=np.int64)  # that copy's buffer (or -1)
    arrival = np.empty(n_devices)  # when that copy is present
    n_buffers = 0
    # Graph data inputs are present at time 0 on every device that reads them.
    for t in data_inputs:
        for j in range(consumer_pointer[t], consumer_pointer[t + 1]):
            e = device[consumers[j]]
            if holder[e] != t:
                holder[e] = t
                copy[e] = n_buffers
                buffer_device[n_buffers] = e
                buffer_bytes[n_buffers] = tensor_bytes[t]
                buffer_alloc[n_buffers] = 0.0
                buffer_free[n_buffers] = 0.0
                n_buffers += 1
            reader_buffer[edge_slot[j]] = copy[e]

    ready = np.zeros(n_ops)
    pending = input_count.copy()
    base = np.zeros(n_devices, dtype=np.int64)
    size = np.zeros(n_devices, dtype=np.int64)
    for op in range(n_ops):
        size[device[op]] += 1
    for d in range(1, n_devices):
        base[d] = base[d - 1] + size[d - 1]
    size[:] = 0
    # Each device's ready ops: a binary min-heap ordered by (ready time, op index) in the slice
    # ``[base[d], base[d] + size[d])``. The key is stored next to the op (a ready time is final when
    # an op enters its heap), so comparisons read adjacent memory. The heap code is written out in
    # the loop below: as functions taking the arrays, numba counts references on every call.
    # The ops ready at time 0, appended in index order, are already a valid heap.
    heap_key = np.zeros(n_ops)
    heap_op = np.empty(n_ops, dtype=np.int64)
    for op in range(n_ops):
        if pending[op] == 0:
            d = device[op]
            heap_op[base[d] + size[d]] = op
            size[d] += 1
    device_free = np.zeros(n_devices)
    link_free = np.zeros((n_devices, n_devices))
    segment_free = np.zeros(n_segments)
    n_route = link_segments.shape[2]
    # Host dispatch: an op's launch may begin once its same-device producers are launched and its
    # received inputs have arrived (`launch_ready`), on the host thread that frees first; launches
    # are issued in the order ops start. Host h's threads are ``thread_pointer[h]:[h + 1]``.
    launch_ready = np.zeros(n_ops)
    launch_end = np.zeros(n_ops)
    thread_free = np.zeros(thread_pointer[-1])
    n_transfer_records = n_edges if record else 0
    transfer_tensor = np.empty(n_transfer_records, dtype=np.int32)
    transfer_dst = np.empty(n_transfer_records, dtype=np.int32)
    transfer_start = np.empty(n_transfer_records)
    transfer_finish = np.empty(n_transfer_records)
    n_transfers = 0
    makespan = 0.0
    for _ in range(n_ops):
        best = -1
        best_start = np.inf
        best_launch = 0.0
        best_thread = -1
        for d in range(n_devices):
            if size[d] > 0:
                h = device_host[d]
                thread = thread_pointer[h]
                for k in range(thread_pointer[h] + 1, thread_pointer[h + 1]):
                    if thread_free[k] < thread_free[thread]:
                        thread = k
                launch = max(thread_free[thread], launch_ready[heap_op[base[d]]])
                s = max(max(device_free[d], heap_key[base[d]]), launch + dispatch_time[d])
                if s < best_start:
                    best_start = s
                    best = d
                    best_launch = launch
                    best_thread = thread
        if best < 0:
            return _STALLED, peak, device, start, finish, device[:0], device[:0], start[:0], start[:0]
        d = best
        # Pop the top of device d's heap: move the last entry down from the root.
        root = base[d]
        op = heap_op[root]
        size[d] -= 1
        n = size[d]
        if n > 0:
            key = heap_key[root + n]
            last = heap_op[root + n]
            i = 0
            while True:
                child = 2 * i + 1
                if child >= n:
                    break
                child_key = heap_key[root + child]
                child_op = heap_op[root + child]
                if child + 1 < n:
                    right_key = heap_key[root + child + 1]
                    right_op = heap_op[root + child + 1]
                    if right_key < child_key or (right_key == child_key and right_op < child_op):
                        child += 1
                        child_key = right_key
                        child_op = right_op
                if key < child_key or (key == child_key and last < child_op):
                    break
                heap_key[root + i] = child_key
                heap_op[root + i] = child_op
                i = child
            heap_key[root + i] = key
            heap_op[root + i] = last
        s = best_start
        f = s + op_time[op]
        launch_end[op] = best_launch + dispatch_time[d]
        thread_free[best_thread] = launch_end[op]
        if record:
            start[op] = s
            finish[op] = f
        device_free[d] = f
        if f > makespan:
            makespan = f
        # Ops on one device finish in the order they start, so the last reader to run sets the free
        # time of each copy it reads (the max keeps a producer's copy alive for its transfers).
        for k in range(reader_pointer[op], reader_pointer[op + 1]):
            b = reader_buffer[k]
            if b >= 0 and f > buffer_free[b]:
                buffer_free[b] = f
        for k in range(output_pointer[op], output_pointer[op + 1]):
            t = outputs[k]
            nbytes = tensor_bytes[t]
            own = -1
            if not tensor_static[t]:  # a static tensor's producer-side memory is in static_bytes
                own = n_buffers
                buffer_device[own] = d
                buffer_bytes[own] = nbytes
                buffer_alloc[own] = s
                buffer_free[own] = np.inf if tensor_persistent[t] else f
                n_buffers += 1
            # The devices that read t (marked in `holder`), then one copy per other device, sent in
            # device order: links that share a segment take their turns in that order.
            for j in range(consumer_pointer[t], consumer_pointer[t + 1]):
                holder[device[consumers[j]]] = t
            for e in range(n_devices):
                if holder[e] != t:
                    continue
                if e == d:
                    arrival[e] = f
                    copy[e] = own
                    continue
                begin = max(link_free[d, e], f)
                for r in range(n_route):
                    g = link_segments[d, e, r]
                    if g >= 0 and segment_free[g] > begin:
                        begin = segment_free[g]
                end = begin + (link_latency[d, e] + nbytes / link_bandwidth[d, e])
                link_free[d, e] = end
                for r in range(n_route):
                    g = link_segments[d, e, r]
                    if g >= 0:
                        segment_free[g] = end
                arrival[e] = end
                copy[e] = n_buffers
                buffer_device[n_buffers] = e
                buffer_bytes[n_buffers] = nbytes
                buffer_alloc[n_buffers] = begin
                buffer_free[n_buffers] = begin
                n_buffers += 1
                if own >= 0 and end > buffer_free[own]:
                    buffer_free[own] = end
                if record:
                    transfer_tensor[n_transfers] = t
                    transfer_dst[n_transfers] = e
                    transfer_start[n_transfers] = begin
                    transfer_finish[n_transfers] = end
                    n_transfers += 1
            for j in range(consumer_pointer[t], consumer_pointer[t + 1]):
                c = consumers[j]
                e = device[c]
                reader_buffer[edge_slot[j]] = copy[e]
                a = arrival[e]
                if a > ready[c]:
                    ready[c] = a
                # Same-device readers may be launched once this op is (stream order); others wait
                # for the copy.
                launch_after = launch_end[op] if e == d else a
                if launch_after > launch_ready[c]:
                    launch_ready[c] = launch_after
                pending[c] -= 1
                if pending[c] == 0:
                    # Push c on device e's heap: move it up from the end.
                    root = base[e]
                    key = ready[c]
                    i = size[e]
                    size[e] += 1
                    while i > 0:
                        parent = (i - 1) // 2
                        parent_key = heap_key[root + parent]
                        if parent_key < key or (parent_key == key and heap_op[root + parent] < c):
                            break
                        heap_key[root + i] = parent_key
                        heap_op[root + i] = heap_op[root + parent]
                        i = parent
                    heap_key[root + i] = key
                    heap_op[root + i] = c

    _peak_live_bytes(
        buffer_device[:n_buffers],
        buffer_bytes[:n_buffers],
        buffer_alloc[:n_buffers],
        buffer_free[:n_buffers],
        makespan,
        peak,
    )
    for op in range(n_ops):
        peak[device[op]] += static_bytes[op]
    return (
        makespan,
        peak,
        device,
        start,
        finish,
        transfer_tensor[:n_transfers],
        transfer_dst[:n_transfers],
        transfer_start[:n_transfers],
        transfer_finish[:n_transfers],
    )


@numba.njit(cache=True)
def _simulate_one(placement, arrays, memory_capacity):
    """Makespan (or a status), peak memory and feasibility of one placement (`_arrays` order)."""
    result = _run(placement, *arrays, False)
    peak = result[1]
    feasible = True
    for d in range(peak.shape[0]):
        if not peak[d] <= memory_capacity[d]:
            feasible = False
    return result[0], peak, feasible


@numba.njit(cache=True, parallel=True)
def _simulate_batch(placements, arrays):
    """Makespans and peak memory of many placements, rows in parallel (each call of `_run` has its
    own scratch arrays)."""
    n = placements.shape[0]
    runtimes = np.empty(n)
    peaks = np.empty((n, arrays[1].shape[1]))
    for i in numba.prange(n):
        result = _run(placements[i], *arrays, False)
        runtimes[i] = result[0]
        peaks[i] = result[1]
    return runtimes, peaks


def _build_arrays(task) -> tuple:
    """The task's arrays in `_run`'s order, with the per-task ones it needs built."""
    static_per_op = np.zeros(task.n_ops)
    static_per_op[: task.n_forward] = task.static_bytes
    # Consumer edges in reader order: a scheduled op reads the buffers of its inputs from one
    # contiguous range (see `_run`).
    by_reader = np.argsort(task.tensor_consumers, kind="stable")
    edge_slot = np.empty(len(by_reader), dtype=np.int64)
    edge_slot[by_reader] = np.arange(len(by_reader))
    reader_pointer = np.zeros(task.n_ops + 1, dtype=np.int64)
    np.cumsum(np.bincount(task.tensor_consumers, minlength=task.n_ops), out=reader_pointer[1:])
    return (
        np.ascontiguousarray(task.op_forward, dtype=np.int64),
        task.duration,
        task.op_output_pointer,
        task.op_outputs,
        task.tensor_consumer_pointer,
        task.tensor_consumers,
        reader_pointer,
        edge_slot,
        np.flatnonzero(task.tensor_producer < 0),
        task.tensor_bytes,
        task.tensor_static,
        task.tensor_persistent,
        static_per_op,
        task.cluster.link_bandwidth,
        task.cluster.link_latency,
        task.op_input_count,
        task.cluster.dispatch_time,
        np.ascontiguousarray(task.cluster.device_host, dtype=np.int64),
        np.concatenate([[0], np.cumsum(task.cluster.host_dispatch_threads)]).astype(np.int64),
        task.cluster.transfer_sync,
        np.ascontiguousarray(task.cluster.link_segments, dtype=np.int64),
        len(task.cluster.segment_names),
    )


# Built once per task, not per call: `simulate`'s hot path fetches them with one dict lookup.
_ARRAYS: TaskCache[tuple] = TaskCache("fast_arrays")
# The task's arrays in `_run`'s order (`_build_arrays`), cached.
_arrays = _ARRAYS.getter(_build_arrays)


def _placement_array(task, placement) -> np.ndarray:
    """``placement`` as an int64 array of the right shape; the common case needs no conversion (the
    device range is checked in the kernel), anything else goes through `Task.check_placement`."""
    if (
        type(placement) is np.ndarray
        and placement.dtype == np.int64
        and placement.shape == (task.n_forward,)
        and placement.flags.c_contiguous
    ):
        return placement
    return task.check_placement(placement)


def _check_status(task, placement, status: float, batch: bool = False) -> None:
    """Raise the error a negative status of `_run` stands for."""
    if status == _BAD_DEVICE:
        task.check_placement(placement, batch=batch)  # raises the clear error naming op and device
    if status < 0.0:
        raise RuntimeError(f"task {task.id}: the simulation stalled; its graph is not in topological order")


def simulate(task, placement, schedule: bool = False) -> SimulationResult:
    """Evaluate one placement (one device index per forward op) of ``task`` with the cost model.

    Returns runtime (makespan, seconds), feasibility (no device over its memory capacity), peak
    memory per device (bytes) and, with ``schedule=True``, the full `Schedule`. Adds one to
    ``task.evaluations``."""
    array = _placement_array(task, placement)
    arrays = _arrays(task)
    timeline = None
    if schedule:
        makespan, peak, device, start, finish, t_tensor, t_dst, t_start, t_finish = _run(array, *arrays, True)
        _check_status(task, placement, makespan)
        timeline = Schedule(
            op_device=device,
            op_start=start,
            op_finish=finish,
            transfer_tensor=t_tensor,
            transfer_src=device[task.tensor_producer[t_tensor]],
            transfer_dst=t_dst,
            transfer_start=t_start,
            transfer_finish=t_finish,
        )
        feasible = bool(np.all(peak <= task.cluster.memory_capacity))
    else:
        makespan, peak, feasible = _simulate_one(array, arrays, task.cluster.memory_capacity)
        _check_status(task, placement, makespan)
    task.count_evaluations(1, makespan, feasible)  # the task's counter (`Task.evaluations`) and trace
    return SimulationResult(runtime=float(makespan), feasible=feasible, peak_memory=peak, schedule=timeline)


def simulate_batch(task, placements) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Evaluate many placements of one task at once (parallel over the machine's cores).

    ``placements``: int array ``(batch, n_forward)``. Returns ``(runtimes, feasible, peak_memory)``
    with shapes ``(batch,)``, ``(batch,)``, ``(batch, n_devices)``. Adds ``batch`` to
    ``task.evaluations``."""
    rows = np.ascontiguousarray(task.check_placement(placements, batch=True))
    runtimes, peaks = _simulate_batch(rows, _arrays(task))
    _check_status(task, rows, float(runtimes.min(initial=1.0)), batch=True)
    feasible = np.all(peaks <= task.cluster.memory_capacity[None, :], axis=1)
    task.count_evaluations(len(rows), runtimes, feasible)  # one evaluation per row (`Task.evaluations`)
    return runtimes, feasible, peaks
