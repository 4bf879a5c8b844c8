"""The graph observation every env shows, built once per task and grouping.

A *node* is a forward op, or with ``groups=`` a group of forward ops (the coarsened graph). Three
observation modes (``obs_mode``):

``"dict"`` (default): a `gymnasium.spaces.Dict` of fixed-size `Box` spaces, padded, that
stable-baselines3's ``MultiInputPolicy`` takes:

* ``node_features`` ``(max_nodes, len(NODE_FEATURES))`` float32 in [0, 1]: one row per node (see
  `NODE_FEATURES`), zero rows for padding.
* ``node_mask`` ``(max_nodes,)`` float32: 1 for a real node, 0 for padding.
* ``edge_index`` ``(2, max_edges)`` int64 in [0, max_nodes - 1]: (producer node, consumer node) of
  each node-to-node edge of the forward graph, one per node pair (tensors between the same two
  nodes are merged, edges inside a group and from graph data inputs are left out); padding edges
  point 0 -> 0.
* ``edge_features`` ``(max_edges, len(EDGE_FEATURES))`` float32 in [0, 1]; 0 for padding.
* ``edge_mask`` ``(max_edges,)`` float32: 1 for a real edge.
* ``device_features`` ``(max_devices, len(DEVICE_FEATURES))`` float32 in [0, 1]; zero rows for
  padding (a real device's ``log_peak_flops`` is above 0).
* ``placement`` ``(max_nodes, max_devices)`` float32: one-hot of each node's device; a zero row for
  a node not placed yet (and for padding), a zero column for a padded device.
* ``current`` ``(max_nodes,)`` float32: one-hot of the node the next action places (the staged and
  refine envs); all zero when there is none (single-shot, or after the last step).

``"flat"``: the arrays of the dict mode, padded the same way, concatenated into one 1-D float32
`Box` (for libraries whose stock policies take nothing else); order, encodings and how to split it
again: `placement_gym.envs.flat`. `NodeObservation` keeps this mode's vector itself, the static
entries written once and the placement and current entries updated in place, so an observation is
one copy of it (`NodeObservation.flat_observation`); `NodeObservation.observation` still gives the
dict.

``"graph"``: a `gymnasium.spaces.Graph` (for GNN users; no padding of nodes and edges): ``nodes``
``(n_nodes, len(NODE_FEATURES) + max_devices + 1)`` float32 = the node features, then the
``placement`` one-hot, then the ``current`` flag; ``edges`` ``(n_edges, len(EDGE_FEATURES))``
float32; ``edge_links`` ``(n_edges, 2)`` int64 (producer node, consumer node). The device features
are not part of it: read them from the env's ``device_features`` attribute. Gymnasium cannot put a
`Graph` in shared memory: an async vector env needs ``vector_kwargs={"shared_memory": False}`` in
this mode.

``max_devices`` (default: the cluster's number of devices) pads the device axis in every mode, so
that envs of different clusters share one space; padded devices have zero features and are never
anyone's device.

Features of a group are computed from the summed raw quantities of its ops (FLOPs, bytes,
parameter bytes, per-device time, ...), normalised after summing (not a sum of logs); see
`node_features`. Scales are fixed constants rather than per-graph maxima, so a feature means the
same thing on every graph and cluster (a policy can move between them, as Placeto's and GDP's do).
Values beyond a scale are clipped to 1.
"""

from __future__ import annotations

import math

import numpy as np
from gymnasium import spaces

from placement_gym.common.limits import check_allocation
from placement_gym.envs.flat import FlatLayout
from placement_gym.graph.opgraph import CATEGORIES
from placement_gym.task.cache import TaskCache

OBS_MODES: tuple[str, ...] = ("dict", "graph", "flat")
# Per task, computed once whatever the number of envs made on it: the raw per-op quantities
# (`_op_quantities`) and, for ops as nodes, the node features and edges.
_OP_QUANTITIES: TaskCache[dict[str, np.ndarray]] = TaskCache("observation_op_quantities")
_OP_FEATURES: TaskCache[tuple] = TaskCache("graph_observation_features")

