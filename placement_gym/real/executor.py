"""Run a placement of a task's op graph on real torch devices and time it.

How one step runs (the cost model's semantics, docs/design.md section 3, on real devices):

* Jobs are the task's ops: forward op ``f`` (index ``f``), for ``train_step`` its backward op
  (index ``2n - 1 - f``) and, for an op that owns parameters, its update op (``2n + ...``), each on
  the device of its forward op.
* One worker thread per cluster device runs that device's jobs one at a time; among ready jobs it
  takes the one that became ready first, ties by job index (topological). A job is ready when the
  jobs it depends on have finished.
* A tensor needed on another device is sent once per destination device (by the destination's
  worker, when the first consumer there starts). Between two virtual CPU devices (both "cpu") the
  send is a real copy (``clone``), so each device holds its own copy as the cost model assumes.
  Graph data inputs are on every device before the step starts.
* Forward: each op is its ONNX op's torch function (`placement_gym.real.ops.OP_TABLE`). For
  training every op's inputs are detached leaves, so each op has its own small autograd graph.
  Backward op ``f.grad``: ``torch.autograd.grad`` of ``f``'s outputs with respect to its inputs and
  parameters, seeded by the gradients its consumers sent back (one gradient tensor per forward edge,
  as in `Task`). The loss is the sum of the means of the float graph outputs, so a graph output's
  gradient is ``1 / numel`` everywhere. Update op: the task's optimizer (``task.optimizer``: Adam,
  momentum or SGD, `placement_gym.real.optimizers`) on the parameter's device, with its state tensors
  (Adam's two moments, the momentum velocity) created there, zero, when the run's weights are, and
  kept across the run's steps as a training loop keeps them.
* Inference: forward jobs only, under ``torch.no_grad()`` (grad mode is per thread: set in each worker).

The program it runs (each op's torch call and where its inputs come from) is built from the graph's
ONNX model by `placement_gym.real.program`. Weights are random, created from ``seed`` on the CPU (one
generator, parameters in a fixed order, so they do not depend on the placement:
`placement_gym.real.program.make_parameters`) and moved to the device of the op that owns them. A
failure on a device (out of memory, an op the device cannot run, a device that is not there) ends the
step and returns an infeasible `RealResult` with the explanation; what the step held is released.
"""

from __future__ import annotations

import gc
import heapq
import math
import statistics
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import onnx

from placement_gym.cost_model.result import SimulationResult
from placement_gym.real.devices import cluster_device_map, intra_op_threads, virtual_cpus
from placement_gym.real.optimizers import apply_update, new_state
from placement_gym.real.program import (
    build_program,
    call_op,
    constant_tensor,
    load_model,
    make_inputs,
    make_parameters,
)
from placement_gym.task.compiled import Task

# Learning rate of the update of a real train step, every optimizer (the value only matters for the numbers).
DEFAULT_LEARNING_RATE = 1e-3
_TORCH_DEVICE_TYPES = ("cpu", "cuda", "mps")


@dataclass(frozen=True, eq=False)
class RealResult:
    """What running a placement on real devices gives.

    runtime: median of the timed steps (seconds; ``inf`` when infeasible); runtimes: every timed
    step; spread: (max - min) / median of the timed steps; feasible / error: whether every step ran,
    and if not why; peak_memory: bytes per cluster device (CUDA: the allocator's peak in the last
    step; CPU: the bytes the executor held on the device at the end of the last step (weights, for
    training their gradients and optimizer state, inputs, activations and copies), which is its
    peak because nothing is freed before the step ends; op workspaces not counted); loss: the last
    train step's loss (None for inference or a failure).
    """

    runtime: float
    runtimes: tuple[float, ...]
    spread: float
    feasible: bool
    error: str | None
    peak_memory: np.ndarray
    loss: float | None = None

    def to_simulation_result(self) -> SimulationResult:
        """The result as a `SimulationResult` (no schedule), for envs and evaluators."""
        return SimulationResult(runtime=self.runtime, feasible=self.feasible, peak_memory=self.peak_memory)


# --- the executor -----------------------------------------------------------------------------------


