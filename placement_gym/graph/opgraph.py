"""`OpGraph`: the forward computation graph of a model as flat numpy arrays.

Ops are stored in a fixed topological order: op ``i`` only consumes tensors produced by ops
``j < i``. Tensors are the values that flow along edges; a tensor has one producer (or ``-1`` for a
graph data input, which is present on every device at time 0) and any number of consumers.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property

import numpy as np

from placement_gym.common.content_hash import dataclass_sha256

# Cost categories: a device's FLOP efficiency is given per category (see `Cluster.efficiency`).
CATEGORIES: tuple[str, ...] = (
    "matmul",  # MatMul, Gemm, Einsum, LSTM/GRU cells
    "conv",  # Conv, ConvTranspose
    "elementwise",  # activations, arithmetic, casts
    "normalization",  # BatchNorm, LayerNorm, Softmax, ...
    "reduction",  # pooling, ReduceMean, ...
    "data_movement",  # Reshape, Transpose, Concat, Gather, Slice, ...
    "other",  # op types with no formula: costed by their bytes
)
CATEGORY_INDEX: dict[str, int] = {name: i for i, name in enumerate(CATEGORIES)}


@dataclass(frozen=True, eq=False)
class OpGraph:
    """An immutable forward graph.

    Per op (length ``n_ops``, in topological order):
        op_names, op_types: ONNX node names (made unique) and op types, for humans.
        op_type_ids: int32 index into ``op_type_names`` (the sorted op types of this graph).
        category: int8 index into `CATEGORIES`.
        flops: float64 floating-point operations of the forward op.
        bytes_accessed: float64 bytes read plus written by the op (its memory traffic).
        param_bytes: float64 bytes of the parameters this op owns (a parameter used by several ops
            is owned by its first consumer; the others receive it as a parameter tensor).
        depth: int32 longest path (in ops) from a source.
    Per tensor (length ``n_tensors``):
        tensor_names, tensor_producer (int32, -1 for a graph data input), tensor_bytes (float64),
        tensor_is_parameter (bool: a shared parameter read from its owner; its memory is counted
        with the owner's parameters, not as an activation), tensor_is_output (bool: a graph output,
        alive until the end of the step).
    Per edge (length ``n_edges``; one per (tensor, consumer op) pair, no duplicates):
        edge_tensor, edge_dst (int32). The source op is ``tensor_producer[edge_tensor]``.
    Other:
        name: the graph's name; sha256: of the ONNX file it came from ("" if built in memory);
        data_inputs: names of the graph's data inputs with their shapes.
        content_sha256 (computed): of everything above except ``name`` and ``sha256``: two graphs
            with the same content pose the same problem, whichever file or code built them.
    """

    name: str
    op_names: tuple[str, ...]
    op_types: tuple[str, ...]
    category: np.ndarray
    flops: np.ndarray
    bytes_accessed: np.ndarray
    param_bytes: np.ndarray
    tensor_names: tuple[str, ...]
    tensor_producer: np.ndarray
    tensor_bytes: np.ndarray
    tensor_is_parameter: np.ndarray
    tensor_is_output: np.ndarray
    edge_tensor: np.ndarray
    edge_dst: np.ndarray
    sha256: str = ""
    data_inputs: tuple[tuple[str, tuple[int, ...]], ...] = ()
    op_type_names: tuple[str, ...] = field(init=False)
    op_type_ids: np.ndarray = field(init=False)
    depth: np.ndarray = field(init=False)

    def __post_init__(self) -> None:
        n, t = len(self.op_names), len(self.tensor_names)
        conv = {
            "category": np.int8,
            "flops": np.float64,
            "bytes_accessed": np.float64,
            "param_bytes": np.float64,
            "tensor_producer": np.int32,
            "tensor_bytes": np.float64,
            "tensor_is_parameter": bool,
            "tensor_is_output": bool,
            "edge_tensor": np.int32,
            "edge_dst": np.int32,
        }
        for key, dtype in conv.items():
            array = np.ascontiguousarray(getattr(self, key), dtype=dtype)
            array.setflags(write=False)
            object.__setattr__(self, key, array)
        lengths = {
            "op_types": (len(self.op_types), n),
            "category": (len(self.category), n),
            "flops": (len(self.flops), n),
            "bytes_accessed": (len(self.bytes_accessed), n),
            "param_bytes": (len(self.param_bytes), n),
            "tensor_producer": (len(self.tensor_producer), t),
            "tensor_bytes": (len(self.tensor_bytes), t),
            "tensor_is_parameter": (len(self.tensor_is_parameter), t),
            "tensor_is_output": (len(self.tensor_is_output), t),
            "edge_dst": (len(self.edge_dst), len(self.edge_tensor)),
        }
        for key, (got, want) in lengths.items():
            if got != want:
                raise ValueError(f"OpGraph {self.name!r}: {key} has length {got}, expected {want}")
        if n == 0:
            raise ValueError(f"OpGraph {self.name!r} has no ops")
        if len(set(self.op_names)) != n:
            raise ValueError(f"OpGraph {self.name!r}: op names are not unique")
        for key in ("flops", "bytes_accessed", "param_bytes", "tensor_bytes"):
            values = getattr(self, key)
            bad = ~np.isfinite(values) | (values < 0)
            if bad.any():
                i = int(np.argmax(bad))
                tensor = key == "tensor_bytes"
                where = f"tensor {self.tensor_names[i]!r}" if tensor else f"op {self.op_names[i]!r}"
                raise ValueError(
                    f"OpGraph {self.name!r}: {key} of {where} must be finite and >= 0, got {values[i]}"
                )
        if np.any((self.category < 0) | (self.category >= len(CATEGORIES))):
            raise ValueError(f"OpGraph {self.name!r}: category out of range")
        if np.any((self.tensor_producer < -1) | (self.tensor_producer >= n)):
            raise ValueError(f"OpGraph {self.name!r}: tensor_producer out of range")
        if np.any((self.edge_dst < 0) | (self.edge_dst >= n)):
            raise ValueError(f"OpGraph {self.name!r}: edge_dst out of range")
        if np.any((self.edge_tensor < 0) | (self.edge_tensor >= t)):
            raise ValueError(f"OpGraph {self.name!r}: edge_tensor out of range")
        src = self.tensor_producer[self.edge_tensor]
        if np.any(src >= self.edge_dst):
            raise ValueError(
                f"OpGraph {self.name!r}: ops are not in topological order (or the graph has a cycle)"
            )
        pairs = self.edge_tensor.astype(np.int64) * n + self.edge_dst
        if len(np.unique(pairs)) != len(pairs):
            raise ValueError(f"OpGraph {self.name!r}: duplicate (tensor, consumer) edges")
        if np.any(self.tensor_is_parameter & (self.tensor_producer < 0)):
            raise ValueError(f"OpGraph {self.name!r}: a parameter tensor must have an owner op")
        names = tuple(sorted(set(self.op_types)))
        index = {name: i for i, name in enumerate(names)}
        object.__setattr__(self, "op_type_names", names)
        ids = np.array([index[o] for o in self.op_types], dtype=np.int32)
        ids.setflags(write=False)
        object.__setattr__(self, "op_type_ids", ids)
        levels = [0] * n
        order = np.argsort(self.edge_dst, kind="stable")
        # Edges sorted by consumer: producers' depths are final when read. Plain lists: a walk over
        # numpy scalars costs several times more per edge.
        for s, d in zip(src[order].tolist(), self.edge_dst[order].tolist(), strict=True):
            if s >= 0 and levels[s] + 1 > levels[d]:
                levels[d] = levels[s] + 1
        depth = np.asarray(levels, dtype=np.int32)
        depth.setflags(write=False)
        object.__setattr__(self, "depth", depth)

    @cached_property
    def content_sha256(self) -> str:
        """The hex sha256 of the graph's content: every array, op and tensor name and data input, not
        its name nor its file's sha256 (a renamed copy of a file has the same content; a file whose
        bytes differ only where the importer does not look, too)."""
        return dataclass_sha256(self, exclude=("name", "sha256"))

    @property
    def n_ops(self) -> int:
        return len(self.op_names)

    @property
    def n_tensors(self) -> int:
        return len(self.tensor_names)

    @property
    def n_edges(self) -> int:
        return len(self.edge_tensor)

    @property
    def edge_src(self) -> np.ndarray:
        """Producer op of each edge (-1 for a graph data input)."""
        return self.tensor_producer[self.edge_tensor]

    def __repr__(self) -> str:
        return (
            f"OpGraph({self.name!r}, ops={self.n_ops}, tensors={self.n_tensors}, "
            f"edges={self.n_edges}, gflops={self.flops.sum() / 1e9:.2f})"
        )
