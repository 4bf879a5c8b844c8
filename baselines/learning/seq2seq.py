"""The network and helpers shared by the seq2seq placers `pg`, `spotlight` and `hierarchical`.

Mirhoseini et al. (ICML 2017; docs/references.md) place a graph with a sequence-to-sequence LSTM: an
encoder reads one embedding per op group in topological order, a decoder with attention emits one
device per group, feeding back the device it chose. `Seq2SeqPlacer` is that network, kept small
(hidden 64 by default) so that training runs on a CPU:

* *Node embedding*: a linear layer + tanh over the node's input row (`node_inputs`): its
  `placement_gym.envs.observation.NODE_FEATURES` (op-kind shares, log FLOPs, log bytes, log
  parameter and output bytes, depth, time shares...), the mean features of its predecessors and
  of its successors in the (coarsened) graph, and its log size in ops.
* *Encoder*: a one-layer LSTM over the node embeddings in sequence order; its final state starts
  the decoder.
* *Decoder*: a one-layer LSTM whose input at step ``t`` is the embedding of the device chosen at
  ``t - 1`` (a start token at ``t = 0``) and the encoder output of node ``t``; Luong "general"
  attention of its output over all encoder outputs; a two-layer head on [decoder output, attention
  context] gives the device logits of node ``t`` and, optionally, a state value (`spotlight`).

Choice (not in the papers): the attention context is not fed back into the decoder LSTM ("input
feeding"), so a pass over *given* actions (`Seq2SeqPlacer.evaluate_actions`, the one the gradient
goes through) runs the decoder as one fused ``nn.LSTM`` call over the whole sequence and computes
every step's attention at once; only sampling (`Seq2SeqPlacer.sample`, no gradient) steps through
the sequence, one LSTM step for all samples together. Sampling draws inverse-CDF from uniforms the
agent takes from its seeded numpy generator, so a run is reproducible and resumable.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from torch import nn

from baselines.learning.agent import LearnedAgent
from baselines.learning.options import check_number
from placement_gym.envs.observation import NODE_FEATURES, node_features, op_edges
from placement_gym.envs.rewards import DEFAULT_OOM_RUNTIME_FACTOR, OomPenalty
from placement_gym.task.compiled import Task
from placement_gym.task.groups import Grouping, make_grouping, quotient_edges

# Mirhoseini et al. 2017 (docs/references.md): num_groups = min(256, 20 x devices).
GROUP_LIMIT = 256
GROUPS_PER_DEVICE = 20


def default_max_groups(task: Task) -> int:
    """``min(256, 20 x devices)`` (Mirhoseini et al. 2017), never more than the task's forward ops."""
    return min(GROUP_LIMIT, GROUPS_PER_DEVICE * task.n_devices, task.n_forward)


def placer_grouping(task: Task, groups="colocate", max_groups: int | None = None) -> Grouping:
    """The groups a seq2seq placer emits one device for.

    ``groups`` is any ``groups=`` value of the envs (`placement_gym.task.groups.make_grouping`; default
    ``"colocate"``, Mirhoseini et al.'s co-location groups). When that leaves more than
    ``max_groups`` groups (default `default_max_groups`), the groups are merged further: a balanced
    ``max_groups``-way partition of the ops with few bytes crossing parts (`make_grouping(graph,
    k)`, seed 0) is computed, and every group joins the part of its first op, so the co-location
    constraints still hold and there are at most ``max_groups`` groups. (Choice: the paper does not
    say how it got from co-location groups to its group count.)"""
    if max_groups is None:
        max_groups = default_max_groups(task)
    if isinstance(max_groups, bool) or not isinstance(max_groups, (int, np.integer)) or max_groups < 1:
        raise ValueError(f"max_groups must be a positive integer or None, got {max_groups!r}")
    grouping = make_grouping(task.graph, groups)
    if grouping.n_groups <= max_groups:
        return grouping
    parts = make_grouping(task.graph, int(max_groups)).group_of_op
    labels = parts[grouping.first_op][grouping.group_of_op]
    return make_grouping(task.graph, labels)


def neighbour_means(features: np.ndarray, src: np.ndarray, dst: np.ndarray) -> np.ndarray:
    """``(n, 2 * width)``: the mean feature row of each node's predecessors, then of its
    successors, over the edges ``src -> dst`` (zeros for a node without any)."""
    n, width = features.shape
    result = np.zeros((n, 2 * width))
    for column, (into, outof) in enumerate(((dst, src), (src, dst))):
        total = np.zeros((n, width))
        np.add.at(total, into, features[outof])
        count = np.bincount(into, minlength=n)[:, None]
        result[:, column * width : (column + 1) * width] = total / np.maximum(count, 1)
    return result


