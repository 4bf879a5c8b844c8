"""Op groupings: let an agent place groups of forward ops instead of single ops.

A `Grouping` maps every forward op of an `OpGraph` to a group; an action gives one device per
group and `Grouping.expand` turns it into a placement (one device per op). Groups are numbered by
their first (lowest-index) op, so group order follows the topological order of first ops.

`make_grouping(graph, groups, seed)` builds one from the ``groups=`` kwarg the environments share:

* ``None`` (or ``"none"``): one group per op.
* ``"colocate"``: ops that must stay together (the co-location groups of Mirhoseini et al. 2017).
* ``"chains"``: HSDAG's chain merging (Duan et al. 2024).
* an int ``k`` (or ``"partition:k"``): a balanced k-way partition with few bytes crossing groups.
* an array or sequence of ``n_ops`` integer labels: explicit groups, renumbered by first op.
* a `Grouping`: passed through after checking it fits the graph.

`quotient_edges` gives the edges of the coarsened graph, `group_sums` per-group totals of per-op
values, `communication_bytes` the bytes a grouping makes cross groups (the partition's objective).
"""

from __future__ import annotations

import weakref
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from placement_gym.graph.op_costs import METADATA_OPS, VIEW_OPS
from placement_gym.graph.opgraph import OpGraph
from placement_gym.task.partition import contiguous_labels, partition_labels

# The accepted values of ``groups=``, for error messages and docs.
GROUP_MODES: tuple = (None, "colocate", "chains", "<int k>", "<array>")
_ALLOWED = (
    "None (one group per op), 'colocate', 'chains', an int k with 1 <= k <= n_ops (a k-way "
    "partition; also 'partition:k'), an array of n_ops integer group labels, or a Grouping"
)

# Ops that only alias their input (views) or read its metadata (Shape, Size): they move no data
# (see op_costs), so running one away from its input's producer only adds a transfer. Transpose is
# left out on purpose: ONNX Transpose materialises a permuted copy, the cost model charges its bytes
# (12.6 MB per attention transpose in bert_base), so it is real work that may pay to move.
COLOCATED_VIEW_OPS: frozenset[str] = VIEW_OPS | METADATA_OPS


@dataclass(frozen=True, eq=False)
class Grouping:
    """A map from forward ops to groups.

    name: how it was made ("none", "colocate", "chains", "partition:32", "explicit").
    group_of_op: int64 ``(n_ops,)``, values ``0..n_groups-1``; groups are numbered by their first
        (lowest-index) op, so ``first_op`` is increasing. Build arbitrary labels with
        `make_grouping`, which renumbers them.
    n_groups, first_op (int64 ``(n_groups,)``), sizes (ops per group): derived.
    """

    name: str
    group_of_op: np.ndarray
    n_groups: int = field(init=False)
    first_op: np.ndarray = field(init=False, repr=False)
    _member_pointer: np.ndarray = field(init=False, repr=False)
    _members: np.ndarray = field(init=False, repr=False)

    def __post_init__(self) -> None:
        labels = np.asarray(self.group_of_op)
        if labels.ndim != 1 or len(labels) == 0 or labels.dtype.kind not in "iu":
            raise ValueError(
                f"Grouping {self.name!r}: group_of_op must be a non-empty 1-D integer array, got "
                f"shape {labels.shape} dtype {labels.dtype}"
            )
        labels = np.ascontiguousarray(labels, dtype=np.int64)
        unique, first = np.unique(labels, return_index=True)
        if not (np.array_equal(unique, np.arange(len(unique))) and np.all(np.diff(first) > 0)):
            raise ValueError(
                f"Grouping {self.name!r}: groups must be numbered 0..n_groups-1 in order of their first "
                "op; use make_grouping(graph, labels) to renumber arbitrary labels"
            )
        order = np.argsort(labels, kind="stable")  # members of each group in op order
        pointer = np.zeros(len(unique) + 1, dtype=np.int64)
        np.cumsum(np.bincount(labels, minlength=len(unique)), out=pointer[1:])
        for value in (labels, first, pointer, order):
            value.setflags(write=False)
        object.__setattr__(self, "group_of_op", labels)
        object.__setattr__(self, "n_groups", len(unique))
        object.__setattr__(self, "first_op", first.astype(np.int64))
        object.__setattr__(self, "_member_pointer", pointer)
        object.__setattr__(self, "_members", order.astype(np.int64))

    @property
    def n_ops(self) -> int:
        return len(self.group_of_op)

    @property
    def sizes(self) -> np.ndarray:
        """Number of ops in each group."""
        return np.diff(self._member_pointer)

    def members(self, group: int) -> np.ndarray:
        """The ops of ``group`` in increasing (topological) order."""
        if not 0 <= group < self.n_groups:
            raise ValueError(f"group {group} out of range; grouping {self.name!r} has {self.n_groups} groups")
        return self._members[self._member_pointer[group] : self._member_pointer[group + 1]]

    def expand(self, group_placement) -> np.ndarray:
        """Per-op placement (int64 ``(n_ops,)``) from one device per group (``(n_groups,)``); a
        leading batch axis ``(batch, n_groups)`` gives ``(batch, n_ops)``."""
        rows = self._device_rows(group_placement, self.n_groups, "group placement", "group")
        return rows[..., self.group_of_op]

    def reduce(self, placement) -> np.ndarray:
        """Per-group placement from a per-op one: the device of each group's first op."""
        return self._device_rows(placement, self.n_ops, "placement", "op")[..., self.first_op]

    def _device_rows(self, devices, width: int, what: str, per: str) -> np.ndarray:
        """``devices`` as int64: one device per ``per`` (``(width,)``) or a batch of such rows, else a
        ValueError naming ``what``."""
        array = np.asarray(devices)
        if array.ndim not in (1, 2) or array.shape[-1] != width:
            raise ValueError(
                f"{what} for grouping {self.name!r} must have shape ({width},): one device per {per} "
                f"(or (batch, {width})); got shape {array.shape}"
            )
        return _as_int(array, what)

    def __repr__(self) -> str:
        return f"Grouping({self.name!r}, ops={self.n_ops}, groups={self.n_groups})"


