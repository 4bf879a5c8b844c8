"""Measuring a profile (`placement_gym.real.profile` describes the format): per-op forward, backward
and update times, links, the executor's dispatch overhead per job and the transfer latency that makes
the profiled model reproduce the executor.

`measure_profile` measures everything and returns the profile; the other functions measure one part.
Imports torch when measuring.
"""

from __future__ import annotations

import dataclasses
import datetime
import time
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from placement_gym.cluster.cluster import Cluster
from placement_gym.graph.opgraph import OpGraph
from placement_gym.real.devices import intra_op_threads, virtual_cpus
from placement_gym.real.optimizers import check_optimizer, torch_optimizer
from placement_gym.real.profile import (
    MIN_LATENCY_S,
    PROFILE_FORMAT,
    check_device_map,
    describe_devices,
    graph_digest,
    profile_key,
)
from placement_gym.real.profiled import profiled_task
from placement_gym.task.compiled import make_task

# Sizes (bytes) of the copies a link is timed with: small ones pin the latency, large ones the bandwidth.
LINK_SIZES: tuple[int, ...] = (1 << 10, 1 << 16, 1 << 20, 1 << 23)


def fit_link(sizes: Sequence[float], seconds: Sequence[float]) -> tuple[float, float]:
    """Least-squares fit of ``seconds = latency + bytes / bandwidth``; returns ``(bandwidth bytes/s,
    latency s)``, both positive (a latency fitted at or below zero is floored at 1 ns; a slope at
    or below zero, which only noise gives, falls back to the largest copy's bytes per second)."""
    x = np.asarray(sizes, dtype=np.float64)
    y = np.asarray(seconds, dtype=np.float64)
    if len(x) < 2 or len(x) != len(y):
        raise ValueError("fit_link needs at least two (size, seconds) pairs of equal length")
    slope, intercept = np.polyfit(x, y, 1)
    largest = int(np.argmax(x))
    bandwidth = 1.0 / slope if slope > 0 else x[largest] / max(y[largest], MIN_LATENCY_S)
    return float(bandwidth), float(max(intercept, MIN_LATENCY_S))