def node_inputs(task: Task, grouping: Grouping | None = None) -> np.ndarray:
    """The input row of every node (a group of ``grouping``, or every forward op when None),
    float32 ``(n_nodes, input_width())``: [`NODE_FEATURES`, mean predecessor features, mean
    successor features, log1p(ops in the node) / log1p(forward ops of the task)]."""
    if grouping is None:
        features = node_features(task)
        src, dst, _ = op_edges(task.graph)
        sizes = np.ones(task.n_forward)
    else:
        features = node_features(task, grouping.group_of_op, grouping.n_groups)
        src, dst, _ = quotient_edges(task.graph, grouping)
        sizes = grouping.sizes.astype(np.float64)
    size_column = np.log1p(sizes) / np.log1p(max(task.n_forward, 1))
    rows = np.concatenate([features, neighbour_means(features, src, dst), size_column[:, None]], axis=1)
    return rows.astype(np.float32)


def input_width() -> int:
    """Width of a `node_inputs` row."""
    return 3 * len(NODE_FEATURES) + 1


def sample_categorical(probs: torch.Tensor, uniforms: torch.Tensor) -> torch.Tensor:
    """Inverse-CDF draws: one index per row of ``probs`` ``(batch, k)`` from ``uniforms``
    ``(batch,)`` in [0, 1)."""
    cumulative = probs.cumsum(dim=-1)
    index = (cumulative < uniforms[:, None]).sum(dim=-1)
    return index.clamp_(max=probs.shape[-1] - 1)