def _as_int(array: np.ndarray, what: str) -> np.ndarray:
    if array.dtype.kind in "iu":
        return array.astype(np.int64, copy=False)
    if array.dtype.kind == "f" and np.all(np.isfinite(array)) and np.all(array == np.round(array)):
        return array.astype(np.int64)
    raise ValueError(f"{what} must hold integers, got dtype {array.dtype}")


def _renumber(labels: np.ndarray) -> np.ndarray:
    """Labels renumbered 0..n-1 in order of each label's first occurrence."""
    _, first, inverse = np.unique(labels, return_index=True, return_inverse=True)
    rank = np.empty(len(first), dtype=np.int64)
    rank[np.argsort(first, kind="stable")] = np.arange(len(first))
    return rank[inverse.reshape(-1)]


class _UnionFind:
    def __init__(self, n: int) -> None:
        self.parent = list(range(n))

    def find(self, x: int) -> int:
        parent = self.parent
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    def union(self, a: int, b: int) -> None:
        ra, rb = self.find(a), self.find(b)
        if ra != rb:
            self.parent[max(ra, rb)] = min(ra, rb)

    def labels(self) -> np.ndarray:
        return np.array([self.find(i) for i in range(len(self.parent))], dtype=np.int64)


# ---------------------------------------------------------------------------------------------------
# Modes


def colocation_grouping(graph: OpGraph) -> Grouping:
    """Co-location groups (Mirhoseini et al. 2017): the union (union-find, so transitively) of

    (a) a shared parameter's owner with every op that reads it: for each tensor with
        ``tensor_is_parameter``, its producer and all its consumers, as TensorFlow co-locates a
        variable with its readers;
    (b) an op whose type is in `COLOCATED_VIEW_OPS` (Reshape, Squeeze, Unsqueeze, Flatten, Identity,
        Shape, Size: zero FLOPs and no data movement, since a view aliases its input) with the
        producer of its data input, since moving a view alone never pays. The data input is the
        view's largest input tensor (a Reshape's shape operand is a few bytes; ties: the first edge);
        when that tensor is a graph data input (no producer), the view stays on its own.
    Transpose is not merged: it copies its input (see `COLOCATED_VIEW_OPS`).
    """
    n = graph.n_ops
    uf = _UnionFind(n)
    src = graph.edge_src
    for t in np.flatnonzero(graph.tensor_is_parameter).tolist():
        owner = int(graph.tensor_producer[t])
        for reader in graph.edge_dst[graph.edge_tensor == t].tolist():
            uf.union(owner, reader)
    views = np.flatnonzero(np.isin(np.array(graph.op_types), list(COLOCATED_VIEW_OPS)))
    if len(views):
        order = np.argsort(graph.edge_dst, kind="stable")
        pointer = np.searchsorted(graph.edge_dst[order], np.arange(n + 1))
        for v in views.tolist():
            edges = order[pointer[v] : pointer[v + 1]]
            if len(edges) == 0:
                continue
            data = edges[int(np.argmax(graph.tensor_bytes[graph.edge_tensor[edges]]))]
            if src[data] >= 0:
                uf.union(int(src[data]), v)
    return Grouping("colocate", _renumber(uf.labels()))


