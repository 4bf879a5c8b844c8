"""Plain-torch message passing over a (coarsened) op graph, shared by the GNN placers `placeto` and
`hsdag` (no torch_geometric or dgl: messages are gathered with ``h[:, src]`` and summed into their
destination with ``index_add_``, which is deterministic on the CPU).

`graph_inputs(task, groups)` builds the static tensors of one task's graph once, from the envs' own
graph observation of that grouping read through `placement_gym.envs.pyg.graph_arrays` (the numpy core of
the PyTorch Geometric converter): the node features of `placement_gym.envs.observation` (fixed
scales, so they mean the same on every graph), the node-to-node edges of
`placement_gym.task.groups.quotient_edges` with the env's log-scaled bytes, and the per-node work and
memory shares the policies pool per device.

`DagEncoder` embeds every node from its own features and its neighbourhood ``rounds`` times, with
separate messages down the DAG (from producers) and up it (from consumers), as Placeto embeds a node
from its parents and its children (Addanki et al. 2019). Placeto propagates in topological order (one
sequential step per depth level, so a node sees all its ancestors); we use a few parallel rounds
instead (a node sees ancestors and descendants ``rounds`` hops away), which costs O(rounds) tensor
ops per forward pass instead of O(depth) and keeps a pass over gnmt4's 2,000+ nodes in milliseconds.
Every weight has a size independent of the number of nodes, so one encoder runs on any graph.

`GNNAgent` is what both agents share around their networks: the options of `GNNOptions`, the graph
inputs, checkpoints and moving to another graph of the same devices.
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass, fields
from typing import Any

import numpy as np
import torch
from torch import nn

from baselines.learning.agent import LearnedAgent
from baselines.learning.options import check_number
from placement_gym.envs.observation import NODE_FEATURES, NodeObservation
from placement_gym.envs.pyg import graph_arrays
from placement_gym.envs.rewards import DEFAULT_OOM_RUNTIME_FACTOR, OomPenalty
from placement_gym.task.cache import TaskCache
from placement_gym.task.compiled import Task
from placement_gym.task.groups import Grouping, make_grouping, quotient_edges

_WORK_SHARE = NODE_FEATURES.index("fastest_time_share")
_MEMORY_SHARE = NODE_FEATURES.index("static_memory_share")
# Per task, the inputs of each named grouping: every episode of Placeto and HSDAG reads them.
_GRAPH_INPUTS: TaskCache[dict] = TaskCache("gnn_graph_inputs")


@dataclass(frozen=True)
class GraphInputs:
    """The static tensors of one task's (coarsened) graph.

    grouping: the op -> node map (`placement_gym.task.groups.Grouping`); a node is a group of ops.
    features: float32 ``(n_nodes, len(NODE_FEATURES))``.
    src, dst: int64 ``(n_edges,)``: producer node -> consumer node.
    edge_features: float32 ``(n_edges, 1)``: log-scaled bytes on the edge.
    in_scale, out_scale: float32 ``(n_nodes, 1)``: 1 / max(in-degree, 1) and 1 / max(out-degree, 1),
        so a node averages its messages (a sum would grow with the degree and differ across graphs).
    work_share: float32 ``(n_nodes,)``: the node's share of the graph's work on its fastest device.
    memory_share: float32 ``(n_nodes,)``: its static bytes / the smallest device memory (clipped to 1).
    device_features: float32 ``(n_devices, len(DEVICE_FEATURES))``.
    """

    grouping: Grouping
    features: torch.Tensor
    src: torch.Tensor
    dst: torch.Tensor
    edge_features: torch.Tensor
    in_scale: torch.Tensor
    out_scale: torch.Tensor
    work_share: torch.Tensor
    memory_share: torch.Tensor
    device_features: torch.Tensor

    @property
    def n_nodes(self) -> int:
        return self.grouping.n_groups


def graph_inputs(task: Task, groups=None) -> GraphInputs:
    """The `GraphInputs` of ``task`` with ops grouped by ``groups`` (any value `make_grouping`
    takes: None, "colocate", "chains", an int k, labels or a Grouping); cached per task."""
    # only names and ints are cached: an array or Grouping has no stable key
    if not isinstance(groups, (str, int, type(None))):
        return _graph_inputs(task, groups)
    by_groups = _GRAPH_INPUTS.get(task, lambda _: {})
    if groups not in by_groups:
        by_groups[groups] = _graph_inputs(task, groups)
    return by_groups[groups]


def _graph_inputs(task: Task, groups) -> GraphInputs:
    grouping = make_grouping(task.graph, groups)
    n = grouping.n_groups
    # The graph observation an env with this grouping shows (nothing placed yet), so that the agents
    # read exactly what env users read; the placement and current-node columns are not used here.
    observed = NodeObservation(
        task, node_of_op=grouping.group_of_op, n_nodes=n,
        edges=quotient_edges(task.graph, grouping), obs_mode="graph",
    )
    x, (src, dst), edge_attr = graph_arrays(observed.observation())
    features = x[:, : len(NODE_FEATURES)]
    in_degree = np.bincount(dst, minlength=n)
    out_degree = np.bincount(src, minlength=n)

    def tensor(array, dtype=torch.float32) -> torch.Tensor:
        return torch.as_tensor(np.ascontiguousarray(array), dtype=dtype)

    return GraphInputs(
        grouping=grouping,
        features=tensor(features),
        src=tensor(src, torch.int64),
        dst=tensor(dst, torch.int64),
        edge_features=tensor(edge_attr),
        in_scale=tensor(1.0 / np.maximum(in_degree, 1)[:, None]),
        out_scale=tensor(1.0 / np.maximum(out_degree, 1)[:, None]),
        work_share=tensor(features[:, _WORK_SHARE]),
        memory_share=tensor(features[:, _MEMORY_SHARE]),
        device_features=tensor(observed.device_features.copy()),  # a writable copy: torch warns on read-only
    )


def mlp(in_dim: int, hidden: int, out_dim: int) -> nn.Sequential:
    """Two linear layers with a ReLU between them."""
    return nn.Sequential(nn.Linear(in_dim, hidden), nn.ReLU(), nn.Linear(hidden, out_dim))


class DagEncoder(nn.Module):
    """Node embeddings ``(batch, n_nodes, hidden)`` from node inputs ``(batch, n_nodes, in_dim)``.

    Each round r: a message along every edge from the producer's embedding and the edge's bytes
    (``relu(W_down [h_src, e])``), averaged at the consumer; a message against every edge from the
    consumer (``relu(W_up [h_dst, e])``), averaged at the producer; then a residual update
    ``h <- LayerNorm(h + relu(W [h, down, up]))``. The batch axis holds different placements of the
    same graph (the edges are shared)."""

    def __init__(self, in_dim: int, hidden: int = 32, rounds: int = 2) -> None:
        super().__init__()
        if hidden < 1 or rounds < 0:
            raise ValueError(
                f"DagEncoder needs hidden >= 1 and rounds >= 0, got hidden={hidden}, rounds={rounds}"
            )
        self.hidden = hidden
        self.embed = nn.Linear(in_dim, hidden)
        self.down = nn.ModuleList(nn.Linear(hidden + 1, hidden) for _ in range(rounds))
        self.up = nn.ModuleList(nn.Linear(hidden + 1, hidden) for _ in range(rounds))
        self.update = nn.ModuleList(nn.Linear(3 * hidden, hidden) for _ in range(rounds))
        self.norm = nn.ModuleList(nn.LayerNorm(hidden) for _ in range(rounds))

    def forward(self, x: torch.Tensor, graph: GraphInputs) -> torch.Tensor:
        h = torch.relu(self.embed(x))
        batch, n_nodes, _ = h.shape
        edge = graph.edge_features.expand(batch, -1, -1)
        for down, up, update, norm in zip(self.down, self.up, self.update, self.norm):
            to_dst = torch.relu(down(torch.cat([h[:, graph.src], edge], dim=-1)))
            to_src = torch.relu(up(torch.cat([h[:, graph.dst], edge], dim=-1)))
            from_parents = h.new_zeros(batch, n_nodes, self.hidden).index_add_(1, graph.dst, to_dst)
            from_children = h.new_zeros(batch, n_nodes, self.hidden).index_add_(1, graph.src, to_src)
            message = torch.cat([h, from_parents * graph.in_scale, from_children * graph.out_scale], dim=-1)
            h = norm(h + torch.relu(update(message)))
        return h


def sample_categorical(probs: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """One index per row of ``probs`` (``(..., k)``, rows summing to 1), drawn with ``rng`` by inverse
    CDF (numpy, so a checkpointed generator resumes the same draws)."""
    cumulative = np.cumsum(probs, axis=-1)
    u = rng.random(probs.shape[:-1] + (1,)) * cumulative[..., -1:]
    return np.minimum((cumulative < u).sum(axis=-1), probs.shape[-1] - 1).astype(np.int64)


@dataclass(frozen=True)
class GNNOptions:
    """The options the GNN agents (`placeto`, `hsdag`) share, with their defaults, checked by
    `check_number`: ``batch`` (episodes per update, >= 1; each agent has its own default), ``hidden``
    (width, >= 1), ``rounds`` (message passing, >= 0), ``learning_rate`` (Adam, > 0), ``entropy_coef``
    (bonus, >= 0), ``oom_runtime_factor`` (out-of-memory runtime in best-single runtimes, >= 1, the envs'
    rule) and ``max_grad_norm`` (> 0)."""

    batch: int
    hidden: int = 32
    rounds: int = 2
    learning_rate: float = 3e-3
    entropy_coef: float = 0.01
    oom_runtime_factor: float = DEFAULT_OOM_RUNTIME_FACTOR
    max_grad_norm: float = 1.0

    @classmethod
    def checked(cls, batch: Any, **options: Any) -> GNNOptions:
        """The options ``batch`` and ``options`` (keywords named as this class's fields; the others
        keep their defaults), each checked; a ValueError names the first one out of bounds."""
        given = {**{f.name: f.default for f in fields(cls) if f.name != "batch"}, **options}
        return cls(
            batch=check_number("batch", batch, 1, integer=True),
            hidden=check_number("hidden", given["hidden"], 1, integer=True),
            rounds=check_number("rounds", given["rounds"], 0, integer=True),
            learning_rate=check_number("learning_rate", given["learning_rate"], 0.0, open_low=True),
            entropy_coef=check_number("entropy_coef", given["entropy_coef"], 0.0),
            oom_runtime_factor=check_number("oom_runtime_factor", given["oom_runtime_factor"], 1.0),
            max_grad_norm=check_number("max_grad_norm", given["max_grad_norm"], 0.0, open_low=True),
        )


GNN_OPTION_NAMES = tuple(f.name for f in fields(GNNOptions) if f.name != "batch")
"""The keywords a GNN agent passes on to `GNNOptions` (``batch`` is each agent's own)."""


class GNNAgent(LearnedAgent):
    """What the GNN agents (`placeto`, `hsdag`) share: their `GNNOptions` (``options``; ``batch``,
    ``entropy_coef``, ``oom_runtime_factor`` and ``max_grad_norm`` also as attributes, and the penalty
    rule as ``oom_penalty``), the `GraphInputs` of the task's ops grouped by ``groups`` (``graph``), a
    ``policy`` network and its ``optimizer`` (built by the subclass, both checkpointed) and `set_task`.
    ``options`` are the keywords of `GNNOptions` but ``batch``; any other keyword is refused as the base
    class refuses it."""

    checkpointed = ("policy", "optimizer")

    def __init_subclass__(cls, **kwargs: Any) -> None:
        """A subclass's ``__init__`` shows the shared options as its own keywords (``help()``,
        `inspect.signature`), not as ``**options``."""
        super().__init_subclass__(**kwargs)
        init = vars(cls).get("__init__")
        if init is None:
            return
        own = [p for p in inspect.signature(init).parameters.values() if p.kind != p.VAR_KEYWORD]
        keyword = inspect.Parameter.KEYWORD_ONLY
        shared = [inspect.Parameter(f.name, keyword, default=f.default, annotation=f.type)
                  for f in fields(GNNOptions) if f.name in GNN_OPTION_NAMES]
        init.__signature__ = inspect.signature(init).replace(parameters=[*own, *shared])

    def __init__(self, task: Task, seed: int, groups: Any, batch: int, **options: Any) -> None:
        shared = {key: options.pop(key) for key in GNN_OPTION_NAMES if key in options}
        super().__init__(task, seed, **options)
        self.groups = groups
        self.options = GNNOptions.checked(batch, **shared)
        self.batch, self.entropy_coef = self.options.batch, self.options.entropy_coef
        self.oom_runtime_factor = self.options.oom_runtime_factor
        self.oom_penalty = OomPenalty(oom_runtime_factor=self.oom_runtime_factor)
        self.max_grad_norm = self.options.max_grad_norm
        self.graph = graph_inputs(task, groups)

    def set_task(self, task: Task) -> None:
        """Move to another graph (same number of devices), keeping the weights and the optimiser."""
        if task.n_devices != self.task.n_devices:
            raise ValueError(
                f"{self.name}'s policy was built for {self.task.n_devices} devices; task {task.id} has "
                f"{task.n_devices}: move it only to a cluster with the same number of devices"
            )
        self.task = task
        self.graph = graph_inputs(task, self.groups)