class _StepFailed(Exception):
    """A job failed: the message says which op, where and why."""


class Executor:
    """Runs placements of a task on torch devices. See the module docstring for the semantics.

    ``devices``: cluster device name -> torch device string (``"cpu"``, ``"cuda:0"``); several
    cluster devices may map to ``"cpu"`` (virtual CPU devices: each gets its own worker thread, and
    while a placement uses two or more of them torch runs one intra-op thread). ``None``: ``"cpu"``
    for every cpu-kind device, ``cuda:i`` for the i-th gpu-kind device (an error if it is missing).
    ``batch``: a smaller batch than the graph's (data inputs get that leading dimension, Reshape
    shapes that start with the batch follow it), for quick runs. ``model``: the ONNX file or
    ModelProto the graph came from, needed unless it is a bundled graph. ``lr``: the learning rate
    of the task's optimizer (``task.optimizer``, see `placement_gym.real.optimizers`).
    Each `run` starts from the same seeded weights and fresh (zero) optimizer state, which its steps
    (warm-up and timed) then carry forward. After `run`, ``parameters`` holds the weights (name ->
    tensor on its device), ``optimizer_state`` each parameter's optimizer state (name -> {state
    name -> tensor on the parameter's device}; empty for inference and SGD) and ``outputs`` the graph
    outputs (name -> CPU tensor) of the last step.
    """

    def __init__(self, task: Task, devices: Mapping[str, str] | None = None, seed: int = 0,
                 batch: int | None = None, model: onnx.ModelProto | str | Path | None = None,
                 lr: float = DEFAULT_LEARNING_RATE) -> None:
        import torch

        if task.step.tensor_parallel != 1:
            raise ValueError(
                f"task {task.id}: the real executor runs each op whole on one device, not split over "
                f"groups of {task.step.tensor_parallel} GPUs; evaluate a tensor-parallel step with the cost "
                "model"
            )
        if task.microbatches != 1:
            raise ValueError(
                f"task {task.id}: the real executor runs one batch per step, not {task.microbatches} "
                "micro-batches; evaluate a pipelined step with the cost model (or profiled durations)"
            )
        if task.recompute:
            raise ValueError(
                f"task {task.id}: the real executor keeps every activation; evaluate a step with "
                "activation recomputation with the cost model (or profiled durations)"
            )
        self.task = task
        self.seed = int(seed)
        self.lr = float(lr)
        cluster = task.cluster
        if devices is None:
            devices = self._default_devices(task)
        if not isinstance(devices, Mapping):
            raise TypeError(f"devices must be a mapping from cluster device name to torch device string, "
                            f"got {type(devices).__name__}")
        unknown = [name for name in devices if name not in cluster.device_names]
        missing = [name for name in cluster.device_names if name not in devices]
        if unknown or missing:
            raise ValueError(
                f"devices must map every device of cluster {cluster.name!r} "
                f"({', '.join(cluster.device_names)}) to a torch device; unknown names: {unknown}, "
                f"missing: {missing}"
            )
        self.torch_devices: list[torch.device] = []
        for name in cluster.device_names:
            value = devices[name]
            try:
                device = torch.device(value)
            except (RuntimeError, TypeError):
                raise ValueError(f"devices[{name!r}] = {value!r} is not a torch device string; allowed: "
                                 "'cpu', 'cuda', 'cuda:<index>'") from None
            if device.type not in _TORCH_DEVICE_TYPES:
                raise ValueError(f"devices[{name!r}] = {value!r}: device type {device.type!r} is not "
                                 f"supported; allowed: {', '.join(_TORCH_DEVICE_TYPES)}")
            if device.type == "cpu" and device.index is not None:
                raise ValueError(f"devices[{name!r}] = {value!r}: torch has one CPU device; map every "
                                 "virtual CPU device to 'cpu' (each still gets its own worker thread)")
            if device.type == "cuda" and device.index is None:
                device = torch.device("cuda", 0)
            self.torch_devices.append(device)
        self.program = build_program(task.graph, load_model(task.graph, model), batch)
        self.batch = batch
        self._jobs = self._plan_jobs()
        self.parameters: dict[str, Any] = {}
        self.optimizer_state: dict[str, dict[str, Any]] = {}
        self.outputs: dict[str, Any] = {}

    @staticmethod
    def _default_devices(task: Task) -> dict[str, str]:
        import torch

        n_cuda = torch.cuda.device_count() if torch.cuda.is_available() else 0
        mapping = cluster_device_map(task.cluster)
        for name, device in mapping.items():
            if device.startswith("cuda:") and int(device.split(":")[1]) >= n_cuda:
                raise ValueError(
                    f"cluster {task.cluster.name!r} has gpu device {name!r} (taken for {device}) but torch "
                    f"sees {n_cuda} CUDA device(s) here; pass devices= to map the cluster's devices to torch "
                    "devices (or use a virtual CPU cluster: placement_gym.real.devices.virtual_cpu_cluster)"
                )
        return mapping

    # -- job graph ---------------------------------------------------------------------------------

    def _plan_jobs(self) -> dict[str, Any]:
        """Job kinds, forward ops and dependencies (the task's op order: forward, backward, update)."""
        p = self.program
        n = p.graph.n_ops
        train = self.task.objective == "train_step"
        kinds: list[tuple[str, int]] = [("forward", k) for k in range(n)]
        deps: list[set[int]] = []
        producer = {name: k for k in range(n) for name in p.outputs[k] if name}
        for k in range(n):
            deps.append({producer.get(s[1], p.shared.get(s[1], -1)) for s in p.sources[k]
                         if s and s[0] == "tensor"} - {-1})
        if train:
            backward = lambda f: 2 * n - 1 - f  # noqa: E731 - the Task's index of f's backward op
            kinds += [("backward", f) for f in range(n - 1, -1, -1)]
            for f in range(n - 1, -1, -1):
                users = {c for name in p.outputs[f] if name for c in p.consumers.get(name, [])}
                deps.append({f} | {backward(c) for c in users})
            for f in range(n):
                if p.owned[f]:
                    kinds.append(("update", f))
                    users = {c for name in p.owned[f] for c in p.consumers.get(name, [])}
                    deps.append({backward(f)} | {backward(c) for c in users})
        dependents: list[list[int]] = [[] for _ in kinds]
        for job, needs in enumerate(deps):
            for need in needs:
                dependents[need].append(job)
        return {"kinds": kinds, "n_deps": [len(d) for d in deps], "dependents": dependents}

    # -- running -----------------------------------------------------------------------------------

    def run(self, placement, warmup: int = 1, repeats: int = 3) -> RealResult:
        """Run ``warmup`` untimed and ``repeats`` timed steps of the placement; never raises for a
        failure on a device (the result is infeasible), only for bad arguments."""
        array = self.task.check_placement(placement)
        if isinstance(warmup, bool) or not isinstance(warmup, (int, np.integer)) or warmup < 0:
            raise ValueError(f"warmup must be an integer >= 0, got {warmup!r}")
        if isinstance(repeats, bool) or not isinstance(repeats, (int, np.integer)) or repeats < 1:
            raise ValueError(f"repeats must be an integer >= 1, got {repeats!r}")
        n_devices = self.task.n_devices
        used = sorted(set(array.tolist()))
        problem = self._unavailable(used)
        if problem:
            return self._failed(problem)
        runtimes: list[float] = []
        state: dict[str, Any] = {}
        # One intra-op thread per virtual CPU device (see the module docstring).
        with intra_op_threads(1 if virtual_cpus(self.torch_devices[d] for d in used) else None):
            try:
                self._setup(array, state)
                for step in range(warmup + repeats):
                    last = step == warmup + repeats - 1
                    if last:
                        self._reset_peaks(used)
                    runtime = self._step(array, state, keep=last)
                    state["steps"] += 1
                    if step >= warmup:
                        runtimes.append(runtime)
                peak = self._peak_memory(used, state)
                loss = state.get("loss")
            except _StepFailed as error:
                state.clear()
                self.parameters, self.optimizer_state, self.outputs = {}, {}, {}
                self._release()
                return self._failed(str(error))
        self.parameters = state["weights"]
        self.optimizer_state = state["optimizer_state"]
        median = statistics.median(runtimes)
        spread = (max(runtimes) - min(runtimes)) / median if median > 0 else 0.0
        assert len(peak) == n_devices
        return RealResult(runtime=median, runtimes=tuple(runtimes), spread=spread, feasible=True, error=None,
                          peak_memory=peak, loss=loss)

    def _failed(self, error: str) -> RealResult:
        return RealResult(runtime=math.inf, runtimes=(), spread=math.nan, feasible=False, error=error,
                          peak_memory=np.zeros(self.task.n_devices))

    def _unavailable(self, used: list[int]) -> str | None:
        import torch

        for d in used:
            device = self.torch_devices[d]
            name = self.task.cluster.device_names[d]
            if device.type == "cuda":
                count = torch.cuda.device_count() if torch.cuda.is_available() else 0
                if device.index >= count:
                    return (f"device {name!r} maps to {device}, but torch sees {count} CUDA device(s) on "
                            "this machine")
            if device.type == "mps" and not torch.backends.mps.is_available():
                return f"device {name!r} maps to {device}, but MPS is not available on this machine"
        return None

    def _release(self) -> None:
        import torch

        gc.collect()
        if torch.cuda.is_available():
            torch.cuda.empty_cache()

    def _reset_peaks(self, used: list[int]) -> None:
        import torch

        for d in used:
            if self.torch_devices[d].type == "cuda":
                torch.cuda.reset_peak_memory_stats(self.torch_devices[d])

    def _peak_memory(self, used: list[int], state: dict[str, Any]) -> np.ndarray:
        import torch

        peak = np.zeros(self.task.n_devices)
        for d in used:
            if self.torch_devices[d].type == "cuda":
                peak[d] = torch.cuda.max_memory_allocated(self.torch_devices[d])
        held = state.get("held_bytes", np.zeros(self.task.n_devices))
        for d in used:
            if self.torch_devices[d].type != "cuda":
                peak[d] = held[d]
        return peak

    def _setup(self, placement: np.ndarray, state: dict[str, Any]) -> None:
        """Weights and, for training, their optimizer state on their owners' devices, and data inputs
        on every used device (not timed)."""
        p = self.program
        train = self.task.objective == "train_step"
        try:
            weights = make_parameters(p, self.seed)
            owner = {name: k for k in range(len(p.owned)) for name in p.owned[k]}
            for name in list(weights):
                device = self.torch_devices[placement[owner[name]]]
                weights[name] = weights[name].to(device).requires_grad_(train)
            state["optimizer_state"] = (
                {name: new_state(self.task.optimizer, weight.detach()) for name, weight in weights.items()}
                if train else {}
            )
            state["steps"] = 0
            data = make_inputs(p, self.seed)
            state["data"] = {(name, d): value.to(self.torch_devices[d])
                             for name, value in data.items() for d in set(placement.tolist())}
            state["weights"] = weights
            state["consts"] = {
                (k, i): constant_tensor(p, k, i, s[1], self.torch_devices[placement[k]])
                for k, sources in enumerate(p.sources) for i, s in enumerate(sources) if s and s[0] == "const"
            }
        except Exception as error:
            raise _StepFailed(
                f"setting up weights and inputs failed: {type(error).__name__}: {error}"
            ) from None

    def _step(self, placement: np.ndarray, state: dict[str, Any], keep: bool) -> float:
        """One step: start a worker per used device, release the ready jobs, wait; seconds taken."""
        import torch

        jobs = self._jobs
        kinds = jobs["kinds"]
        device_of = [int(placement[f]) for _, f in kinds]
        remaining = list(jobs["n_deps"])
        used = sorted(set(device_of))
        heaps: dict[int, list[tuple[int, int]]] = {d: [] for d in used}
        for job, count in enumerate(remaining):
            if count == 0:
                heaps[device_of[job]].append((0, job))
        for heap in heaps.values():
            heapq.heapify(heap)
        condition = threading.Condition()
        shared: dict[str, Any] = {"done": 0, "error": None, "seq": 0}
        step = _StepState(self, placement, state)
        n_jobs = len(kinds)
        train = self.task.objective == "train_step"
        barrier = threading.Barrier(len(used) + 1)

        def worker(d: int) -> None:
            device = self.torch_devices[d]
            if device.type == "cuda":
                torch.cuda.set_device(device)
            barrier.wait()
            with torch.set_grad_enabled(train):
                while True:
                    with condition:
                        while not heaps[d] and shared["error"] is None and shared["done"] < n_jobs:
                            condition.wait()
                        if shared["error"] is not None or not heaps[d]:
                            return
                        _, job = heapq.heappop(heaps[d])
                    try:
                        step.run_job(job, kinds[job], d)
                    except BaseException as error:  # noqa: BLE001 - any failure on a device ends the step
                        kind, f = kinds[job]
                        op = f"{self.program.graph.op_names[f]!r} ({self.program.op_types[f]})"
                        where = f"{self.task.cluster.device_names[d]!r} ({device})"
                        first_line = str(error).strip().splitlines()[0] if str(error).strip() else ""
                        with condition:
                            if shared["error"] is None:
                                shared["error"] = (
                                    f"{kind} of op {op} on device {where} failed: "
                                    f"{type(error).__name__}: {first_line}"
                                )
                            condition.notify_all()
                        return
                    with condition:
                        shared["seq"] += 1
                        for nxt in jobs["dependents"][job]:
                            remaining[nxt] -= 1
                            if remaining[nxt] == 0:
                                heapq.heappush(heaps[device_of[nxt]], (shared["seq"], nxt))
                        shared["done"] += 1
                        condition.notify_all()

        threads = [threading.Thread(target=worker, args=(d,), name=f"placement-gym-{d}", daemon=True)
                   for d in used]
        for thread in threads:
            thread.start()
        barrier.wait()
        start = time.perf_counter()
        for thread in threads:
            thread.join()
        if shared["error"] is None:
            for d in used:
                if self.torch_devices[d].type == "cuda":
                    torch.cuda.synchronize(self.torch_devices[d])
        elapsed = time.perf_counter() - start
        if shared["error"] is not None:
            raise _StepFailed(shared["error"])
        if shared["done"] != n_jobs:
            raise _StepFailed(
                f"the step stopped after {shared['done']} of {n_jobs} jobs (a dependency cycle?)"
            )
        if keep:
            step.finish()
        return elapsed