def _synchronize(torch, device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _median_time(torch, devices, call, repeats: int, warmup: int) -> float:
    for _ in range(warmup):
        call()
    for device in devices:
        _synchronize(torch, device)
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        call()
        for device in devices:
            _synchronize(torch, device)
        times.append(time.perf_counter() - start)
    return float(np.median(times))


def measure_links(
    devices: Mapping[str, str], sizes: Sequence[int] = LINK_SIZES, repeats: int = 5, warmup: int = 1
) -> tuple[dict[str, dict[str, float]], dict[str, dict[str, float]]]:
    """Bandwidth and latency of every ordered device pair: the median time of copying tensors of
    ``sizes`` bytes from one torch device to the other, fitted by `fit_link`. Two names on the same
    torch device (virtual devices) are timed with a memory copy on it (``clone``)."""
    check_device_map(devices)
    import torch

    torch_devices = {name: torch.device(spec) for name, spec in devices.items()}
    bandwidth: dict[str, dict[str, float]] = {name: {} for name in devices}
    latency: dict[str, dict[str, float]] = {name: {} for name in devices}
    for src, a in torch_devices.items():
        for dst, b in torch_devices.items():
            if src == dst:
                continue
            times = []
            for size in sizes:
                tensor = torch.empty(max(int(size) // 4, 1), dtype=torch.float32, device=a)
                copy = (lambda t=tensor: t.clone()) if a == b else (lambda t=tensor, d=b: t.to(d))
                times.append(_median_time(torch, {a, b}, copy, repeats, warmup))
            bandwidth[src][dst], latency[src][dst] = fit_link([4 * max(s // 4, 1) for s in sizes], times)
    return bandwidth, latency


def pool_virtual_devices(table: dict[str, dict[str, float]], devices: Mapping[str, str]) -> None:
    """Give every device name on the same torch device (virtual CPU devices) the mean of their
    times, in place: they are one piece of hardware, so a difference between their timings is
    noise of the shared machine, which the cost model would otherwise read as one device being
    faster and rank placements by it."""
    groups: dict[str, list[str]] = {}
    for name, spec in devices.items():
        groups.setdefault(str(spec), []).append(name)
    for names in groups.values():
        if len(names) < 2:
            continue
        for row in table.values():
            present = [row[n] for n in names if n in row]
            if len(present) == len(names):
                mean = float(np.mean(present))
                for n in names:
                    row[n] = mean


def measure_handover(repeats: int = 50) -> float:
    """Seconds from one worker thread finishing a job to another worker thread starting the job it
    released: the median one-way time of a ping-pong between two threads through one
    `threading.Condition`, the executor's mechanism. A copy timed in one thread (`measure_links`)
    leaves this out; every cross-device tensor in the executor pays it."""
    import threading

    if repeats < 1:
        raise ValueError(f"repeats must be >= 1, got {repeats}")
    condition = threading.Condition()
    state = {"turn": 0, "sent": 0.0}
    delays: list[float] = []

    def player(me: int) -> None:
        for _ in range(repeats + 1):
            with condition:
                while state["turn"] != me:
                    condition.wait()
                if state["sent"]:
                    delays.append(time.perf_counter() - state["sent"])
                state["turn"] = 1 - me
                state["sent"] = time.perf_counter()
                condition.notify_all()

    threads = [threading.Thread(target=player, args=(me,), daemon=True) for me in (0, 1)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return float(np.median(delays))


def measure_dispatch(
    graph: OpGraph,
    devices: Mapping[str, str],
    objective: str,
    forward_s: Mapping[str, Mapping[str, float]],
    backward_s: Mapping[str, Mapping[str, float]],
    update_s: Mapping[str, Mapping[str, float]],
    batch: int | None = None,
    repeats: int = 5,
    warmup: int = 1,
    model: Any = None,
    optimizer: str = "adam",
) -> dict[str, float]:
    """The executor's dispatch seconds per job on each device for ``objective``: the whole graph
    run on the device alone by `Executor` (the fastest of ``repeats`` steps), less the sum of the
    measured times of its jobs, divided by the number of jobs (0 when the step was not slower).
    Virtual CPU devices are run with one intra-op thread, as the executor runs them side by side.
    ``optimizer``: the one a train step runs (``update_s`` must be its update times)."""
    from placement_gym.real.executor import Executor

    names = graph.op_names
    out: dict[str, float] = {}
    with intra_op_threads(1 if virtual_cpus(devices.values()) else None):
        for device_name, spec in devices.items():
            # The executor reads only the cluster's names and kinds; the figures are placeholders.
            alone = placeholder_cluster({device_name: spec}, name=f"profile-{device_name}")
            task = make_task(graph, alone, objective, optimizer=optimizer)
            executor = Executor(task, {device_name: spec}, batch=batch, model=model)
            result = executor.run(np.zeros(graph.n_ops, dtype=np.int64), warmup=max(warmup, 1),
                                  repeats=repeats)
            if not result.feasible:
                raise ValueError(f"running {graph.name} on {device_name} ({spec}) failed: {result.error}")
            jobs = sum(forward_s[n][device_name] for n in names)
            n_jobs = graph.n_ops
            if objective == "train_step":
                jobs += sum(backward_s[n][device_name] for n in names)
                jobs += sum(row[device_name] for row in update_s.values())
                n_jobs += graph.n_ops + len(update_s)
            # The fastest step, as the op times are the fastest of their passes (`_time_ops`).
            out[device_name] = max(0.0, (min(result.runtimes) - jobs) / n_jobs)
    pooled = {"dispatch": out}
    pool_virtual_devices(pooled, devices)
    return out


def measure_profile(
    graph: OpGraph,
    devices: Mapping[str, str],
    batch: int | None = None,
    repeats: int = 5,
    warmup: int = 1,
    link_sizes: Sequence[int] = LINK_SIZES,
    model: Any = None,
    optimizer: str = "adam",
) -> dict[str, Any]:
    """Measure ``graph``'s forward and backward op times on every device and every link; returns a
    profile (see the module docstring). ``devices``: device name -> torch device (``"cpu"``,
    ``"cuda:0"``); several names may share a torch device (virtual devices). An op's time is the
    fastest of ``repeats`` passes over all ops (after ``warmup`` passes; `_time_ops` says why), a
    link's and an update's the median of ``repeats`` runs. ``batch``: a smaller batch than the graph's (as
    `Executor`'s); ``model``: the ONNX file or ModelProto of a graph that is not bundled;
    ``optimizer``: the one whose update ops are timed and whose train steps give the train-step
    overhead and transfer latency (``adam``, ``momentum``, ``sgd``; recorded in the profile and its key)."""
    check_device_map(devices)
    check_optimizer(optimizer)
    if repeats < 1 or warmup < 0:
        raise ValueError(f"repeats must be >= 1 and warmup >= 0, got {repeats} and {warmup}")
    described = describe_devices(devices)
    forward_s, backward_s, update_s = _measure_ops(graph, devices, batch, repeats, warmup, model, optimizer)
    for table in (forward_s, backward_s, update_s):
        pool_virtual_devices(table, devices)
    bandwidth, latency = measure_links(devices, link_sizes, repeats, warmup)
    handover = measure_handover(repeats=max(50, 10 * repeats))
    for row in latency.values():
        for dst in row:
            row[dst] += handover
    overhead = {
        objective: measure_dispatch(graph, devices, objective, forward_s, backward_s, update_s, batch,
                                    repeats, warmup, model, optimizer)
        for objective in ("inference", "train_step")
    }
    digest = graph_digest(graph)
    profile = {
        "format": PROFILE_FORMAT,
        "key": profile_key(digest, described, batch, optimizer),
        "graph": {"name": graph.name, "sha256": digest, "n_ops": graph.n_ops},
        "batch": batch,
        "optimizer": optimizer,
        "devices": described,
        "forward_s": forward_s,
        "backward_s": backward_s,
        "update_s": update_s,
        "link_bandwidth": bandwidth,
        "link_latency": latency,
        "launch_overhead_s": overhead,
        "settings": {"repeats": repeats, "warmup": warmup, "link_sizes": [int(s) for s in link_sizes],
                     "timer": "time.perf_counter, device synchronised; ops: fastest of interleaved passes; "
                     "links, updates: median",
                     "handover_s": handover},
        "created": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
    }
    if len(devices) > 1:
        profile["transfer_latency_s"] = {
            objective: measure_transfer_latency(graph, devices, objective, profile, batch, repeats, warmup,
                                                model, optimizer)
            for objective in ("inference", "train_step")
        }
    return profile


def placeholder_cluster(devices: Mapping[str, str], name: str = "profile") -> Cluster:
    """A cluster with ``devices``' names and kinds; its figures are placeholders (the executor reads
    only names and kinds, and a profiled task replaces times and links): the virtual CPU core's
    estimates (`placement_gym.cluster.machine`), and the largest memory a cluster may have, so that
    no placement runs out of it."""
    import torch

    from placement_gym.cluster.cluster import FIGURE_RANGES
    from placement_gym.cluster.machine import virtual_cpu_cluster
    from placement_gym.cluster.presets import default_efficiency_row

    names = list(devices)
    kinds = ["cpu" if torch.device(devices[n]).type == "cpu" else "gpu" for n in names]
    n = len(names)
    core = virtual_cpu_cluster(max(n, 1))
    return dataclasses.replace(
        core, name=name, device_names=tuple(names), device_kinds=tuple(kinds),
        memory_capacity=np.full(n, FIGURE_RANGES["memory_capacity"].high),
        efficiency=np.stack([default_efficiency_row(k) for k in kinds]), description="",
    )


# Calibration placements of `measure_transfer_latency`: the topological order cut into this many
# runs of equal length, each run on the next device (None: every op its own run, i.e. alternating).
CALIBRATION_RUNS: tuple[int | None, ...] = (4, 16, 64, None)
# Candidate latencies of the fit: log-spaced, this many per decade, up to this many seconds.
_LATENCY_STEPS_PER_DECADE = 40
_MAX_LATENCY_S = 0.1


def calibration_placements(n_ops: int, n_devices: int) -> list[np.ndarray]:
    """The distinct placements of `CALIBRATION_RUNS` for a graph of ``n_ops`` ops on ``n_devices``
    devices: few to nearly all tensors crossing devices."""
    found: dict[bytes, np.ndarray] = {}
    for runs in CALIBRATION_RUNS:
        runs = n_ops if runs is None else min(runs, n_ops)
        placement = ((np.arange(n_ops) * runs) // n_ops % n_devices).astype(np.int64)
        found.setdefault(placement.tobytes(), placement)
    return list(found.values())


def measure_transfer_latency(
    graph: OpGraph,
    devices: Mapping[str, str],
    objective: str,
    profile: Mapping[str, Any],
    batch: int | None = None,
    repeats: int = 5,
    warmup: int = 1,
    model: Any = None,
    optimizer: str = "adam",
) -> float:
    """The link latency (seconds, same on every link) with which the profiled cost model best
    reproduces the executor on the `calibration_placements` (least squares on the logarithm of
    simulated / measured runtime, over log-spaced candidates, at least the profile's own latencies).

    It holds what a tensor crossing devices costs in the executor beyond the copy: waking the other
    worker, its lock, the copy's autograd leaf, and, on virtual devices sharing cores and the GIL,
    the parallelism the model expects but the machine does not give. Several placements, from a few
    crossings to one per op, keep one extreme from setting it: fitted on the alternating placement
    alone, the latency also absorbed that placement's lost parallelism and overcharged every
    placement with fewer crossings (bert_base inference on two virtual CPUs). ``optimizer``: the one
    a train step runs, as in ``profile``."""

    from placement_gym.cost_model import simulate
    from placement_gym.real.executor import Executor
    from placement_gym.real.rebatch import rebatched_graph

    cluster = placeholder_cluster(devices)
    placements = calibration_placements(graph.n_ops, len(devices))
    measured = []
    with intra_op_threads(1 if virtual_cpus(devices.values()) else None):
        executor = Executor(make_task(graph, cluster, objective, optimizer=optimizer), dict(devices),
                            batch=batch, model=model)
        for placement in placements:
            result = executor.run(placement, warmup=max(warmup, 1), repeats=repeats)
            if not result.feasible:
                raise ValueError(f"running {graph.name} across {sorted(devices)} failed: {result.error}")
            measured.append(min(result.runtimes))  # the fastest step, as the op times (`_time_ops`)
    model_task = profiled_task(make_task(rebatched_graph(graph, batch, model), cluster, objective,
                                         optimizer=optimizer),
                               {k: v for k, v in profile.items() if k != "transfer_latency_s"})
    low = max(float(np.min(model_task.cluster.link_latency[~np.eye(len(devices), dtype=bool)])),
              MIN_LATENCY_S)
    steps = max(int(np.ceil(np.log10(_MAX_LATENCY_S / low) * _LATENCY_STEPS_PER_DECADE)), 1)
    candidates = np.logspace(np.log10(low), np.log10(max(_MAX_LATENCY_S, low)), steps + 1)
    log_measured = np.log(np.array(measured))

    def loss(latency: float) -> float:
        linked = dataclasses.replace(model_task.cluster,
                                     link_latency=np.full_like(model_task.cluster.link_latency, latency))
        task = dataclasses.replace(model_task, cluster=linked)
        simulated = np.array([simulate(task, p).runtime for p in placements])
        return float(np.sum((np.log(simulated) - log_measured) ** 2))

    return float(min(candidates, key=loss))


def _measure_ops(graph, devices, batch, repeats, warmup, model=None, optimizer="adam"):
    """Per-op forward, backward and update seconds on each device: three ``{op: {device: s}}``
    (update: only ops that own parameters, with ``optimizer``'s update).

    Uses the executor's program of the graph (`placement_gym.real.program`: the ONNX node, inputs
    and attributes of each op, the same random weights and data as `Executor` with seed 0). One
    CPU forward pass gives every op's input values; then each op runs alone on each device with its
    inputs there: forward under ``no_grad``, and backward as ``torch.autograd.grad`` of its float
    outputs with respect to its float inputs (the graph kept, so only the gradient pass is timed).
    An op with no differentiable input or output has backward time 0."""
    import torch

    from placement_gym.real import program as programs

    program = programs.build_program(graph, programs.load_model(graph, model), batch)
    weights = programs.make_parameters(program, seed=0)
    data = programs.make_inputs(program, seed=0)
    cpu = torch.device("cpu")
    values: dict[str, Any] = {}
    op_args: list[list[Any]] = []
    with torch.no_grad():
        for k in range(len(program.sources)):
            # constants are made per device later (integer constants stay on the CPU): a marker here
            args = programs.reference_arguments(
                program, k, data, weights, values, lambda i, name: ("const", i, name)
            )
            op_args.append(args)
            cpu_args = [programs.constant_tensor(program, k, a[1], a[2], cpu) if isinstance(a, tuple) else a
                        for a in args]
            for name, result in zip(program.outputs[k], programs.call_op(program, k, cpu_args), strict=False):
                if name:
                    values[name] = result
    forward_s: dict[str, dict[str, float]] = {name: {} for name in graph.op_names}
    backward_s: dict[str, dict[str, float]] = {name: {} for name in graph.op_names}
    update_s: dict[str, dict[str, float]] = {
        graph.op_names[k]: {} for k in range(graph.n_ops) if program.owned[k]
    }
    # Virtual CPU devices (two or more names on "cpu") each run one intra-op thread in the executor,
    # so their ops are timed with one thread too.
    with intra_op_threads(1 if virtual_cpus(devices.values()) else None):
        _time_ops(torch, programs, program, graph, devices, op_args, forward_s, backward_s, repeats, warmup)
        _time_updates(torch, program, graph, devices, weights, update_s, repeats, warmup, optimizer)
    return forward_s, backward_s, update_s


def _time_updates(torch, program, graph, devices, weights, update_s, repeats, warmup, optimizer) -> None:
    """Fill ``update_s``: the executor's update of each op's parameters with ``optimizer`` (torch's
    optimizer over them, fused where torch can: `placement_gym.real.optimizers.torch_optimizer`), its
    state on the device as in the executor."""
    from placement_gym.real.executor import DEFAULT_LEARNING_RATE

    for device_name, spec in devices.items():
        device = torch.device(spec)
        for k, op_name in enumerate(graph.op_names):
            if not program.owned[k]:
                continue
            params = []
            for name in program.owned[k]:
                weight = weights[name].detach().clone().to(device)
                weight.grad = torch.ones_like(weight)
                params.append(weight)
            update = torch_optimizer(optimizer, params, DEFAULT_LEARNING_RATE).step
            update_s[op_name][device_name] = _median_time(torch, {device}, update, repeats, warmup)


def _time_ops(
    torch, programs, program, graph, devices, op_args, forward_s, backward_s, repeats, warmup
) -> None:
    """Fill ``forward_s`` and ``backward_s`` (see `_measure_ops`).

    Timed in passes: each pass times every op once (forward, then backward), and an op's time is the
    minimum over ``repeats`` passes (after ``warmup`` untimed ones). On a shared or virtualised
    machine the CPU's speed changes in spells of about a second (on this project's 2-core development
    VM the same op sequence took 19 ms in one spell and 34-41 ms in the next); timing an op's repeats
    back to back would put all of them in one spell and make some ops read twice as slow as others,
    while passes spread every op's repeats over the whole measurement. Such interference only ever
    slows a run down, so the minimum is the estimate of the op's own time (as `timeit` advises);
    `placement_gym.real.fidelity` measures placements the same way."""
    for device_name, spec in devices.items():
        device = torch.device(spec)
        on_device = [
            [
                programs.constant_tensor(program, k, a[1], a[2], device) if isinstance(a, tuple)
                else a.to(device) if isinstance(a, torch.Tensor)
                else a
                for a in op_args[k]
            ]
            for k in range(graph.n_ops)
        ]
        forward_times = np.zeros((repeats, graph.n_ops))
        backward_times = np.zeros((repeats, graph.n_ops))
        for step in range(warmup + repeats + 1):
            # Pass 0 is a global warm-up (every op once, errors ignored: the timed passes report them
            # with the op's name); it takes the cold start (allocator, kernel selection) off the ops.
            timed = step - warmup - 1
            for k, op_name in enumerate(graph.op_names):
                try:
                    forward, backward = _time_op_once(torch, programs, program, k, on_device[k], device)
                except (RuntimeError, NotImplementedError) as error:
                    if step == 0:
                        continue
                    raise ValueError(
                        f"measuring op {op_name!r} ({program.op_types[k]}) on {device_name} ({spec}) "
                        f"failed: {error}"
                    ) from None
                if timed >= 0:
                    forward_times[timed, k], backward_times[timed, k] = forward, backward
        for k, op_name in enumerate(graph.op_names):
            forward_s[op_name][device_name] = float(np.min(forward_times[:, k]))
            backward_s[op_name][device_name] = float(np.min(backward_times[:, k]))


def _time_op_once(torch, programs, program, k: int, args: list[Any], device) -> tuple[float, float]:
    """Seconds of one forward call of op ``k`` (under ``no_grad``) and of one backward pass of it
    (``torch.autograd.grad`` of its float outputs with respect to its float inputs, the graph built
    beforehand, untimed); backward 0 for an op with no differentiable input or output."""
    _synchronize(torch, device)
    start = time.perf_counter()
    with torch.no_grad():
        programs.call_op(program, k, args)
    _synchronize(torch, device)
    forward = time.perf_counter() - start
    leaves = [a.detach().requires_grad_(True) if isinstance(a, torch.Tensor) and a.is_floating_point() else a
              for a in args]
    with torch.enable_grad():
        results = programs.call_op(program, k, leaves)
    outputs = [r for r in results if isinstance(r, torch.Tensor) and r.requires_grad]
    inputs = [a for a in leaves if isinstance(a, torch.Tensor) and a.requires_grad]
    if not outputs or not inputs:
        return forward, 0.0
    seeds = [torch.ones_like(r) for r in outputs]
    _synchronize(torch, device)
    start = time.perf_counter()
    torch.autograd.grad(outputs, inputs, seeds, allow_unused=True)
    _synchronize(torch, device)
    return forward, time.perf_counter() - start
