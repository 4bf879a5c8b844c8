"""Tensor parallelism over an op graph: each op's sharding found from the graph, and the graph one rank
of a tensor-parallel group of T GPUs runs, with the collectives the shardings need as ops
(docs/cost_model.md, "Tensor parallelism over an op graph").

Every tensor is *replicated* (each rank holds all of it), *split* (each holds 1/T: heads, or the
columns of a matmul's output) or *partial* (each holds a whole-size partial sum). Walking the ops in
topological order, Megatron-LM's rules (Shoeybi et al. 2019) follow from the shardings of an op's
inputs:

- a matmul that owns a weight (an op of the matmul category with parameters) reading a split
  activation is *row-split*: its output is partial; reading only replicated activations it is
  *column-split*: its output is split;
- an op that works per head or per element (elementwise and data-movement ops, matmuls without
  weights: the attention core, and Softmax, which normalises over keys inside a head) reading a split
  activation is split too, its output split;
- any other op (norms and reductions over the hidden dimension, everything with only replicated
  inputs) is *replicated*: it runs whole on every rank.

A split or row-split op does 1/T of its FLOPs and bytes and holds 1/T of its parameters (bytes rounded
up to whole bytes, as a rank's shard is); a replicated op all of them. Where a tensor's sharding is not
what a consumer reads, a collective op is inserted once per tensor, before its first consumer that
needs it, and the consumers that need it read its output (a graph output is made replicated the same
way):

- a partial tensor read by anything: ``ReduceFromTensorParallelRegion``, an all-reduce forward, nothing
  backward (Megatron's g);
- a split tensor read by a replicated op: ``GatherFromTensorParallelRegion``, an all-gather forward, a
  reduce-scatter of its gradient backward;
- a replicated activation read by a split op: ``CopyToTensorParallelRegion``, nothing forward, an
  all-reduce of its gradient backward (Megatron's f: each rank's gradient covers only its share). A
  replicated tensor that depends on neither a data input nor a parameter (an attention mask, a
  rotary table built from a range) is a constant: it has no gradient to reduce and needs none.

So each attention block and each MLP block of a transformer costs one all-reduce forward and one
backward, as in Megatron-LM. The collective ops' own FLOPs are 0 and their bytes the whole tensor's
(the buffer the compile pass times them on: `COLLECTIVE_TIMES`)."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from placement_gym.graph.opgraph import CATEGORY_INDEX, OpGraph

REPLICATED, SPLIT, PARTIAL = 0, 1, 2
SHARDINGS = ("replicated", "split", "partial")
# collective op type -> (its forward collective, its backward collective); None: nothing to do
COLLECTIVE_TIMES: dict[str, tuple[str | None, str | None]] = {
    "ReduceFromTensorParallelRegion": ("all_reduce", None),
    "GatherFromTensorParallelRegion": ("all_gather", "reduce_scatter"),
    "CopyToTensorParallelRegion": (None, "all_reduce"),
}
_MATMUL = CATEGORY_INDEX["matmul"]
_PER_HEAD = {CATEGORY_INDEX["elementwise"], CATEGORY_INDEX["data_movement"], _MATMUL}


@dataclass(frozen=True, eq=False)
class ShardedGraph:
    """``graph``: what one rank runs (the original ops in their order with the collective ops
    inserted); ``origin``: per op of ``graph``, the original op's index (-1: an inserted collective);
    ``sharding``: per original op, the index in `SHARDINGS` of its output (a row-split op's output is
    partial, a column-split one's split)."""

    graph: OpGraph
    origin: np.ndarray
    sharding: np.ndarray


def _live_tensors(graph: OpGraph) -> np.ndarray:
    """Per tensor: whether it depends on a graph data input or a parameter (else a constant)."""
    live = (graph.param_bytes > 0).tolist()  # per op: owns a parameter or reads a live tensor
    order = np.argsort(graph.edge_dst, kind="stable")
    producers = graph.tensor_producer.tolist()
    for tensor, dst in zip(graph.edge_tensor[order].tolist(), graph.edge_dst[order].tolist()):
        # edges sorted by consumer: a producer's liveness is final when its consumer is reached
        producer = producers[tensor]
        if producer < 0 or live[producer]:
            live[dst] = True
    return np.array([producer < 0 or live[producer] for producer in producers], dtype=bool)


def shard(graph: OpGraph, degree: int) -> ShardedGraph:
    """The graph one rank of a tensor-parallel group of ``degree`` GPUs runs (module docstring)."""
    n, t = graph.n_ops, float(degree)
    producers = graph.tensor_producer.tolist()
    is_parameter = graph.tensor_is_parameter.tolist()
    live = _live_tensors(graph).tolist()
    inputs: list[list[int]] = [[] for _ in range(n)]
    for tensor, dst in zip(graph.edge_tensor.tolist(), graph.edge_dst.tolist()):
        inputs[dst].append(tensor)
    outputs: list[list[int]] = [[] for _ in range(n)]
    for tensor, producer in enumerate(producers):
        if producer >= 0:
            outputs[producer].append(tensor)
    tensor_state = [REPLICATED] * graph.n_tensors
    sharding = np.zeros(n, dtype=np.int8)
    # the new graph, op by op and tensor by tensor
    # name, type, category, flops, bytes, parameter bytes, original op
    ops: list[tuple[str, str, int, float, float, float, int]] = []
    new_producer: list[int] = []
    new_bytes: list[float] = []
    new_names: list[str] = []
    new_output: list[bool] = []
    edges: list[tuple[int, int]] = []  # (new tensor, new op)
    tensor_id = [-1] * graph.n_tensors  # original tensor -> new tensor
    converted: dict[tuple[int, str], int] = {}  # (original tensor, collective) -> new tensor

    def add_tensor(name: str, producer: int, size: float, output: bool = False) -> int:
        new_names.append(name)
        new_producer.append(producer)
        new_bytes.append(size)
        new_output.append(output)
        return len(new_names) - 1

    def collective(tensor: int, kind: str, source: int, size: float) -> int:
        key = (tensor, kind)
        if key not in converted:
            ops.append((f"{graph.tensor_names[tensor]}/{kind}", kind, CATEGORY_INDEX["data_movement"], 0.0,
                        size, 0.0, -1))
            op = len(ops) - 1
            edges.append((source, op))
            converted[key] = add_tensor(f"{graph.tensor_names[tensor]}/{kind}", op, size)
        return converted[key]

    def whole_bytes(tensor: int) -> float:
        return float(graph.tensor_bytes[tensor])

    def replicated(tensor: int) -> int:
        """The new tensor holding ``tensor`` replicated (after its collective when it is not)."""
        state = tensor_state[tensor]
        kind = {PARTIAL: "ReduceFromTensorParallelRegion", SPLIT: "GatherFromTensorParallelRegion"}
        if state in kind:
            return collective(tensor, kind[state], tensor_id[tensor], whole_bytes(tensor))
        return tensor_id[tensor]

    for tensor, producer in enumerate(producers):
        if producer < 0:
            tensor_id[tensor] = add_tensor(graph.tensor_names[tensor], -1, whole_bytes(tensor),
                                           bool(graph.tensor_is_output[tensor]))
    category = graph.category.tolist()
    op_types = graph.op_types
    for op in range(n):
        activations = [x for x in inputs[op] if not is_parameter[x]]
        split_input = any(tensor_state[x] == SPLIT for x in activations)
        weighted_matmul = category[op] == _MATMUL and graph.param_bytes[op] > 0
        if weighted_matmul:
            state = PARTIAL if split_input else SPLIT
        elif split_input and (category[op] in _PER_HEAD or op_types[op] == "Softmax"):
            state = SPLIT
        else:
            state = REPLICATED
        sharding[op] = state
        reads = []
        for x in inputs[op]:
            if is_parameter[x] or (state != REPLICATED and tensor_state[x] == SPLIT):
                reads.append(tensor_id[x])
            elif state != REPLICATED and live[x]:
                # a replicated activation read by a split op: its gradient is all-reduced (f)
                source = replicated(x)
                reads.append(collective(x, "CopyToTensorParallelRegion", source, whole_bytes(x)))
            else:
                reads.append(replicated(x))
        share = 1.0 if state == REPLICATED else t
        ops.append((graph.op_names[op], op_types[op], category[op], float(graph.flops[op]) / share,
                    math.ceil(graph.bytes_accessed[op] / share), math.ceil(graph.param_bytes[op] / share),
                    op))
        new_op = len(ops) - 1
        edges.extend((x, new_op) for x in dict.fromkeys(reads))
        for x in outputs[op]:
            tensor_state[x] = state
            size = math.ceil(whole_bytes(x) / t) if state == SPLIT else whole_bytes(x)
            tensor_id[x] = add_tensor(graph.tensor_names[x], new_op, size)
    for x in np.flatnonzero(graph.tensor_is_output).tolist():
        if graph.tensor_producer[x] >= 0:
            new_output[replicated(x)] = True
    names = [o[0] for o in ops]
    if len(set(names)) != len(names):
        raise ValueError(f"graph {graph.name!r}: an op is named like a collective the tensor-parallel pass "
                         "inserts (<tensor>/<collective>); rename it")
    new_is_parameter = np.zeros(len(new_names), dtype=bool)
    for x in np.flatnonzero(graph.tensor_is_parameter).tolist():
        new_is_parameter[tensor_id[x]] = True
    edge_tensor = np.array([x for x, _ in edges], dtype=np.int64)
    edge_dst = np.array([op for _, op in edges], dtype=np.int64)
    sharded = OpGraph(
        name=graph.name,
        op_names=tuple(names),
        op_types=tuple(o[1] for o in ops),
        category=np.array([o[2] for o in ops]),
        flops=np.array([o[3] for o in ops]),
        bytes_accessed=np.array([o[4] for o in ops]),
        param_bytes=np.array([o[5] for o in ops]),
        tensor_names=tuple(new_names),
        tensor_producer=np.array(new_producer),
        tensor_bytes=np.array(new_bytes),
        tensor_is_parameter=new_is_parameter,
        tensor_is_output=np.array(new_output, dtype=bool),
        edge_tensor=edge_tensor,
        edge_dst=edge_dst,
        sha256=graph.sha256,
        data_inputs=graph.data_inputs,
    )
    return ShardedGraph(sharded, np.array([o[6] for o in ops], dtype=np.int64), sharding)
