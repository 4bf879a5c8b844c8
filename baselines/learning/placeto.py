"""`placeto`: Placeto (Addanki et al., NeurIPS 2019), a GNN policy that refines a full placement
node by node, in plain torch.

The MDP is `DevicePlacementRefine-v0`'s: an episode starts from a random placement of the nodes
(seeded, from ``self.rng``) and visits every node once in topological order (node index order: groups
are numbered by their first op; the env's `refine_visit`); at each visit the policy picks the node's new
device (staying is allowed) and the reward is the runtime saved, ``(R_before - R_after) /
best_single_runtime``, where an out-of-memory placement counts as ``oom_runtime_factor x best_single_runtime``
(the env's default penalty, 10x; both rules from `placement_gym.envs.rewards`).

Policy (choices where the paper leaves a detail open, or where we simplify it):

* Nodes are groups of ops, ``groups="chains"`` by default (HSDAG's chain merging): of the groupings
  the envs offer it is the one that shrinks the bundled graphs most (inception_v3 309 ops -> 62
  nodes, bert_large 730 -> 197; gnmt4 barely: 2,526 -> 2,182), and splitting a chain across devices
  only adds transfers. Any ``groups=`` value of the envs is accepted (an int k gives a k-way
  partition, the way to make gnmt4 episodes short).
* Node inputs: the env's static node features, the one-hot of the node's current device, a flag for
  the node being visited now and one for nodes already visited this episode (Placeto's "current" and
  "done" features). `DagEncoder` embeds them with ``rounds`` rounds of messages down and up the DAG
  (parallel rounds instead of Placeto's topological-order propagation; see `gnn`).
* Placeto's placement-aware pooling: for every device, the mean embedding of the nodes now on it,
  their total work share and static-memory share. Each device is scored by one small MLP from
  ``[current node's embedding, mean embedding of the graph, the device's pool, work, memory, whether
  the current node is on it, the device's features]``; a softmax over devices is the policy. The
  weights depend neither on the number of nodes nor on the number of devices, so `set_task` moves the
  policy to any graph (kept to clusters of the same device count, as the other agents' outputs are).
* Training: REINFORCE with a baseline. ``batch`` episodes run in parallel, so every step evaluates
  ``batch`` placements in one batched call. The returns ``G_t = r_t + gamma G_{t+1}`` run to the end of
  the current update window; the baseline is the mean of ``G_t`` over the batch at the same time step
  (a time-step-wise baseline; with one episode there is none), and advantages are divided
  by their standard deviation so one learning rate fits graphs of 30 to 2,500 ops. An update comes
  every ``steps_per_update`` steps (and at the end of an episode): Placeto updates once per episode,
  but a gnmt4 episode is 2,182 steps x ``batch`` evaluations, more than a 10,000 budget, so updating
  only at the end would never learn there (frequent small updates also learned fastest in our
  1,000-evaluation runs on inception_v3/k80x4: windows of 4 steps beat 8 and 32). Log-probabilities
  are recomputed at update time, in chunks, rather than kept from the rollout (a kept autograd graph
  of many steps over 2,000 nodes would take gigabytes).
  Adam, gradient norm clipped to ``max_grad_norm``, an entropy bonus of weight ``entropy_coef``.

Budget: every step of every episode is one evaluation (the reward needs the new runtime), plus one
per episode for its starting placement. A full visit of an n-node graph therefore costs n + 1
evaluations for ONE final placement, where a single-shot agent (`hsdag`) gets one placement per
evaluation: with a 10,000 budget Placeto sees about 10,000 / (n + 1) complete refinements (about 160
on inception_v3's 62 chain nodes, fewer than 5 on gnmt4), each one a local search guided by the
policy. That is the paper's trade-off: fewer, better-informed placements. One `iteration` = one
update window of the current batch of episodes; when the remaining budget is smaller than the batch,
the episodes beyond it are dropped and the last steps use exactly what is left.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from torch import nn

from baselines.learning.gnn import DagEncoder, GNNAgent, mlp, sample_categorical
from baselines.learning.options import check_number
from baselines.learning.trainer import register_learned
from placement_gym.envs.observation import DEVICE_FEATURES, NODE_FEATURES
from placement_gym.envs.refine import refine_visit
from placement_gym.envs.rewards import improvement_reward
from placement_gym.evaluation.budget import Budget
from placement_gym.task.compiled import Task

# Nodes x rows per recomputation chunk at update time: bounds the memory of the backward pass.
_UPDATE_CHUNK_NODES = 32768


class RefinePolicy(nn.Module):
    """Placeto's policy network: logits over devices for the current node of each row."""

    def __init__(self, n_devices: int, hidden: int, rounds: int) -> None:
        super().__init__()
        self.n_devices = n_devices
        self.encoder = DagEncoder(len(NODE_FEATURES) + n_devices + 2, hidden, rounds)
        # per device: current node, graph mean, device pool (3 x hidden), work, memory, is-current, features
        self.scorer = mlp(3 * hidden + 3 + len(DEVICE_FEATURES), hidden, 1)

    def forward(self, graph, placements: torch.Tensor, current: torch.Tensor) -> torch.Tensor:
        """``placements`` int64 ``(rows, n_nodes)``, ``current`` int64 ``(rows,)``: the node each row
        moves; returns logits ``(rows, n_devices)``."""
        rows, n_nodes = placements.shape
        one_hot = torch.nn.functional.one_hot(placements, self.n_devices).float()
        index = torch.arange(n_nodes)
        is_current = (index[None, :] == current[:, None]).float()
        visited = (index[None, :] < current[:, None]).float()
        x = torch.cat(
            [graph.features.expand(rows, -1, -1), one_hot, is_current[..., None], visited[..., None]], dim=-1
        )
        h = self.encoder(x, graph)
        count = one_hot.sum(dim=1)  # (rows, devices)
        pool = torch.einsum("rnd,rnh->rdh", one_hot, h) / count.clamp(min=1.0)[..., None]
        work = one_hot.transpose(1, 2) @ graph.work_share  # (rows, devices)
        memory = one_hot.transpose(1, 2) @ graph.memory_share
        row = torch.arange(rows)
        h_current = h[row, current]
        on_device = one_hot[row, current]
        per_device = torch.cat(
            [
                h_current[:, None, :].expand(-1, self.n_devices, -1),
                h.mean(dim=1)[:, None, :].expand(-1, self.n_devices, -1),
                pool,
                work[..., None],
                memory[..., None],
                on_device[..., None],
                graph.device_features.expand(rows, -1, -1),
            ],
            dim=-1,
        )
        return self.scorer(per_device).squeeze(-1)


