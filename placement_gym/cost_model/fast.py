"""The fast simulator: list scheduling over a task's arrays, compiled with numba.

Semantics (docs/design.md, section 3), implemented so that the event-driven reference in
`reference.py` gives bit-identical results:

* each device runs one op at a time; a free device takes, among the ops whose inputs are all on
  it, the one that became ready first, ties by index; it waits when none is ready. In a pipelined
  step (more than one micro-batch, docs/cost_model.md "Pipelined steps") a device that can next
  start at ``t`` = max(its free time, the earliest ready time of its ops) takes, among its ops ready
  by ``t``, the lowest micro-batch (`Task.op_microbatch`, an update op counting as the last), then
  the earliest ready, then the lowest index; with one micro-batch that is the rule above;
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
``s`` is already known, because its producers started before ``s``. The pipelined rule keeps this:
the start ``s`` of the op it picks is at least ``t`` (the op is ready by ``t``, and ``t`` is the
device's free time or that op's own ready time), an op not yet known becomes ready after ``s``, so
the ops ready by ``t`` (and ``t`` itself) are final when the device commits; and a later commit
never starts before ``s`` (a device's pick changes only when a new op arrives, ready after ``s``).
Host dispatch follows the picked op (its launch time), so both simulators pick before they time.
"""

from __future__ import annotations

import numba
import numpy as np

from placement_gym.cost_model.result import Schedule, SimulationResult
from placement_gym.task.cache import TaskCache

# The packed layout. `_pack` concatenates a task's int arrays into one int64 array and its float arrays
# into one float64 array, so that a call hands numba a few arrays instead of twenty-odd (unboxing each
# argument costs about as much as simulating a few ops of a small graph). The int array starts with a
# header: the sizes below, then where each int field starts and ends, then the same for float fields.
(_N_OPS, _N_FORWARD, _N_DEVICES, _N_TENSORS, _N_EDGES, _N_SEGMENTS, _N_ROUTE, _N_THREADS, _N_HOSTS,
 _N_MICROBATCHES) = range(10)
_INT_FIELDS = (
    "op_forward", "output_pointer", "outputs", "consumer_pointer", "consumers", "reader_pointer",
    "edge_slot", "data_inputs", "input_count", "device_host", "thread_pointer", "link_segments",
    "tensor_static", "tensor_persistent", "op_microbatch",
)
_FLOAT_FIELDS = (
    "duration", "tensor_bytes", "static_bytes", "link_bandwidth", "link_latency", "dispatch_time",
    "transfer_sync", "memory_capacity",
)
_INT_AT = 10  # int field k is ints[ints[_INT_AT + k] : ints[_INT_AT + k + 1]]
_FLOAT_AT = _INT_AT + len(_INT_FIELDS) + 1  # float field k is floats[ints[_FLOAT_AT + k] : ...]
_HEADER = _FLOAT_AT + len(_FLOAT_FIELDS) + 1

# Status codes of `_run` (returned in place of the makespan, which is always positive).
_BAD_DEVICE = -2.0  # a placement entry is not a device index, or the length is wrong: `check_placement`
_STALLED = -1.0  # no device can start an op: the graph is not a DAG in topological order
_BAD_WORKSPACE = -3.0  # the workspace is smaller than `_work_sizes` says (a bug, never a user error)


@numba.njit(cache=True)
def _field(values, ints, at):
    """The field whose bounds are at ``ints[at : at + 2]``."""
    return values[ints[at] : ints[at + 1]]


@numba.njit(cache=True)
def _int_fields(ints):
    """The int fields, in `_INT_FIELDS` order (2-D fields flattened: ``link_segments[(d * n_devices
    + e) * n_route + r]``)."""
    return (
        _field(ints, ints, _INT_AT + 0),
        _field(ints, ints, _INT_AT + 1),
        _field(ints, ints, _INT_AT + 2),
        _field(ints, ints, _INT_AT + 3),
        _field(ints, ints, _INT_AT + 4),
        _field(ints, ints, _INT_AT + 5),
        _field(ints, ints, _INT_AT + 6),
        _field(ints, ints, _INT_AT + 7),
        _field(ints, ints, _INT_AT + 8),
        _field(ints, ints, _INT_AT + 9),
        _field(ints, ints, _INT_AT + 10),
        _field(ints, ints, _INT_AT + 11),
        _field(ints, ints, _INT_AT + 12),
        _field(ints, ints, _INT_AT + 13),
        _field(ints, ints, _INT_AT + 14),
    )


@numba.njit(cache=True)
def _float_fields(ints, floats):
    """The float fields, in `_FLOAT_FIELDS` order (``duration[op * n_devices + d]``,
    ``link_*[d * n_devices + e]``)."""
    return (
        _field(floats, ints, _FLOAT_AT + 0),
        _field(floats, ints, _FLOAT_AT + 1),
        _field(floats, ints, _FLOAT_AT + 2),
        _field(floats, ints, _FLOAT_AT + 3),
        _field(floats, ints, _FLOAT_AT + 4),
        _field(floats, ints, _FLOAT_AT + 5),
        _field(floats, ints, _FLOAT_AT + 6),
        _field(floats, ints, _FLOAT_AT + 7),
    )


