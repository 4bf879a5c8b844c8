"""Synthetic op graphs for tests and benchmarks: random DAGs and layered networks."""

from __future__ import annotations

import numpy as np

from placement_gym.graph.opgraph import CATEGORIES, OpGraph


def random_graph(
    n_ops: int,
    seed: int = 0,
    max_inputs: int = 3,
    window: int | None = None,
    n_data_inputs: int = 1,
    shared_parameter_prob: float = 0.1,
    name: str | None = None,
) -> OpGraph:
    """A random DAG of ``n_ops`` ops in topological order.

    Op ``i`` reads 1..``max_inputs`` tensors chosen among the outputs of the previous ``window``
    ops (all previous ops when None) and the data inputs; some ops have parameters, a few read a
    parameter shared with an earlier op. Ops with no reader produce a graph output. Byte counts
    are whole numbers, as real tensor sizes are."""
    if n_ops < 1:
        raise ValueError(f"n_ops must be >= 1, got {n_ops}")
    rng = np.random.default_rng(seed)
    flops = rng.choice([0.0, 1e6, 1e8, 1e9, 1e10], size=n_ops) * rng.uniform(0.5, 2.0, size=n_ops)
    flops = np.round(flops)
    out_bytes = np.round(
        rng.choice([4e3, 1e5, 1e6, 2e7, 1e8], size=n_ops) * rng.uniform(0.5, 2.0, size=n_ops)
    )
    has_params = rng.random(n_ops) < 0.3
    param_bytes = np.where(has_params, np.round(rng.choice([1e4, 1e6, 4e7], size=n_ops)), 0.0)
    category = rng.integers(0, len(CATEGORIES), size=n_ops)
    producer = list(range(n_ops)) + [-1] * n_data_inputs
    tensor_bytes = list(out_bytes) + [float(np.round(rng.uniform(1e5, 1e7)))] * n_data_inputs
    is_param = [False] * (n_ops + n_data_inputs)
    edge_tensor: list[int] = []
    edge_dst: list[int] = []
    for i in range(n_ops):
        low = 0 if window is None else max(0, i - window)
        candidates = list(range(low, i)) + list(range(n_ops, n_ops + n_data_inputs))
        k = int(rng.integers(1, max_inputs + 1))
        chosen = rng.choice(candidates, size=min(k, len(candidates)), replace=False)
        for t in sorted(int(c) for c in chosen):
            edge_tensor.append(t)
            edge_dst.append(i)
        owners = np.flatnonzero(has_params[:i])
        if len(owners) and rng.random() < shared_parameter_prob:
            owner = int(rng.choice(owners))
            producer.append(owner)
            tensor_bytes.append(float(param_bytes[owner]))
            is_param.append(True)
            edge_tensor.append(len(producer) - 1)
            edge_dst.append(i)
    consumed = np.zeros(len(producer), dtype=bool)
    consumed[edge_tensor] = True
    is_output = ~consumed
    is_output[n_ops:] = False
    keep = consumed | is_output
    remap = np.cumsum(keep) - 1
    producer_array = np.array(producer)[keep]
    return OpGraph(
        name=name or f"random{n_ops}_s{seed}",
        op_names=tuple(f"op{i}" for i in range(n_ops)),
        op_types=tuple(CATEGORIES[c] for c in category),
        category=category,
        flops=flops,
        bytes_accessed=np.round(out_bytes * rng.uniform(1.0, 3.0, size=n_ops)),
        param_bytes=param_bytes,
        tensor_names=tuple(f"t{i}" for i in range(int(keep.sum()))),
        tensor_producer=producer_array,
        tensor_bytes=np.array(tensor_bytes)[keep],
        tensor_is_parameter=np.array(is_param)[keep],
        tensor_is_output=is_output[keep],
        edge_tensor=remap[np.array(edge_tensor)],
        edge_dst=np.array(edge_dst),
    )


