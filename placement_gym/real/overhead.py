"""The executor's own overhead: its one-device step against torch running the same graph directly.

What `placement-gym bench --real-overhead` reports (issue 67, item 3). Two ways to run a task's program
(`placement_gym.real.program`: the graph's ONNX ops as torch calls, the same seeded weights and data):

* `placement_gym.real.executor.Executor`, every op on device 0 (one worker, its job queue, the
  bookkeeping of every tensor, per-op autograd for training);
* `DirectRunner`, "torch running the same graph directly": one straight-line torch program on one
  device and nothing else. The arguments of every op are built once (data from `make_inputs`,
  weights from `make_parameters`, constants from `constant_tensor`, as `reference_arguments` lays
  them out); a step is a plain loop calling each op's torch function (looked up once, as the executor
  does) in graph order, each value dropped after its last reader (as a module's forward drops its
  locals). Inference runs it under
  ``torch.no_grad()``. A train step runs it with autograd (the weights require gradients), takes the
  loss the executor takes (the sum over the float graph outputs of their mean), one
  ``torch.autograd.grad`` over every parameter, and the task's optimizer update: by default torch's
  own optimizer as the executor runs it (`placement_gym.real.optimizers.torch_optimizer`: fused into
  one kernel where torch has one), or with ``update="reference"`` the written-out update of
  `placement_gym.real.optimizers.apply_update` per parameter (state from `new_state`, the step counter
  as the executor counts it: 1 for a run's first step). Same maths as the executor's step, so the same
  outputs and updated weights up to float rounding (tests/real/test_overhead.py checks both).

Both call the same torch function of each op and the same optimizer, so the difference between them
is the executor's own work (scheduling, threads, tensor bookkeeping, autograd per block) less what it
does better than a plain loop: the executor runs an attention chain as one fused
``scaled_dot_product_attention`` call (`placement_gym.real.attention`), the direct runner runs the
graph's ops as they are, so on transformers the executor can come out ahead. `measure_overhead`
times both in the same process, in interleaved rounds, and returns one row (`ROW_KEYS`). With
``compiled=True`` it also times the direct forward compiled by ``torch.compile`` (inference only,
inductor); a compile that fails leaves ``compiled_ms`` None and says why in ``note``. Besides the
bundled graphs it runs `TINY_CHAIN`, 1,000 ops of a few microseconds each, where the executor's own
work per op is most of a step.

Timing: ``time.perf_counter`` around each step, after ``torch.cuda.synchronize`` on a CUDA device.
Nothing here imports torch at module import time.
"""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import numpy as np
import onnx

from placement_gym.cluster.cluster import Cluster
from placement_gym.common.extras import require
from placement_gym.graph.bundled import bundled_graph_names
from placement_gym.real.devices import intra_op_threads, virtual_cpu_cluster
from placement_gym.real.optimizers import apply_update, new_state, optimizer_state, torch_optimizer
from placement_gym.real.program import (
    Program,
    build_program,
    constant_tensor,
    last_read_output,
    load_model,
    make_inputs,
    make_parameters,
    op_function,
    op_results,
)
from placement_gym.task.compiled import Task

# The learning rate both runs use (the Executor's default; only the numbers depend on it).
LEARNING_RATE = 1e-3
OBJECTIVES = ("inference", "train_step")
DEVICES = ("cpu", "cuda")
# A graph of many tiny ops (4 x 4 tensors: each op a few microseconds), where the ops cost next to
# nothing and the executor's own work per op is what a step measures (`tiny_chain_model`).
TINY_CHAIN = "tiny-chain"
TINY_CHAIN_OPS = 1000
# Timed rounds per row (the median of 5). The graphs `bench --real-overhead` runs by default
# (each row a few seconds on a 2-core CPU) are placement_gym.cli.bench_command.DEFAULT_OVERHEAD_GRAPHS.
DEFAULT_REPEATS = 5