@numba.njit(cache=True)
def _work_sizes(ints):
    """Lengths of the int64 and float64 workspaces that `_run` carves its scratch arrays from."""
    n_ops, n_devices, n_edges = ints[_N_OPS], ints[_N_DEVICES], ints[_N_EDGES]
    capacity = ints[_N_TENSORS] + n_edges  # live buffers: one per tensor and per consumer edge at most
    n_int = 3 * n_ops + 8 * n_devices + 4 * capacity + n_edges + ints[_N_HOSTS]
    n_float = (7 * n_ops + 7 * n_devices + n_devices * n_devices + 3 * capacity + ints[_N_SEGMENTS]
               + ints[_N_THREADS] + ints[_N_HOSTS] + 2 * capacity + 2 * (2 * capacity))
    return n_int, n_float


# A cell of `_peak_live_bytes` with more events than this is sorted in n log n, not by insertion.
_FEW_EVENTS = 32


@numba.njit(cache=True)
def _peak_live_bytes(buffer_device, buffer_bytes, buffer_alloc, buffer_free, horizon, peak, grown,
                     usage_at, head, after, time, change, usage):
    """Set ``peak`` (zeros on entry) to the most bytes live at once on each device (``grown``,
    ``usage_at``: scratch, at least buffers + devices long; ``head`` the same, int; ``after``: int,
    2 * buffers; ``time``, ``change``: 2 * buffers; ``usage``: devices).

    One event per allocation (+bytes) and per free (-bytes; a buffer freed at ``inf`` never is;
    every buffer has bytes), in time order with frees first at equal times, the peak taken after
    every event (a free never raises it). Byte counts are whole numbers, so the sums do not depend
    on the order in which they are added.

    Sorting every event is not needed. Time [0, horizon] is cut into buckets, about two events per
    device each; a cell is one bucket of one device. One pass over the buffers sums each cell's
    allocations (``grown``) and its change (``usage_at``) and links its events in a list (``head``,
    then ``after``; event 2b is buffer b's allocation, 2b + 1 its free). One pass over the cells in
    time order turns the sums into the usage when the cell begins and the most it can reach inside
    it (that plus its allocations), and takes as a first peak the usage at the end of every cell,
    which the sweep passes through. Only a cell whose bound is above its device's first peak can
    hold a higher one: only its events are sorted (by time, frees first) and swept from its
    starting usage. Few cells pass, so most events are added twice and never sorted. Where events bunch
    in time (the expert's placement of `llama2_70b/dgx-h100x4/train+bf16+rc`: 28k of its 34k events in
    118 cells, up to 631 in one), a cell of more than `_FEW_EVENTS` is sorted by time
    in n log n instead of by insertion (n squared); it gives the same peaks."""
    n_buffers = buffer_device.shape[0]
    n_devices = peak.shape[0]
    n_buckets = n_buffers // n_devices + 1
    n_cells = n_buckets * n_devices
    scale = (n_buckets - 1) / horizon if horizon > 0.0 else 0.0
    grown = grown[:n_cells]
    usage_at = usage_at[:n_cells]
    head = head[:n_cells]
    grown[:] = 0.0
    usage_at[:] = 0.0
    head[:] = -1
    # Cells are bucket-major: buffers are made roughly in time order, so neighbouring buffers hit
    # neighbouring cells.
    for b in range(n_buffers):
        e = buffer_device[b]
        nbytes = buffer_bytes[b]
        cell = min(int(buffer_alloc[b] * scale), n_buckets - 1) * n_devices + e
        grown[cell] += nbytes
        usage_at[cell] += nbytes
        after[2 * b] = head[cell]
        head[cell] = 2 * b
        if buffer_free[b] < np.inf:
            cell = min(int(buffer_free[b] * scale), n_buckets - 1) * n_devices + e
            usage_at[cell] -= nbytes
            after[2 * b + 1] = head[cell]
            head[cell] = 2 * b + 1
    usage[:] = 0.0
    cell = 0
    for _ in range(n_buckets):
        for e in range(n_devices):
            begin = usage[e]
            grown[cell] += begin
            usage[e] = begin + usage_at[cell]
            usage_at[cell] = begin
            if usage[e] > peak[e]:
                peak[e] = usage[e]
            cell += 1
    cell = 0
    for _ in range(n_buckets):
        for e in range(n_devices):
            if grown[cell] > peak[e]:
                # The cell's events, sorted by insertion (by time, frees first) as they are taken
                # from its list; past `_FEW_EVENTS` of them, only appended (sorted below).
                n = 0
                event = head[cell]
                while event >= 0:
                    b = event >> 1
                    if event & 1:
                        t = buffer_free[b]
                        c = -buffer_bytes[b]
                    else:
                        t = buffer_alloc[b]
                        c = buffer_bytes[b]
                    if n < _FEW_EVENTS:
                        j = n - 1
                        while j >= 0 and (time[j] > t or (time[j] == t and change[j] > 0.0 and c < 0.0)):
                            time[j + 1] = time[j]
                            change[j + 1] = change[j]
                            j -= 1
                        time[j + 1] = t
                        change[j + 1] = c
                    else:
                        time[n] = t
                        change[n] = c
                    n += 1
                    event = after[event]
                u = usage_at[cell]
                if n <= _FEW_EVENTS:
                    for i in range(n):
                        u += change[i]
                        if u > peak[e]:
                            peak[e] = u
                else:
                    # A crowded cell (events bunched in time): sorted by time in n log n. At one time
                    # the frees come first and the allocations then only raise the usage, so the
                    # most reached at that time is the usage after all of its events.
                    order = np.argsort(time[:n])
                    i = 0
                    while i < n:
                        t = time[order[i]]
                        while i < n and time[order[i]] == t:
                            u += change[order[i]]
                            i += 1
                        if u > peak[e]:
                            peak[e] = u
            cell += 1


