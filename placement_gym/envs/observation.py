"""The graph observation every env shows: padded, fixed-size arrays that stable-baselines3 takes.

Keys of the observation (a `gymnasium.spaces.Dict` of `Box`es):

* ``node_features`` ``(max_ops, len(NODE_FEATURES))`` float32 in [0, 1]: one row per forward op (see
  `NODE_FEATURES`), zero rows for padding.
* ``node_mask`` ``(max_ops,)`` float32: 1 for a real op, 0 for padding.
* ``edge_index`` ``(2, max_edges)`` int64 in [0, max_ops - 1]: (producer op, consumer op) of each
  op-to-op edge of the forward graph, one per op pair (tensors between the same two ops are merged,
  edges from graph data inputs are left out); padding edges point 0 -> 0.
* ``edge_features`` ``(max_edges, len(EDGE_FEATURES))`` float32 in [0, 1]; 0 for padding.
* ``edge_mask`` ``(max_edges,)`` float32: 1 for a real edge.
* ``device_features`` ``(n_devices, len(DEVICE_FEATURES))`` float32 in [0, 1].

Scales are fixed constants rather than per-graph maxima, so a feature means the same thing on every
graph and cluster (a policy can move between them, as Placeto's and GDP's do). Values beyond a scale
are clipped to 1.
"""

from __future__ import annotations

import math

import numpy as np
from gymnasium import spaces

from placement_gym.graph.opgraph import CATEGORIES

# Fixed scales of the log features: log1p(x) / log1p(SCALE) reaches 1 at x = SCALE.
FLOP_SCALE = 1e13  # FLOPs of one op: 10 TFLOP, far above any op of the bundled graphs
BYTE_SCALE = 1e11  # bytes: 100 GB, above any single device's memory in the presets
TIME_SCALE_US = 1e7  # op time in microseconds: 10 s
PEAK_FLOPS_SCALE = 1e16  # FLOP/s of a device: 10 PFLOP/s, above any accelerator's dense peak
BANDWIDTH_SCALE = 1e13  # bytes/s of device memory: 10 TB/s
CAPACITY_SCALE = 1e13  # bytes of device memory: 10 TB

NODE_FEATURES: tuple[str, ...] = tuple(f"category_{name}" for name in CATEGORIES) + (
    "log_flops",  # log1p(forward FLOPs) / log1p(FLOP_SCALE)
    "log_bytes_accessed",  # log1p(forward bytes read + written) / log1p(BYTE_SCALE)
    "log_param_bytes",  # log1p(parameter bytes the op owns) / log1p(BYTE_SCALE)
    "log_output_bytes",  # log1p(bytes of the tensors the op produces) / log1p(BYTE_SCALE)
    "depth",  # longest path from a source / the graph's largest depth (0 when the graph is flat)
    "log_fastest_time",  # log1p(time in us of the op and the ops that follow it (its backward
    #                      and update ops) on its fastest device) / log1p(TIME_SCALE_US)
    "fastest_time_share",  # that time / the sum of it over all ops: the op's share of the work
    "static_memory_share",  # static bytes (parameters, gradients, optimizer state) / the smallest
    #                         device memory capacity of the cluster (1: it fills or overflows that device)
)
EDGE_FEATURES: tuple[str, ...] = ("log_bytes",)  # log1p(bytes of the tensors on the edge) / log1p(BYTE_SCALE)
DEVICE_FEATURES: tuple[str, ...] = (
    "log_peak_flops",  # log1p(peak FLOP/s) / log1p(PEAK_FLOPS_SCALE)
    "log_memory_bandwidth",  # log1p(bytes/s) / log1p(BANDWIDTH_SCALE)
    "log_memory_capacity",  # log1p(bytes) / log1p(CAPACITY_SCALE)
    "is_gpu",  # 1 for a GPU, 0 for a CPU
)


def _log_scaled(values: np.ndarray, scale: float) -> np.ndarray:
    return np.clip(np.log1p(np.asarray(values, dtype=np.float64)) / math.log1p(scale), 0.0, 1.0)


