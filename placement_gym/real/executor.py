"""Run a placement of a task's ops on real torch devices and time it.

How one step runs (the cost model's semantics, docs/design.md section 3, on real devices; the
executor's own costs and what is left of them: docs/real_hardware.md, "The executor"):

* Jobs are the task's ops (`placement_gym.task.compiled.Task`): forward ops, for ``train_step`` their
  backward ops and the parameters' update ops, with ``microbatches=M`` the forward and backward ops of
  every micro-batch, with ``recompute=True`` the replayed ops; each runs on the device of its forward
  op and waits for what the task says it waits for (and for every value it reads).
* Each device runs its jobs in the order of the cost model's schedule of the same placement, cut into
  units it runs without waiting in between (`placement_gym.real.step_plan`). The plan is made once per
  placement; one worker thread per used device (the calling thread for the first) lives for the whole
  run, so a step hands out work and waits for its end, nothing more.
* A tensor needed on another device is copied once per destination device (a real ``clone`` between
  virtual CPU devices, so each holds its own copy as the cost model assumes). On a GPU each device
  runs on its own compute stream and copies on a copy stream ordered by CUDA events: the host does
  not wait inside a step. Graph data inputs are on every device before the step starts.
* Forward: each op is its ONNX op's torch function (`placement_gym.real.ops.OP_TABLE`), its fixed
  arguments (weights, data, constants) put in place once per run. For training, ops of one block
  (`placement_gym.real.step_plan`) form one autograd graph and the backward of a block is one
  ``torch.autograd.grad`` call, seeded by the gradients its consumers sent back; across blocks and
  devices an op reads a detached copy. The loss is the sum of the means of the float graph outputs of
  every micro-batch, so a graph output's gradient is ``1 / numel`` everywhere, and the gradients of
  the micro-batches add up before the one update. Update op: the task's optimizer (``task.optimizer``:
  Adam, momentum or SGD, `placement_gym.real.optimizers`) on the parameter's device, with its state
  tensors (Adam's two moments, the momentum velocity) created there, zero, when the run's weights
  are, and kept across the run's steps as a training loop keeps them.
* Precision: at ``bf16``/``fp16`` the ops run on weights, inputs and constants of that type; a train
  step keeps fp32 master weights and optimizer state, updates them with the gradient in fp32 and
  writes the low-precision copy back, as mixed-precision training does.
* Recomputation: the forward jobs of a replayed segment run without autograd and keep only what
  later segments read; the replayed jobs run them again with autograd just before the segment's
  backward jobs. A value is freed once its last reader has run (and, in training, its backward).
* Inference: forward jobs only, without autograd.
* Timing: on placements of GPUs only, by CUDA events on each device's compute stream (the step's
  time is the longest device's, from the moment the step is handed out); else by the host clock,
  the GPUs synchronised at the end.

The program it runs (each op's torch call and where its inputs come from) is built from the graph's
ONNX model by `placement_gym.real.program`. Weights are random, created from ``seed`` on the CPU (one
generator, parameters in a fixed order, so they do not depend on the placement:
`placement_gym.real.program.make_parameters`) and moved to the device of the op that owns them; the
data of micro-batch ``b > 0`` comes from its own seed. A failure on a device (out of memory, an op
the device cannot run, a device that is not there) ends the step and returns an infeasible
`RealResult` with the explanation; what the step held is released.
"""

from __future__ import annotations

import contextlib
import gc
import math
import queue
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
from placement_gym.real.attention import Attention, attention_call, find_attention
from placement_gym.real.devices import cluster_device_map, intra_op_threads, virtual_cpus
from placement_gym.real.optimizers import STATE_TENSORS, optimizer_state, torch_optimizer
from placement_gym.real.program import (
    build_program,
    constant_tensor,
    last_read_output,
    load_model,
    make_inputs,
    make_parameters,
    op_function,
    op_results,
)
from placement_gym.real.segments import Segment, build_segment, check_compile
from placement_gym.real.step_plan import (
    BACKWARD,
    FORWARD,
    RECOMPUTE,
    UPDATE,
    StepPlan,
    plan_step,
    replayed_ops,
)
from placement_gym.task.compiled import Task
from placement_gym.task.passes.step_graph import OP_KINDS

# Learning rate of the update of a real train step, every optimizer (the value only matters for the numbers).
DEFAULT_LEARNING_RATE = 1e-3
_TORCH_DEVICE_TYPES = ("cpu", "cuda", "mps")