# The passes of `_run` that run once per simulation, one job each. A compiled function counts
# references to every array it takes, on every call (inlined by numba or not): once per simulation
# this is lost in the noise, but `_run`'s commit loop keeps its per-op work (ready queues, host
# threads, transfers, buffers) written out, because as functions, inlined or as closures, that work
# ran 10-27% slower (docs/cost_model.md, "Speed").


@numba.njit(cache=True, inline="always")
def _take(work, at, n):
    """``(work[at : at + n], at + n)``: the next scratch array carved from a workspace, and where the
    one after it starts."""
    return work[at : at + n], at + n


@numba.njit(cache=True)
def _gather_op_times(placement, op_forward, duration, n_devices, device, op_time):
    """Fill ``device`` (each op's: its forward op's device in ``placement``) and ``op_time`` (its
    duration there, ``duration[op * n_devices + d]``); False, leaving them partial, when an entry of
    the placement is not a device index."""
    # Backward and update ops follow their forward op. The range is checked here so that the
    # common call (an int64 array) needs no validation in Python. Each op's time on its device is
    # gathered in this sequential pass: in the schedule loop a row of `duration` would be a cache
    # miss per op on large graphs.
    for op in range(device.shape[0]):
        d = placement[op_forward[op]]
        if d < 0 or d >= n_devices:
            return False
        device[op] = d
        op_time[op] = duration[op * n_devices + d]
    return True


@numba.njit(cache=True)
def _add_transfer_syncs(device, op_time, output_pointer, outputs, consumer_pointer, consumers, transfer_sync,
                        n_syncs, sent_to):
    """Add to ``op_time`` the synchronisation of every copy an op issues (on the producer's device,
    one per output tensor and other reading device) and of every input it receives from another
    device (on the reader's), ``transfer_sync[d] x count``: both follow from the placement alone (the
    reference computes the same expression). ``n_syncs`` (ops), ``sent_to`` (devices): scratch."""
    # Clusters without sync costs (most presets) skip the pass.
    if not transfer_sync.max() > 0.0:
        return
    n_syncs[:] = 0.0
    sent_to[:] = -1  # the last tensor counted as sent to a device
    for op in range(device.shape[0]):
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
    for op in range(device.shape[0]):
        if n_syncs[op] > 0.0:
            op_time[op] = op_time[op] + transfer_sync[device[op]] * n_syncs[op]


@numba.njit(cache=True)
def _cutoff_bounds(device, op_time, output_pointer, outputs, consumer_pointer, consumers, tensor_bytes,
                   link_latency, link_bandwidth, left, tail):
    """Fill ``left`` (each device's total op time) and ``tail`` (each op's longest path after it: of
    its consumers' times and, between devices, each copy's time on its link), what the cutoff's lower
    bound is made of (`_run`)."""
    n_devices = left.shape[0]
    left[:] = 0.0
    for op in range(device.shape[0]):
        left[device[op]] += op_time[op]
    # A copy starts no earlier than its producer's finish, whatever waits on the link, and a reader
    # starts no earlier than its input's arrival.
    for op in range(device.shape[0] - 1, -1, -1):
        d = device[op]
        longest = 0.0
        for k in range(output_pointer[op], output_pointer[op + 1]):
            t = outputs[k]
            for j in range(consumer_pointer[t], consumer_pointer[t + 1]):
                c = consumers[j]
                if c <= op:  # not in topological order (never in a valid task): left out, still a bound
                    continue
                e = device[c]
                after = op_time[c] + tail[c]
                if e != d:
                    link = d * n_devices + e
                    after = (link_latency[link] + tensor_bytes[t] / link_bandwidth[link]) + after
                if after > longest:
                    longest = after
        tail[op] = longest


@numba.njit(cache=True)
def _place_data_inputs(data_inputs, consumer_pointer, consumers, edge_slot, device, tensor_bytes, holder,
                       copy, reader_buffer, buffer_device, buffer_bytes, buffer_alloc, buffer_free):
    """Give each graph data input a buffer at time 0 on every device that reads it (none when empty)
    and its readers that buffer (``reader_buffer``); ``holder`` and ``copy`` are reset first. Returns
    the count of buffers."""
    holder[:] = -1
    n_buffers = 0
    for t in data_inputs:
        for j in range(consumer_pointer[t], consumer_pointer[t + 1]):
            e = device[consumers[j]]
            if holder[e] != t:
                holder[e] = t
                copy[e] = -1
                if tensor_bytes[t] > 0.0:
                    copy[e] = n_buffers
                    buffer_device[n_buffers] = e
                    buffer_bytes[n_buffers] = tensor_bytes[t]
                    buffer_alloc[n_buffers] = 0.0
                    buffer_free[n_buffers] = 0.0
                    n_buffers += 1
            reader_buffer[edge_slot[j]] = copy[e]
    return n_buffers


