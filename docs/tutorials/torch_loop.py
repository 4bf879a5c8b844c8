"""A plain torch REINFORCE loop on the single-shot env: no RL library."""

import gymnasium as gym
import numpy as np
import torch

import placement_gym  # noqa: F401 - registers the environments


def main(episodes: int = 300, seed: int = 0) -> float:
    torch.manual_seed(seed)
    env = gym.make("DevicePlacement-v0", graph="cifar10_cnn", cluster="k80x2")
    obs, info = env.reset(seed=seed)
    n_nodes = len(env.action_space.nvec)
    features = torch.as_tensor(obs["node_features"][:n_nodes])  # the graph is the same every episode
    masks = torch.as_tensor(env.unwrapped.action_masks())  # (n_nodes, n_devices): static memory fits
    n_devices = masks.shape[1]
    policy = torch.nn.Sequential(torch.nn.Linear(features.shape[1], 64), torch.nn.Tanh(),
                                 torch.nn.Linear(64, n_devices))
    optimiser = torch.optim.Adam(policy.parameters(), lr=1e-2)
    baseline = None
    for _ in range(episodes):
        logits = policy(features).masked_fill(~masks, -torch.inf)
        distribution = torch.distributions.Categorical(logits=logits)  # one device per node
        action = distribution.sample()
        env.reset()
        _, reward, _, _, info = env.step(action.numpy())
        baseline = reward if baseline is None else 0.9 * baseline + 0.1 * reward  # moving average
        loss = -(reward - baseline) * distribution.log_prob(action).sum()
        optimiser.zero_grad()
        loss.backward()
        optimiser.step()

    env.reset()
    greedy = policy(features).masked_fill(~masks, -torch.inf).argmax(dim=1)
    _, reward, _, _, info = env.step(greedy.numpy())
    print(f"greedy policy: {info['runtime'] * 1e3:.2f} ms (reward {reward:+.3f}); "
          f"best single device {info['best_single_runtime'] * 1e3:.2f} ms")
    return float(np.asarray(info["runtime"]))


if __name__ == "__main__":
    main()
