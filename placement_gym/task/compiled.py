"""`Task` = OpGraph + Cluster + Objective, compiled once into the flat arrays the simulators read.

For ``train_step`` the forward graph is extended (docs/design.md, section 2):

* a backward op ``f.grad`` for every forward op ``f``, on ``f``'s device, at index ``2n - 1 - f`` (so
  backward ops follow the reverse topological order and every index stays topological);
* gradient tensors reversed along every forward edge: ``c.grad -> p.grad`` with the bytes of the
  tensor ``p -> c``; a shared parameter's gradient goes from ``c.grad`` to the owner's update op;
* saved activations: ``f.grad`` also consumes every input and every output tensor of ``f``, so
  forward activations stay alive until the backward ops that need them;
* an update op ``f.update`` for every op that owns parameters, consuming ``f.grad``'s parameter
  gradient (indices ``2n ...`` in forward order).

A training step runs BatchNormalization in training mode (`graph.op_costs.batch_norm_in_training`):
exported CNNs carry the inference form, so its forward FLOPs and bytes are raised to the training form
first.

Costs of the added ops (documented choices, not paper facts): a backward op does 2x the forward
FLOPs for matmul and conv ops (gradients of both operands) and 1x for the others, and moves 2x the
forward bytes. An update op reads and writes parameters, gradients and optimizer state:
Adam 12 FLOPs and 7 x 4 bytes per parameter element (read p, g, m, v; write p, m, v), SGD 2 FLOPs
and 3 x 4 bytes. Static memory of an op with parameters P bytes: P for inference; for training
P (weights) + P (gradients) + the optimizer's state (Adam 2P, momentum P, SGD 0).

Precision (``precision``: ``fp32``, the default, or ``bf16``/``fp16``, mixed precision with fp32
master weights as Megatron-LM and PyTorch AMP train). A graph's bytes are fp32 (4 bytes per element);
in half precision:

* matmul and conv ops, forward and backward, run on the device's tensor cores: FLOPs / (its
  ``tensor_peak_flops`` x ``tensor_efficiency``, `Cluster.tensor_rate`); a device without tensor cores
  (a CPU, a K80) runs them at its FP32 rate. The other ops keep the FP32 FLOP rate (they are
  memory-bound: the bytes term decides them);
* every tensor (activations, their gradients, the bf16 weights ops read and the bf16 parameter
  gradients) and the bytes every forward and backward op moves take 2 bytes per element, half the
  graph's figures. The graph records no element types, so its few integer tensors (token ids,
  shapes) are halved too;
* an update op reads the fp32 master weights, the bf16 gradient and the optimizer's fp32 state and
  writes the master weights, the state and a bf16 copy of the weights: Adam reads 4 + 2 + 8 and writes
  4 + 8 + 2 bytes per parameter element, 28 as in fp32 (momentum 20, SGD 12, as in fp32), with the
  same FLOPs;
* static memory per parameter element for training: 2 (bf16 weights) + 2 (bf16 gradients) + 4 (fp32
  master copy) + the optimizer's fp32 state (Adam 4 + 4, momentum 4, SGD none): 16 bytes with Adam,
  the 16 bytes per parameter of mixed-precision Adam (and the same totals as fp32's 4 + 4 + state);
  for inference 2 bytes per parameter element (the bf16 weights alone).

Pipelined steps (``microbatches=M > 1``, docs/cost_model.md, "Pipelined steps"): the step runs ``M``
micro-batches, each a copy of the graph at its own batch (an export at batch 32 with M = 4 is a step
of 128 samples), so that a placement across devices is a pipeline. Layout (every index topological):

* forward op ``f`` of micro-batch ``k`` at ``k n + f`` (ops ``0..n-1`` are the graph's forward ops
  themselves, micro-batch 0); its backward op at ``M n + k n + (n - 1 - f)``; the update ops, one per
  op with parameters as for M = 1, at ``2 M n ...``; each update waits for the parameter gradients of
  all M backward copies (gradients accumulated, one update);
* tensors: micro-batch 0's are the tensors of the M = 1 task, with the same ids; then the tensors of
  micro-batches 1..M-1 in the same order, except the parameter tensors, which all copies share (one
  tensor, sent at most once per device; parameters, gradients and optimizer state are counted once in
  ``static_bytes``); a graph data input is a new micro-batch per copy; each copy's activations stay
  alive until that copy's backward ops read them, so memory grows with M as GPipe's does;
* the schedule is GPipe's fill-drain (Huang et al., NeurIPS 2019, figure 2c: every micro-batch's
  forward before any backward), stated as zero-byte dependency tokens (ids after all other tensors),
  which both simulators read like any tensor: each forward op of micro-batch ``k + 1`` waits for the
  same op of micro-batch ``k``, each backward op likewise (one op takes micro-batches in order; both
  on one device, so the token is never sent), and the backward ops of micro-batch 0 at the graph's
  sinks (ops none of whose outputs other than parameters is read by an op) wait for every sink of the
  last micro-batch. Every backward op follows a sink's backward and every forward op precedes a sink,
  so no backward op starts before every forward op has finished. Among its ready ops a device takes
  the lowest micro-batch first (`op_microbatch`, an update op counting as the last), then the
  earliest ready, then the lowest index (both simulators; docs/cost_model.md, "Pipelined steps").

``M = 1`` is the step described above, array for array.

Activation recomputation (``recompute=True``, training only; docs/cost_model.md, "Activation
recomputation"), as Chen et al. (2016, "Training deep nets with sublinear memory cost") and Megatron-LM
(full recomputation) train models whose activations do not fit:

* the forward ops are cut into ``K = round(sqrt(n))`` segments, contiguous ranges of the topological
  order with equal op counts (`recompute_segments`); every segment but the last is replayed;
* a replayed op ``f.recompute`` (kind 3) runs on ``f``'s device with ``f``'s costs, reads what ``f``
  read (the copies made in its own segment; the originals of earlier segments, the checkpoints;
  parameters and data inputs) and makes a copy of each of ``f``'s activations. The backward ops of a
  segment read these copies instead of the forward pass's activations, so an activation is kept
  through the forward pass only when an op of a later segment reads it;
* a segment's replay waits for every gradient sent into the segment from a later one (a zero-byte
  token from each sending backward op to each replayed op of the segment that reads no copy), so it
  runs when the backward pass reaches the segment, not earlier;
* layout of one micro-batch (every index topological): the forward ops, then for each segment from the
  last down its replayed ops in forward order followed by its backward ops in reverse order, then the
  update ops. With micro-batches, this backward section is what is copied per micro-batch.

A step on one device thus runs the forward ops of all segments but the last twice (about a third more
work for a step whose backward costs twice the forward, Megatron-LM's figure) and keeps about
``sqrt(n)`` checkpoints and one segment's activations instead of all of them.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

import numpy as np

from placement_gym.cluster.cluster import TENSOR_CATEGORY_COLUMNS, Cluster
from placement_gym.common.limits import check_allocation
from placement_gym.graph.op_costs import batch_norm_in_training
from placement_gym.graph.opgraph import CATEGORY_INDEX, OpGraph
from placement_gym.task.cache import copy_entries
from placement_gym.task.counter import EvaluationCounter
from placement_gym.task.device_indices import check_device_indices
from placement_gym.task.ids import make_task_id

# The step's vocabulary is the step module's; these names stay importable from here for the modules that
# read the tables with the compiled task.
from placement_gym.task.step import (  # noqa: F401
    DEFAULT_PRECISION,
    MAX_MICROBATCHES,
    OBJECTIVES,
    OPTIMIZERS,
    PRECISIONS,
    Step,
    step_of_call,
)

GRAPH_BYTES_PER_ELEMENT = 4  # a graph's tensor, op and parameter bytes are fp32
# Mixed-precision training: bytes per parameter element of the bf16/fp16 weights and gradients and of
# the fp32 master copy; each optimizer state copy is fp32 (4 bytes).
HALF_WEIGHT_BYTES, HALF_GRADIENT_BYTES, MASTER_WEIGHT_BYTES, STATE_BYTES = 2, 2, 4, 4
OP_KINDS: tuple[str, ...] = ("forward", "backward", "update", "recompute")
_DOUBLE_BACKWARD = np.array(
    [name in ("matmul", "conv") for name in sorted(CATEGORY_INDEX, key=CATEGORY_INDEX.get)]
)


def _csr(keys: np.ndarray, values: np.ndarray, n_keys: int) -> tuple[np.ndarray, np.ndarray]:
    """Group ``values`` by ``keys`` (stable, values sorted within a key) as (pointer, values) arrays."""
    order = np.lexsort((values, keys))
    pointer = np.zeros(n_keys + 1, dtype=np.int64)
    np.cumsum(np.bincount(keys, minlength=n_keys), out=pointer[1:])
    return pointer, np.ascontiguousarray(values[order], dtype=np.int32)


@dataclass(frozen=True, eq=False)
class Task:
    """A compiled placement problem. Build it with `make_task`. ``step``: the `Step` it times (its
    ``objective``, ``optimizer``, ``precision``, ``microbatches`` and ``recompute`` are also the task's
    attributes; module docstring).

    Ops (length ``n_ops``): forward ops ``0..n_forward-1`` (the graph's), then for ``train_step``
    their backward ops and the update ops; with ``microbatches`` M > 1 (a pipelined step), the
    forward (and backward) ops of every micro-batch (layout: the module docstring), task op
    ``f < n_forward`` still being forward op ``f``; ``op_microbatch`` gives each op's micro-batch.
    ``op_kind`` (0 forward, 1 backward, 2 update, 3 recompute), ``op_forward`` (the forward op whose
    device the op follows), ``duration[op, device]`` (seconds).
    Tensors: ``tensor_producer`` (-1: a graph data input, present on every device at time 0),
    ``tensor_bytes``, ``tensor_static`` (its producer-side memory is already counted in the static
    memory: a parameter read or a parameter gradient), ``tensor_persistent`` (a graph output: alive
    until the end of the step). CSR adjacency: ``op_output_pointer/op_outputs`` (tensors an op
    produces), ``tensor_consumer_pointer/tensor_consumers`` (ops that read a tensor),
    ``op_input_count`` (number of produced tensors an op waits for). ``static_bytes`` per forward op.

    ``evaluations``: placements of this task evaluated so far, through any of the project's ways to
    evaluate (`EvaluationCounter`; the leaderboard records an agent's from it). What is derived
    from the arrays once (simulator arrays, reference runtimes, observations) is kept by the module
    that derives it, in a `placement_gym.task.cache.TaskCache`, not on the task.
    """

    graph: OpGraph
    cluster: Cluster
    step: Step
    id: str
    op_kind: np.ndarray
    op_forward: np.ndarray
    duration: np.ndarray
    tensor_producer: np.ndarray
    tensor_bytes: np.ndarray
    tensor_static: np.ndarray
    tensor_persistent: np.ndarray
    op_output_pointer: np.ndarray
    op_outputs: np.ndarray
    tensor_consumer_pointer: np.ndarray
    tensor_consumers: np.ndarray
    op_input_count: np.ndarray
    static_bytes: np.ndarray
    _evaluations: EvaluationCounter = field(default_factory=EvaluationCounter, repr=False)

    @property
    def objective(self) -> str:
        """``"train_step"`` or ``"inference"`` (the step's)."""
        return self.step.objective

    @property
    def optimizer(self) -> str:
        """The step's optimizer (the default, ``"adam"``, for inference, which runs none)."""
        return self.step.optimizer

    @property
    def precision(self) -> str:
        """The step's precision."""
        return self.step.precision

    @property
    def microbatches(self) -> int:
        """The step's micro-batches (1: not pipelined)."""
        return self.step.microbatches

    @property
    def recompute(self) -> bool:
        """Whether the step recomputes activations."""
        return self.step.recompute

    @property
    def evaluations(self) -> int:
        """Placements of this task (and of the tasks derived from it) evaluated so far."""
        return self._evaluations.count

    def count_evaluations(
        self,
        n: int = 1,
        runtimes: np.ndarray | float | None = None,
        feasible: np.ndarray | bool | None = None,
    ) -> None:
        """Add ``n`` evaluations to the counter. The cost model's simulators also pass the ``n``
        runtimes and feasibilities they computed, which a running trace (`start_trace`) records."""
        counter = self._evaluations
        if counter.trace is None:  # the simulators' hot path: one add, no call
            counter.count += n
        else:
            counter.add(n, runtimes, feasible)

    def start_trace(self) -> None:
        """Record, from now on, each evaluation that improves on the best feasible runtime so far
        (`trace`). The leaderboard harness starts one on the copy of the task it hands an agent."""
        self._evaluations.trace = []
        self._evaluations.best = np.inf

    @property
    def trace(self) -> list[tuple[int, float]] | None:
        """``[(evaluations, best feasible runtime so far), ...]`` since `start_trace` (None before):
        the count of evaluations at which each improvement came, and the runtime it reached."""
        trace = self._evaluations.trace
        return None if trace is None else list(trace)

    def evaluations_since(self, start: int) -> dict:
        """What this task counted since its `evaluations` stood at ``start`` (the count, the trace's
        improvements and the best so far), for a checkpoint of a run that began there; `resume_evaluations`
        restores it."""
        return self._evaluations.since(start)

    def resume_evaluations(self, start: int, saved: dict) -> None:
        """Continue a stopped run that began when this task's `evaluations` stood at ``start``: what it
        counted (``saved``, its `evaluations_since`) replaces what was counted since ``start``, so the
        count and the trace read as those of one run never stopped."""
        self._evaluations.resume(start, saved)

    def __deepcopy__(self, memo: dict) -> Task:
        # A deep copy is derived from this task (its counter is shared) and keeps deep copies of the
        # cached values, so that reading a deep copy's best single device is no evaluation.
        return self._deep_copy(memo, caches=True)

    def _deep_copy(self, memo: dict, caches: bool) -> Task:
        copied = object.__new__(type(self))
        memo[id(self)] = copied
        vars(copied).update(copy.deepcopy(vars(self), memo))
        if caches:
            # The same memo: a cached value that holds this task's arrays gets the copy's arrays.
            copy_entries(self, copied, memo)
        return copied

    def independent_copy(self, caches: bool = True) -> Task:
        """A copy that shares nothing with this task: every array of the task, its graph and its
        cluster copied (read-only where the original is), this task's entry in every registered
        `TaskCache` deep-copied for the copy (``caches=False``: none, to be rebuilt from the copied
        arrays) and a new evaluation counter at 0. Whatever is done to the copy, its arrays or its
        cached values, leaves this task as it was."""
        copied = self._deep_copy({id(self._evaluations): EvaluationCounter()}, caches)
        pairs = ((self, copied), (self.graph, copied.graph), (self.cluster, copied.cluster))
        for original, duplicate in pairs:
            for name, value in vars(original).items():
                if isinstance(value, np.ndarray) and not value.flags.writeable:
                    getattr(duplicate, name).setflags(write=False)
        return copied

    @property
    def n_forward(self) -> int:
        return self.graph.n_ops

    @property
    def n_ops(self) -> int:
        return len(self.op_kind)

    @property
    def n_devices(self) -> int:
        return self.cluster.n_devices

    @property
    def n_tensors(self) -> int:
        return len(self.tensor_bytes)

    def __repr__(self) -> str:
        ops = f"{self.n_ops} ops"
        if self.n_ops != self.n_forward:
            ops += f" ({self.n_forward} forward)"
        training = f", optimizer={self.optimizer!r}" if self.objective == "train_step" else ""
        if self.precision != DEFAULT_PRECISION:
            training += f", precision={self.precision!r}"
        if self.recompute:
            training += ", recompute=True"
        pipelined = f", microbatches={self.microbatches}" if self.microbatches > 1 else ""
        return f"Task({self.id!r}, {ops}, {self.n_devices} devices{training}{pipelined})"

    @cached_property
    def op_microbatch(self) -> np.ndarray:
        """Micro-batch (int32) of every task op (0 to ``microbatches - 1``), -1 for an update op (one per
        step, after the gradients of every micro-batch)."""
        n, m = self.n_forward, self.microbatches
        batches = np.arange(m, dtype=np.int32)
        if self.objective == "inference":
            result = np.repeat(batches, n)
        else:
            n_update = int(np.count_nonzero(self.op_kind == OP_KINDS.index("update")))
            section = (self.n_ops - n_update) // m - n  # backward and replayed ops of one micro-batch
            update = np.full(n_update, -1, dtype=np.int32)
            result = np.concatenate([np.repeat(batches, n), np.repeat(batches, section), update])
        result.setflags(write=False)
        return result

    @cached_property
    def op_names(self) -> tuple[str, ...]:
        suffix = ("", ".grad", ".update", ".recompute")
        names = self.graph.op_names
        forward, kinds = self.op_forward.tolist(), self.op_kind.tolist()
        if self.microbatches == 1:
            return tuple(names[f] + suffix[k] for f, k in zip(forward, kinds))
        return tuple(
            names[f] + suffix[k] + (f"[mb{b}]" if b >= 0 else "")
            for f, k, b in zip(forward, kinds, self.op_microbatch.tolist())
        )

    def check_placement(self, placement, batch: bool = False) -> np.ndarray:
        """Return ``placement`` as an int64 array of device indices, or raise a clear ValueError.

        A placement has one device index per forward op (shape ``(n_forward,)``, or
        ``(batch, n_forward)`` with ``batch=True``); backward and update ops follow their forward op."""
        names = self.graph.op_names
        return check_device_indices(
            placement,
            self.cluster.device_names,
            self.n_forward,
            f"placement for task {self.id}",
            "forward op",
            lambda i: f"op {i} ({names[i]!r})",
            batch,
        )

    def expand(self, placement) -> np.ndarray:
        """Device (int32) of every task op for a placement of the forward ops."""
        return self.check_placement(placement)[self.op_forward].astype(np.int32)

    def static_memory(self, placement) -> np.ndarray:
        """Bytes of parameters (and for training, gradients and optimizer state) per device."""
        array = self.check_placement(placement)
        return np.bincount(array, weights=self.static_bytes, minlength=self.n_devices)


# float64 arrays of (task ops x devices) alive at once while a task is compiled: the durations and
# the temporaries of `_op_durations` (rate, compute time, memory time, their maximum).
_DURATION_ARRAYS = 5


def task_bytes(n_task_ops: int, n_devices: int) -> float:
    """Bytes a task of ``n_task_ops`` ops (forward, backward and update) on ``n_devices`` devices
    allocates for its per-op-and-device arrays while it is compiled."""
    return 8.0 * _DURATION_ARRAYS * n_task_ops * n_devices


def _op_durations(flops, bytes_moved, category, cluster: Cluster, tensor_cores: bool = False) -> np.ndarray:
    """Op time on every device: max(FLOPs / (peak x efficiency), bytes / bandwidth) + overhead; with
    ``tensor_cores`` (half precision) matmul and conv ops take the devices' `Cluster.tensor_rate`."""
    rate = cluster.peak_flops[None, :] * cluster.efficiency.T[category]  # (ops, devices)
    if tensor_cores:
        for k, column in enumerate(TENSOR_CATEGORY_COLUMNS):
            rate[category == column] = cluster.tensor_rate[:, k]
    compute = flops[:, None] / rate
    memory = bytes_moved[:, None] / cluster.memory_bandwidth[None, :]
    return np.ascontiguousarray(np.maximum(compute, memory) + cluster.launch_overhead[None, :])


def make_task(
    graph: OpGraph,
    cluster: Cluster,
    step: Step | str | None = None,
    *positional: Any,
    **options: Any,
) -> Task:
    """Compile the task of ``graph`` on ``cluster`` for ``step``: a `Step`, an objective
    (``"train_step"``, the default, or ``"inference"``) or a task id's objective (``"train+sgd+bf16"``),
    its fields replaced by the keywords ``objective``, ``optimizer``, ``precision``, ``microbatches``
    and ``recompute`` (`placement_gym.task.step.as_step`; what each does: the module docstring). An
    optimizer keyword given with inference is ignored (inference has no update op), so that code that
    compiles both objectives passes one. Passing the options by position after the step is deprecated.
    The task's ``id`` names graph, cluster and step so that no other task shares it (format:
    `placement_gym.task.ids`). A task whose per-op-and-device arrays (`task_bytes`) would pass the
    allocation limit (`placement_gym.common.limits`) is refused before they are made."""
    step = step_of_call("make_task", step, positional, options, inference_ignores=("optimizer",))
    objective, m, recompute = step.objective, step.microbatches, step.recompute
    optimizer, precision = step.optimizer, step.precision
    half = precision != DEFAULT_PRECISION
    scale = PRECISIONS[precision] / GRAPH_BYTES_PER_ELEMENT
    g = graph
    n = g.n_ops
    n_update = int(np.count_nonzero(g.param_bytes > 0))
    segment = recompute_segments(n) if recompute else None
    n_replayed = 0 if segment is None else int(np.count_nonzero(segment < segment[-1]))
    n_task_ops = m * n if objective == "inference" else m * (2 * n + n_replayed) + n_update
    check_allocation(
        f"the task of graph {g.name!r} ({n_task_ops} ops) on cluster {cluster.name!r} "
        f"({cluster.n_devices} devices)",
        task_bytes(n_task_ops, cluster.n_devices),
    )
    category = g.category.astype(np.int64)
    edge_src = g.edge_src.astype(np.int64)
    edge_dst = g.edge_dst.astype(np.int64)
    edge_tensor = g.edge_tensor.astype(np.int64)
    # Two different tasks never share an id (placement_gym/task/ids.py): resumed runs, caches and
    # the leaderboard key on it.
    task_id = make_task_id(g, cluster, step)
    if objective == "inference":
        op_kind = np.zeros(n, dtype=np.int8)
        op_forward = np.arange(n, dtype=np.int32)
        flops, bytes_moved, op_category = g.flops, g.bytes_accessed, category
        tensor_producer = g.tensor_producer.astype(np.int64)
        tensor_bytes = g.tensor_bytes
        tensor_static = g.tensor_is_parameter.copy()
        tensor_persistent = g.tensor_is_output.copy()
        consumer_tensor, consumer_op = edge_tensor, edge_dst
        static_bytes = g.param_bytes.copy()
        backward_index = None
        if half:
            bytes_moved, tensor_bytes = bytes_moved * scale, tensor_bytes * scale
            static_bytes = g.param_bytes / GRAPH_BYTES_PER_ELEMENT * HALF_WEIGHT_BYTES
    else:
        states, update_flops, update_bytes = OPTIMIZERS[optimizer]
        owners = np.flatnonzero(g.param_bytes > 0)
        n_update = len(owners)
        n_total = 2 * n + n_update
        backward = lambda f: 2 * n - 1 - f  # noqa: E731 - index of f's backward op
        update_of = np.full(n, -1, dtype=np.int64)
        update_of[owners] = 2 * n + np.arange(n_update)
        op_kind = np.concatenate([np.zeros(n), np.ones(n), np.full(n_update, 2)]).astype(np.int8)
        op_forward = np.concatenate([np.arange(n), np.arange(n)[::-1], owners]).astype(np.int32)
        param_elements = g.param_bytes[owners] / 4.0
        forward_flops, forward_bytes = batch_norm_in_training(g)
        if half:
            forward_bytes = forward_bytes * scale
        flops = np.concatenate(
            [
                forward_flops,
                (forward_flops * np.where(_DOUBLE_BACKWARD[category], 2.0, 1.0))[::-1],
                param_elements * update_flops,
            ]
        )
        bytes_moved = np.concatenate(
            [forward_bytes, 2.0 * forward_bytes[::-1], g.param_bytes[owners] * update_bytes]
        )
        op_category = np.concatenate(
            [category, category[::-1], np.full(n_update, CATEGORY_INDEX["elementwise"])]
        )
        t0 = g.n_tensors
        # Forward tensors keep their ids; each is also read by the backward op of each consumer
        # (saved input) and of its producer (saved output).
        producers = g.tensor_producer.astype(np.int64)
        has_producer = np.flatnonzero(producers >= 0)
        tensors, consumers = (
            [edge_tensor, edge_tensor, has_producer],
            [edge_dst, backward(edge_dst), backward(producers[has_producer])],
        )
        new_producer, new_bytes, new_static = [], [], []
        # Gradient tensors, one per forward edge from an op: c.grad -> p.grad, or for a shared
        # parameter c.grad -> owner.update.
        from_op = np.flatnonzero(edge_src >= 0)
        is_param = g.tensor_is_parameter[edge_tensor[from_op]]
        grad_ids = t0 + np.arange(len(from_op))
        new_producer.append(backward(edge_dst[from_op]))
        new_bytes.append(g.tensor_bytes[edge_tensor[from_op]])
        new_static.append(np.zeros(len(from_op), dtype=bool))
        tensors.append(grad_ids)
        consumers.append(np.where(is_param, update_of[edge_src[from_op]], backward(edge_src[from_op])))
        next_id = t0 + len(from_op)
        # Ops with no output tensor still have to run before their backward op: a 0-byte tensor.
        silent = np.setdiff1d(np.arange(n), producers[has_producer])
        ids = next_id + np.arange(len(silent))
        new_producer.append(silent)
        new_bytes.append(np.zeros(len(silent)))
        new_static.append(np.zeros(len(silent), dtype=bool))
        tensors.append(ids)
        consumers.append(backward(silent))
        next_id += len(silent)
        # Parameter gradients of each owner: owner.grad -> owner.update (memory is static).
        ids = next_id + np.arange(n_update)
        new_producer.append(backward(owners))
        new_bytes.append(g.param_bytes[owners])
        new_static.append(np.ones(n_update, dtype=bool))
        tensors.append(ids)
        consumers.append(update_of[owners])
        tensor_producer = np.concatenate([producers, *new_producer])
        tensor_bytes = np.concatenate([g.tensor_bytes, *new_bytes])
        tensor_static = np.concatenate([g.tensor_is_parameter, *new_static])
        tensor_persistent = np.concatenate([g.tensor_is_output, np.zeros(len(tensor_bytes) - t0, dtype=bool)])
        consumer_tensor = np.concatenate(tensors)
        consumer_op = np.concatenate(consumers)
        pairs = np.unique(consumer_tensor * n_total + consumer_op)
        consumer_tensor, consumer_op = pairs // n_total, pairs % n_total
        if half:
            tensor_bytes = tensor_bytes * scale
            elements = g.param_bytes / GRAPH_BYTES_PER_ELEMENT
            static_bytes = elements * (
                HALF_WEIGHT_BYTES + HALF_GRADIENT_BYTES + MASTER_WEIGHT_BYTES + STATE_BYTES * states
            )
        else:
            static_bytes = g.param_bytes * (2 + states)
        backward_index = backward(np.arange(n))
        if segment is not None:
            replayed = _with_recomputation(
                g, segment, op_kind, op_forward, flops, bytes_moved, op_category, tensor_producer,
                tensor_bytes, tensor_static, tensor_persistent, consumer_tensor, consumer_op,
            )
            (op_kind, op_forward, flops, bytes_moved, op_category, tensor_producer, tensor_bytes,
             tensor_static, tensor_persistent, consumer_tensor, consumer_op, backward_index) = replayed
        n = len(op_kind)
    if m > 1:
        copies = _micro_batch_copies(
            g, m, backward_index, op_kind, op_forward, flops, bytes_moved, op_category,
            tensor_producer, tensor_bytes, tensor_static, tensor_persistent, consumer_tensor, consumer_op,
        )
        (op_kind, op_forward, flops, bytes_moved, op_category, tensor_producer, tensor_bytes, tensor_static,
         tensor_persistent, consumer_tensor, consumer_op) = copies
        n = len(op_kind)
    n_tensors = len(tensor_bytes)
    produced = np.flatnonzero(tensor_producer >= 0)
    op_output_pointer, op_outputs = _csr(tensor_producer[produced], produced, n)
    tensor_consumer_pointer, tensor_consumers = _csr(consumer_tensor, consumer_op, n_tensors)
    op_input_count = np.bincount(consumer_op[tensor_producer[consumer_tensor] >= 0], minlength=n).astype(
        np.int32
    )
    duration = _op_durations(
        np.asarray(flops, dtype=np.float64),
        np.asarray(bytes_moved, dtype=np.float64),
        np.asarray(op_category, dtype=np.int64),
        cluster,
        tensor_cores=half,
    )
    arrays = dict(
        op_kind=op_kind,
        op_forward=op_forward,
        duration=duration,
        tensor_producer=tensor_producer.astype(np.int32),
        tensor_bytes=np.asarray(tensor_bytes, np.float64),
        tensor_static=np.asarray(tensor_static, bool),
        tensor_persistent=np.asarray(tensor_persistent, bool),
        op_output_pointer=op_output_pointer,
        op_outputs=op_outputs,
        tensor_consumer_pointer=tensor_consumer_pointer,
        tensor_consumers=tensor_consumers,
        op_input_count=op_input_count,
        static_bytes=np.asarray(static_bytes, np.float64),
    )
    for value in arrays.values():
        value.setflags(write=False)
    return Task(graph=g, cluster=cluster, step=step, id=task_id, **arrays)


def _micro_batch_copies(
    g: OpGraph, m: int, backward_index: np.ndarray | None, op_kind, op_forward, flops, bytes_moved,
    op_category, tensor_producer, tensor_bytes, tensor_static, tensor_persistent, consumer_tensor,
    consumer_op,
) -> tuple[np.ndarray, ...]:
    """The arrays of the one-micro-batch task (ops, tensors, consumer pairs) copied for ``m``
    micro-batches, with the fill-drain tokens (layout: the module docstring). ``backward_index``: the
    one-copy index of each forward op's backward op (None for inference)."""
    n = g.n_ops
    training = backward_index is not None
    n_one = len(op_kind)  # ops of one copy: n forward (+ the backward section + the update ops)
    section = int(np.count_nonzero(np.asarray(op_kind) != OP_KINDS.index("update"))) - n
    copy = np.arange(m, dtype=np.int64)

    def op_of(op: np.ndarray, k: np.ndarray) -> np.ndarray:
        """Index of one-copy op ``op`` in micro-batch ``k`` (update ops: the same for every k)."""
        backward_or_update = np.where(
            op < n + section, m * n + k * section + (op - n), (m - 1) * (n + section) + op
        )
        return np.where(op < n, k * n + op, backward_or_update)

    # Each new op's one-copy op: forward copies, backward sections, then the update ops once.
    one = np.arange(n_one)
    source = np.concatenate([np.tile(one[:n], m), np.tile(one[n : n + section], m), one[n + section :]])
    # Tensors: micro-batch 0's keep their ids; the others' copies follow, the parameter tensors
    # (read by every copy, produced by micro-batch 0's owner) excepted.
    n_tensors = len(tensor_bytes)
    shared = np.zeros(n_tensors, dtype=bool)
    shared[: g.n_tensors] = g.tensor_is_parameter
    per_copy = np.flatnonzero(~shared)
    rank = np.full(n_tensors, -1, dtype=np.int64)
    rank[per_copy] = np.arange(len(per_copy))
    tensor_of = lambda t, k: np.where(  # noqa: E731 - id of one-copy tensor t in micro-batch k
        (k == 0) | shared[t], t, n_tensors + (k - 1) * len(per_copy) + rank[t]
    )
    k_tensor = np.repeat(copy[1:], len(per_copy))
    t_copy = np.tile(per_copy, m - 1)
    producer_one = np.concatenate([tensor_producer, tensor_producer[t_copy]]).astype(np.int64)
    k_all = np.concatenate([np.zeros(n_tensors, dtype=np.int64), k_tensor])
    producer = np.where(producer_one >= 0, op_of(np.maximum(producer_one, 0), k_all), -1)
    nbytes = [np.asarray(tensor_bytes, np.float64), np.asarray(tensor_bytes, np.float64)[t_copy]]
    static = [np.asarray(tensor_static, bool), np.asarray(tensor_static, bool)[t_copy]]
    persistent = [np.asarray(tensor_persistent, bool), np.asarray(tensor_persistent, bool)[t_copy]]
    # Every consumer pair, in every micro-batch.
    k_pair = np.repeat(copy, len(consumer_tensor))
    t_pair = np.tile(consumer_tensor, m)
    readers = [op_of(np.tile(consumer_op, m), k_pair)]
    tensors = [tensor_of(t_pair, k_pair)]
    # Fill-drain tokens (zero bytes): op f of micro-batch k -> op f of micro-batch k + 1, forward and
    # backward; every sink of the last micro-batch -> the backward op of every sink of micro-batch 0.
    token_producer, token_reader = [], []
    for ops in (np.arange(n), np.arange(n, n + section)):
        token_producer.append(op_of(np.tile(ops, m - 1), np.repeat(copy[:-1], len(ops))))
        token_reader.append(op_of(np.tile(ops, m - 1), np.repeat(copy[1:], len(ops))))
    if training:
        src, tensor = g.edge_src.astype(np.int64), g.edge_tensor
        sinks = np.setdiff1d(np.arange(n), src[(src >= 0) & ~g.tensor_is_parameter[tensor]])
        token_producer.append(np.repeat(op_of(sinks, m - 1), len(sinks)))
        token_reader.append(np.tile(op_of(backward_index[sinks], 0), len(sinks)))
    token_producer, token_reader = np.concatenate(token_producer), np.concatenate(token_reader)
    n_before = len(producer)
    # One token tensor per producing op: a sink of the last micro-batch sends one to every reader.
    token_ops, token_index = np.unique(token_producer, return_inverse=True)
    producer = np.concatenate([producer, token_ops])
    nbytes.append(np.zeros(len(token_ops)))
    static.append(np.zeros(len(token_ops), dtype=bool))
    persistent.append(np.zeros(len(token_ops), dtype=bool))
    tensors.append(n_before + token_index.ravel())
    readers.append(token_reader)
    n_total = len(source)
    pairs = np.unique(np.concatenate(tensors) * n_total + np.concatenate(readers))
    return (
        np.asarray(op_kind)[source],
        np.asarray(op_forward)[source],
        np.asarray(flops, dtype=np.float64)[source],
        np.asarray(bytes_moved, dtype=np.float64)[source],
        np.asarray(op_category, dtype=np.int64)[source],
        producer,
        np.concatenate(nbytes),
        np.concatenate(static),
        np.concatenate(persistent),
        pairs // n_total,
        pairs % n_total,
    )


def recompute_segments(n_forward: int) -> np.ndarray:
    """The recomputation segment (int64) of each forward op: ``K = max(1, round(sqrt(n)))`` contiguous
    ranges of the topological order with equal op counts (to one op), as Chen et al. (2016) cut a
    network of n layers into about sqrt(n) segments. The last segment is never replayed."""
    k = max(1, round(float(np.sqrt(n_forward))))
    return np.arange(n_forward, dtype=np.int64) * k // max(n_forward, 1)


def _with_recomputation(
    g: OpGraph, segment: np.ndarray, op_kind, op_forward, flops, bytes_moved, op_category,
    tensor_producer, tensor_bytes, tensor_static, tensor_persistent, consumer_tensor, consumer_op,
) -> tuple[np.ndarray, ...]:
    """The arrays of a one-micro-batch training step with activation recomputation (layout: the
    module docstring), and the index of each forward op's backward op in it."""
    n = g.n_ops
    n_one = len(op_kind)
    last = int(segment[-1])
    replayed = segment < last
    # The backward section: for each segment from the last down, its replayed ops in forward order,
    # then its backward ops in reverse order; both stay topological (module docstring).
    kinds, forwards = [], []
    for s in range(last, -1, -1):
        ops = np.flatnonzero(segment == s)
        if s < last:
            kinds.append(np.full(len(ops), OP_KINDS.index("recompute")))
            forwards.append(ops)
        kinds.append(np.full(len(ops), OP_KINDS.index("backward")))
        forwards.append(ops[::-1])
    section_kind, section_forward = np.concatenate(kinds), np.concatenate(forwards)
    position = n + np.arange(len(section_kind))
    is_backward = section_kind == OP_KINDS.index("backward")
    backward_index = np.empty(n, dtype=np.int64)
    backward_index[section_forward[is_backward]] = position[is_backward]
    replay_index = np.full(n, -1, dtype=np.int64)
    replay_index[section_forward[~is_backward]] = position[~is_backward]
    n_section = len(section_kind)
    # Old op index (forward, backward at 2n - 1 - f, update at 2n + j) -> new index.
    old_map = np.concatenate([np.arange(n), backward_index[::-1], np.arange(2 * n, n_one) - n + n_section])
    section_old = np.where(is_backward, 2 * n - 1 - section_forward, section_forward)
    ops_from_old = np.concatenate([np.arange(n), section_old, np.arange(2 * n, n_one)])

    producer = np.asarray(tensor_producer, dtype=np.int64)
    new_producer = np.where(producer >= 0, old_map[np.maximum(producer, 0)], -1)
    # A copy of every activation a replayed op makes: the replayed op produces it for the backward ops
    # of its own segment; the original still serves the forward pass and later segments.
    forward_tensor = np.arange(len(producer)) < g.n_tensors
    copied = np.flatnonzero(
        forward_tensor & (producer >= 0) & replayed[np.clip(producer, 0, n - 1)]
        & ~np.concatenate([g.tensor_is_parameter, np.zeros(len(producer) - g.n_tensors, dtype=bool)])
    )
    copy_of = np.full(len(producer), -1, dtype=np.int64)
    copy_of[copied] = len(producer) + np.arange(len(copied))
    tensor_segment = np.where(producer >= 0, segment[np.clip(producer, 0, n - 1)], -1)

    def own_copy(tensor: np.ndarray, reader_forward: np.ndarray) -> np.ndarray:
        """``tensor``, or its copy where the reader's segment made one."""
        mine = (copy_of[tensor] >= 0) & (tensor_segment[tensor] == segment[reader_forward])
        return np.where(mine, copy_of[tensor], tensor)

    consumer_tensor = np.asarray(consumer_tensor, dtype=np.int64)
    consumer_op = np.asarray(consumer_op, dtype=np.int64)
    reads_saved = (consumer_op >= n) & (consumer_op < 2 * n)
    reader_forward = np.where(reads_saved, 2 * n - 1 - consumer_op, 0)
    tensors = [np.where(reads_saved, own_copy(consumer_tensor, reader_forward), consumer_tensor)]
    readers = [old_map[consumer_op]]
    # A replayed op reads what its forward op read: the copies made in its segment, the originals of
    # earlier segments (the checkpoints), parameters and data inputs.
    edge_dst, edge_tensor = g.edge_dst.astype(np.int64), g.edge_tensor.astype(np.int64)
    replay_edge = replayed[edge_dst]
    tensors.append(own_copy(edge_tensor[replay_edge], edge_dst[replay_edge]))
    readers.append(replay_index[edge_dst[replay_edge]])
    # A segment's replay waits for every gradient sent into the segment from a later one: one zero-byte
    # token from each such backward op to each replayed op of the segment that reads no copy.
    sender = producer[consumer_tensor]
    gradient = reads_saved & (sender >= n) & (sender < 2 * n)
    source_forward = 2 * n - 1 - sender[gradient]
    target_segment = segment[reader_forward[gradient]]
    into_earlier = (segment[source_forward] > target_segment) & (target_segment < last)
    pairs = np.unique(source_forward[into_earlier] * (last + 1) + target_segment[into_earlier])
    token_source, token_segment = pairs // (last + 1), pairs % (last + 1)
    inner = np.zeros(n, dtype=bool)
    edge_producer = producer[edge_tensor]
    inner_edge = (edge_producer >= 0) & (segment[np.clip(edge_producer, 0, n - 1)] == segment[edge_dst])
    inner[edge_dst[inner_edge]] = True
    # Those entry ops grouped by segment once (a stable sort keeps op order within a segment), so the
    # readers of every token are one slice: linear in tokens + entry ops, not their product.
    entry = np.flatnonzero(replayed & ~inner)
    entry = entry[np.argsort(segment[entry], kind="stable")]
    entry_segment = segment[entry]
    start = np.searchsorted(entry_segment, token_segment, side="left")
    count = np.searchsorted(entry_segment, token_segment, side="right") - start
    n_tokens = len(token_source)
    first_token = len(producer) + len(copied)
    within = np.arange(int(count.sum())) - np.repeat(np.cumsum(count) - count, count)
    tensors.append(first_token + np.repeat(np.arange(n_tokens), count))
    readers.append(replay_index[entry[np.repeat(start, count) + within]])
    n_total = len(ops_from_old)
    merged = np.unique(np.concatenate(tensors) * n_total + np.concatenate(readers))
    new_ops = (
        np.concatenate([np.zeros(n, dtype=np.int8), section_kind.astype(np.int8),
                        np.full(n_one - 2 * n, OP_KINDS.index("update"), dtype=np.int8)]),
        np.concatenate([np.arange(n), section_forward, np.asarray(op_forward)[2 * n :]]).astype(np.int32),
        np.asarray(flops, dtype=np.float64)[ops_from_old],
        np.asarray(bytes_moved, dtype=np.float64)[ops_from_old],
        np.asarray(op_category, dtype=np.int64)[ops_from_old],
    )
    no_extra = np.zeros(len(copied) + n_tokens, dtype=bool)
    new_tensors = (
        np.concatenate([new_producer, replay_index[producer[copied]], backward_index[token_source]]),
        np.concatenate([np.asarray(tensor_bytes, np.float64), np.asarray(tensor_bytes, np.float64)[copied],
                        np.zeros(n_tokens)]),
        np.concatenate([np.asarray(tensor_static, bool), no_extra]),
        np.concatenate([np.asarray(tensor_persistent, bool), no_extra]),
    )
    return (*new_ops, *new_tensors, merged // n_total, merged % n_total, backward_index)