@numba.njit(cache=True)
def _start_ready_queues(device, input_count, pending, base, size, heap_op, heap_key):
    """Lay out each device's ready queue (a binary min-heap in ``heap_op[base[d] : base[d] + size[d]]``,
    its keys beside it in ``heap_key``, room for every op of the device) and put in it the ops that
    wait for no input, ready at time 0; ``pending`` = each op's count of inputs to wait for."""
    pending[:] = input_count
    size[:] = 0
    for op in range(device.shape[0]):
        size[device[op]] += 1
    base[0] = 0
    for d in range(1, base.shape[0]):
        base[d] = base[d - 1] + size[d - 1]
    size[:] = 0
    # The ops ready at time 0, appended in index order, are already a valid heap.
    for op in range(device.shape[0]):
        if pending[op] == 0:
            d = device[op]
            heap_op[base[d] + size[d]] = op
            heap_key[base[d] + size[d]] = 0.0
            size[d] += 1


@numba.njit(cache=True)
def _run(placement, ints, floats, work_i, work_f, peak, record, cutoff):
    """Simulate one placement of the forward ops; write each device's peak memory into ``peak``.

    ``ints``, ``floats``: the task packed by `_pack`; ``work_i``, ``work_f``: workspaces at least as
    long as `_work_sizes` says (overwritten). Returns ``(makespan or status, device, start, finish,
    transfer_tensor, transfer_dst, transfer_start, transfer_finish, cut)``; the arrays after ``device``
    (a view of the workspace) are new, and empty unless ``record`` (the `Schedule` is asked for).

    ``cutoff`` (seconds; inf: none): the run stops as soon as a proven lower bound on the makespan
    exceeds it (``cut`` True). The makespan returned is then that bound, ``peak`` is NaN, and the
    schedule's arrays are partial. Uncut, the run is the full one, number for number: the bound is
    only read. The bound, at each commit of op o on device d finishing at f, is the larger of
    ``f + tail[o]`` (the longest path after o, of its ops' times and of its copies' times on their
    links, without waiting: every consumer starts after its inputs arrive) and ``f + left[d]`` (the
    times of d's ops not yet started: d runs them one at a time, after f), scaled down by
    ``1 - 8 (n_ops + 2) eps``: both are sums rounded in another order than the schedule's own, each
    rounding a relative error of at most eps on positive numbers (``left[d]`` is kept by subtraction,
    off by at most n_ops eps times d's whole work, which is itself at most the makespan).

    Its passes: the workspace carved (`_take`), each op's device and time (`_gather_op_times`,
    `_add_transfer_syncs`), the cutoff's bounds (`_cutoff_bounds`), the data inputs' buffers
    (`_place_data_inputs`), the ready queues filled (`_start_ready_queues`); then the commit loop,
    written out (the comment above `_take` says why), one op a turn: the device whose next op starts
    first, its heap popped, its host thread taken, its outputs' buffers made and their copies sent on
    their links, its readers told; then the peak memory (`_peak_live_bytes`)."""
    (op_forward, output_pointer, outputs, consumer_pointer, consumers, reader_pointer, edge_slot,
     data_inputs, input_count, device_host, thread_pointer, link_segments, tensor_static,
     tensor_persistent, op_microbatch) = _int_fields(ints)
    (duration, tensor_bytes, static_bytes, link_bandwidth, link_latency, dispatch_time, transfer_sync,
     _) = _float_fields(ints, floats)
    n_ops, n_devices, n_edges = ints[_N_OPS], ints[_N_DEVICES], ints[_N_EDGES]
    n_route, n_hosts = ints[_N_ROUTE], ints[_N_HOSTS]
    capacity = ints[_N_TENSORS] + n_edges

    # Scratch arrays, carved from the workspaces (`_work_sizes` counts them).
    wi = 0
    device, wi = _take(work_i, wi, n_ops)
    sent_to, wi = _take(work_i, wi, n_devices)
    buffer_device, wi = _take(work_i, wi, capacity)
    reader_buffer, wi = _take(work_i, wi, n_edges)
    holder, wi = _take(work_i, wi, n_devices)
    copy, wi = _take(work_i, wi, n_devices)
    pending, wi = _take(work_i, wi, n_ops)
    base, wi = _take(work_i, wi, n_devices)
    size, wi = _take(work_i, wi, n_devices)
    heap_op, wi = _take(work_i, wi, n_ops)
    thread_head, wi = _take(work_i, wi, n_hosts)
    dst, wi = _take(work_i, wi, n_devices)
    chosen, wi = _take(work_i, wi, n_devices)
    cell_first, wi = _take(work_i, wi, capacity + n_devices)
    event_after, wi = _take(work_i, wi, 2 * capacity)
    wf = 0
    op_time, wf = _take(work_f, wf, n_ops)
    n_syncs, wf = _take(work_f, wf, n_ops)
    buffer_bytes, wf = _take(work_f, wf, capacity)
    buffer_alloc, wf = _take(work_f, wf, capacity)
    buffer_free, wf = _take(work_f, wf, capacity)
    arrival, wf = _take(work_f, wf, n_devices)
    ready, wf = _take(work_f, wf, n_ops)
    heap_key, wf = _take(work_f, wf, n_ops)
    device_free, wf = _take(work_f, wf, n_devices)
    device_next, wf = _take(work_f, wf, n_devices)
    link_free, wf = _take(work_f, wf, n_devices * n_devices)
    segment_free, wf = _take(work_f, wf, ints[_N_SEGMENTS])
    launch_ready, wf = _take(work_f, wf, n_ops)
    launch_end, wf = _take(work_f, wf, n_ops)
    thread_free, wf = _take(work_f, wf, ints[_N_THREADS])
    host_free, wf = _take(work_f, wf, n_hosts)
    cell_grown, wf = _take(work_f, wf, capacity + n_devices)
    cell_usage, wf = _take(work_f, wf, capacity + n_devices)
    event_time, wf = _take(work_f, wf, 2 * capacity)
    event_change, wf = _take(work_f, wf, 2 * capacity)
    usage, wf = _take(work_f, wf, n_devices)
    left, wf = _take(work_f, wf, n_devices)
    tail, wf = _take(work_f, wf, n_ops)

    # The schedule's arrays: new when it is recorded, else empty views (no allocation on the hot path).
    if record:
        start = np.empty(n_ops)
        finish = np.empty(n_ops)
        transfer_tensor = np.empty(n_edges, dtype=np.int64)
        transfer_dst = np.empty(n_edges, dtype=np.int64)
        transfer_start = np.empty(n_edges)
        transfer_finish = np.empty(n_edges)
    else:
        start = finish = transfer_start = transfer_finish = work_f[:0]
        transfer_tensor = transfer_dst = work_i[:0]
    peak[:] = 0.0
    if wi > work_i.shape[0] or wf > work_f.shape[0]:
        return _BAD_WORKSPACE, device, start, finish, transfer_tensor, transfer_dst, start, finish, False
    if placement.shape[0] != ints[_N_FORWARD]:
        return _BAD_DEVICE, device, start, finish, transfer_tensor, transfer_dst, start, finish, False
    if not _gather_op_times(placement, op_forward, duration, n_devices, device, op_time):
        return _BAD_DEVICE, device, start, finish, transfer_tensor, transfer_dst, start, finish, False
    _add_transfer_syncs(device, op_time, output_pointer, outputs, consumer_pointer, consumers, transfer_sync,
                        n_syncs, sent_to)
    cutting = cutoff < np.inf
    slack = 1.0 - 8.0 * (n_ops + 2) * 2.220446049250313e-16
    if cutting:
        _cutoff_bounds(device, op_time, output_pointer, outputs, consumer_pointer, consumers, tensor_bytes,
                       link_latency, link_bandwidth, left, tail)

    # Live buffers (memory): one per (tensor, device holding it), made as soon as its allocation
    # time is known; its free time grows to the finish of each reader as readers are scheduled.
    # At most one per produced tensor plus one per consumer edge (a received or data-input copy).
    # `reader_buffer` holds, for each consumer edge in reader order (`reader_pointer` ranges),
    # the buffer the reader reads (-1: none, a static tensor's own copy or an empty tensor);
    # `edge_slot` maps a consumer edge to that position. ``holder[e]``: the tensor whose copy on device e is
    # ``copy[e]`` (a buffer, or -1), present from ``arrival[e]``.
    # An empty tensor changes no device's memory, so it gets no buffer (-1) at all. A persistent
    # output (``buffer_free`` inf) is never freed.
    n_buffers = _place_data_inputs(data_inputs, consumer_pointer, consumers, edge_slot, device, tensor_bytes,
                                   holder, copy, reader_buffer, buffer_device, buffer_bytes, buffer_alloc,
                                   buffer_free)
    ready[:] = 0.0
    # Each device's ready ops: a binary min-heap ordered by (ready time, op index). The key is stored
    # next to the op (a ready time is final when an op enters its heap), so comparisons read adjacent
    # memory.
    _start_ready_queues(device, input_count, pending, base, size, heap_op, heap_key)
    device_free[:] = 0.0
    link_free[:] = 0.0
    segment_free[:] = 0.0
    # Host dispatch: an op's launch may begin once its same-device producers are launched and its
    # received inputs have arrived (`launch_ready`), on the host thread that frees first; launches
    # are issued in the order ops start. Only the earliest free time among a host's threads matters
    # (the launch takes that thread; which of several equal ones does is not observable), so host h
    # keeps its threads' free times ``thread_pointer[h]:[h + 1]`` as a sorted ring starting at
    # offset ``thread_head[h]``, and the earliest in ``host_free[h]``. A launch ends no earlier than
    # the time it replaces and usually after every other thread's, so it is put back from the end of
    # the ring, mostly without moving any entry (a binary heap would move it to the bottom).
    launch_ready[:] = 0.0
    thread_free[:] = 0.0
    thread_head[:] = 0
    host_free[:] = 0.0
    # A pipelined step (more than one micro-batch) chooses each device's op by micro-batch first.
    pipelined = ints[_N_MICROBATCHES] > 1
    # Each device's next op is at heap position ``chosen[d]`` (-1: to be found again, after its heap or
    # free time changed), and ``device_next[d]`` is when it could start leaving out the host thread:
    # max(free time, ready time, launch_ready + dispatch). Its start is then ``max(device_next[d],
    # earliest thread + dispatch)``, the same number as max(free, ready, max(thread, launch_ready) +
    # dispatch) (rounding is monotonic, so adding the dispatch time commutes with max). Caching it leaves
    # the per-commit scan over devices a few loads each; only the devices whose heaps changed are
    # recomputed.
    chosen[:] = -1
    n_transfers = 0
    makespan = 0.0
    for _ in range(n_ops):
        best = -1
        best_start = np.inf
        for d in range(n_devices):
            if chosen[d] < 0:
                root = base[d]
                at = 0
                if size[d] == 0:
                    device_next[d] = np.inf
                elif pipelined:
                    # The device's op: among its heap's ops ready by t (the heap holds every op of d
                    # that can be ready by then), the lowest micro-batch, then the earliest ready,
                    # then the lowest index.
                    t = max(device_free[d], heap_key[root])
                    at_op = heap_op[root]
                    at_key = heap_key[root]
                    at_batch = op_microbatch[at_op]
                    for i in range(1, size[d]):
                        key = heap_key[root + i]
                        if key <= t:
                            other = heap_op[root + i]
                            batch = op_microbatch[other]
                            if batch < at_batch or (batch == at_batch and (
                                    key < at_key or (key == at_key and other < at_op))):
                                at = i
                                at_op = other
                                at_key = key
                                at_batch = batch
                # Else: the top of its heap, the earliest ready, ties by index.
                chosen[d] = at
                if size[d] > 0:
                    top = root + at
                    device_next[d] = max(max(device_free[d], heap_key[top]),
                                         launch_ready[heap_op[top]] + dispatch_time[d])
            s = max(device_next[d], host_free[device_host[d]] + dispatch_time[d])
            if s < best_start:
                best_start = s
                best = d
        if best < 0:
            return _STALLED, device, start, finish, transfer_tensor, transfer_dst, start, finish, False
        d = best
        best_at = chosen[d]
        # Pop device d's op off its heap. A pipelined step's op may lie below the root: it is brought
        # up first, each entry on its path moving down one slot (where all below it are still no
        # smaller, so the heap order holds under the root), then popped as the root.
        root = base[d]
        if best_at > 0:
            key = heap_key[root + best_at]
            last = heap_op[root + best_at]
            i = best_at
            while i > 0:
                parent = (i - 1) // 2
                heap_key[root + i] = heap_key[root + parent]
                heap_op[root + i] = heap_op[root + parent]
                i = parent
            heap_key[root] = key
            heap_op[root] = last
        chosen[d] = -1
        # Pop the top of device d's heap: move the last entry down from the root.
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
        # The launch takes the host's earliest thread: its slot, at the head of the ring, becomes the
        # last one, and the launch's end moves towards the head past the later free times.
        h = device_host[d]
        launch = max(host_free[h], launch_ready[op])
        launch_end[op] = launch + dispatch_time[d]
        key = launch_end[op]
        lo = thread_pointer[h]
        n = thread_pointer[h + 1] - lo
        head = thread_head[h]
        j = head
        for _ in range(n - 1):
            i = j - 1 if j > 0 else n - 1
            if thread_free[lo + i] <= key:
                break
            thread_free[lo + j] = thread_free[lo + i]
            j = i
        thread_free[lo + j] = key
        head = head + 1 if head + 1 < n else 0
        thread_head[h] = head
        host_free[h] = thread_free[lo + head]
        if record:
            start[op] = s
            finish[op] = f
        device_free[d] = f
        if f > makespan:
            makespan = f
        if cutting:
            left[d] -= op_time[op]
            bound = f + max(tail[op], left[d])
            if bound * slack > cutoff:
                peak[:] = np.nan
                return (bound * slack, device, start, finish, transfer_tensor[:n_transfers],
                        transfer_dst[:n_transfers], transfer_start[:n_transfers],
                        transfer_finish[:n_transfers], True)
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
            # A static tensor's producer-side memory is in static_bytes.
            if nbytes > 0.0 and not tensor_static[t]:
                own = n_buffers
                buffer_device[own] = d
                buffer_bytes[own] = nbytes
                buffer_alloc[own] = s
                buffer_free[own] = f
                if tensor_persistent[t]:
                    buffer_free[own] = np.inf
                n_buffers += 1
            # The devices that read t (marked in `holder`, listed in ``dst[:n_dst]`` in increasing order
            # by insertion: a tensor has few), then one copy per other device, sent in device order:
            # links that share a segment take their turns in that order.
            n_dst = 0
            for j in range(consumer_pointer[t], consumer_pointer[t + 1]):
                e = device[consumers[j]]
                if holder[e] != t:
                    holder[e] = t
                    i = n_dst
                    while i > 0 and dst[i - 1] > e:
                        dst[i] = dst[i - 1]
                        i -= 1
                    dst[i] = e
                    n_dst += 1
            for k in range(n_dst):
                e = dst[k]
                if e == d:
                    arrival[e] = f
                    copy[e] = own
                    continue
                link = d * n_devices + e
                route = link * n_route
                begin = max(link_free[link], f)
                for r in range(n_route):
                    g = link_segments[route + r]
                    if g >= 0 and segment_free[g] > begin:
                        begin = segment_free[g]
                end = begin + (link_latency[link] + nbytes / link_bandwidth[link])
                link_free[link] = end
                for r in range(n_route):
                    g = link_segments[route + r]
                    if g >= 0:
                        segment_free[g] = end
                arrival[e] = end
                copy[e] = -1
                if nbytes > 0.0:
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
                    chosen[e] = -1
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
        cell_grown,
        cell_usage,
        cell_first,
        event_after,
        event_time,
        event_change,
        usage,
    )
    for op in range(n_ops):
        peak[device[op]] += static_bytes[op]
    return (
        makespan,
        device,
        start,
        finish,
        transfer_tensor[:n_transfers],
        transfer_dst[:n_transfers],
        transfer_start[:n_transfers],
        transfer_finish[:n_transfers],
        False,
    )