ROW_KEYS = (
    "graph", "objective", "batch", "device", "n_ops", "n_jobs", "executor_ms", "torch_ms",
    "overhead_us_per_op", "vs_torch", "compiled_ms", "vs_compiled", "note",
)
"""The keys of a `measure_overhead` row, in order (docs/real_hardware.md, "Its overhead").

``graph``, ``objective``, ``batch``, ``device`` (``"cpu"`` or ``"cuda"``); ``n_ops``: the graph's
forward ops; ``n_jobs``: the task's ops (for ``train_step`` forward, backward and update ops);
``executor_ms``: the executor's one-device step (all ops on device 0), median of the timed steps;
``torch_ms``: `DirectRunner`'s step, likewise; ``overhead_us_per_op``: (executor - torch) / n_jobs in
microseconds, the executor's time per job beyond the ops' own (negative when the executor's step came
out faster, which noise can do where the overhead is small against the ops, and the executor's fused
attention on transformers); ``vs_torch``: executor /
torch; ``compiled_ms``: the direct forward compiled by ``torch.compile`` (inference with
``compiled=True`` only; else None); ``vs_compiled``: executor / compiled (None likewise); ``note``:
why ``compiled_ms`` is None when it was asked for ("" otherwise)."""

# The targets (issue 67, "Targets"), checked by `bench --real-overhead --check`.
TARGET_US_PER_OP = 5.0  # CPU, one thread: executor overhead per job, at most
TARGET_VS_TORCH = 1.2  # CPU, one thread: one-device step / torch direct, at most
TARGET_VS_TORCH_GPU = 1.3  # GPU: ResNet-50 inference at batch 32, one-device step / torch eager, at most
WHY_US_PER_OP = ("the executor must cost little against the ops it runs: at 5 us per job a 500-op step "
                 "spends 2.5 ms on scheduling, small against its ops on any device; the ops' torch "
                 "functions are in both runs, so this is the executor's own work")
WHY_VS_TORCH = ("a placement's measured time must be the placement's, not the executor's: a one-device "
                "step within 1.2x of torch running the same graph directly (median of 5, same process, "
                "one intra-op thread); load and small graphs move it, so run it on an idle machine")
WHY_VS_TORCH_GPU = ("on a GPU the ops are short and the host's dispatch is what remains: ResNet-50 inference "
                    "at batch 32 on one GPU within 1.3x of torch eager running the same graph")


def _torch() -> Any:
    return require("torch", "measuring the executor's overhead")


def _synchronize(device: Any) -> None:
    import torch

    if device.type == "cuda":
        torch.cuda.synchronize(device)


def one_gpu_cluster(memory: float | None = None) -> Cluster:
    """A cluster of one GPU, ``gpu:0`` (taken for ``cuda:0``): gpu:0 of the ``h100x8`` preset (Hopper
    figures, 989 TFLOP/s bf16 on the tensor cores), its memory ``memory`` bytes when given (else the
    first CUDA device's where torch sees one, else the preset's). The real runs only need its device
    map; the cost model prices the same single-GPU placement with its figures."""
    from placement_gym.cluster.load import cluster_from_dict, cluster_to_dict
    from placement_gym.cluster.presets import PRESETS

    data = cluster_to_dict(PRESETS["h100x8"]())
    data["devices"] = [device for device in data["devices"] if device["name"] == "gpu:0"]
    data["links"] = []
    data.pop("hosts", None)
    for device in data["devices"]:
        device.pop("host", None)
        if memory is None:
            try:
                import torch

                if torch.cuda.is_available():
                    memory = float(torch.cuda.get_device_properties(0).total_memory)
            except ImportError:
                pass
        if memory is not None:
            device["memory"] = float(memory)
    data["name"], data["description"] = "gpu1", "gpu:0 of the h100x8 preset alone (one CUDA GPU)"
    return cluster_from_dict(data, "gpu1")


