"""A plain torch REINFORCE loop on the single-shot env: no RL library.

``python docs/tutorials/torch_loop.py [--episodes N] [--seed S]``; the last line it prints is JSON: the
greedy placement's runtime, the best single device's, the devices the sampled placements used and the
placements evaluated (``env.unwrapped.evaluations``)."""

import argparse
import json

import gymnasium as gym
import torch

import placement_gym  # noqa: F401 - registers the environments
from placement_gym.common.progress import Progress


def main(episodes: int = 300, seed: int = 0, graph: str = "cifar10_cnn", cluster: str = "k80x2") -> float:
    torch.manual_seed(seed)
    env = gym.make("DevicePlacement-v0", graph=graph, cluster=cluster)
    obs, info = env.reset(seed=seed)
    n_nodes = len(env.action_space.nvec)
    features = torch.as_tensor(obs["node_features"][:n_nodes])  # the graph is the same every episode
    masks = torch.as_tensor(env.unwrapped.action_masks())  # (n_nodes, n_devices): static memory fits
    n_devices = masks.shape[1]
    policy = torch.nn.Sequential(torch.nn.Linear(features.shape[1], 64), torch.nn.Tanh(),
                                 torch.nn.Linear(64, n_devices))
    optimiser = torch.optim.Adam(policy.parameters(), lr=1e-2)
    baseline = None
    sampled = set()
    progress = Progress()  # a line on stderr at least every 3 s; stdout keeps the results
    for episode in range(episodes):
        progress("training", episode, episodes)
        logits = policy(features).masked_fill(~masks, -torch.inf)
        distribution = torch.distributions.Categorical(logits=logits)  # one device per node
        action = distribution.sample()
        sampled.update(action.unique().tolist())
        env.reset()
        _, reward, _, _, info = env.step(action.numpy())
        baseline = reward if baseline is None else 0.9 * baseline + 0.1 * reward  # moving average
        loss = -(reward - baseline) * distribution.log_prob(action).sum()
        optimiser.zero_grad()
        loss.backward()
        optimiser.step()
    progress.close()

    env.reset()
    greedy = policy(features).masked_fill(~masks, -torch.inf).argmax(dim=1)
    _, reward, _, _, info = env.step(greedy.numpy())
    runtime, best_single = float(info["runtime"]), float(info["best_single_runtime"])
    devices, evaluations = sorted(sampled), env.unwrapped.evaluations
    print(f"greedy policy: {runtime * 1e3:.2f} ms (reward {reward:+.3f}); "
          f"best single device {best_single * 1e3:.2f} ms; "
          f"sampled placements used devices {devices}; {evaluations} placements evaluated")
    print(json.dumps({"env_id": "DevicePlacement-v0", "graph": graph, "cluster": cluster,
                      "runtime": runtime, "best_single_runtime": best_single, "sampled_devices": devices,
                      "evaluations": evaluations, "torch_threads": torch.get_num_threads()}))
    return runtime


if __name__ == "__main__":
    torch.set_num_threads(1)  # a 64-unit MLP: one thread is faster, more so on a shared machine
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--episodes", type=int, default=300, help="episodes (placements) to train on")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    main(episodes=args.episodes, seed=args.seed)