@dataclass(frozen=True, eq=False)
class RealResult:
    """What running a placement on real devices gives.

    runtime: median of the timed steps (seconds; ``inf`` when infeasible); runtimes: every timed
    step; spread: (max - min) / median of the timed steps; feasible / error: whether every step ran,
    and if not why; peak_memory: bytes per cluster device (CUDA: the allocator's peak in the last
    step; CPU: weights, for training their gradients and optimizer state, and inputs, plus the peak
    of what the last step held there (activations, copies, gradients sent back), counted as the
    executor makes and frees them; op workspaces and a compiled unit's inner values not counted;
    across several virtual CPU devices it depends on when each thread frees what it read); loss: the
    last train step's loss, the sum over micro-batches of the means of the float graph outputs (None
    for inference or a failure).
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


class _Aborted(Exception):
    """Another device failed during the step: this device stops too."""


_DTYPES = {"fp32": "float32", "bf16": "bfloat16", "fp16": "float16"}


class Executor:
    """Runs placements of a task on torch devices. See the module docstring for the semantics.

    ``devices``: cluster device name -> torch device string (``"cpu"``, ``"cuda:0"``); several
    cluster devices may map to ``"cpu"`` (virtual CPU devices: each gets its own worker thread, and
    while a placement uses two or more of them torch runs one intra-op thread). ``None``: ``"cpu"``
    for every cpu-kind device, ``cuda:i`` for the i-th gpu-kind device (an error if it is missing).
    ``batch``: a smaller batch than the graph's (data inputs get that leading dimension, Reshape
    shapes that start with the batch follow it), for quick runs; with micro-batches it is each
    micro-batch's. ``model``: the ONNX file or ModelProto the graph came from, needed unless it is a
    bundled graph. ``lr``: the learning rate of the task's optimizer (``task.optimizer``, see
    `placement_gym.real.optimizers`). ``compile``: None (ops run one by one, the default) or a mode of
    `placement_gym.real.segments.COMPILE_MODES`: each unit of ops compiled by ``torch.compile`` once
    per run (``"reduce-overhead"``: captured as a CUDA graph on a GPU). ``fuse_attention``: run each
    attention chain of the graph as one ``scaled_dot_product_attention`` call where its ops share a
    unit (`placement_gym.real.attention`; default True).
    Each `run` starts from the same seeded weights and fresh (zero) optimizer state, which its steps
    (warm-up and timed) then carry forward. After `run`, ``parameters`` holds the weights (name ->
    tensor on its device; fp32 master weights at every precision), ``optimizer_state`` each
    parameter's optimizer state (name -> {state name -> tensor on the parameter's device}; empty for
    inference and SGD) and ``outputs`` the graph outputs (name -> CPU tensor) of the last step's last
    micro-batch.
    """

    def __init__(self, task: Task, devices: Mapping[str, str] | None = None, seed: int = 0,
                 batch: int | None = None, model: onnx.ModelProto | str | Path | None = None,
                 lr: float = DEFAULT_LEARNING_RATE, compile: str | None = None,
                 fuse_attention: bool = True) -> None:
        import torch

        self.compile = check_compile(compile)
        if task.step.tensor_parallel != 1:
            raise ValueError(
                f"task {task.id}: the real executor runs each op whole on one device, not split over "
                f"groups of {task.step.tensor_parallel} GPUs; evaluate a tensor-parallel step with the cost "
                "model"
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
        self.dtype = getattr(torch, _DTYPES[task.step.precision])
        self._jobs = _JobTable(task, self.program)
        if not isinstance(fuse_attention, bool):
            raise ValueError(f"fuse_attention must be True or False, got {fuse_attention!r}")
        self.attention = find_attention(self.program) if fuse_attention else []
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

    # -- running -----------------------------------------------------------------------------------

    def run(self, placement, warmup: int = 1, repeats: int = 3) -> RealResult:
        """Run ``warmup`` untimed and ``repeats`` timed steps of the placement; never raises for a
        failure on a device (the result is infeasible), only for bad arguments."""
        array = self.task.check_placement(placement)
        if isinstance(warmup, bool) or not isinstance(warmup, (int, np.integer)) or warmup < 0:
            raise ValueError(f"warmup must be an integer >= 0, got {warmup!r}")
        if isinstance(repeats, bool) or not isinstance(repeats, (int, np.integer)) or repeats < 1:
            raise ValueError(f"repeats must be an integer >= 1, got {repeats!r}")
        used = sorted(set(array.tolist()))
        problem = self._unavailable(used)
        if problem:
            return self._failed(problem)
        plan = plan_step(self.task, array, self._jobs.value_deps)
        runtimes: list[float] = []
        # One intra-op thread per virtual CPU device (see the module docstring).
        with intra_op_threads(1 if virtual_cpus(self.torch_devices[d] for d in used) else None):
            state = _RunState(self, array, plan)
            pool = _DevicePool(self, used)
            try:
                state.setup()
                for step in range(warmup + repeats):
                    last = step == warmup + repeats - 1
                    if last:
                        self._reset_peaks(used)
                    state.current = state.new_step()  # held by the state: freed with it on a failure
                    runtime = pool.step(state.current)
                    if last:
                        state.current.finish()
                    state.current = None
                    state.steps += 1
                    if step >= warmup:
                        runtimes.append(runtime)
                peak = self._peak_memory(used, state)
            except _StepFailed as error:
                self.parameters, self.optimizer_state, self.outputs = {}, {}, {}
                del state  # and what its step held, so that releasing below frees it
                self._release()
                return self._failed(str(error))
            finally:
                pool.close()
        self.parameters = state.weights
        self.optimizer_state = {name: optimizer_state(torch_opt, state.weights[name])
                                for torch_opt in state.optimizers.values()
                                for group in torch_opt.param_groups for name in _names(state, group)}
        self.outputs = state.outputs
        median = statistics.median(runtimes)
        spread = (max(runtimes) - min(runtimes)) / median if median > 0 else 0.0
        return RealResult(runtime=median, runtimes=tuple(runtimes), spread=spread, feasible=True, error=None,
                          peak_memory=peak, loss=state.loss)

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

    def _peak_memory(self, used: list[int], state: _RunState) -> np.ndarray:
        import torch

        peak = np.zeros(self.task.n_devices)
        for d in used:
            if self.torch_devices[d].type == "cuda":
                peak[d] = torch.cuda.max_memory_allocated(self.torch_devices[d])
            else:
                peak[d] = state.static_bytes[d] + state.step_peak[d]
        return peak


class _JobTable:
    """The task's jobs as the executor reads them: each task op's kind, forward op and micro-batch,
    the (kind, op, micro-batch) -> task op index, and the values each job reads (`value_deps`)."""

    def __init__(self, task: Task, program: Any) -> None:
        self.kind = task.op_kind.tolist()
        self.forward = task.op_forward.tolist()
        self.microbatch = task.op_microbatch.tolist()
        keys = zip(self.kind, self.forward, self.microbatch, strict=True)
        self.index = {key: j for j, key in enumerate(keys)}
        self.microbatches = task.microbatches
        n = len(program.sources)
        producer = {name: k for k in range(n) for name in program.outputs[k] if name}
        self.producer = producer
        self.segment, self.replayed = replayed_ops(task)
        replayed = self.replayed
        deps: list[set[int]] = [set() for _ in range(task.n_ops)]
        for j, (k, f, b) in enumerate(zip(self.kind, self.forward, self.microbatch)):
            if k in (FORWARD, RECOMPUTE):
                for source in program.sources[f]:
                    if source and source[0] == "tensor" and source[1] in producer:
                        q = producer[source[1]]
                        deps[j].add(self.index[(self.version_of_input(k, f, q), q, b)])
            elif k == BACKWARD:
                deps[j].add(self.index[(RECOMPUTE if replayed[f] else FORWARD, f, b)])
                for name in program.outputs[f]:
                    for c in program.consumers.get(name, []) if name else []:
                        deps[j].add(self.index[(BACKWARD, c, b)])
            elif k == UPDATE:
                for mb in range(self.microbatches):
                    deps[j].add(self.index[(BACKWARD, f, mb)])
                    for name in program.owned[f]:
                        for c in program.consumers.get(name, []):
                            deps[j].add(self.index[(BACKWARD, c, mb)])
        self.value_deps = deps

    def version_of_input(self, kind: int, f: int, p: int) -> int:
        """Which job's output of producer ``p`` a forward or replayed job of ``f`` reads: a replayed
        job reads the replayed copy of a producer of its own segment, every other read is the
        forward pass's value."""
        if kind == RECOMPUTE and self.replayed[p] and self.segment[p] == self.segment[f]:
            return RECOMPUTE
        return FORWARD


