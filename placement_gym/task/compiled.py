"""`Task` = OpGraph + Cluster + Objective, compiled once into the flat arrays the simulators read.

`make_task` runs the compile passes of `placement_gym.task.passes` (one module each: the training
step's backward and update ops, precision, recomputation, micro-batches, op durations) and makes the
task's arrays from what they give. A task's evaluation counter and the methods over it live in
`placement_gym.task.evaluations`, how a task is copied in `placement_gym.task.copies`. What the passes
make, layout and costs:

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

Tensor parallelism (``tensor_parallel=T > 1``; docs/cost_model.md, "Tensor parallelism over an op
graph"): the task's devices are the cluster's GPUs in groups of T (`placement_gym.cluster.tensor_groups`)
and its graph is what one rank of a group runs (`placement_gym.task.passes.tensor_parallel`: the ops
split as Megatron-LM splits a layer, the collectives they need inserted as ops); every pass above then
compiles that graph on that view. A collective op's forward, backward and replayed copies take the
time of their collective on the ring of the group they run on (an op that is no collective in one
direction takes 0 there), not the roofline. ``tensor_parallel=1`` compiles the graph and the cluster as
they are: exactly the task of a step without the option.

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

from dataclasses import dataclass
from functools import cached_property
from typing import Any

import numpy as np

from placement_gym.cluster.cluster import Cluster
from placement_gym.cluster.tensor_groups import TensorGroups, tensor_groups
from placement_gym.common.limits import check_allocation
from placement_gym.graph.opgraph import OpGraph
from placement_gym.task import copies
from placement_gym.task.device_indices import check_device_indices
from placement_gym.task.evaluations import CountsEvaluations
from placement_gym.task.ids import make_task_id
from placement_gym.task.passes.backward import training_step
from placement_gym.task.passes.durations import op_durations, task_bytes
from placement_gym.task.passes.forward import forward_step
from placement_gym.task.passes.microbatches import micro_batch_copies
from placement_gym.task.passes.precision import at_precision, uses_tensor_cores
from placement_gym.task.passes.recompute import recompute_segments, with_recomputation
from placement_gym.task.passes.step_graph import OP_KINDS, StepGraph
from placement_gym.task.passes.tensor_parallel import COLLECTIVE_TIMES, shard

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


def _csr(keys: np.ndarray, values: np.ndarray, n_keys: int) -> tuple[np.ndarray, np.ndarray]:
    """Group ``values`` by ``keys`` (stable, values sorted within a key) as (pointer, values) arrays."""
    order = np.lexsort((values, keys))
    pointer = np.zeros(n_keys + 1, dtype=np.int64)
    np.cumsum(np.bincount(keys, minlength=n_keys), out=pointer[1:])
    return pointer, np.ascontiguousarray(values[order], dtype=np.int32)


@dataclass(frozen=True, eq=False)
class Task(CountsEvaluations):
    """A compiled placement problem. Build it with `make_task`. ``step``: the `Step` it times (its
    ``objective``, ``optimizer``, ``precision``, ``microbatches`` and ``recompute`` are also the task's
    attributes; module docstring). ``made_from``: None, or for a tensor-parallel step the graph and
    cluster it was made from (`source_graph`, `source_cluster`): ``graph`` and ``cluster`` are then the
    rank's graph and the view of the cluster's GPUs in groups.

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
    evaluate (`CountsEvaluations`: the counter and its methods; the leaderboard records an agent's
    from it). What is derived from the arrays once (simulator arrays, reference runtimes,
    observations) is kept by the module that derives it, in a `placement_gym.task.cache.TaskCache`,
    not on the task.
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
    made_from: tuple[OpGraph, Cluster] | None = None

    @property
    def source_graph(self) -> OpGraph:
        """The graph the task was made from: ``graph`` itself, or for a tensor-parallel step the graph
        before its ops were split (``graph`` is then what one rank runs)."""
        return self.graph if self.made_from is None else self.made_from[0]

    @property
    def source_cluster(self) -> Cluster:
        """The cluster the task was made from: ``cluster`` itself, or for a tensor-parallel step the
        cluster whose GPUs ``cluster`` groups."""
        return self.cluster if self.made_from is None else self.made_from[1]

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

    def __deepcopy__(self, memo: dict) -> Task:
        # A deep copy is derived from this task (its counter is shared) and keeps deep copies of the
        # cached values, so that reading a deep copy's best single device is no evaluation.
        return copies.deep_copy(self, memo, caches=True)

    def independent_copy(self, caches: bool = True) -> Task:
        """A copy that shares nothing with this task: every array of the task, its graph and its
        cluster copied (read-only where the original is), this task's entry in every registered
        `TaskCache` deep-copied for the copy (``caches=False``: none, to be rebuilt from the copied
        arrays) and a new evaluation counter at 0. Whatever is done to the copy, its arrays or its
        cached values, leaves this task as it was."""
        return copies.independent_copy(self, caches)

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


def task_op_count(graph: OpGraph, step: Step) -> int:
    """Ops of the task of ``graph`` for ``step`` (forward, backward, replayed and update ops), counted
    before the task is compiled (the allocation check)."""
    n, m = graph.n_ops, step.microbatches
    if step.objective == "inference":
        return m * n
    n_update = int(np.count_nonzero(graph.param_bytes > 0))
    segment = recompute_segments(n) if step.recompute else None
    n_replayed = 0 if segment is None else int(np.count_nonzero(segment < segment[-1]))
    return m * (2 * n + n_replayed) + n_update