def chain_grouping(graph: OpGraph) -> Grouping:
    """HSDAG's coarsening (Duan et al. 2024): merge op ``u`` into its successor ``v`` when ``v`` is
    ``u``'s only successor and ``u`` is ``v``'s only predecessor. Successors and predecessors are
    distinct ops joined by an op-to-op edge (graph data inputs are not predecessors; parameter reads
    count, they are edges between ops). Merged pairs are joined by union-find, so a whole chain
    ``a -> b -> c`` becomes one group, while a fork or a join stops it."""
    n = graph.n_ops
    src = graph.edge_src.astype(np.int64)
    keep = src >= 0
    pairs = np.unique(src[keep] * n + graph.edge_dst[keep])
    u, v = pairs // n, pairs % n
    out_degree = np.bincount(u, minlength=n)
    in_degree = np.bincount(v, minlength=n)
    merge = (out_degree[u] == 1) & (in_degree[v] == 1)
    uf = _UnionFind(n)
    for a, b in zip(u[merge].tolist(), v[merge].tolist()):
        uf.union(a, b)
    return Grouping("chains", _renumber(uf.labels()))


def explicit_grouping(graph: OpGraph, labels) -> Grouping:
    """Groups from ``n_ops`` integer labels (any non-negative values), renumbered by first op."""
    array = np.asarray(labels)
    if array.ndim != 1 or len(array) != graph.n_ops:
        raise ValueError(
            f"explicit groups for graph {graph.name!r} must be a 1-D array of {graph.n_ops} integer labels "
            f"(one per op); got shape {array.shape}"
        )
    if array.dtype.kind == "b" or array.dtype.kind not in "iuf":
        raise ValueError(f"explicit group labels must be integers, got dtype {array.dtype}")
    if array.dtype.kind == "f" and not (np.all(np.isfinite(array)) and np.all(array == np.round(array))):
        bad = int(np.flatnonzero(~np.isfinite(array) | (array != np.round(array)))[0])
        raise ValueError(f"explicit group labels must be integers; op {bad} has label {array[bad]!r}")
    if np.any(array < 0):
        bad = int(np.flatnonzero(array < 0)[0])
        raise ValueError(f"explicit group labels must be >= 0; op {bad} has label {array[bad]!r}")
    return Grouping("explicit", _renumber(array.astype(np.int64)))


def identity_grouping(graph: OpGraph) -> Grouping:
    """One group per op."""
    return Grouping("none", np.arange(graph.n_ops, dtype=np.int64))


# ---------------------------------------------------------------------------------------------------
# Coarsened-graph helpers