class _RunState:
    """What a run of one placement keeps across its steps (weights, optimizer state, inputs, the
    compiled jobs) and what one step holds (values, copies, gradients)."""

    def __init__(self, executor: Executor, placement: np.ndarray, plan: StepPlan) -> None:
        self.ex = executor
        self.p = executor.program
        self.placement = placement
        self.plan = plan
        self.jobs = executor._jobs
        self.train = executor.task.objective == "train_step"
        self.devices = executor.torch_devices
        self.steps = 0
        self.current: _Step | None = None
        self.loss: float | None = None
        self.outputs: dict[str, Any] = {}
        self.weights: dict[str, Any] = {}
        self.compute: dict[str, Any] = {}
        self.static_bytes = np.zeros(executor.task.n_devices)
        self.step_peak = np.zeros(executor.task.n_devices)

    # -- set-up, once per run ----------------------------------------------------------------------

    def setup(self) -> None:
        """Weights (and their optimizer state) on their owners' devices, inputs and constants on the
        devices that read them, every job's arguments compiled (not timed)."""
        import torch

        p, placement, dtype = self.p, self.placement, self.ex.dtype
        try:
            owner = {name: k for k in range(len(p.owned)) for name in p.owned[k]}
            for name, weight in make_parameters(p, self.ex.seed).items():
                d = int(placement[owner[name]])
                master = weight.to(self.devices[d])
                self.weights[name] = master
                if self.train:
                    compute = master if dtype == torch.float32 else master.to(dtype)
                    self.compute[name] = compute.requires_grad_(True)
                    extra = master.numel() * compute.element_size()  # its gradient
                    extra += len(STATE_TENSORS[self.ex.task.optimizer]) * _nbytes(master)  # optimizer state
                    extra += _nbytes(compute) if compute is not master else 0
                    self.static_bytes[d] += _nbytes(master) + extra
                else:
                    if dtype != torch.float32:
                        self.weights[name] = master = master.to(dtype)
                    self.compute[name] = master
                    self.static_bytes[d] += _nbytes(master)
            used = sorted(set(placement.tolist()))
            self.data: dict[tuple[str, int, int], Any] = {}
            for b in range(self.jobs.microbatches):
                for name, value in make_inputs(p, self.ex.seed, b).items():
                    if value.is_floating_point():
                        value = value.to(dtype)
                    for d in used:
                        self.data[(name, b, d)] = value.to(self.devices[d])
                        self.static_bytes[d] += _nbytes(value)
            self.consts: dict[tuple[int, int], Any] = {}
            for k, sources in enumerate(p.sources):
                for i, s in enumerate(sources):
                    if s and s[0] == "const":
                        value = constant_tensor(p, k, i, s[1], self.devices[placement[k]])
                        self.consts[(k, i)] = value.to(dtype) if value.is_floating_point() else value
            self.optimizers: dict[tuple[int, int], Any] = {}
            for d, units in self.plan.units.items():
                for i, unit in enumerate(units):
                    if unit.kind == "update":
                        owned = [name for j in unit.jobs for name in p.owned[self.jobs.forward[j]]]
                        self.optimizers[(d, i)] = torch_optimizer(
                            self.ex.task.optimizer, [self.weights[name] for name in owned], self.ex.lr)
            self._prepare()
        except Exception as error:
            raise _StepFailed(
                f"setting up weights and inputs failed: {type(error).__name__}: {error}"
            ) from None

    def _prepare(self) -> None:
        """Per forward or replayed job: its argument list with every fixed argument in place and the
        slots filled at each step; per value, how many reads free it (module docstring); attention
        chains that run in one unit fused into their last op (`placement_gym.real.attention`)."""
        from placement_gym.real.ops import OP_TABLE

        p, jobs, plan = self.p, self.jobs, self.plan
        self.compiled: dict[int, tuple[Any, ...] | None] = {}
        reads: dict[Any, int] = {}  # value -> its reads; (value, device) -> reads of its copy there
        kept: set[tuple[str, int, int]] = set()
        fused = self._fused_attention()

        def argument(reader: int, i: int, k: int, b: int, d: int, grad: bool, args: list[Any],
                     slots: list[tuple[int, Any, int]]) -> None:
            """Input ``i`` of op ``reader`` as argument ``len(args)`` of a job of kind ``k``."""
            source = p.sources[reader][i] if i < len(p.sources[reader]) else None
            if source is None:
                args.append(None)
                return
            kind, name = source
            if kind == "data":
                args.append(self.data[(name, b, d)])
            elif kind == "param":
                args.append(self.compute[name])
            elif kind == "const":
                args.append(self.consts[(reader, i)])
            elif name in p.shared:  # a parameter another op owns: read from its owner
                src = int(self.placement[p.shared[name]])
                mode = _LEAF if self.train and grad else _DIRECT
                slots.append((len(args), ("param", name, src), mode if src == d else _COPY))
                args.append(None)
            else:
                q = jobs.producer[name]
                key = (name, b, jobs.version_of_input(k, reader, q))
                src = int(self.placement[q])
                if src != d:
                    mode = _COPY
                elif grad and plan.block.get((q, b)) != plan.block.get((reader, b)):
                    mode = _LEAF
                else:
                    mode = _DIRECT
                slots.append((len(args), key, mode))
                args.append(None)
                reads[key] = reads.get(key, 0) + 1
                if mode != _DIRECT:
                    reads[(key, d)] = reads.get((key, d), 0) + 1

        for units in plan.units.values():
            for unit in units:
                if unit.kind not in ("forward", "recompute"):
                    continue
                for j in unit.jobs:
                    k, f, b = jobs.kind[j], jobs.forward[j], jobs.microbatch[j]
                    if fused.get(j, 0) is None:
                        self.compiled[j] = None  # an inner op of a fused attention: done by its last op
                        continue
                    d = int(self.placement[f])
                    args: list[Any] = []
                    slots: list[tuple[int, Any, int]] = []
                    chain = fused.get(j)
                    if chain is None:
                        fn, attrs = OP_TABLE.get(p.op_types[f]), p.attrs[f]
                        for i in range(len(p.sources[f])):
                            argument(f, i, k, b, d, unit.grad, args, slots)
                    else:
                        fn, attrs = attention_call(chain), {}
                        for reader, i in (chain.q, chain.kt, chain.v, *(slot for _, slot in chain.masks)):
                            argument(reader, i, k, b, d, unit.grad, args, slots)
                    version = RECOMPUTE if k == RECOMPUTE else FORWARD
                    outputs = []
                    for position, name in enumerate(p.outputs[f]):
                        if name and (name in p.consumers or name in p.output_names):
                            key = (name, b, version)
                            outputs.append((position, key))
                            # a graph output, or a value its backward differentiates, outlives its reads
                            if name in p.output_names or (self.train and version == (
                                    RECOMPUTE if jobs.replayed[f] else FORWARD)):
                                kept.add(key)
                    needed = last_read_output(p, f)
                    self.compiled[j] = (f, b, d, fn, attrs, args, tuple(slots), tuple(outputs), needed,
                                        self.devices[d].type != "cuda")
        self.reads = reads
        self.kept = kept
        self.segments: dict[tuple[int, int], Segment] = {}
        if self.ex.compile is not None:
            for d, units in plan.units.items():
                for i, unit in enumerate(units):
                    if unit.kind not in ("forward", "recompute"):
                        continue
                    blocks = {plan.block.get((jobs.forward[j], jobs.microbatch[j])) for j in unit.jobs}
                    if not unit.grad or len(blocks) == 1:
                        entries = [self.compiled[j] for j in unit.jobs]
                        self.segments[(d, i)] = build_segment(
                            p, [e for e in entries if e is not None], reads, kept, self.ex.compile, _DIRECT)

    def _fused_attention(self) -> dict[int, Attention | None]:
        """The attention chains this plan runs fused: task op of each chain's last op -> the chain,
        task op of each of its other ops -> None. A chain is fused for a micro-batch when all its
        jobs share one unit (and, in a train step, one block)."""
        jobs, plan = self.jobs, self.plan
        fused: dict[int, Attention | None] = {}
        for chain in self.ex.attention:
            for b in range(jobs.microbatches):
                for kind in (FORWARD, RECOMPUTE):
                    ops = [jobs.index.get((kind, f, b)) for f in chain.ops]
                    if None in ops or len({plan.job_unit[j] for j in ops}) != 1:
                        continue
                    if self.train and len({plan.block.get((f, b)) for f in chain.ops}) != 1:
                        continue
                    for j in ops[:-1]:
                        fused[j] = None
                    fused[ops[-1]] = chain
        return fused

    def new_step(self) -> _Step:
        return _Step(self)