def op_edges(graph) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Op-to-op edges of an `OpGraph` as (src, dst, bytes) arrays, one per (producer, consumer) pair,
    the bytes of all tensors between the pair summed, sorted by (src, dst)."""
    src = graph.edge_src.astype(np.int64)
    keep = src >= 0
    src, dst = src[keep], graph.edge_dst.astype(np.int64)[keep]
    tensor_bytes = graph.tensor_bytes[graph.edge_tensor[keep]]
    pairs, inverse = np.unique(src * graph.n_ops + dst, return_inverse=True)
    total = np.bincount(inverse.ravel(), weights=tensor_bytes, minlength=len(pairs))
    return pairs // graph.n_ops, pairs % graph.n_ops, total


def node_features(task) -> np.ndarray:
    """The `NODE_FEATURES` of every forward op of ``task``, ``(n_forward, len(NODE_FEATURES))`` float64."""
    g = task.graph
    n = task.n_forward
    one_hot = np.zeros((n, len(CATEGORIES)))
    one_hot[np.arange(n), g.category.astype(np.int64)] = 1.0
    produced = g.tensor_producer >= 0
    output_bytes = np.bincount(g.tensor_producer[produced], weights=g.tensor_bytes[produced], minlength=n)
    max_depth = int(g.depth.max())
    depth = g.depth / max_depth if max_depth > 0 else np.zeros(n)
    # Time of every task op that follows forward op f, per device; f's cost is what its device carries.
    work = np.zeros((n, task.n_devices))
    np.add.at(work, task.op_forward, task.duration)
    fastest = work.min(axis=1)
    static_share = np.clip(task.static_bytes / task.cluster.memory_capacity.min(), 0.0, 1.0)
    columns = [
        _log_scaled(g.flops, FLOP_SCALE),
        _log_scaled(g.bytes_accessed, BYTE_SCALE),
        _log_scaled(g.param_bytes, BYTE_SCALE),
        _log_scaled(output_bytes, BYTE_SCALE),
        depth,
        _log_scaled(fastest * 1e6, TIME_SCALE_US),
        fastest / fastest.sum(),
        static_share,
    ]
    return np.concatenate([one_hot, np.stack(columns, axis=1)], axis=1)


def device_features(cluster) -> np.ndarray:
    """The `DEVICE_FEATURES` of every device, ``(n_devices, len(DEVICE_FEATURES))`` float64."""
    return np.stack(
        [
            _log_scaled(cluster.peak_flops, PEAK_FLOPS_SCALE),
            _log_scaled(cluster.memory_bandwidth, BANDWIDTH_SCALE),
            _log_scaled(cluster.memory_capacity, CAPACITY_SCALE),
            np.array([kind == "gpu" for kind in cluster.device_kinds], dtype=np.float64),
        ],
        axis=1,
    )


def _check_size(name: str, value: int | None, needed: int, what: str) -> int:
    if value is None:
        return needed
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < needed:
        raise ValueError(f"{name} must be an integer >= {needed} (the {what} of the task), got {value!r}")
    return int(value)


class GraphObservation:
    """The observation of a task's graph and cluster, built once and padded to fixed sizes.

    ``max_ops`` (default: the task's forward ops) and ``max_edges`` (default: its op-to-op edges, at
    least 1) let tasks of different sizes share one observation space. ``space`` is the
    `gymnasium.spaces.Dict`; `observation()` returns a fresh copy of the arrays each call."""

    def __init__(self, task, max_ops: int | None = None, max_edges: int | None = None) -> None:
        key = "graph_observation_features"
        features = task._cache.get(key)
        if features is None:
            features = task._cache[key] = (node_features(task), op_edges(task.graph),
                                           device_features(task.cluster))
        nodes, (src, dst, edge_bytes), devices = features
        self.task = task
        self.n_ops = task.n_forward
        self.n_edges = len(src)
        self.max_ops = _check_size("max_ops", max_ops, self.n_ops, "number of forward ops")
        self.max_edges = _check_size("max_edges", max_edges, max(self.n_edges, 1), "number of op-to-op edges")
        n_node, n_edge, n_dev = len(NODE_FEATURES), len(EDGE_FEATURES), task.n_devices

        def unit_box(shape: tuple[int, ...]) -> spaces.Box:
            return spaces.Box(0.0, 1.0, shape=shape, dtype=np.float32)

        self.space = spaces.Dict({
            "node_features": unit_box((self.max_ops, n_node)),
            "node_mask": unit_box((self.max_ops,)),
            "edge_index": spaces.Box(0, self.max_ops - 1, shape=(2, self.max_edges), dtype=np.int64),
            "edge_features": unit_box((self.max_edges, n_edge)),
            "edge_mask": unit_box((self.max_edges,)),
            "device_features": unit_box((n_dev, len(DEVICE_FEATURES))),
        })
        arrays = {
            "node_features": np.zeros((self.max_ops, n_node), dtype=np.float32),
            "node_mask": np.zeros(self.max_ops, dtype=np.float32),
            "edge_index": np.zeros((2, self.max_edges), dtype=np.int64),
            "edge_features": np.zeros((self.max_edges, n_edge), dtype=np.float32),
            "edge_mask": np.zeros(self.max_edges, dtype=np.float32),
            "device_features": devices.astype(np.float32),
        }
        arrays["node_features"][: self.n_ops] = nodes
        arrays["node_mask"][: self.n_ops] = 1.0
        arrays["edge_index"][0, : self.n_edges] = src
        arrays["edge_index"][1, : self.n_edges] = dst
        arrays["edge_features"][: self.n_edges, 0] = _log_scaled(edge_bytes, BYTE_SCALE)
        arrays["edge_mask"][: self.n_edges] = 1.0
        for array in arrays.values():
            array.setflags(write=False)
        self._arrays = arrays

    def observation(self) -> dict[str, np.ndarray]:
        """A writable copy of the observation (callers may modify it without touching the next one)."""
        return {key: array.copy() for key, array in self._arrays.items()}
