"""`hsdag`: HSDAG (Duan et al., NeurIPS 2024), single-shot placement through learned groups, in plain
torch.

The pipeline of the paper, with our choices where it leaves a detail open:

1. Coarsening by chain merging (`make_grouping(graph, "chains")`: an op is merged into its only
   successor when it is that successor's only predecessor). ``groups=`` accepts any value of the envs.
2. GNN node embeddings of the coarsened graph: `DagEncoder` over the env's static node features
   (the placement is not an input: a sample is one full placement, drawn at once).
3. Pooling into a learned number of groups. The paper uses a graph-parsing pooling network; we use a
   soft assignment instead: a linear layer gives every coarse node a distribution ``S[i, :]`` over
   ``max_groups`` candidate groups (K). A sample draws one group per node from ``S``; a group no node
   draws is unused and vanishes, so the number of groups in use is learned (it is logged as
   ``groups_used``). A group's embedding is the ``S``-weighted mean of its nodes' embeddings, with its
   ``S``-weighted work share and static-memory share.
4. A policy over groups: an MLP maps each group's embedding to logits over the devices; a sample draws
   a device per group, and every node takes its group's device (`Grouping.expand` then gives every op
   its node's device).

Training: REINFORCE, ``batch`` placements per iteration (one batched evaluation), reward =
``log(best_single_runtime / runtime)`` (execution time as the reward, as the paper, made scale-free so
one learning rate fits every graph; 0 for the best single device, positive when faster). An
out-of-memory placement is rewarded as if it ran ``oom_runtime_factor`` (10) x the best single-device runtime.
A placement that puts everything on one device is rewarded with its own runtime like any other (the
released HSDAG code forces those to a 1e10 runtime, docs/references.md: a pitfall not repeated). The log
probability of a sample is the sum of its nodes' group draws and its used groups' device draws (an
unused group's device has no effect on the runtime, so it is left out). Baseline: the batch's mean
reward; advantages divided by their standard deviation; an entropy bonus of weight ``entropy_coef`` on both
the assignment and the device distributions; Adam with gradient norm clipped to ``max_grad_norm``.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from torch import nn

from baselines.learning.gnn import DagEncoder, GNNAgent, mlp, sample_categorical
from baselines.learning.options import check_number
from baselines.learning.trainer import register_learned
from placement_gym.envs.observation import NODE_FEATURES
from placement_gym.evaluation.budget import Budget
from placement_gym.task.compiled import Task


class GroupPlacer(nn.Module):
    """Node embeddings -> soft assignment to ``max_groups`` groups -> device logits per group."""

    def __init__(self, n_devices: int, hidden: int, rounds: int, max_groups: int) -> None:
        super().__init__()
        self.encoder = DagEncoder(len(NODE_FEATURES), hidden, rounds)
        self.assign = nn.Linear(hidden, max_groups)
        self.placer = mlp(hidden + 2, hidden, n_devices)

    def forward(self, graph) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Returns log S ``(n_nodes, K)`` (node -> group), log pi ``(K, n_devices)`` (group -> device)
        and the soft size of every group ``(K,)`` (the sum of S over nodes)."""
        h = self.encoder(graph.features[None], graph)[0]
        log_assign = torch.log_softmax(self.assign(h), dim=-1)
        assign = log_assign.exp()
        mass = assign.sum(dim=0)
        scale = 1.0 / (mass + 1e-6)
        pooled = (assign.T @ h) * scale[:, None]
        work = assign.T @ graph.work_share
        memory = assign.T @ graph.memory_share
        group_inputs = torch.cat([pooled, work[:, None], memory[:, None]], dim=-1)
        log_device = torch.log_softmax(self.placer(group_inputs), dim=-1)
        return log_assign, log_device, mass