def _names(state: _RunState, group: dict[str, Any]) -> list[str]:
    """The names of the weights in an optimizer's parameter group."""
    ids = {id(weight): name for name, weight in state.weights.items()}
    return [ids[id(weight)] for weight in group["params"]]


def _total(parts: list[Any]) -> Any:
    """The sum of gradient contributions, one addition at a time (no stacked copy of them all)."""
    total = parts[0]
    for part in parts[1:]:
        total = total + part
    return total


def _nbytes(value: Any) -> int:
    return int(value.numel() * value.element_size())


_DIRECT, _LEAF, _COPY = 0, 1, 2


class _Step:
    """One step's tensors: values by (tensor, micro-batch, version), copies per device, gradients
    sent back, and the events by which units of different devices wait for each other."""

    def __init__(self, run: _RunState) -> None:
        self.run = run
        self.values: dict[tuple[str, int, int], Any] = {}
        self.left: dict[tuple[str, int, int], int] = dict(run.reads)
        self.copies: dict[tuple[Any, int], Any] = {}
        self.leaves: dict[tuple[int, int], list[tuple[tuple[str, int], Any]]] = {}
        self.grads: dict[tuple[str, int], list[Any]] = {}
        self.held = [0] * len(run.devices)
        self.peak = [0] * len(run.devices)
        self.lock = threading.Lock() if len(run.plan.units) > 1 else None
        self.done: dict[tuple[int, int], threading.Event] = {
            (d, i): threading.Event() for d, units in run.plan.units.items()
            for i, unit in enumerate(units) if unit.signals}
        self.cuda_done: dict[tuple[int, int], Any] = {}
        self.sources: list[Any] = []  # tensors of one GPU copied to another, kept until the step ends
        self.error: str | None = None
        self.where: dict[int, Any] = {}  # device -> the job it runs (a task op, or a block's ops)

    # -- memory accounting (the CPU's peak; CUDA has its allocator's) ----------------------------

    def _hold(self, d: int, value: Any, sign: int) -> None:
        """Count ``value``'s bytes on CPU device ``d`` (``sign`` 1) or stop counting them (-1)."""
        if self.run.devices[d].type == "cuda" or not hasattr(value, "element_size"):
            return
        if self.lock is None:
            self._count(d, sign * _nbytes(value))
        else:
            with self.lock:
                self._count(d, sign * _nbytes(value))

    def _count(self, d: int, change: int) -> None:
        held = self.held[d] + change
        self.held[d] = held
        if held > self.peak[d]:
            self.peak[d] = held

    # -- running units -----------------------------------------------------------------------------

    def run_units(self, d: int) -> None:
        """Run device ``d``'s units in order (in its worker thread)."""
        import torch

        run = self.run
        device = run.devices[d]
        streams = _streams(device) if device.type == "cuda" else None
        context = torch.cuda.stream(streams[0]) if streams else contextlib.nullcontext()
        with context:
            for i, unit in enumerate(run.plan.units[d]):
                for j in unit.waits:
                    self._wait(run.plan.job_unit[j])
                segment = run.segments.get((d, i))
                if segment is not None:
                    self.where[d] = unit.jobs[0]
                    with torch.set_grad_enabled(unit.grad):
                        self._run_segment(segment, unit, d, streams)
                elif unit.kind in ("forward", "recompute"):
                    with torch.set_grad_enabled(unit.grad):
                        version = RECOMPUTE if unit.kind == "recompute" else FORWARD
                        for j in unit.jobs:
                            self.where[d] = j
                            self._forward(j, version, streams)
                elif unit.kind == "backward":
                    for ops in unit.blocks:
                        self.where[d] = ops
                        self._backward(ops, unit.microbatch, d, streams)
                else:
                    with torch.no_grad():
                        for j in unit.jobs:
                            self.where[d] = j
                            self._gather(run.jobs.forward[j], d, streams)
                        self._update(unit, run.optimizers[(d, i)])
                if unit.signals:
                    if streams:
                        event = torch.cuda.Event()
                        event.record(streams[0])
                        self.cuda_done[(d, i)] = event
                    self.done[(d, i)].set()

    def _wait(self, where: tuple[int, int]) -> None:
        event = self.done[where]
        event.wait()
        if self.error is not None:
            raise _Aborted

    def abort(self, message: str) -> None:
        if self.error is None:
            self.error = message
        for event in self.done.values():
            event.set()

    def _transfer(self, value: Any, d: int, streams: Any, event: Any) -> Any:
        """``value`` copied to device ``d``: a real copy even between virtual CPU devices. ``event``:
        the CUDA event after the work that made ``value`` on its GPU (None: nothing to wait for). To a
        GPU the copy runs on ``d``'s copy stream once that event has passed, and ``d``'s compute
        stream waits for the copy: the host never waits. To the CPU from a GPU the host waits."""
        import torch

        target = self.run.devices[d]
        if streams is None:
            if event is not None:
                event.synchronize()
            return value.detach().clone() if value.device == target else value.detach().to(target)
        compute, copy = streams
        if event is not None:
            copy.wait_event(event)
        with torch.cuda.stream(copy):
            result = value.detach().clone() if value.device == target else value.detach().to(
                target, non_blocking=True)
        if value.device == target:
            value.record_stream(copy)  # its memory is not reused before the copy has read it
        elif value.device.type == "cuda":
            self.sources.append(value)  # another GPU's tensor: kept to the step's end, when all is done
        compute.wait_stream(copy)
        result.record_stream(compute)
        return result

    def _value_event(self, key: tuple[str, int, int]) -> Any:
        """The CUDA event after the unit that made value ``key`` (None off the GPU)."""
        run = self.run
        q = run.jobs.producer[key[0]]
        return self.cuda_done.get(run.plan.job_unit[run.jobs.index[(key[2], q, key[1])]])

    def _read(self, key: Any, mode: int, d: int, streams: Any) -> Any:
        run = self.run
        value = run.compute[key[1]] if key[0] == "param" else self.values[key]
        if mode == _DIRECT:
            return value
        cached = self.copies.get((key, d))
        if cached is None:
            if mode == _COPY:
                event = None if key[0] == "param" or streams is None and value.device.type != "cuda" else (
                    self._value_event(key))
                cached = self._transfer(value, d, streams, event)
                self._hold(d, cached, 1)
            else:
                cached = value.detach()
            if run.train and cached.is_floating_point():
                cached.requires_grad_(True)
            self.copies[(key, d)] = cached
        return cached

    def _release_read(self, key: Any, mode: int, d: int) -> None:
        """One read of a value done: free its copy on ``d`` once nothing there reads it any more, and
        the value once nothing anywhere does (unless it outlives its reads: `_RunState.kept`)."""
        if key[0] == "param":
            return
        left = self.left
        if mode != _DIRECT:
            where = (key, d)
            remaining = left[where] - 1
            left[where] = remaining
            if remaining == 0:
                copy = self.copies.pop(where, None)
                if mode == _COPY and copy is not None:
                    self._hold(d, copy, -1)
        remaining = left[key] - 1
        left[key] = remaining
        if remaining == 0 and key not in self.run.kept:
            value = self.values.pop(key, None)
            if value is not None:
                run = self.run
                self._hold(int(run.placement[run.jobs.producer[key[0]]]), value, -1)

    def _forward(self, j: int, version: int, streams: Any) -> None:
        run = self.run
        entry = run.compiled[j]
        if entry is None:  # an inner op of a fused attention
            return
        f, b, d, fn, attrs, template, slots, outputs, needed, counted = entry
        values = self.values
        args = template.copy()
        leaves = None
        for i, key, mode in slots:
            if mode == _DIRECT and key[0] != "param":
                args[i] = values[key]
                continue
            value = self._read(key, mode, d, streams)
            args[i] = value
            if mode != _DIRECT and value.requires_grad:
                if leaves is None:
                    leaves = []
                leaves.append(((key[1], b) if key[0] == "param" else (key[0], b), value))
        results = op_results(run.p, f, (fn or op_function(run.p, f))(args, attrs), needed)
        for _, key, mode in slots:
            self._release_read(key, mode, d)
        left, kept = self.left, run.kept
        for position, key in outputs:
            result = results[position]
            if counted:
                self._hold(d, result, 1)
            if left.get(key, 0) == 0 and key not in kept:
                if counted:
                    self._hold(d, result, -1)
                continue
            values[key] = result
        if leaves is not None:
            self.leaves[(f, b)] = leaves

    def _run_segment(self, segment: Segment, unit: Any, d: int, streams: Any) -> None:
        """A compiled unit: read its inputs, call it once, keep what is read after it."""
        run = self.run
        b = unit.microbatch
        tensors, leaves = [], []
        for key, mode in segment.inputs:
            value = self._read(key, mode, d, streams)
            tensors.append(value)
            if mode != _DIRECT and value.requires_grad:
                leaves.append(((key[1], b) if key[0] == "param" else (key[0], b), value))
        for key, value in zip(segment.outputs, segment(*tensors), strict=True):
            self.values[key] = value
            self._hold(d, value, 1)
        for j in unit.jobs:
            entry = run.compiled[j]
            for _, key, mode in entry[6] if entry is not None else ():
                self._release_read(key, mode, d)
        if leaves:  # the unit is one block: its backward collects the leaves of any of its ops
            self.leaves[(run.jobs.forward[unit.jobs[0]], b)] = leaves

    def _backward(self, ops: tuple[int, ...], b: int, d: int, streams: Any) -> None:
        """One autograd call for the block ``ops`` of micro-batch ``b`` (module docstring)."""
        import torch

        run = self.run
        p = run.p
        outputs, seeds = [], []
        inputs: list[Any] = []
        targets: list[tuple[str, Any]] = []  # ("leaf", (name, b)) or ("param", name)
        seen: set[int] = set()
        for f in ops:
            version = RECOMPUTE if run.jobs.replayed[f] else FORWARD
            for name in p.outputs[f]:
                key = (name, b, version)
                value = self.values.get(key) if name else None
                if value is None or not isinstance(value, torch.Tensor) or not value.requires_grad:
                    continue
                parts = [g if src == d else self._transfer(g, d, streams, event)
                         for src, g, event in self._pop_grads((name, b))]
                if name in p.output_names and value.is_floating_point():
                    parts.append(torch.full_like(value, 1.0 / max(1, value.numel())))
                if parts:
                    outputs.append(value)
                    seeds.append(_total(parts))
            for key, leaf in self.leaves.pop((f, b), []):
                if id(leaf) not in seen:
                    seen.add(id(leaf))
                    inputs.append(leaf)
                    targets.append(("leaf", key))
            for name in p.owned[f]:
                inputs.append(run.compute[name])
                targets.append(("param", name))
        if outputs and inputs:
            grads = torch.autograd.grad(outputs, inputs, seeds, allow_unused=True)
            event = None
            if streams is not None:
                event = torch.cuda.Event()
                event.record(streams[0])
            for (what, key), grad in zip(targets, grads, strict=True):
                if grad is not None:
                    self._push_grad((key, b) if what == "param" else key, d, grad, event)
        for f in ops:
            version = RECOMPUTE if run.jobs.replayed[f] else FORWARD
            for name in p.outputs[f]:
                key = (name, b, version)
                if name and name not in p.output_names and key in self.values:
                    self._hold(d, self.values.pop(key), -1)

    def _push_grad(self, key: tuple[str, int], d: int, grad: Any, event: Any) -> None:
        self.grads.setdefault(key, []).append((d, grad, event))  # list.append is atomic under the GIL
        self._hold(d, grad, 1)

    def _pop_grads(self, key: tuple[str, int]) -> list[tuple[int, Any, Any]]:
        parts = self.grads.pop(key, [])
        for src, grad, _ in parts:
            self._hold(src, grad, -1)
        return parts

    def _gather(self, f: int, d: int, streams: Any) -> None:
        """The gradient of each parameter op ``f`` owns, summed over its contributions (every
        micro-batch, every op that reads it), as its master weight's ``.grad``."""
        run = self.run
        for name in run.p.owned[f]:
            parts = [g if src == d else self._transfer(g, d, streams, event)
                     for b in range(run.jobs.microbatches) for src, g, event in self._pop_grads((name, b))]
            master = run.weights[name]
            master.grad = _total(parts).to(master.dtype) if parts else None

    def _update(self, unit: Any, torch_opt: Any) -> None:
        """One step of the unit's optimizer over its parameters (one fused kernel where torch has it),
        then each low-precision copy written from its master weight."""
        run = self.run
        torch_opt.step()
        for j in unit.jobs:
            for name in run.p.owned[run.jobs.forward[j]]:
                master, compute = run.weights[name], run.compute[name]
                master.grad = None
                if compute is not master:
                    compute.copy_(master)

    def finish(self) -> None:
        """Keep the step's graph outputs (of the last micro-batch), its loss and the CPU peak."""
        run = self.run
        last = run.jobs.microbatches - 1
        outputs = {}
        loss = 0.0
        for name in run.p.output_names:
            key = (name, last, FORWARD)
            if key in self.values:
                outputs[name] = self.values[key].detach().to("cpu")
        if run.train:
            for b in range(run.jobs.microbatches):
                for name in run.p.output_names:
                    value = self.values.get((name, b, FORWARD))
                    if value is not None and value.is_floating_point():
                        loss += float(value.detach().float().mean())
        run.outputs = outputs
        run.loss = loss if run.train else None
        run.step_peak = self.peak.copy()


