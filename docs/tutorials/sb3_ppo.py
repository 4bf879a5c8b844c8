"""stable-baselines3 PPO with its stock MultiInputPolicy on the dict observation of a placement env
(the staged one by default), then one greedy episode.

``python docs/tutorials/sb3_ppo.py [--env-id ID] [--timesteps N] [--seed S] [--dataset NAME:SPLIT]`` (a
dataset split: a graph of it at every reset); the last line it prints is JSON: the greedy placement's
runtime, the best single device's, the devices the sampled placements used and the placements evaluated
(``env.unwrapped.evaluations``)."""

import argparse
import json

import gymnasium as gym
import numpy as np
import torch
from stable_baselines3 import PPO
from stable_baselines3.common.callbacks import BaseCallback

import placement_gym  # noqa: F401 - registers the environments
from baselines.policies import FactorizedPlacementPolicy
from baselines.sb3_progress import TrainingProgress


class SampledDevices(BaseCallback):
    """The devices of every action PPO sampled in its rollouts."""

    def __init__(self):
        super().__init__()
        self.devices: set[int] = set()

    def _on_step(self) -> bool:
        self.devices.update(np.unique(self.locals["actions"]).tolist())
        return True


def main(timesteps: int = 4096, seed: int = 0, env_id: str = "DevicePlacementStaged-v0",
         graph: str = "cifar10_cnn", cluster: str = "k80x2", dataset: str | None = None) -> float:
    # Staged (Spotlight): one node per step, Discrete(n_devices), reward at the last stage. Single-shot:
    # every node at once, MultiDiscrete, one step per episode. Refine (Placeto): one move per step.
    # dataset="synthetic-mini-v1:train": a graph of the split at every reset instead of one graph
    env = gym.make(env_id, cluster=cluster, **({"dataset": dataset} if dataset else {"graph": graph}))
    if env_id == "DevicePlacement-v0":
        # Stock SB3 samples a MultiDiscrete action with one Categorical per node, in Python; the
        # project's factorised policy is one categorical over (nodes, devices), and its one-step
        # episodes take a larger learning rate than PPO's default.
        model = PPO(FactorizedPlacementPolicy, env, n_steps=128, batch_size=64, learning_rate=3e-3,
                    seed=seed, verbose=0)
    else:
        model = PPO("MultiInputPolicy", env, gamma=1.0, n_steps=256, batch_size=64, seed=seed, verbose=0)
    sampled = SampledDevices()
    model.learn(total_timesteps=timesteps, callback=[sampled, TrainingProgress(timesteps)])

    obs, info = env.reset(seed=seed)  # one greedy episode of the trained policy
    done = False
    while not done:
        action, _ = model.predict(obs, deterministic=True)
        obs, reward, terminated, truncated, info = env.step(action)
        done = terminated or truncated
    runtime, best_single = float(info["runtime"]), float(info["best_single_runtime"])
    devices, evaluations = sorted(sampled.devices), env.unwrapped.evaluations
    print(f"policy: {runtime * 1e3:.2f} ms, feasible {bool(info['feasible'])}; "
          f"best single device {best_single * 1e3:.2f} ms; "
          f"sampled placements used devices {devices}; {evaluations} placements evaluated")
    print(json.dumps({"env_id": env_id, "graph": env.unwrapped.task.graph.name, "dataset": dataset,
                      "cluster": cluster,
                      "runtime": runtime, "best_single_runtime": best_single, "sampled_devices": devices,
                      "evaluations": evaluations, "torch_threads": torch.get_num_threads()}))
    return runtime


if __name__ == "__main__":
    torch.set_num_threads(1)  # small MLPs: one thread is faster, more so on a shared machine
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--env-id", default="DevicePlacementStaged-v0")
    parser.add_argument("--timesteps", type=int, default=4096, help="env steps to train for")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--dataset", default=None, help="a dataset split (synthetic-mini-v1:train)")
    args = parser.parse_args()
    main(timesteps=args.timesteps, seed=args.seed, env_id=args.env_id, dataset=args.dataset)