class _StepState:
    """Tensors of one step: outputs by name, copies per (tensor, device), gradients sent back."""

    def __init__(self, executor: Executor, placement: np.ndarray, state: dict[str, Any]) -> None:
        self.ex = executor
        self.p = executor.program
        self.placement = placement
        self.state = state
        self.train = executor.task.objective == "train_step"
        self.values: dict[str, tuple[int, Any]] = {}  # produced tensor -> (device, tensor)
        self.copies: dict[tuple[str, int], Any] = {}  # (tensor, device) -> the input tensor used there
        self.grads: dict[str, list[Any]] = {}  # tensor -> gradients sent back by its consumers
        self.param_grads: dict[str, Any] = {}
        self.leaves: dict[int, list[tuple[str, Any]]] = {}  # op -> (tensor name, leaf) it may need grads of

    def fetch(self, name: str, d: int) -> Any:
        key = (name, d)
        if key in self.copies:
            return self.copies[key]
        src_device, value = self.values[name]
        if self.train:
            value = value.detach()
        if src_device != d:
            target = self.ex.torch_devices[d]
            # A real copy even between virtual CPU devices (same torch device): see the module docstring.
            value = value.clone() if value.device == target else value.to(target)
        if self.train and value.is_floating_point():
            value = value.detach().requires_grad_(True)
        self.copies[key] = value
        return value

    def run_job(self, job: int, kind_op: tuple[str, int], d: int) -> None:
        kind, k = kind_op
        if kind == "forward":
            self.forward(k, d)
        elif kind == "backward":
            self.backward(k, d)
        else:
            self.update(k, d)

    def forward(self, k: int, d: int) -> None:
        p = self.p
        args: list[Any] = []
        leaves: list[tuple[str, Any]] = []
        for i, source in enumerate(p.sources[k]):
            if source is None:
                args.append(None)
                continue
            kind, name = source
            if kind == "data":
                args.append(self.state["data"][(name, d)])
            elif kind == "param":
                weight = self.state["weights"][name]
                args.append(weight)
                if name in p.shared:  # consumers on other devices read it like a produced tensor
                    self.values[name] = (d, weight)
            elif kind == "const":
                args.append(self.state["consts"][(k, i)])
            else:
                value = self.fetch(name, d)
                args.append(value)
                if self.train and value.requires_grad:
                    leaves.append((name, value))
        results = call_op(p, k, args)
        for name, result in zip(p.outputs[k], results, strict=False):
            if name:
                self.values[name] = (d, result)
        if self.train:
            self.leaves[k] = leaves

    def backward(self, k: int, d: int) -> None:
        import torch

        p = self.p
        device = self.ex.torch_devices[d]
        outputs, seeds = [], []
        for name in p.outputs[k]:
            if not name or name not in self.values:
                continue
            _, value = self.values[name]
            if not isinstance(value, torch.Tensor) or not value.requires_grad:
                continue
            contributions = [g.to(device) for g in self.grads.pop(name, [])]
            if name in p.output_names and value.is_floating_point():
                contributions.append(torch.full_like(value, 1.0 / max(1, value.numel())))
            if contributions:
                outputs.append(value)
                total = torch.stack(contributions).sum(0) if len(contributions) > 1 else contributions[0]
                seeds.append(total)
        own = [(name, self.state["weights"][name]) for name in p.owned[k]]
        targets = self.leaves.get(k, []) + own
        if not outputs or not targets:
            return
        grads = torch.autograd.grad(outputs, [t for _, t in targets], seeds, allow_unused=True)
        n_leaves = len(self.leaves.get(k, []))
        for j, ((name, _), grad) in enumerate(zip(targets, grads, strict=True)):
            if grad is None:
                continue
            if j < n_leaves:
                self.grads.setdefault(name, []).append(grad)  # list.append is atomic under the GIL
            else:
                self.param_grads[name] = grad

    def update(self, k: int, d: int) -> None:
        import torch

        device = self.ex.torch_devices[d]
        step = self.state["steps"] + 1  # this step's number, 1 for the first of the run
        with torch.no_grad():
            for name in self.p.owned[k]:
                parts = [g.to(device) for g in self.grads.pop(name, [])]
                if name in self.param_grads:
                    parts.append(self.param_grads.pop(name))
                if parts:
                    grad = torch.stack(parts).sum(0) if len(parts) > 1 else parts[0]
                    apply_update(self.ex.task.optimizer, self.state["weights"][name], grad,
                                 self.state["optimizer_state"][name], step, self.ex.lr)

    def finish(self) -> None:
        """Keep the last step's graph outputs, loss and the bytes held per device."""
        import torch

        held = np.zeros(self.ex.task.n_devices)

        def count(d: int, value: Any) -> None:
            if isinstance(value, torch.Tensor):
                held[d] += value.numel() * value.element_size()

        for d, value in self.values.values():
            count(d, value)
        for (_, d), value in self.copies.items():
            count(d, value)
        owner = {name: k for k in range(len(self.p.owned)) for name in self.p.owned[k]}
        for name, weight in self.state["weights"].items():
            d = int(self.placement[owner[name]])
            count(d, weight)
            if self.train:
                held[d] += weight.numel() * weight.element_size()  # its gradient
                for value in self.state["optimizer_state"][name].values():
                    count(d, value)
        for (_, d), value in self.state["data"].items():
            count(d, value)
        outputs = {}
        loss = 0.0
        for name in self.p.output_names:
            if name in self.values:
                value = self.values[name][1].detach().to("cpu")
                outputs[name] = value
                if value.is_floating_point():
                    loss += float(value.mean())
        self.ex.outputs = outputs
        self.state["held_bytes"] = held
        self.state["loss"] = loss if self.train else None