class DirectRunner:
    """The task's program as one straight-line torch program on one device (see the module docstring).

    ``device``: a torch device string (default ``"cpu"``); ``seed``, ``batch``, ``model``, ``lr``: as
    `Executor`'s, so that both start from the same weights and data. ``update``: ``"torch"`` (torch's
    optimizer, fused where it can be, as the executor runs it; the default) or ``"reference"``
    (`apply_update` per parameter). `step` runs one step and returns
    its seconds; `run` runs warm-up and timed steps. The weights and optimizer state carry over from
    step to step (as a training loop's). After a step ``parameters`` holds the weights (name ->
    tensor on ``device``) and `outputs` gives the last step's graph outputs (name -> CPU tensor).
    """

    def __init__(self, task: Task, device: str = "cpu", seed: int = 0, batch: int | None = None,
                 model: onnx.ModelProto | str | Path | None = None, lr: float = LEARNING_RATE,
                 update: str = "torch") -> None:
        torch = _torch()

        if update not in ("torch", "reference"):
            raise ValueError(f"update must be 'torch' or 'reference', got {update!r}")

        step = task.step
        if step.precision != "fp32" or step.microbatches != 1 or step.recompute or step.tensor_parallel != 1:
            raise ValueError(f"task {task.id}: the direct runner runs plain fp32 steps (one batch, every "
                             "activation kept, no tensor parallelism)")
        self.task = task
        self.device = torch.device(device)
        if self.device.type == "cuda" and self.device.index is None:
            self.device = torch.device("cuda", 0)
        self.lr = float(lr)
        self.train = task.objective == "train_step"
        self.program: Program = build_program(task.graph, load_model(task.graph, model), batch)
        p = self.program
        weights = make_parameters(p, seed)
        self.parameters: dict[str, Any] = {
            name: value.to(self.device).requires_grad_(self.train) for name, value in weights.items()}
        data = make_inputs(p, seed)
        self.data: dict[str, Any] = {name: value.to(self.device) for name, value in data.items()}
        self._optimizer = None
        self._state: dict[str, dict[str, Any]] = {}
        if self.train and update == "torch":
            self._optimizer = torch_optimizer(task.optimizer, list(self.parameters.values()), self.lr)
        elif self.train:
            self._state = {name: new_state(task.optimizer, weight.detach())
                           for name, weight in self.parameters.items()}
        self.steps = 0
        # Per op: its arguments with everything but earlier ops' outputs filled in once (``_eager``),
        # or with the constants alone (``_traced``, for `compiled_forward`, whose data and weights are
        # inputs), the slots to fill from the values of the step, and the outputs later ops or the
        # graph's outputs read.
        wanted = set(p.consumers) | set(p.output_names)
        self._eager: list[tuple[list[Any], list[tuple[int, str]]]] = []
        self._traced: list[tuple[list[Any], list[tuple[int, str]]]] = []
        self._keep: list[list[tuple[int, str]]] = []
        for k, sources in enumerate(p.sources):
            eager, eager_fill, traced, traced_fill = [], [], [], []
            for i, source in enumerate(sources):
                if source is None:
                    eager.append(None)
                    traced.append(None)
                    continue
                kind, name = source
                if kind == "const":
                    value = constant_tensor(p, k, i, name, self.device)
                    eager.append(value)
                    traced.append(value)
                    continue
                traced.append(None)
                traced_fill.append((i, name))
                if kind == "data":
                    eager.append(self.data[name])
                elif kind == "param" or name in self.parameters:  # a shared parameter is the parameter
                    eager.append(self.parameters[name])
                else:
                    eager.append(None)
                    eager_fill.append((i, name))
            self._eager.append((eager, eager_fill))
            self._traced.append((traced, traced_fill))
            self._keep.append([(j, name) for j, name in enumerate(p.outputs[k]) if name and name in wanted])
        # Per op: the values it reads last (not graph outputs), dropped once it has run, as the locals
        # of a module's forward go when they are no longer used.
        last_reader: dict[str, int] = {}
        for k, (_, fill) in enumerate(self._eager):
            for _, name in fill:
                last_reader[name] = k
        outputs = set(p.output_names)
        self._free: list[list[str]] = [[] for _ in p.sources]
        for name, k in last_reader.items():
            if name not in outputs:
                self._free[k].append(name)
        self._last: dict[str, Any] = {}
        # Per op: its torch function, attributes and last output read, looked up once (as the executor does).
        self._calls = [(op_function(p, k), p.attrs[k], last_read_output(p, k)) for k in range(len(p.sources))]

    # -- one pass over the ops ---------------------------------------------------------------------

    def _forward(self, plan: list[tuple[list[Any], list[tuple[int, str]]]],
                 values: dict[str, Any]) -> dict[str, Any]:
        p = self.program
        keep, free, calls = self._keep, self._free, self._calls
        for k, (fixed, fill) in enumerate(plan):
            args = list(fixed)
            for i, name in fill:
                args[i] = values[name]
            fn, attrs, last_read = calls[k]
            results = op_results(p, k, fn(args, attrs), last_read)
            del args
            for j, name in keep[k]:
                values[name] = results[j]
            for name in free[k]:
                values.pop(name, None)
        return values

    def _graph_outputs(self, values: dict[str, Any]) -> dict[str, Any]:
        return {name: values[name] for name in self.program.output_names if name in values}

    def step(self) -> float:
        """One step (inference: the forward; train_step: forward, loss, gradients, update); seconds."""
        import torch

        device = self.device
        _synchronize(device)
        start = time.perf_counter()
        if not self.train:
            with torch.no_grad():
                outputs = self._graph_outputs(self._forward(self._eager, {}))
        else:
            with torch.enable_grad():
                outputs = self._graph_outputs(self._forward(self._eager, {}))
                terms = [value.mean() for value in outputs.values() if isinstance(value, torch.Tensor)
                         and value.is_floating_point() and value.requires_grad]
                names = [name for name, weight in self.parameters.items() if weight.requires_grad]
                weights = [self.parameters[name] for name in names]
                grads = (torch.autograd.grad(sum(terms), weights, allow_unused=True) if terms
                         else [None] * len(names))
            if self._optimizer is not None:
                for weight, grad in zip(weights, grads, strict=True):
                    weight.grad = grad  # None: no gradient, so no update (as in the executor)
                self._optimizer.step()
            else:
                number = self.steps + 1  # this step's number, 1 for the first (the executor's count)
                with torch.no_grad():
                    for name, grad in zip(names, grads, strict=True):
                        if grad is not None:
                            apply_update(self.task.optimizer, self.parameters[name], grad,
                                         self._state[name], number, self.lr)
        _synchronize(device)
        elapsed = time.perf_counter() - start
        self.steps += 1
        self._last = outputs
        return elapsed

    def run(self, warmup: int = 1, repeats: int = 3) -> list[float]:
        """``warmup`` untimed steps, then the seconds of each of ``repeats`` timed steps."""
        for _ in range(warmup):
            self.step()
        return [self.step() for _ in range(repeats)]

    @property
    def optimizer_state(self) -> dict[str, dict[str, Any]]:
        """Each parameter's optimizer state (name -> {state name -> tensor}, the names of
        `STATE_TENSORS`); empty for inference and SGD, and before the first step."""
        if self._optimizer is None:
            return {name: tensors for name, tensors in self._state.items() if tensors}
        state = {name: optimizer_state(self._optimizer, weight) for name, weight in self.parameters.items()}
        return {name: tensors for name, tensors in state.items() if tensors}

    def outputs(self) -> dict[str, Any]:
        """The last step's graph outputs, name -> detached CPU tensor."""
        return {name: value.detach().to("cpu") for name, value in self._last.items()}

    # -- compiled ------------------------------------------------------------------------------------

    def compiled_forward(self, mode: str | None = None, backend: str = "inductor") -> Callable[[], Any]:
        """The inference forward as one compiled program: ``() -> graph outputs``.

        The loop over the ops as one function of the data and the weights (the constants in place),
        which ``torch.compile`` (``mode``: None, ``"reduce-overhead"`` ...; ``backend``: inductor, or
        ``"eager"`` to capture the graph and run it as it is) compiles on the first call. Raises what
        compiling raises; inference only."""
        import torch

        if self.train:
            raise ValueError("compiled_forward: inference only (a train step is not compiled here)")
        data_names, weight_names = list(self.data), list(self.parameters)
        output_names = list(self.program.output_names)

        def forward(*tensors: Any) -> tuple[Any, ...]:
            values = dict(zip(data_names + weight_names, tensors, strict=True))
            values = self._forward(self._traced, values)
            return tuple(values[name] for name in output_names if name in values)

        inputs = [self.data[n] for n in data_names] + [self.parameters[n].detach() for n in weight_names]
        compiled = torch.compile(forward, mode=mode, backend=backend, dynamic=False)

        def call() -> Any:
            with torch.no_grad():
                return compiled(*inputs)

        return call

    def timed(self, fn: Callable[[], Any]) -> float:
        """Seconds of one call of ``fn`` on this runner's device (synchronised on a GPU)."""
        _synchronize(self.device)
        start = time.perf_counter()
        fn()
        _synchronize(self.device)
        return time.perf_counter() - start