_STREAMS: dict[Any, tuple[Any, Any]] = {}


def _streams(device: Any) -> tuple[Any, Any]:
    """The compute and copy streams of a CUDA device, made once per process."""
    import torch

    if device not in _STREAMS:
        _STREAMS[device] = (torch.cuda.Stream(device), torch.cuda.Stream(device))
    return _STREAMS[device]


class _DevicePool:
    """One worker thread per used device but the first, alive for the whole run (so per-thread
    caches such as cuDNN's stay warm); the calling thread runs the first device's units. A step is
    handed to every worker at once and timed from that moment to the last unit's end: on CUDA-only
    placements by device events (each device's start recorded when the step is handed out, its end
    after its last unit), else by the host clock after synchronising the devices."""

    def __init__(self, executor: Executor, used: list[int]) -> None:
        self.ex = executor
        self.used = used
        self.devices = [executor.torch_devices[d] for d in used]
        self.cuda_only = all(device.type == "cuda" for device in self.devices)
        self.queues: dict[int, queue.SimpleQueue] = {}
        self.finished: queue.SimpleQueue = queue.SimpleQueue()
        self.threads: list[threading.Thread] = []
        for d in used[1:]:
            inbox: queue.SimpleQueue = queue.SimpleQueue()
            thread = threading.Thread(target=self._serve, args=(d, inbox), name=f"placement-gym-{d}",
                                      daemon=True)
            self.queues[d] = inbox
            self.threads.append(thread)
            thread.start()

    def _serve(self, d: int, inbox: queue.SimpleQueue) -> None:
        import torch

        device = self.ex.torch_devices[d]
        if device.type == "cuda":
            torch.cuda.set_device(device)
        while True:
            step = inbox.get()
            if step is None:
                return
            self.finished.put(self._run(step, d))

    def _run(self, step: _Step, d: int) -> str | None:
        try:
            step.run_units(d)
        except _Aborted:
            return None
        except BaseException as error:  # noqa: BLE001 - any failure on a device ends the step
            step.abort(self._explain(error, d, step))
            return step.error
        return None

    def _explain(self, error: BaseException, d: int, step: _Step) -> str:
        where = f"{self.ex.task.cluster.device_names[d]!r} ({self.ex.torch_devices[d]})"
        first_line = str(error).strip().splitlines()[0] if str(error).strip() else ""
        program, jobs = self.ex.program, self.ex._jobs
        current = step.where.get(d)
        if current is None:
            kind, ops = "set-up", ()
        elif isinstance(current, tuple):
            kind, ops = "backward", current
        else:
            kind, ops = OP_KINDS[jobs.kind[current]], (jobs.forward[current],)
        names = ", ".join(f"{program.graph.op_names[f]!r} ({program.op_types[f]})" for f in ops[:3])
        more = f" and {len(ops) - 3} more" if len(ops) > 3 else ""
        what = f"{kind} of op{'s' if len(ops) > 1 else ''} {names}{more}" if ops else kind
        return f"{what} on device {where} failed: {type(error).__name__}: {first_line}"

    def step(self, step: _Step) -> float:
        import torch

        starts = {}
        if self.cuda_only:
            for d, device in zip(self.used, self.devices, strict=True):
                compute = _streams(device)[0]
                compute.wait_stream(torch.cuda.current_stream(device))
                starts[d] = torch.cuda.Event(enable_timing=True)
                starts[d].record(compute)
        begin = time.perf_counter()
        for inbox in self.queues.values():
            inbox.put(step)
        first = self.used[0]
        if self.ex.torch_devices[first].type == "cuda":
            with torch.cuda.device(self.ex.torch_devices[first]):
                self._run(step, first)
        else:
            self._run(step, first)
        for _ in self.queues:
            self.finished.get()
        if step.error is not None:
            raise _StepFailed(step.error)
        if self.cuda_only:
            elapsed = 0.0
            for d, device in zip(self.used, self.devices, strict=True):
                end = torch.cuda.Event(enable_timing=True)
                end.record(_streams(device)[0])
                end.synchronize()
                elapsed = max(elapsed, starts[d].elapsed_time(end) / 1e3)
        else:
            for device in self.devices:
                if device.type == "cuda":
                    torch.cuda.synchronize(device)
            elapsed = time.perf_counter() - begin
        return elapsed

    def close(self) -> None:
        for inbox in self.queues.values():
            inbox.put(None)
        for thread in self.threads:
            thread.join()
