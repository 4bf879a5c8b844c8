"""Plain-torch REINFORCE on `DevicePlacementStaged-v0` (Spotlight's one-node-per-stage MDP).

No RL library: a small MLP picks the device of the current node from
  * the current node's features (``node_features`` row of the node ``current`` points at),
  * the partial placement as seen from that node: the share of its already-placed predecessors on
    each device (read from ``edge_index`` and ``placement``) and the share of all placed nodes on
    each device (the load so far),
so its size does not depend on the graph. The reward comes at the last stage (log speedup over the
best single device); each episode's log-probabilities are weighted by (reward - baseline), the
baseline a moving average of past rewards with decay 0.9 (Mirhoseini et al. 2017; docs/references.md).

    PYTHONPATH=. python examples/reinforce_staged.py
    PYTHONPATH=. python examples/reinforce_staged.py --graph resnet50 --steps 40000
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import torch as th
from torch import nn

from placement_gym.common.progress import Progress
from placement_gym.envs.staged import DevicePlacementStagedEnv

BASELINE_DECAY = 0.9  # Mirhoseini et al. 2017's moving-average baseline (docs/references.md)


class StagePolicy(nn.Module):
    """Logits over devices from the current node's features and the placement around it."""

    def __init__(self, n_node_features: int, n_devices: int, hidden: int = 64) -> None:
        super().__init__()
        self.net = nn.Sequential(nn.Linear(n_node_features + 2 * n_devices, hidden), nn.Tanh(),
                                 nn.Linear(hidden, n_devices))

    def forward(self, x: th.Tensor) -> th.Tensor:
        return self.net(x)


def stage_input(obs: dict, predecessors: list[np.ndarray]) -> th.Tensor:
    """The policy's input at this stage (see the module docstring)."""
    node = int(np.argmax(obs["current"]))
    placement = obs["placement"]  # one-hot device per node, zero rows for nodes not placed yet
    placed = placement[predecessors[node]].sum(axis=0)
    near = placed / max(placed.sum(), 1.0)
    load = placement.sum(axis=0) / max(placement.sum(), 1.0)
    return th.as_tensor(np.concatenate([obs["node_features"][node], near, load]), dtype=th.float32)


def predecessor_lists(obs: dict) -> list[np.ndarray]:
    """Predecessors of every node, from the (static) edges of the observation."""
    n_nodes = len(obs["node_mask"])
    real = obs["edge_mask"] > 0
    src, dst = obs["edge_index"][0][real], obs["edge_index"][1][real]
    return [src[dst == v] for v in range(n_nodes)]


def play(env: DevicePlacementStagedEnv, policy: StagePolicy, predecessors, greedy: bool = False):
    """One episode: (sum of log-probabilities of the choices, final reward, final info)."""
    obs, _ = env.reset()
    log_probs, terminated = [], False
    while not terminated:
        logits = policy(stage_input(obs, predecessors))
        if greedy:
            action = int(th.argmax(logits))
        else:
            dist = th.distributions.Categorical(logits=logits)
            sample = dist.sample()
            log_probs.append(dist.log_prob(sample))
            action = int(sample)
        obs, reward, terminated, _, info = env.step(action)
    return (th.stack(log_probs).sum() if log_probs else None), reward, info


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--graph", default="cifar10_cnn")
    parser.add_argument("--cluster", default="k80x4")
    parser.add_argument("--steps", type=int, default=15000,
                        help="training steps (stages; an episode has one per node)")
    parser.add_argument("--lr", type=float, default=3e-3)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    th.manual_seed(args.seed)
    th.set_num_threads(1)

    env = DevicePlacementStagedEnv(graph=args.graph, cluster=args.cluster)  # sparse log-speedup reward
    obs, _ = env.reset(seed=args.seed)
    predecessors = predecessor_lists(obs)
    policy = StagePolicy(obs["node_features"].shape[1], env.task.n_devices)
    optimizer = th.optim.Adam(policy.parameters(), lr=args.lr)

    episodes = max(1, args.steps // env.n_nodes)
    baseline, first_rewards, best = None, [], (float("inf"), None)
    start = time.perf_counter()
    progress = Progress()  # a line on stderr at least every 3 s; stdout keeps the results
    for episode in range(episodes):
        progress("training", episode, episodes)
        log_prob, reward, info = play(env, policy, predecessors)
        if episode < 20:
            first_rewards.append(reward)
        if info["feasible"] and info["runtime"] < best[0]:
            best = (info["runtime"], episode)
        # The first episode sets the baseline; after that, (reward - baseline) is the advantage.
        baseline = reward if baseline is None else BASELINE_DECAY * baseline + (1 - BASELINE_DECAY) * reward
        loss = -(reward - baseline) * log_prob
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    progress.close()
    seconds = time.perf_counter() - start

    _, greedy_reward, info = play(env, policy, predecessors, greedy=True)
    single = env.best_single_runtime
    print(f"{env.task.id}: {env.n_nodes} stages, {episodes} episodes in {seconds:.1f} s")
    print(f"mean reward of the first 20 episodes: {np.mean(first_rewards):+.3f}; moving baseline at the end: "
          f"{baseline:+.3f} (log speedup over the best single device)")
    if best[1] is not None:
        print(f"best placement sampled: {best[0] * 1e3:.2f} ms (episode {best[1]}), "
              f"{single / best[0]:.2f}x the best single device ({single * 1e3:.2f} ms)")
    status = "feasible" if info["feasible"] else "OUT OF MEMORY"
    print(f"greedy policy: {info['runtime'] * 1e3:.2f} ms ({status}), reward {greedy_reward:+.3f}")


if __name__ == "__main__":
    main()