@numba.njit(cache=True)
def _simulate_one(placement, ints, floats, work_i, work_f, peak, cutoff):
    """Makespan (or a status, or when cut the bound), feasibility (False when cut) and whether the
    run was cut (`_run`) of one placement; its peak memory goes to ``peak``."""
    result = _run(placement, ints, floats, work_i, work_f, peak, False, cutoff)
    memory_capacity = _field(floats, ints, _FLOAT_AT + 7)
    feasible = True
    for d in range(peak.shape[0]):
        if not peak[d] <= memory_capacity[d]:  # NaN (cut) is not
            feasible = False
    return result[0], feasible, result[8]


@numba.njit(cache=True, parallel=True)
def _simulate_batch(placements, ints, floats, n_chunks, cutoff):
    """Makespans (or statuses, or bounds where cut), peak memory (NaN where cut) and the cut rows of
    many placements, each run with ``cutoff`` (`_run`; inf: none). The rows are split into
    ``n_chunks`` runs of consecutive rows, in parallel; each run allocates one workspace and reuses it
    for its rows (an allocation per row would have the threads queue on the allocator)."""
    n = placements.shape[0]
    runtimes = np.empty(n)
    # np.empty, not np.zeros: numba makes a zero fill a parallel loop of its own, and every parallel
    # region costs a wake-up of the threads (it doubled the time of a batch of 16 on 2 busy cores).
    cut = np.empty(n, dtype=np.bool_)
    peaks = np.empty((n, ints[_N_DEVICES]))
    n_int, n_float = _work_sizes(ints)
    for chunk in numba.prange(n_chunks):
        work_i = np.empty(n_int, dtype=np.int64)
        work_f = np.empty(n_float)
        for i in range(chunk * n // n_chunks, (chunk + 1) * n // n_chunks):
            result = _run(placements[i], ints, floats, work_i, work_f, peaks[i], False, cutoff)
            runtimes[i] = result[0]
            cut[i] = result[8]
    return runtimes, peaks, cut


def _pack(task) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, int]:
    """The task packed for `_run`: ``(ints, floats, work_i, work_f, n_devices)``, the workspaces
    being those of `simulate` (its calls hold the GIL, so one per task suffices)."""
    cluster = task.cluster
    # Task ops 0..n_forward-1 are the graph's forward ops (micro-batch 0 of a pipelined step), so the
    # static bytes are counted once per forward op, on its device, however many micro-batches run.
    static_per_op = np.zeros(task.n_ops)
    static_per_op[: task.n_forward] = task.static_bytes
    # Consumer edges in reader order: a scheduled op reads the buffers of its inputs from one
    # contiguous range (see `_run`).
    by_reader = np.argsort(task.tensor_consumers, kind="stable")
    edge_slot = np.empty(len(by_reader), dtype=np.int64)
    edge_slot[by_reader] = np.arange(len(by_reader))
    reader_pointer = np.zeros(task.n_ops + 1, dtype=np.int64)
    np.cumsum(np.bincount(task.tensor_consumers, minlength=task.n_ops), out=reader_pointer[1:])
    int_fields = {
        "op_forward": task.op_forward,
        "output_pointer": task.op_output_pointer,
        "outputs": task.op_outputs,
        "consumer_pointer": task.tensor_consumer_pointer,
        "consumers": task.tensor_consumers,
        "reader_pointer": reader_pointer,
        "edge_slot": edge_slot,
        "data_inputs": np.flatnonzero(task.tensor_producer < 0),
        "input_count": task.op_input_count,
        "device_host": cluster.device_host,
        "thread_pointer": np.concatenate([[0], np.cumsum(cluster.host_dispatch_threads)]),
        "link_segments": cluster.link_segments,
        "tensor_static": task.tensor_static,
        "tensor_persistent": task.tensor_persistent,
        # An update op (-1) runs after every micro-batch's gradient: it counts as the last micro-batch.
        "op_microbatch": np.where(task.op_microbatch < 0, task.microbatches - 1, task.op_microbatch),
    }
    float_fields = {
        "duration": task.duration,
        "tensor_bytes": task.tensor_bytes,
        "static_bytes": static_per_op,
        "link_bandwidth": cluster.link_bandwidth,
        "link_latency": cluster.link_latency,
        "dispatch_time": cluster.dispatch_time,
        "transfer_sync": cluster.transfer_sync,
        "memory_capacity": cluster.memory_capacity,
    }
    assert tuple(int_fields) == _INT_FIELDS and tuple(float_fields) == _FLOAT_FIELDS
    threads = cluster.host_dispatch_threads
    sizes = [task.n_ops, task.n_forward, task.n_devices, task.n_tensors, len(task.tensor_consumers),
             len(cluster.segment_names), cluster.link_segments.shape[2], int(np.sum(threads)), len(threads),
             task.microbatches]
    int_parts = [np.ravel(np.asarray(a)).astype(np.int64) for a in int_fields.values()]
    float_parts = [np.ravel(np.asarray(a)).astype(np.float64) for a in float_fields.values()]
    int_bounds = _HEADER + np.concatenate([[0], np.cumsum([len(a) for a in int_parts])])
    float_bounds = np.concatenate([[0], np.cumsum([len(a) for a in float_parts])])
    ints = np.concatenate([sizes, int_bounds, float_bounds, *int_parts]).astype(np.int64)
    floats = np.concatenate(float_parts)
    n_int, n_float = _work_sizes(ints)
    return ints, floats, np.empty(n_int, dtype=np.int64), np.empty(n_float), task.n_devices