def make_task(
    graph: OpGraph,
    cluster: Cluster,
    step: Step | str | None = None,
    *positional: Any,
    **options: Any,
) -> Task:
    """Compile the task of ``graph`` on ``cluster`` for ``step``: a `Step`, an objective
    (``"train_step"``, the default, or ``"inference"``) or a task id's objective (``"train+sgd+bf16"``),
    its fields replaced by the keywords ``objective``, ``optimizer``, ``precision``, ``microbatches``,
    ``recompute`` and ``tensor_parallel`` (`placement_gym.task.step.as_step`; what each does: the module
    docstring). An optimizer keyword given with inference is ignored (inference has no update op), so
    that code that compiles both objectives passes one. Passing the options by position after the step
    is deprecated. The task's ``id`` names graph, cluster and step so that no other task shares it (format:
    `placement_gym.task.ids`). A task whose per-op-and-device arrays (`task_bytes`) would pass the
    allocation limit (`placement_gym.common.limits`) is refused before they are made.

    The compile passes (`placement_gym.task.passes`), in order: the forward or training step, its
    precision, recomputation, micro-batches; then the task's adjacency and op durations (a
    tensor-parallel step first splits the graph's ops over groups of the cluster's GPUs)."""
    step = step_of_call("make_task", step, positional, options, inference_ignores=("optimizer",))
    # Two different tasks never share an id (placement_gym/task/ids.py): resumed runs, caches and
    # the leaderboard key on it.
    task_id = make_task_id(graph, cluster, step)
    groups, made_from = None, None
    if step.tensor_parallel > 1:
        made_from = (graph, cluster)
        groups = tensor_groups(cluster, step.tensor_parallel)
        graph, cluster = shard(graph, step.tensor_parallel).graph, groups.cluster
    n_task_ops = task_op_count(graph, step)
    check_allocation(
        f"the task of graph {graph.name!r} ({n_task_ops} ops) on cluster {cluster.name!r} "
        f"({cluster.n_devices} devices)",
        task_bytes(n_task_ops, cluster.n_devices),
    )
    training = step.objective != "inference"
    ops = training_step(graph, step.optimizer) if training else forward_step(graph)
    ops = at_precision(ops, graph, step)
    if training and step.recompute:
        ops = with_recomputation(graph, ops)
    if step.microbatches > 1:
        ops = micro_batch_copies(graph, step.microbatches, ops)
    arrays = task_arrays(ops, cluster, tensor_cores=uses_tensor_cores(step))
    if groups is not None:
        arrays["duration"] = with_collective_times(arrays["duration"], ops, graph, groups)
    return Task(graph=graph, cluster=cluster, step=step, id=task_id, made_from=made_from, **arrays)


def with_collective_times(
    duration: np.ndarray, ops: StepGraph, graph: OpGraph, groups: TensorGroups
) -> np.ndarray:
    """``duration`` with the rows of the collective ops of a tensor-parallel ``graph`` replaced by their
    collectives' times on each group (module docstring); the buffer is the forward collective op's
    bytes at the step's precision."""
    duration = duration.copy()
    types = graph.op_types
    forward_bytes = ops.bytes_moved[: graph.n_ops]
    backward = OP_KINDS.index("backward")
    for op, (f, kind) in enumerate(zip(ops.op_forward.tolist(), ops.op_kind.tolist())):
        times = COLLECTIVE_TIMES.get(types[f])
        if times is None:
            continue
        collective = times[1] if kind == backward else times[0]
        duration[op] = 0.0 if collective is None else groups.collective_seconds(collective, forward_bytes[f])
    duration.setflags(write=False)
    return duration


def task_arrays(ops: StepGraph, cluster: Cluster, tensor_cores: bool) -> dict[str, np.ndarray]:
    """The arrays of a `Task` (its fields by name, read-only) from the step ``ops`` on ``cluster``: the
    ops' durations (matmul and conv ops at the tensor-core rate with ``tensor_cores``), the tensors,
    the CSR adjacency of what each op produces and each tensor's readers, and each op's count of
    produced inputs."""
    n, n_tensors = ops.n_ops, ops.n_tensors
    tensor_producer, consumer_tensor, consumer_op = ops.tensor_producer, ops.consumer_tensor, ops.consumer_op
    produced = np.flatnonzero(tensor_producer >= 0)
    op_output_pointer, op_outputs = _csr(tensor_producer[produced], produced, n)
    tensor_consumer_pointer, tensor_consumers = _csr(consumer_tensor, consumer_op, n_tensors)
    op_input_count = np.bincount(consumer_op[tensor_producer[consumer_tensor] >= 0], minlength=n).astype(
        np.int32
    )
    duration = op_durations(
        np.asarray(ops.flops, dtype=np.float64),
        np.asarray(ops.bytes_moved, dtype=np.float64),
        np.asarray(ops.op_category, dtype=np.int64),
        cluster,
        tensor_cores=tensor_cores,
    )
    arrays = dict(
        op_kind=ops.op_kind,
        op_forward=ops.op_forward,
        duration=duration,
        tensor_producer=tensor_producer.astype(np.int32),
        tensor_bytes=np.asarray(ops.tensor_bytes, np.float64),
        tensor_static=np.asarray(ops.tensor_static, bool),
        tensor_persistent=np.asarray(ops.tensor_persistent, bool),
        op_output_pointer=op_output_pointer,
        op_outputs=op_outputs,
        tensor_consumer_pointer=tensor_consumer_pointer,
        tensor_consumers=tensor_consumers,
        op_input_count=op_input_count,
        static_bytes=np.asarray(ops.static_bytes, np.float64),
    )
    for value in arrays.values():
        value.setflags(write=False)
    return arrays