def layered_graph(n_ops: int, width: int = 8, seed: int = 0) -> OpGraph:
    """A layered network of ``n_ops`` ops, ``width`` per layer: the first layer reads the data
    input, every later op reads 2 random ops of the layer before; ops nobody reads are graph
    outputs. Built with numpy alone, so 100k-op benchmark graphs take well under a second."""
    if n_ops < 1 or width < 2:
        raise ValueError(f"need n_ops >= 1 and width >= 2, got n_ops={n_ops}, width={width}")
    rng = np.random.default_rng(seed)
    ops = np.arange(n_ops)
    layer = ops // width
    later = ops[layer > 0]
    previous_start = (layer[later] - 1) * width
    first = rng.integers(0, width, size=len(later))
    second = (first + rng.integers(1, width, size=len(later))) % width  # a different op
    edge_src = np.concatenate(
        [np.full(min(width, n_ops), -1), previous_start + first, previous_start + second]
    )
    edge_dst = np.concatenate([ops[layer == 0], later, later])
    read = np.zeros(n_ops, dtype=bool)
    read[edge_src[edge_src >= 0]] = True
    # tensors: one per op (its output), then the data input
    edge_tensor = np.where(edge_src >= 0, edge_src, n_ops)
    order = np.lexsort((edge_tensor, edge_dst))
    out_bytes = np.round(rng.choice([4e3, 1e5, 1e6, 2e7], size=n_ops) * rng.uniform(0.5, 2.0, size=n_ops))
    return OpGraph(
        name=f"layered{n_ops}",
        op_names=tuple(f"op{i}" for i in range(n_ops)),
        op_types=("MatMul",) * n_ops,
        category=np.zeros(n_ops, dtype=np.int8),
        flops=np.round(rng.choice([1e6, 1e8, 1e9, 1e10], size=n_ops) * rng.uniform(0.5, 2.0, size=n_ops)),
        bytes_accessed=np.round(out_bytes * rng.uniform(1.0, 3.0, size=n_ops)),
        param_bytes=np.where(rng.random(n_ops) < 0.3, np.round(rng.choice([1e4, 1e6, 4e7], size=n_ops)), 0.0),
        tensor_names=tuple(f"t{i}" for i in range(n_ops)) + ("input",),
        tensor_producer=np.append(ops, -1),
        tensor_bytes=np.append(out_bytes, 1e6),
        tensor_is_parameter=np.zeros(n_ops + 1, dtype=bool),
        tensor_is_output=np.append(~read, False),
        edge_tensor=edge_tensor[order],
        edge_dst=edge_dst[order],
    )


# The op types of `onnx_chain_model`, in turn: a matmul by the shared weight, two element-wise ops
# of one input and an Add that also reads the value two ops back (a skip connection).
_CHAIN_PATTERN = ("MatMul", "Relu", "Add", "Sigmoid")


def onnx_chain_model(n_nodes: int, width: int = 64, batch: int = 32):  # -> onnx.ModelProto
    """An ONNX model of ``n_nodes`` nodes for import benchmarks: a chain whose nodes cycle through
    MatMul (by one ``(width, width)`` weight initializer shared by every MatMul), Relu, Add (of the
    previous value and the one two nodes back) and Sigmoid, on ``(batch, width)`` float tensors from
    one data input ``x``; the last value is the graph output. Written with ``onnx.helper`` in well
    under a second per 100,000 nodes; every tensor's shape is left to shape inference."""
    if n_nodes < 1 or width < 1 or batch < 1:
        raise ValueError(f"need n_nodes, width and batch >= 1, got {n_nodes}, {width}, {batch}")
    from onnx import TensorProto, helper

    nodes = []
    previous = "x"
    for i in range(n_nodes):
        op_type, out = _CHAIN_PATTERN[i % 4], f"t{i}"
        if op_type == "MatMul":
            inputs = [previous, "W"]
        elif op_type == "Add":
            inputs = [previous, f"t{i - 2}"]
        else:
            inputs = [previous]
        nodes.append(helper.make_node(op_type, inputs, [out], name=f"n{i}"))
        previous = out
    weight = helper.make_tensor("W", TensorProto.FLOAT, [width, width], bytes(4 * width * width), raw=True)
    graph = helper.make_graph(
        nodes, f"chain{n_nodes}", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [batch, width])],
        [helper.make_tensor_value_info(previous, TensorProto.FLOAT, [batch, width])], [weight],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