# --- the measurement -------------------------------------------------------------------------------


def tiny_chain_model(n_ops: int = TINY_CHAIN_OPS) -> onnx.ModelProto:
    """`TINY_CHAIN`: a chain of ``n_ops`` ops on a 4 x 4 tensor, every tenth a MatMul with a weight of
    its own, the others Tanh: ops of a few microseconds, so a step is mostly the work around them."""
    from onnx import TensorProto, helper, numpy_helper

    nodes, weights, previous = [], [], "x"
    for i in range(n_ops):
        if i % 10 == 0:
            weights.append(numpy_helper.from_array(np.eye(4, dtype=np.float32), f"w{i}"))
            nodes.append(helper.make_node("MatMul", [previous, f"w{i}"], [f"h{i}"], name=f"op{i}"))
        else:
            nodes.append(helper.make_node("Tanh", [previous], [f"h{i}"], name=f"op{i}"))
        previous = f"h{i}"
    inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 4])]
    outputs = [helper.make_tensor_value_info(previous, TensorProto.FLOAT, [4, 4])]
    graph = helper.make_graph(nodes, TINY_CHAIN, inputs, outputs, weights)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def overhead_graphs() -> list[str]:
    """The graphs `measure_overhead` takes: `TINY_CHAIN` and the bundled graphs."""
    return [TINY_CHAIN, *bundled_graph_names()]