@register_learned
class HSDAG(GNNAgent):
    """HSDAG: chain coarsening, GNN embeddings, soft pooling into a learned number of groups, a device
    per group; REINFORCE on the log speedup (see the module docstring for every design choice).

    Config (keyword arguments, defaults): ``groups="chains"``, ``batch=32`` (placements per
    iteration), ``max_groups=32`` (candidate groups K), ``hidden=32``, ``rounds=2``, ``learning_rate=3e-3``
    (Adam), ``entropy_coef=0.01``, ``oom_runtime_factor=10.0``, ``max_grad_norm=1.0``."""

    name = "hsdag"

    def __init__(
        self, task: Task, seed: int = 0, groups: Any = "chains", batch: int = 32, max_groups: int = 32,
        **options: Any,
    ) -> None:
        super().__init__(task, seed, groups, batch, **options)
        self.max_groups = check_number("max_groups", max_groups, 1, integer=True)
        self.policy = GroupPlacer(task.n_devices, self.options.hidden, self.options.rounds, self.max_groups)
        self.optimizer = torch.optim.Adam(self.policy.parameters(), lr=self.options.learning_rate)

    def _sample(self, log_assign: torch.Tensor, log_device: torch.Tensor, count: int, greedy_rows: int = 0):
        """Group of every node ``(count, n_nodes)`` and device of every group ``(count, K)``."""
        assign = log_assign.detach().double().exp().numpy()
        device = log_device.detach().double().exp().numpy()
        groups = sample_categorical(np.broadcast_to(assign, (count, *assign.shape)), self.rng)
        devices = sample_categorical(np.broadcast_to(device, (count, *device.shape)), self.rng)
        groups[:greedy_rows] = assign.argmax(axis=-1)
        devices[:greedy_rows] = device.argmax(axis=-1)
        return groups, devices

    def iteration(self, evaluator: Budget) -> dict[str, float]:
        count = min(self.batch, evaluator.remaining)
        log_assign, log_device, mass = self.policy(self.graph)
        groups, devices = self._sample(log_assign, log_device, count)
        nodes = np.take_along_axis(devices, groups, axis=1)
        runtimes, feasible = evaluator.evaluate(self.graph.grouping.expand(nodes))
        best_single = evaluator.best_single_runtime
        reward = self.oom_penalty.log_speedups(runtimes, feasible, best_single)
        advantage = reward - reward.mean() if count > 1 else reward
        spread = advantage.std()
        advantage = advantage / spread if spread > 1e-12 else advantage * 0.0
        used = np.zeros((count, self.max_groups), dtype=bool)
        used[np.arange(count)[:, None], groups] = True
        node_index = torch.arange(self.graph.n_nodes)
        group_index = torch.arange(self.max_groups)
        log_prob = log_assign[node_index, torch.as_tensor(groups)].sum(dim=1) + (
            log_device[group_index, torch.as_tensor(devices)] * torch.as_tensor(used, dtype=torch.float32)
        ).sum(dim=1)
        assign_entropy = -(log_assign.exp() * log_assign).sum(dim=-1).mean()
        weight = mass / mass.sum()  # a group's device entropy counts by how many nodes it holds
        device_entropy = (-(log_device.exp() * log_device).sum(dim=-1) * weight.detach()).sum()
        loss = -(torch.as_tensor(advantage, dtype=torch.float32) * log_prob).mean() - self.entropy_coef * (
            assign_entropy + device_entropy
        )
        self.optimizer.zero_grad()
        loss.backward()
        nn.utils.clip_grad_norm_(self.policy.parameters(), self.max_grad_norm)
        self.optimizer.step()
        return {
            "loss": loss.item(),
            "mean_reward": float(reward.mean()),
            "mean_runtime": float(runtimes.mean()),
            "groups_used": float(used.sum(axis=1).mean()),
        }

    def propose(self, count: int) -> np.ndarray:
        """``count`` placements (int64 ``(count, n_forward)``) of the current policy on the current
        task, evaluating nothing: the first row greedy (each node's most likely group, each group's
        most likely device), the others sampled."""
        count = check_number("count", count, 1, integer=True)
        with torch.no_grad():
            log_assign, log_device, _ = self.policy(self.graph)
        groups, devices = self._sample(log_assign, log_device, count, greedy_rows=1)
        return self.graph.grouping.expand(np.take_along_axis(devices, groups, axis=1))