@register_learned
class Placeto(GNNAgent):
    """Placeto: a GNN refines a random placement node by node; REINFORCE on the per-step runtime
    improvement (see the module docstring for every design choice).

    Config (keyword arguments, defaults): ``groups="chains"`` (nodes: any ``groups=`` value of the
    envs), ``batch=8`` (episodes in parallel = evaluations per step), ``steps_per_update=4``,
    ``hidden=32``, ``rounds=2`` (message-passing rounds), ``learning_rate=3e-3`` (Adam), ``gamma=0.9``,
    ``entropy_coef=0.01``, ``oom_runtime_factor=10.0`` (penalty runtime of an out-of-memory placement in best
    single-device runtimes), ``max_grad_norm=1.0``."""

    name = "placeto"

    def __init__(
        self, task: Task, seed: int = 0, groups: Any = "chains", batch: int = 8, steps_per_update: int = 4,
        gamma: float = 0.9, **options: Any,
    ) -> None:
        super().__init__(task, seed, groups, batch, **options)
        self.steps_per_update = check_number("steps_per_update", steps_per_update, 1, integer=True)
        self.gamma = check_number("gamma", gamma, 0.0, 1.0)
        self.policy = RefinePolicy(task.n_devices, self.options.hidden, self.options.rounds)
        self.optimizer = torch.optim.Adam(self.policy.parameters(), lr=self.options.learning_rate)
        self._reset_episodes()

    # -- episodes ---------------------------------------------------------------------------------
    def _reset_episodes(self) -> None:
        self._nodes: np.ndarray | None = None  # (episodes, n_nodes) current node placements
        self._reward_runtime = np.zeros(0)  # runtime (OOM: penalty) of each episode's placement
        self._step = 0  # index of the node the next step visits

    def set_task(self, task: Task) -> None:
        """Move to another graph (same number of devices), keeping the weights and the optimiser;
        episodes in progress are dropped."""
        super().set_task(task)
        self._reset_episodes()

    def _logits(self, nodes: np.ndarray, current: np.ndarray) -> torch.Tensor:
        return self.policy(self.graph, torch.as_tensor(nodes, dtype=torch.int64),
                           torch.as_tensor(current, dtype=torch.int64))

    def _choose(self, nodes: np.ndarray, node: int, greedy_rows: int = 0) -> np.ndarray:
        """Devices for ``node`` in every row of ``nodes``: sampled, or the most likely one in the
        first ``greedy_rows`` rows."""
        with torch.no_grad():
            logits = self._logits(nodes, np.full(len(nodes), node))
        probs = torch.softmax(logits.double(), dim=-1).numpy()
        choice = sample_categorical(probs, self.rng)
        choice[:greedy_rows] = probs[:greedy_rows].argmax(axis=-1)
        return choice

    def iteration(self, evaluator: Budget) -> dict[str, float]:
        best_single = evaluator.best_single_runtime
        grouping = self.graph.grouping
        if self._nodes is None:  # a new batch of episodes from random placements
            count = min(self.batch, evaluator.remaining)
            nodes = self.rng.integers(0, self.task.n_devices, size=(count, self.graph.n_nodes))
            runtimes, feasible = evaluator.evaluate(grouping.expand(nodes))
            self._nodes, self._step = nodes, 0
            self._reward_runtime = self.oom_penalty.reward_runtimes(runtimes, feasible, best_single)
            if evaluator.remaining == 0:
                return {"mean_runtime": float(runtimes.mean())}
        active = min(len(self._nodes), evaluator.remaining)
        nodes, previous = self._nodes[:active], self._reward_runtime[:active]
        steps = min(self.steps_per_update, self.graph.n_nodes - self._step, evaluator.remaining // active)
        states, currents, actions, rewards = [], [], [], []
        for _ in range(steps):
            node, _ = refine_visit(self._step, self.graph.n_nodes)  # one sweep per episode
            choice = self._choose(nodes, node)
            states.append(nodes.copy())
            currents.append(node)
            actions.append(choice)
            nodes[:, node] = choice
            runtimes, feasible = evaluator.evaluate(grouping.expand(nodes))
            now = self.oom_penalty.reward_runtimes(runtimes, feasible, best_single)
            rewards.append(improvement_reward(previous, now, best_single))
            previous = now
            self._step += 1
        self._nodes, self._reward_runtime = nodes, previous
        if self._step == self.graph.n_nodes:
            self._reset_episodes()
        loss = self._update(np.stack(states), np.array(currents), np.stack(actions), np.stack(rewards))
        return {"loss": loss, "mean_reward": float(np.mean(rewards)), "mean_runtime": float(previous.mean())}

    def _update(
        self, states: np.ndarray, currents: np.ndarray, actions: np.ndarray, rewards: np.ndarray
    ) -> float:
        """One REINFORCE step on a window: states ``(T, E, n_nodes)``, currents ``(T,)``, actions and
        rewards ``(T, E)``."""
        steps, episodes = rewards.shape
        returns = np.zeros_like(rewards)
        running = np.zeros(episodes)
        for t in range(steps - 1, -1, -1):
            running = rewards[t] + self.gamma * running
            returns[t] = running
        advantage = returns - returns.mean(axis=1, keepdims=True) if episodes > 1 else returns
        spread = advantage.std()
        advantage = advantage / spread if spread > 1e-12 else advantage * 0.0
        flat_states = states.reshape(steps * episodes, -1)
        flat_current = np.repeat(currents, episodes)
        flat_actions = torch.as_tensor(actions.reshape(-1), dtype=torch.int64)
        flat_advantage = torch.as_tensor(advantage.reshape(-1), dtype=torch.float32)
        total = steps * episodes
        chunk = max(1, _UPDATE_CHUNK_NODES // self.graph.n_nodes)
        self.optimizer.zero_grad()
        loss_sum = 0.0
        for start in range(0, total, chunk):
            part = slice(start, start + chunk)
            log_probs = torch.log_softmax(self._logits(flat_states[part], flat_current[part]), dim=-1)
            chosen = log_probs.gather(1, flat_actions[part, None]).squeeze(1)
            entropy = -(log_probs.exp() * log_probs).sum(dim=-1)
            loss = (-(flat_advantage[part] * chosen).sum() - self.entropy_coef * entropy.sum()) / total
            loss.backward()
            loss_sum += loss.item()
        nn.utils.clip_grad_norm_(self.policy.parameters(), self.max_grad_norm)
        self.optimizer.step()
        return loss_sum

    # -- placements without evaluation (zero-shot use) ---------------------------------------------
    def propose(self, count: int) -> np.ndarray:
        """``count`` placements (int64 ``(count, n_forward)``) from full refinement episodes of the
        current policy on the current task, started from random placements: the first row greedy (the
        most likely device at every visit), the others sampled. Evaluates nothing: the policy reads
        the placement, not its runtime, so an episode needs evaluations only for its rewards."""
        count = check_number("count", count, 1, integer=True)
        nodes = self.rng.integers(0, self.task.n_devices, size=(count, self.graph.n_nodes))
        for node in range(self.graph.n_nodes):
            nodes[:, node] = self._choose(nodes, node, greedy_rows=1)
        return self.graph.grouping.expand(nodes)

    # -- checkpoints --------------------------------------------------------------------------------
    def state_dict(self) -> dict[str, Any]:
        return super().state_dict() | {
            "nodes": None if self._nodes is None else self._nodes.copy(),
            "reward_runtime": self._reward_runtime.copy(),
            "step": self._step,
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        super().load_state_dict(state)
        self._nodes = None if state["nodes"] is None else np.array(state["nodes"])
        self._reward_runtime = np.array(state["reward_runtime"])
        self._step = int(state["step"])