# Built once per task, not per call: `simulate`'s hot path fetches them with one dict lookup.
_ARRAYS: TaskCache[tuple] = TaskCache("fast_arrays")
# The task packed for `_run` (`_pack`), cached.
_arrays = _ARRAYS.getter(_pack)
_INT64 = np.dtype(np.int64)


def _placement_array(task, placement) -> np.ndarray:
    """``placement`` as an int64 array; the common case needs no conversion (the length and device
    range are checked in the kernel), anything else goes through `Task.check_placement`."""
    if type(placement) is np.ndarray and placement.dtype is _INT64 and placement.ndim == 1 and (
            placement.flags.c_contiguous):
        return placement
    return task.check_placement(placement)


def _check_status(task, placement, status: float, batch: bool = False) -> None:
    """Raise the error a negative status of `_run` stands for."""
    if status == _BAD_DEVICE:
        task.check_placement(placement, batch=batch)  # raises the clear error naming op and device
    if status == _BAD_WORKSPACE:
        raise RuntimeError(f"task {task.id}: the simulator's workspace is too small (a bug in fast.py)")
    if status < 0.0:
        raise RuntimeError(f"task {task.id}: the simulation stalled; its graph is not in topological order")


def check_cutoff(cutoff) -> float:
    """``cutoff`` as a float (None: inf, no cutoff), or a one-line ValueError unless it is a real
    number of seconds or inf."""
    if cutoff is None:
        return np.inf
    if isinstance(cutoff, (bool, np.bool_)) or not isinstance(cutoff, (int, float, np.integer, np.floating)):
        raise ValueError(f"cutoff must be a number of seconds or None, got {cutoff!r}")
    value = float(cutoff)
    if value != value:
        raise ValueError("cutoff must be a number of seconds or None, got nan")
    return value