def quotient_edges(
    graph: OpGraph, grouping: Grouping | np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Edges of the coarsened graph: ``(src_group, dst_group, bytes)`` (int64, int64, float64), one
    per ordered pair of distinct groups joined by a producer-op -> consumer-op edge, sorted by
    ``(src, dst)``. A tensor counts once per consuming group (not once per consuming op), as the
    cost model sends a tensor once per destination device; graph data inputs make no edges."""
    group = _labels_of(graph, grouping)
    src_op = graph.edge_src
    keep = src_op >= 0
    tensor = graph.edge_tensor[keep].astype(np.int64)
    cross = group[src_op[keep]] != group[graph.edge_dst[keep]]
    n_groups = int(group.max()) + 1
    # one entry per (tensor, destination group); the source group is the tensor's producer's
    unique = np.unique(tensor[cross] * n_groups + group[graph.edge_dst[keep][cross]])
    tensor, dst = unique // n_groups, unique % n_groups
    src = group[graph.tensor_producer[tensor]]
    pairs, inverse = np.unique(src * n_groups + dst, return_inverse=True)
    volume = np.bincount(inverse.reshape(-1), weights=graph.tensor_bytes[tensor], minlength=len(pairs))
    return pairs // n_groups, pairs % n_groups, volume.astype(np.float64)


def communication_bytes(graph: OpGraph, grouping: Grouping | np.ndarray) -> float:
    """Bytes that cross groups if every group sits on its own device: each op-produced tensor is sent
    once to every group other than its producer's that reads it, i.e. the sum over tensors of
    bytes x (groups among its producer and readers - 1). Equals the total of `quotient_edges`."""
    return float(quotient_edges(graph, grouping)[2].sum())


def group_sums(grouping: Grouping, values) -> np.ndarray:
    """Sum of per-op ``values`` (shape ``(n_ops,)``) within each group: float64 ``(n_groups,)``."""
    array = np.asarray(values, dtype=np.float64)
    if array.shape != (grouping.n_ops,):
        raise ValueError(f"values must have shape ({grouping.n_ops},): one per op; got shape {array.shape}")
    return np.bincount(grouping.group_of_op, weights=array, minlength=grouping.n_groups)


def _labels_of(graph: OpGraph, grouping: Grouping | np.ndarray) -> np.ndarray:
    group = grouping.group_of_op if isinstance(grouping, Grouping) else np.asarray(grouping)
    if group.shape != (graph.n_ops,) or group.dtype.kind not in "iu" or np.any(group < 0):
        raise ValueError(
            f"grouping must give a group index >= 0 to each of the {graph.n_ops} ops of {graph.name!r}; "
            f"got shape {group.shape} dtype {group.dtype}"
        )
    return group.astype(np.int64, copy=False)


# ---------------------------------------------------------------------------------------------------
# Partition (the algorithm is placement_gym/task/partition.py)


def contiguous_grouping(graph: OpGraph, k: int) -> Grouping:
    """``k`` contiguous ranges of the topological order with about equal `partition.op_weight`: the
    plain topological split that `partition_grouping` must not be worse than."""
    _check_k(graph, k)
    return Grouping(f"contiguous:{k}", contiguous_labels(graph, k))


def _check_seed(seed) -> None:
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)):
        raise ValueError(f"grouping seed must be an int, got {seed!r}")


def _check_k(graph: OpGraph, k) -> None:
    if not 1 <= k <= graph.n_ops:
        raise ValueError(
            f"number of groups k={k} out of range; allowed 1..{graph.n_ops} (the ops of {graph.name!r})"
        )


def partition_grouping(graph: OpGraph, k: int, seed: int = 0) -> Grouping:
    """A balanced ``k``-way partition that keeps few bytes crossing groups (`communication_bytes`),
    each group within about `partition.PARTITION_IMBALANCE` of the mean `partition.op_weight` where
    single heavy ops allow it; never worse than `contiguous_grouping`. The method: `partition_labels`
    in `placement_gym/task/partition.py`. Deterministic for (graph, k, seed); exactly k non-empty groups."""
    _check_k(graph, k)
    _check_seed(seed)
    return Grouping(f"partition:{k}", _renumber(partition_labels(graph, k, seed)))


# ---------------------------------------------------------------------------------------------------
# Entry point

_CACHE: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def make_grouping(
    graph: OpGraph,
    groups: None | str | int | np.ndarray | Sequence[int] | Grouping = None,
    seed: int = 0,
) -> Grouping:
    """The `Grouping` of ``graph`` named by ``groups`` (see the module docstring and `GROUP_MODES`).
    ``seed`` only matters for a partition. Named modes are cached per graph (groupings are pure
    functions of graph, mode and seed; the cache holds the graph weakly)."""
    if isinstance(groups, Grouping):
        if groups.n_ops != graph.n_ops:
            raise ValueError(
                f"grouping {groups.name!r} covers {groups.n_ops} ops, "
                f"graph {graph.name!r} has {graph.n_ops} ops"
            )
        return groups
    if groups is None or isinstance(groups, (str, int, np.integer)) and not isinstance(groups, bool):
        key = _mode_key(graph, groups)
        _check_seed(seed)
        cache = _CACHE.setdefault(graph, {})
        cache_key = (key, int(seed) if key[0] == "partition" else 0)
        if cache_key not in cache:
            cache[cache_key] = _build(graph, key, int(seed))
        return cache[cache_key]
    if isinstance(groups, (np.ndarray, Sequence)) and not isinstance(groups, (str, bytes)):
        return explicit_grouping(graph, groups)
    raise ValueError(f"unknown groups {groups!r}; allowed: {_ALLOWED}")


def _mode_key(graph: OpGraph, groups) -> tuple[str, int]:
    if groups is None or groups == "none":
        return ("none", 0)
    if groups in ("colocate", "chains"):
        return (groups, 0)
    if isinstance(groups, str) and groups.startswith("partition:") and groups[10:].strip().isdigit():
        groups = int(groups[10:])
    if isinstance(groups, (int, np.integer)):
        _check_k(graph, int(groups))
        return ("partition", int(groups))
    raise ValueError(f"unknown groups {groups!r}; allowed: {_ALLOWED}")


def _build(graph: OpGraph, key: tuple[str, int], seed: int) -> Grouping:
    mode, k = key
    if mode == "none":
        return identity_grouping(graph)
    if mode == "colocate":
        return colocation_grouping(graph)
    if mode == "chains":
        return chain_grouping(graph)
    return partition_grouping(graph, k, seed)