# Fixed scales of the log features: log1p(x) / log1p(SCALE) reaches 1 at x = SCALE.
FLOP_SCALE = 1e13  # FLOPs of one op: 10 TFLOP, far above any op of the bundled graphs
BYTE_SCALE = 1e11  # bytes: 100 GB, above any single device's memory in the presets
TIME_SCALE_US = 1e7  # op time in microseconds: 10 s
PEAK_FLOPS_SCALE = 1e16  # FLOP/s of a device: 10 PFLOP/s, above any accelerator's dense peak
BANDWIDTH_SCALE = 1e13  # bytes/s of device memory: 10 TB/s
CAPACITY_SCALE = 1e13  # bytes of device memory: 10 TB

NODE_FEATURES: tuple[str, ...] = tuple(f"category_{name}" for name in CATEGORIES) + (
    # category_*: the share of the node's ops in each op category (a one-hot for a single op)
    "log_flops",  # log1p(forward FLOPs) / log1p(FLOP_SCALE)
    "log_bytes_accessed",  # log1p(forward bytes read + written) / log1p(BYTE_SCALE)
    "log_param_bytes",  # log1p(parameter bytes the node owns) / log1p(BYTE_SCALE)
    "log_output_bytes",  # log1p(bytes of the tensors the node's ops produce) / log1p(BYTE_SCALE)
    "depth",  # longest path from a source (the smallest over a group's ops) / the graph's largest
    #           depth (0 when the graph is flat)
    "log_fastest_time",  # log1p(time in us of the node's ops and the ops that follow them (backward
    #                      and update ops) on the node's fastest device) / log1p(TIME_SCALE_US)
    "fastest_time_share",  # that time / the sum of it over all nodes: the node's share of the work
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


# Arrays of one observation's size alive per env: the space's low and high bounds, the static and
# placement arrays kept here, the copy `NodeObservation.observation` (or in the flat mode
# `NodeObservation.flat_observation`) returns, and in the flat mode the flat space's bounds and the
# flat vector kept here.
OBSERVATION_COPIES = 7


def observation_bytes(n_nodes: int, n_edges: int, n_devices: int) -> float:
    """Bytes of one dict-mode observation of ``n_nodes`` nodes and ``n_edges`` edges (padding
    included) on ``n_devices`` devices; a flat or graph observation of the same nodes is no larger."""
    per_node = 4 * (len(NODE_FEATURES) + n_devices + 2)  # features, placement, mask, current
    per_edge = 8 * 2 + 4 * (len(EDGE_FEATURES) + 1)  # index pair, features, mask
    return float(n_nodes * per_node + n_edges * per_edge + 4 * n_devices * len(DEVICE_FEATURES))


def check_obs_mode(name: str) -> str:
    """``name`` if it is a known observation mode, else a ValueError naming the allowed ones."""
    if name not in OBS_MODES:
        raise ValueError(f"unknown obs_mode {name!r}; allowed: {', '.join(OBS_MODES)}")
    return name


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


def _op_quantities(task) -> dict[str, np.ndarray]:
    """The raw per-forward-op quantities the node features are made of (computed once per task)."""
    return _OP_QUANTITIES.get(task, _compute_op_quantities)


def _compute_op_quantities(task) -> dict[str, np.ndarray]:
    g = task.graph
    n = task.n_forward
    category = np.zeros((n, len(CATEGORIES)))
    category[np.arange(n), g.category.astype(np.int64)] = 1.0
    produced = g.tensor_producer >= 0
    # Time of every task op that follows forward op f, per device: f's device carries all of it.
    work = np.zeros((n, task.n_devices))
    np.add.at(work, task.op_forward, task.duration)
    return {
        "category": category,
        "flops": np.asarray(g.flops, dtype=np.float64),
        "bytes_accessed": np.asarray(g.bytes_accessed, dtype=np.float64),
        "param_bytes": np.asarray(g.param_bytes, dtype=np.float64),
        "output_bytes": np.bincount(g.tensor_producer[produced], weights=g.tensor_bytes[produced],
                                    minlength=n),
        "depth": np.asarray(g.depth, dtype=np.float64),
        "work": work,
        "static_bytes": np.asarray(task.static_bytes, dtype=np.float64),
    }


def node_features(task, node_of_op: np.ndarray | None = None, n_nodes: int | None = None) -> np.ndarray:
    """The `NODE_FEATURES` of every node, ``(n_nodes, len(NODE_FEATURES))`` float64.

    ``node_of_op`` (int, one entry per forward op) maps ops to nodes ``0..n_nodes-1``; None: every
    op is its own node. A node's raw quantities are the sums over its ops (its time on a device is
    the summed time of its ops there; its depth is its ops' smallest depth), normalised after
    summing, so a group of one op has exactly the features of that op."""
    q = _op_quantities(task)
    if node_of_op is None:
        sums = q
        depth = q["depth"]
        size = np.ones(task.n_forward)
    else:
        node_of_op = np.asarray(node_of_op, dtype=np.int64)
        n_nodes = int(node_of_op.max()) + 1 if n_nodes is None else int(n_nodes)
        sums = {}
        for key in ("category", "work"):
            total = np.zeros((n_nodes, q[key].shape[1]))
            np.add.at(total, node_of_op, q[key])
            sums[key] = total
        for key in ("flops", "bytes_accessed", "param_bytes", "output_bytes", "static_bytes"):
            sums[key] = np.bincount(node_of_op, weights=q[key], minlength=n_nodes)
        depth = np.full(n_nodes, np.inf)
        np.minimum.at(depth, node_of_op, q["depth"])
        size = np.bincount(node_of_op, minlength=n_nodes).astype(np.float64)
    max_depth = float(q["depth"].max())
    fastest = sums["work"].min(axis=1)
    static_share = np.clip(sums["static_bytes"] / task.cluster.memory_capacity.min(), 0.0, 1.0)
    columns = [
        _log_scaled(sums["flops"], FLOP_SCALE),
        _log_scaled(sums["bytes_accessed"], BYTE_SCALE),
        _log_scaled(sums["param_bytes"], BYTE_SCALE),
        _log_scaled(sums["output_bytes"], BYTE_SCALE),
        depth / max_depth if max_depth > 0 else np.zeros(len(depth)),
        _log_scaled(fastest * 1e6, TIME_SCALE_US),
        fastest / fastest.sum(),
        static_share,
    ]
    return np.concatenate([sums["category"] / size[:, None], np.stack(columns, axis=1)], axis=1)


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


class NodeObservation:
    """The observation of a task's (possibly coarsened) graph, its cluster and a placement of its
    nodes, in one of `OBS_MODES` (see the module docstring).

    The static arrays are built once; `place`, `set_placement`, `clear_placement` and `set_current`
    update the placement and current-node columns in place, and `observation()` returns copies.

    ``node_of_op``/``n_nodes``: the op -> node map (None: one node per forward op). ``edges``:
    (src node, dst node, bytes) of the node-to-node edges (default: `op_edges`). ``max_ops``
    (default: the number of nodes) and ``max_edges`` (default: the number of edges, at least 1) pad
    the dict mode (and the flat mode, made of it) so that tasks of different sizes share one
    observation space; the graph mode is not padded and ignores them. ``max_devices`` (default: the
    task's number of devices) pads the device axis in every mode (``device_features`` rows,
    ``placement`` columns, the graph mode's placement columns). In ``"flat"`` mode ``space``
    and `observation` are the dict mode's, and `flat_observation` gives the flat vector
    (`placement_gym.envs.flat`) without building the dict: the placement and current entries live in
    that vector, so a step that moves one node updates O(1) entries and an observation costs one copy.
    ``nbytes``: the bytes of one observation (`observation_bytes`); an observation whose arrays
    (`OBSERVATION_COPIES` of it) would pass the allocation limit (`placement_gym.common.limits`) is
    refused before they are made."""

    def __init__(
        self,
        task,
        node_of_op: np.ndarray | None = None,
        n_nodes: int | None = None,
        edges: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None,
        obs_mode: str = "dict",
        max_ops: int | None = None,
        max_edges: int | None = None,
        max_devices: int | None = None,
    ) -> None:
        self.mode = check_obs_mode(obs_mode)
        if node_of_op is None:
            nodes, default_edges = _OP_FEATURES.get(task, lambda t: (node_features(t), op_edges(t.graph)))
            what = "number of forward ops"
        else:
            nodes = node_features(task, node_of_op, n_nodes)
            default_edges = None
            what = "number of groups"
        if edges is None:
            edges = default_edges if default_edges is not None else op_edges(task.graph)
        src, dst, edge_bytes = (np.asarray(a) for a in edges)
        self.task = task
        self.n_nodes = len(nodes)
        self.n_devices = task.n_devices
        self.n_edges = len(src)
        self.max_nodes = _check_size("max_ops", max_ops, self.n_nodes, what)
        self.max_edges = _check_size("max_edges", max_edges, max(self.n_edges, 1), "number of edges")
        self.max_devices = _check_size("max_devices", max_devices, self.n_devices, "number of devices")
        if self.mode == "graph":
            self.nbytes = observation_bytes(self.n_nodes, self.n_edges, self.max_devices)
            size = f"{self.n_nodes} nodes, {self.n_edges} edges"
        else:
            self.nbytes = observation_bytes(self.max_nodes, self.max_edges, self.max_devices)
            size = f"max_ops={self.max_nodes}, max_edges={self.max_edges}"
        check_allocation(
            f"the {self.mode} observation of task {task.id} ({size}, {self.max_devices} devices)",
            OBSERVATION_COPIES * self.nbytes)
        self.device_features = np.zeros((self.max_devices, len(DEVICE_FEATURES)), dtype=np.float32)
        self.device_features[: self.n_devices] = device_features(task.cluster)
        self.device_features.setflags(write=False)
        n_feat, n_dev = len(NODE_FEATURES), self.max_devices
        edge_columns = _log_scaled(edge_bytes, BYTE_SCALE)[:, None].astype(np.float32)
        if self.mode != "graph":
            self._build_dict(nodes, src, dst, edge_columns)
            if self.mode == "flat":
                self._build_flat()
        else:
            width = n_feat + n_dev + 1
            self.space = spaces.Graph(
                node_space=spaces.Box(0.0, 1.0, shape=(width,), dtype=np.float32),
                edge_space=spaces.Box(0.0, 1.0, shape=(len(EDGE_FEATURES),), dtype=np.float32),
            )
            self._nodes = np.zeros((self.n_nodes, width), dtype=np.float32)
            self._nodes[:, :n_feat] = nodes
            self._placement = self._nodes[:, n_feat: n_feat + n_dev]  # views: updated in place
            self._current = self._nodes[:, n_feat + n_dev]
            self._edges = edge_columns
            self._edge_links = np.stack([src, dst], axis=1).astype(np.int64).reshape(-1, 2)
        self._current_node: int | None = None

    def _build_dict(self, nodes, src, dst, edge_columns) -> None:
        n_feat, n_dev = len(NODE_FEATURES), self.max_devices

        def unit_box(shape: tuple[int, ...]) -> spaces.Box:
            return spaces.Box(0.0, 1.0, shape=shape, dtype=np.float32)

        self.space = spaces.Dict({
            "node_features": unit_box((self.max_nodes, n_feat)),
            "node_mask": unit_box((self.max_nodes,)),
            "edge_index": spaces.Box(0, self.max_nodes - 1, shape=(2, self.max_edges), dtype=np.int64),
            "edge_features": unit_box((self.max_edges, len(EDGE_FEATURES))),
            "edge_mask": unit_box((self.max_edges,)),
            "device_features": unit_box((n_dev, len(DEVICE_FEATURES))),
            "placement": unit_box((self.max_nodes, n_dev)),
            "current": unit_box((self.max_nodes,)),
        })
        static = {
            "node_features": np.zeros((self.max_nodes, n_feat), dtype=np.float32),
            "node_mask": np.zeros(self.max_nodes, dtype=np.float32),
            "edge_index": np.zeros((2, self.max_edges), dtype=np.int64),
            "edge_features": np.zeros((self.max_edges, len(EDGE_FEATURES)), dtype=np.float32),
            "edge_mask": np.zeros(self.max_edges, dtype=np.float32),
            "device_features": self.device_features,
        }
        static["node_features"][: self.n_nodes] = nodes
        static["node_mask"][: self.n_nodes] = 1.0
        static["edge_index"][0, : self.n_edges] = src
        static["edge_index"][1, : self.n_edges] = dst
        static["edge_features"][: self.n_edges] = edge_columns
        static["edge_mask"][: self.n_edges] = 1.0
        for array in static.values():
            array.setflags(write=False)
        self._static = static
        self._placement = np.zeros((self.max_nodes, n_dev), dtype=np.float32)
        self._current = np.zeros(self.max_nodes, dtype=np.float32)

    def _build_flat(self) -> None:
        """The flat vector of the dict arrays (`FlatLayout` of ``space``), with ``_placement`` and
        ``_current`` rebound to views of their entries in it, so that updates land there directly."""
        layout = FlatLayout(self.space)
        self._flat = layout.flatten(self._static | {"placement": self._placement, "current": self._current})
        self._placement = self._flat[layout.slices["placement"]].reshape(self._placement.shape)
        self._current = self._flat[layout.slices["current"]]

    def clear_placement(self) -> None:
        """No node placed."""
        self._placement[:] = 0.0

    def set_placement(self, node_devices: np.ndarray) -> None:
        """Every node placed: ``node_devices`` holds one device index per node."""
        self._placement[:] = 0.0
        self._placement[np.arange(self.n_nodes), node_devices] = 1.0

    def placement_batch(self, node_devices: np.ndarray) -> np.ndarray:
        """The ``placement`` arrays of a batch of placements, float32 ``(k, max_nodes, max_devices)``:
        row ``i`` is what `observation` shows after ``set_placement(node_devices[i])`` (dict and flat
        modes; ``node_devices`` is ``(k, n_nodes)``). Leaves this object's own placement as it was."""
        one_hot = np.zeros((len(node_devices), self.max_nodes, self.max_devices), dtype=np.float32)
        rows = np.arange(len(node_devices))[:, None]
        one_hot[rows, np.arange(self.n_nodes)[None, :], node_devices] = 1.0
        return one_hot

    def place(self, node: int, device: int) -> None:
        """Node ``node`` (re)placed on ``device``."""
        row = self._placement[node]
        row[:] = 0.0
        row[device] = 1.0

    def set_current(self, node: int | None) -> None:
        """Mark ``node`` as the one the next action places (None: no node)."""
        if self._current_node is not None:
            self._current[self._current_node] = 0.0
        if node is not None:
            self._current[node] = 1.0
        self._current_node = node

    def observation(self) -> dict[str, np.ndarray] | spaces.GraphInstance:
        """A writable copy of the observation (callers may modify it without touching the next one)."""
        if self.mode == "graph":
            return spaces.GraphInstance(self._nodes.copy(), self._edges.copy(), self._edge_links.copy())
        obs = {key: array.copy() for key, array in self._static.items()}
        obs["placement"] = self._placement.copy()
        obs["current"] = self._current.copy()
        return obs

    def flat_observation(self, tail: np.ndarray | None = None) -> np.ndarray:
        """``obs_mode="flat"``: a fresh float32 copy of the flat vector (`placement_gym.envs.flat`:
        the arrays of `observation` in `placement_gym.envs.flat.FLAT_KEYS` order), followed by
        ``tail`` (the env's action mask, as 0.0/1.0) when given."""
        if self.mode != "flat":
            raise ValueError(f"flat_observation needs obs_mode 'flat'; this observation is {self.mode!r}")
        if tail is None:
            return self._flat.copy()
        tail = np.ravel(tail)
        flat = np.empty(len(self._flat) + len(tail), dtype=np.float32)
        flat[: len(self._flat)] = self._flat
        flat[len(self._flat):] = tail
        return flat