def simulate(task, placement, schedule: bool = False, cutoff: float | None = None) -> SimulationResult:
    """Evaluate one placement (one device index per forward op) of ``task`` with the cost model.

    Returns runtime (makespan, seconds), feasibility (no device over its memory capacity), peak
    memory per device (bytes) and, with ``schedule=True``, the full `Schedule`. Adds one to
    ``task.evaluations``, cut or not.

    ``cutoff`` (seconds; None: none): the simulation may stop once a proven lower bound on the
    runtime exceeds it (docs/cost_model.md, "Evaluations with a cutoff"). A result that was not cut
    (``cut`` False) is the full simulation's, bit for bit. A cut one has ``cut`` True, ``runtime``
    that bound (``cutoff < runtime <= `` the full runtime), ``feasible`` False (feasibility unknown)
    and ``peak_memory`` NaN: a decision ``feasible and runtime < cutoff`` (or ``<=``) is the full
    result's either way. Not with ``schedule=True`` (a cut run has no full schedule)."""
    limit = check_cutoff(cutoff)
    array = _placement_array(task, placement)
    ints, floats, work_i, work_f, n_devices = _arrays(task)
    peak = np.empty(n_devices)
    if schedule:
        if limit < np.inf:
            raise ValueError("simulate: schedule=True needs the full simulation; give no cutoff")
        makespan, device, start, finish, t_tensor, t_dst, t_start, t_finish, _ = _run(
            array, ints, floats, work_i, work_f, peak, True, np.inf)
        if makespan < 0.0:
            _check_status(task, placement, makespan)
        device = device.astype(np.int32)
        t_tensor = t_tensor.astype(np.int32)
        timeline = Schedule(
            op_device=device,
            op_start=start,
            op_finish=finish,
            transfer_tensor=t_tensor,
            transfer_src=device[task.tensor_producer[t_tensor]],
            transfer_dst=t_dst.astype(np.int32),
            transfer_start=t_start,
            transfer_finish=t_finish,
        )
        feasible = bool(np.all(peak <= task.cluster.memory_capacity))
        task.count_evaluations(1, makespan, feasible)
        return SimulationResult(runtime=float(makespan), feasible=feasible, peak_memory=peak,
                                schedule=timeline)
    makespan, feasible, cut = _simulate_one(array, ints, floats, work_i, work_f, peak, limit)
    if makespan < 0.0:
        _check_status(task, placement, makespan)
    task.count_evaluations(1, makespan, feasible)  # the task's counter (`Task.evaluations`) and trace
    if cut:
        return SimulationResult(makespan, False, peak, None, True)
    return SimulationResult(makespan, feasible, peak)


def simulate_batch(
    task, placements, cutoff: float | None = None
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Evaluate many placements of one task at once (parallel over the machine's cores).

    ``placements``: int array ``(batch, n_forward)``. Returns ``(runtimes, feasible, peak_memory)``
    with shapes ``(batch,)``, ``(batch,)``, ``(batch, n_devices)``. Adds ``batch`` to
    ``task.evaluations``. ``cutoff``: as `simulate`'s, for every row; a cut row has its bound as
    runtime, feasible False and NaN peak memory (``np.isnan(peak_memory[:, 0])`` marks the cut rows)."""
    limit = check_cutoff(cutoff)
    rows = np.ascontiguousarray(task.check_placement(placements, batch=True))
    ints, floats = _arrays(task)[:2]
    runtimes, peaks, _ = _simulate_batch(rows, ints, floats, min(len(rows), numba.get_num_threads()), limit)
    _check_status(task, rows, float(runtimes.min(initial=1.0)), batch=True)
    feasible = np.all(peaks <= task.cluster.memory_capacity[None, :], axis=1)  # NaN (cut) is not
    task.count_evaluations(len(rows), runtimes, feasible)  # one evaluation per row (`Task.evaluations`)
    return runtimes, feasible, peaks