def overhead_task(graph_name: str, objective: str,
                  device: str = "cpu") -> tuple[Task, onnx.ModelProto | None]:
    """The task `measure_overhead` runs and the ONNX model it needs (None for a bundled graph): the
    graph on a one-device cluster (``cpu1``, one virtual CPU device, for ``device="cpu"``;
    `one_gpu_cluster` for ``"cuda"``)."""
    from placement_gym.graph.onnx_import import graph_from_onnx
    from placement_gym.task.compiled import make_task
    from placement_gym.task.named import get_task

    if graph_name not in overhead_graphs():
        raise ValueError(f"unknown graph {graph_name!r}; the executor's overhead is measured on "
                         f"{', '.join(overhead_graphs())}")
    if objective not in OBJECTIVES:
        raise ValueError(f"unknown objective {objective!r}; allowed: {', '.join(OBJECTIVES)}")
    if device not in DEVICES:
        raise ValueError(f"unknown device {device!r}; allowed: {', '.join(DEVICES)}")
    cluster = virtual_cpu_cluster(1) if device == "cpu" else one_gpu_cluster()
    if graph_name == TINY_CHAIN:
        model = tiny_chain_model()
        return make_task(graph_from_onnx(model), cluster, objective), model
    return get_task(graph_name, cluster, objective), None


def _median_ms(values: Iterable[float]) -> float:
    return statistics.median(values) * 1e3


