"""`GraphBuilder`: an `OpGraph` written op by op, in topological order, for the dataset families.

Each op makes one output tensor; ``add`` names the tensors an op reads (its own data inputs, graph data
inputs from `data_input`, or parameters another op owns, read as shared parameters). Ops nobody reads
are the graph's outputs. Byte counts are whole numbers, as real tensor sizes are.
"""

from __future__ import annotations

import numpy as np

from placement_gym.graph.opgraph import CATEGORY_INDEX, OpGraph

FLOAT_BYTES = 4.0


class GraphBuilder:
    """Collects ops and tensors; `build` makes the `OpGraph`."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.op_names: list[str] = []
        self.op_types: list[str] = []
        self.category: list[int] = []
        self.flops: list[float] = []
        self.bytes_accessed: list[float] = []
        self.param_bytes: list[float] = []
        self.tensor_producer: list[int] = []
        self.tensor_bytes: list[float] = []
        self.tensor_names: list[str] = []
        self.edges: list[tuple[int, int]] = []  # (tensor, consumer op)

    def data_input(self, name: str, elements: float) -> int:
        """A graph data input of ``elements`` float32 values: its tensor index."""
        self.tensor_names.append(name)
        self.tensor_producer.append(-1)
        self.tensor_bytes.append(float(np.round(elements * FLOAT_BYTES)))
        return len(self.tensor_bytes) - 1

    def add(self, name: str, op_type: str, category: str, reads: list[int], out_elements: float,
            flops: float, param_elements: float = 0.0) -> int:
        """An op reading the tensors ``reads`` and making ``out_elements`` float32 values with
        ``flops`` FLOPs and ``param_elements`` float32 parameters of its own; its output's tensor index.
        Memory traffic: every input and the output, once, plus the parameters."""
        op = len(self.op_names)
        self.op_names.append(name)
        self.op_types.append(op_type)
        self.category.append(CATEGORY_INDEX[category])
        self.flops.append(float(np.round(flops)))
        read_bytes = sum(self.tensor_bytes[t] for t in reads)
        out_bytes = float(np.round(out_elements * FLOAT_BYTES))
        params = float(np.round(param_elements * FLOAT_BYTES))
        self.bytes_accessed.append(read_bytes + out_bytes + params)
        self.param_bytes.append(params)
        self.edges += [(t, op) for t in dict.fromkeys(reads)]
        self.tensor_names.append(f"{name}:0")
        self.tensor_producer.append(op)
        self.tensor_bytes.append(out_bytes)
        return len(self.tensor_bytes) - 1

    @property
    def n_ops(self) -> int:
        return len(self.op_names)

    def build(self) -> OpGraph:
        n_tensors = len(self.tensor_bytes)
        producer = np.array(self.tensor_producer, dtype=np.int64)
        read = np.zeros(n_tensors, dtype=bool)
        edge_tensor = np.array([t for t, _ in self.edges], dtype=np.int64)
        edge_dst = np.array([d for _, d in self.edges], dtype=np.int64)
        read[edge_tensor] = True
        is_output = ~read & (producer >= 0)
        keep = read | is_output
        remap = np.cumsum(keep) - 1
        order = np.lexsort((remap[edge_tensor], edge_dst))
        return OpGraph(
            name=self.name,
            op_names=tuple(self.op_names),
            op_types=tuple(self.op_types),
            category=np.array(self.category, dtype=np.int8),
            flops=np.array(self.flops),
            bytes_accessed=np.array(self.bytes_accessed),
            param_bytes=np.array(self.param_bytes),
            tensor_names=tuple(name for name, kept in zip(self.tensor_names, keep) if kept),
            tensor_producer=producer[keep],
            tensor_bytes=np.array(self.tensor_bytes)[keep],
            tensor_is_parameter=np.zeros(int(keep.sum()), dtype=bool),
            tensor_is_output=is_output[keep],
            edge_tensor=remap[edge_tensor][order],
            edge_dst=edge_dst[order],
        )
