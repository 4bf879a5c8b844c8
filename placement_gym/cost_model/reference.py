"""The reference simulator: a plain, slow re-statement of the cost model, kept as the oracle.

It recomputes everything from scratch at every step instead of keeping heaps and incremental state:
while ops remain, every device proposes an op among those whose producers have all been scheduled
(the earliest ready, ties by index; in a pipelined step, among those ready by the time the device
can next start, the lowest micro-batch first), each proposal's start is computed from first
principles (device free, inputs present, launch done), and the earliest start wins (ties by device
index). The
semantics are those stated in `fast.py`'s docstring and docs/design.md (section 3); `fast.simulate`
must agree with it exactly (tests/cost_model/test_cost_model.py).
"""

from __future__ import annotations

import numpy as np

from placement_gym.cost_model.result import SimulationResult


def reference_simulate(task, placement) -> SimulationResult:
    """Evaluate one placement of ``task`` (same result as `fast.simulate`, and counted the same way
    in ``task.evaluations``)."""
    cluster = task.cluster
    device = task.expand(placement).tolist()
    n_ops, n_devices = task.n_ops, task.n_devices
    size = task.tensor_bytes.tolist()
    outputs = [
        task.op_outputs[task.op_output_pointer[o] : task.op_output_pointer[o + 1]].tolist()
        for o in range(n_ops)
    ]
    readers = [
        task.tensor_consumers[task.tensor_consumer_pointer[t] : task.tensor_consumer_pointer[t + 1]].tolist()
        for t in range(task.n_tensors)
    ]
    producer = task.tensor_producer.tolist()
    # An update op (micro-batch -1) comes after every micro-batch's gradient: it counts as the last.
    pipelined = task.microbatches > 1
    batch = [b if b >= 0 else task.microbatches - 1 for b in task.op_microbatch.tolist()]
    # Op time: duration on its device, plus its stream's synchronisation for every copy it issues
    # (one per tensor and other reading device) and every input it receives from another device.
    syncs = [0.0] * n_ops
    for t in range(task.n_tensors):
        p = producer[t]
        if p < 0:
            continue
        others = {device[r] for r in readers[t]} - {device[p]}
        syncs[p] += float(len(others))
        for r in readers[t]:
            if device[r] != device[p]:
                syncs[r] += 1.0
    op_time = []
    for op in range(n_ops):
        d = device[op]
        time = float(task.duration[op, d])
        if syncs[op] > 0.0:
            time = time + float(cluster.transfer_sync[d]) * syncs[op]
        op_time.append(time)
    routes = {
        (i, j): [int(k) for k in cluster.link_segments[i, j] if k >= 0]
        for i in range(n_devices)
        for j in range(n_devices)
        if i != j
    }
    threads = [[0.0] * k for k in cluster.host_dispatch_threads]

    missing = task.op_input_count.tolist()
    ready = [0.0] * n_ops  # inputs present on the op's device
    launch_ready = [0.0] * n_ops  # same-device producers launched, received inputs arrived
    start, finish, launch_end = [0.0] * n_ops, [0.0] * n_ops, [0.0] * n_ops
    waiting: list[set[int]] = [set() for _ in range(n_devices)]
    for op in range(n_ops):
        if missing[op] == 0:
            waiting[device[op]].add(op)
    device_free = [0.0] * n_devices
    link_free = {link: 0.0 for link in routes}
    segment_free = [0.0] * len(cluster.segment_names)
    transfers = []  # (tensor, src, dst, start, end)
    for _ in range(n_ops):
        best = None
        for d in range(n_devices):
            if not waiting[d]:
                continue
            if pipelined:
                # The device can next start at t; among its ops ready by then it takes the lowest
                # micro-batch, then the earliest ready, then the lowest index.
                t = max(device_free[d], min(ready[o] for o in waiting[d]))
                op = min((o for o in waiting[d] if ready[o] <= t), key=lambda o: (batch[o], ready[o], o))
            else:  # the same rule with one micro-batch (the earliest ready is ready by t), in one pass
                op = min(waiting[d], key=lambda o: (ready[o], o))
            host = threads[int(cluster.device_host[d])]
            thread = min(range(len(host)), key=lambda k: (host[k], k))
            launch = max(host[thread], launch_ready[op])
            begin = max(device_free[d], ready[op], launch + float(cluster.dispatch_time[d]))
            if best is None or begin < best[0]:
                best = (begin, d, op, thread, launch)
        if best is None:
            raise RuntimeError("reference simulation stalled: the task graph is not a DAG")
        begin, d, op, thread, launch = best
        waiting[d].discard(op)
        start[op], finish[op] = begin, begin + op_time[op]
        launch_end[op] = launch + float(cluster.dispatch_time[d])
        threads[int(cluster.device_host[d])][thread] = launch_end[op]
        device_free[d] = finish[op]
        for tensor in outputs[op]:
            arrival = {}
            for e in sorted({device[r] for r in readers[tensor]}):
                if e == d:
                    arrival[e] = finish[op]
                    continue
                link = (d, e)
                sent = max([finish[op], link_free[link]] + [segment_free[g] for g in routes[link]])
                end = sent + (
                    float(cluster.link_latency[d, e]) + size[tensor] / float(cluster.link_bandwidth[d, e])
                )
                link_free[link] = end
                for g in routes[link]:
                    segment_free[g] = end
                transfers.append((tensor, d, e, sent, end))
                arrival[e] = end
            for r in readers[tensor]:
                e = device[r]
                ready[r] = max(ready[r], arrival[e])
                launch_ready[r] = max(launch_ready[r], launch_end[op] if e == d else arrival[e])
                missing[r] -= 1
                if missing[r] == 0:
                    waiting[e].add(r)

    peak = _peak_memory(task, device, start, finish, transfers)
    feasible = bool(np.all(peak <= task.cluster.memory_capacity))
    task.count_evaluations(1, max(finish), feasible)
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
    # Static bytes once per forward op of the graph, task ops 0..n_forward-1 (the micro-batches of a
    # pipelined step share their parameters).
    static = np.zeros(n_devices)
    for op in range(task.n_forward):
        static[device[op]] += task.static_bytes[op]
    return static + peak