def measure_overhead(graph_name: str, objective: str, batch: int | None, repeats: int = DEFAULT_REPEATS,
                     warmup: int = 1, device: str = "cpu", compiled: bool = False, seed: int = 0,
                     executor_options: dict[str, Any] | None = None) -> dict[str, Any]:
    """The executor's overhead on one bundled graph: one row with the keys of `ROW_KEYS`.

    The task is `overhead_task`'s (one device). In the same process and, on the CPU, under one
    intra-op thread (`intra_op_threads(1)`), ``repeats`` rounds each run the executor's one-device
    step (all ops on device 0; ``Executor(...).run(placement, warmup, repeats=1)``: its ``warmup``
    untimed steps, then one timed) and then `DirectRunner`'s (``warmup`` untimed steps, then one
    timed), so that load hits both alike; each figure is the median of its ``repeats`` timed steps.
    ``overhead_us_per_op`` = (executor_ms - torch_ms) / n_jobs in microseconds: negative when the
    executor's step came out faster (noise, where the overhead is small against the ops, or what the
    executor does better than a plain loop: its fused attention).
    ``compiled``: also time the direct forward compiled by ``torch.compile`` (inference only; see
    `DirectRunner.compiled_forward`), compiled before the first round, in the same rounds.
    ``executor_options``: more keywords for `Executor` (``compile=``, ``fuse_attention=``); by default
    the executor runs every op as the direct runner does (``fuse_attention=False``: its fused attention
    would be a different, faster computation, not less overhead).
    A failed executor step raises RuntimeError with its reason.
    """
    _torch()
    from placement_gym.real.executor import Executor

    if isinstance(repeats, bool) or not isinstance(repeats, (int, np.integer)) or repeats < 1:
        raise ValueError(f"repeats must be an integer >= 1, got {repeats!r}")
    if isinstance(warmup, bool) or not isinstance(warmup, (int, np.integer)) or warmup < 0:
        raise ValueError(f"warmup must be an integer >= 0, got {warmup!r}")
    task, model = overhead_task(graph_name, objective, device)
    placement = np.zeros(task.graph.n_ops, dtype=np.int64)
    threads = 1 if device == "cpu" else None
    note = ""
    with intra_op_threads(threads):
        options = {"fuse_attention": False, **(executor_options or {})}
        executor = Executor(task, seed=seed, batch=batch, model=model, lr=LEARNING_RATE, **options)
        runner = DirectRunner(task, device=device, seed=seed, batch=batch, model=model, lr=LEARNING_RATE)
        compiled_call = None
        if compiled and objective == "inference":
            try:
                compiled_call = runner.compiled_forward()
                for _ in range(max(1, warmup)):  # the first call compiles
                    runner.timed(compiled_call)
            except Exception as error:  # noqa: BLE001 - any failure of torch.compile is reported, not raised
                text = str(error).strip().splitlines()
                note = f"torch.compile failed: {type(error).__name__}: {text[0] if text else ''}"[:200]
                compiled_call = None
        elif compiled:
            note = "compiled: inference only"
        executor_times, torch_times, compiled_times = [], [], []
        for _ in range(repeats):
            result = executor.run(placement, warmup=warmup, repeats=1)
            if not result.feasible:
                raise RuntimeError(f"{graph_name} {objective}: the executor's one-device step failed: "
                                   f"{result.error}")
            executor_times.append(result.runtime)
            torch_times.extend(runner.run(warmup=warmup, repeats=1))
            if compiled_call is not None:
                compiled_times.append(runner.timed(compiled_call))
    executor_ms, torch_ms = _median_ms(executor_times), _median_ms(torch_times)
    compiled_ms = _median_ms(compiled_times) if compiled_times else None
    n_jobs = int(task.n_ops)
    return {
        "graph": graph_name,
        "objective": objective,
        "batch": int(batch) if batch is not None else int(task.graph.data_inputs[0][1][0]),
        "device": device,
        "n_ops": int(task.graph.n_ops),
        "n_jobs": n_jobs,
        "executor_ms": executor_ms,
        "torch_ms": torch_ms,
        "overhead_us_per_op": (executor_ms - torch_ms) * 1e3 / n_jobs,
        "vs_torch": executor_ms / torch_ms if torch_ms > 0 else math.inf,
        "compiled_ms": compiled_ms,
        "vs_compiled": (executor_ms / compiled_ms if compiled_ms else None),
        "note": note,
    }