class Seq2SeqPlacer(nn.Module):
    """Seq2seq LSTM placer with attention (see the module docstring).

    ``input_width``: width of a node's input row; ``n_devices``: devices to choose from;
    ``hidden``: LSTM and embedding width; ``value_head``: also predict a state value per step."""

    def __init__(self, input_width: int, n_devices: int, hidden: int = 64, value_head: bool = False) -> None:
        super().__init__()
        self.n_devices = n_devices
        self.embed = nn.Sequential(nn.Linear(input_width, hidden), nn.Tanh())
        self.encoder = nn.LSTM(hidden, hidden, batch_first=True)
        self.device_embedding = nn.Embedding(n_devices + 1, hidden)  # index n_devices: start token
        self.decoder = nn.LSTM(2 * hidden, hidden, batch_first=True)
        self.attention = nn.Linear(hidden, hidden, bias=False)
        self.head = nn.Sequential(nn.Linear(2 * hidden, hidden), nn.Tanh())
        self.logits = nn.Linear(hidden, n_devices)
        self.value = nn.Linear(hidden, 1) if value_head else None

    def encode(self, inputs: torch.Tensor) -> tuple[torch.Tensor, tuple[torch.Tensor, torch.Tensor]]:
        """``inputs`` ``(sequences, n_nodes, input_width)`` -> encoder outputs ``(sequences,
        n_nodes, hidden)`` and the final (h, c) state, each ``(1, sequences, hidden)``."""
        outputs, state = self.encoder(self.embed(inputs))
        return outputs, state

    def _head(self, decoded: torch.Tensor, encoded: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        # decoded (B, S, H), encoded (B, T, H): attention of every decoder step over every node
        scores = torch.bmm(self.attention(decoded), encoded.transpose(1, 2))
        context = torch.bmm(torch.softmax(scores, dim=-1), encoded)
        features = self.head(torch.cat([decoded, context], dim=-1))
        return self.logits(features), features

    @torch.no_grad()
    def sample(
        self,
        encoded: torch.Tensor,
        state: tuple[torch.Tensor, torch.Tensor],
        uniforms: np.ndarray,
        temperature: float = 1.0,
    ) -> np.ndarray:
        """Decode one device per node for each row of ``encoded`` ``(batch, n_nodes, hidden)``
        (``state``: the encoder's final state of each row), drawing step ``t`` of row ``b`` with
        ``uniforms[b, t]``. Returns int64 ``(batch, n_nodes)``."""
        batch, n_nodes, _ = encoded.shape
        draws = torch.from_numpy(np.ascontiguousarray(uniforms, dtype=np.float32))
        keys = self.attention.weight  # attention scores as (W d) . e = d . (W^T e): precompute W^T e
        projected = torch.matmul(encoded, keys)  # (B, T, H)
        previous = torch.full((batch,), self.n_devices, dtype=torch.long)
        actions = torch.empty((batch, n_nodes), dtype=torch.long)
        for t in range(n_nodes):
            step_input = torch.cat([self.device_embedding(previous), encoded[:, t]], dim=-1)
            output, state = self.decoder(step_input[:, None], state)
            scores = torch.bmm(projected, output.transpose(1, 2))  # (B, T, 1)
            context = torch.bmm(torch.softmax(scores, dim=1).transpose(1, 2), encoded)  # (B, 1, H)
            logits = self.logits(self.head(torch.cat([output, context], dim=-1)))[:, 0]
            probs = torch.softmax(logits / temperature, dim=-1)
            previous = sample_categorical(probs, draws[:, t])
            actions[:, t] = previous
        return actions.numpy()

    def evaluate_actions(
        self, encoded: torch.Tensor, state: tuple[torch.Tensor, torch.Tensor], actions: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
        """Teacher-forced pass over given ``actions`` ``(batch, n_nodes)``: per-step log-probability
        of each action and entropy of each step's distribution ``(batch, n_nodes)``, and the state
        values ``(batch, n_nodes)`` (None without a value head). Step ``t``'s state is the graph and
        the devices of nodes ``0..t-1``: exactly the staged MDP's state at stage ``t``."""
        batch = actions.shape[0]
        start = torch.full((batch, 1), self.n_devices, dtype=torch.long)
        previous = torch.cat([start, actions[:, :-1]], dim=1)
        decoded, _ = self.decoder(torch.cat([self.device_embedding(previous), encoded], dim=-1), state)
        logits, features = self._head(decoded, encoded)
        log_probs = torch.log_softmax(logits, dim=-1)
        chosen = log_probs.gather(-1, actions[..., None])[..., 0]
        entropy = -(log_probs.exp() * log_probs).sum(dim=-1)
        values = self.value(features)[..., 0] if self.value is not None else None
        return chosen, entropy, values


def repeat_rows(
    encoded: torch.Tensor, state: tuple[torch.Tensor, torch.Tensor], times: int
) -> tuple[torch.Tensor, tuple[torch.Tensor, torch.Tensor]]:
    """Each encoded sequence (and its state) repeated ``times`` times, consecutively: the rows of
    ``times`` samples per sequence."""
    h, c = state
    return (
        encoded.repeat_interleave(times, dim=0),
        (h.repeat_interleave(times, dim=1), c.repeat_interleave(times, dim=1)),
    )


# Gradients are clipped to this global norm before each optimiser step (a choice, for stability).
MAX_GRAD_NORM = 1.0


class Seq2SeqAgent(LearnedAgent):
    """What `pg` and `spotlight` share: their common options (``hidden`` LSTM width, ``batch`` placements
    per iteration, ``learning_rate`` of Adam, ``entropy_coef``, ``groups`` and ``max_groups`` of
    `placer_grouping`, ``oom_runtime_factor``: each agent's docstring gives their defaults), the grouping,
    the node inputs, a `Seq2SeqPlacer` (with a value head when ``value_head``) and its Adam optimiser, and
    batched sampling. The network is initialised from ``seed`` (a forked torch generator), so building
    an agent is deterministic on its own."""

    checkpointed = ("policy", "optimizer")

    def __init__(
        self, task: Task, seed: int = 0, hidden: int = 64, batch: int = 32, learning_rate: float = 3e-3,
        entropy_coef: float = 0.01, groups: Any = "colocate", max_groups: int | None = None,
        oom_runtime_factor: float = DEFAULT_OOM_RUNTIME_FACTOR, *, value_head: bool, **config: Any,
    ) -> None:
        super().__init__(task, seed, **config)
        self.batch = check_number("batch", batch, 1, integer=True)
        self.entropy_coef = check_number("entropy_coef", entropy_coef, 0)
        self.oom_runtime_factor = check_number("oom_runtime_factor", oom_runtime_factor, 1)
        self.oom_penalty = OomPenalty(oom_runtime_factor=self.oom_runtime_factor)
        check_number("hidden", hidden, 1, integer=True)
        check_number("learning_rate", learning_rate, 0, open_low=True)
        self.grouping = placer_grouping(self.task, groups, max_groups)
        self.inputs = torch.from_numpy(node_inputs(self.task, self.grouping))[None]
        with torch.random.fork_rng():
            torch.manual_seed(self.seed)
            self.policy = Seq2SeqPlacer(input_width(), self.task.n_devices, int(hidden), value_head)
        self.optimizer = torch.optim.Adam(self.policy.parameters(), lr=float(learning_rate))
        self.best_single = float(self.task_best_single())

    def task_best_single(self) -> float:
        from placement_gym.cost_model import single_device

        # single_device simulates outside the budget: it is the task's fixed reference (the
        # evaluator's `best_single_runtime` is the same number), not a search step.
        return single_device(self.task).runtime

    def sample_groups(self, size: int) -> np.ndarray:
        """``size`` group placements ``(size, n_groups)`` from the current policy."""
        with torch.no_grad():
            encoded, state = self.policy.encode(self.inputs)
        encoded, state = repeat_rows(encoded, state, size)
        uniforms = self.rng.random((size, self.grouping.n_groups))
        return self.policy.sample(encoded, state, uniforms)

    def evaluate_groups(self, actions: np.ndarray):
        """Teacher-forced `Seq2SeqPlacer.evaluate_actions` of group placements ``actions``."""
        encoded, state = self.policy.encode(self.inputs)
        encoded, state = repeat_rows(encoded, state, len(actions))
        return self.policy.evaluate_actions(encoded, state, torch.from_numpy(actions))

    def step_optimizer(self, loss: torch.Tensor) -> None:
        self.optimizer.zero_grad()
        loss.backward()
        nn.utils.clip_grad_norm_(self.policy.parameters(), MAX_GRAD_NORM)
        self.optimizer.step()
