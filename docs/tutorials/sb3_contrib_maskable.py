"""sb3-contrib MaskablePPO on a placement env (the refine env by default): the env's action_masks() keeps
devices that fit; then one greedy episode of the trained policy (on the refine env it refines one
random placement).

``python docs/tutorials/sb3_contrib_maskable.py [--env-id ID] [--timesteps N] [--seed S]
[--dataset NAME:SPLIT]`` (a dataset split: a graph of it at every reset); the last line it prints is
JSON: the final placement's runtime, the best single device's, the devices the sampled actions chose and
the placements evaluated (``env.unwrapped.evaluations``)."""

import argparse
import json

import gymnasium as gym
import numpy as np
import torch
from sb3_contrib import MaskablePPO
from stable_baselines3.common.callbacks import BaseCallback

import placement_gym  # noqa: F401 - registers the environments
from baselines.policies import MaskableFactorizedPlacementPolicy
from baselines.sb3_progress import TrainingProgress


class SampledDevices(BaseCallback):
    """The devices of every action MaskablePPO sampled in its rollouts."""

    def __init__(self):
        super().__init__()
        self.devices: set[int] = set()

    def _on_step(self) -> bool:
        self.devices.update(np.unique(self.locals["actions"]).tolist())
        return True


def main(timesteps: int = 4096, seed: int = 0, env_id: str = "DevicePlacementRefine-v0",
         graph: str = "cifar10_cnn", cluster: str = "k80x4", dataset: str | None = None) -> float:
    # Refine (Placeto's MDP): start from a random placement, move one node per step, reward = improvement.
    # The masks are (n_devices,) for the staged and refine envs, (n_nodes, n_devices) for single-shot.
    # dataset="synthetic-mini-v1:train": a graph of the split at every reset instead of one graph
    env = gym.make(env_id, cluster=cluster, **({"dataset": dataset} if dataset else {"graph": graph}))
    if env_id == "DevicePlacement-v0":
        # one categorical over (nodes, devices) instead of stock SB3's Python loop of one per node
        model = MaskablePPO(MaskableFactorizedPlacementPolicy, env, n_steps=128, batch_size=64,
                            learning_rate=3e-3, seed=seed, verbose=0)
    else:
        model = MaskablePPO("MultiInputPolicy", env, n_steps=256, batch_size=64, seed=seed, verbose=0)
    sampled = SampledDevices()
    # MaskablePPO calls env.action_masks() at every step
    model.learn(total_timesteps=timesteps, callback=[sampled, TrainingProgress(timesteps)])

    obs, info = env.reset(seed=seed)
    start = float(info["runtime"])  # refine: the random initial placement, simulated at reset (else 0)
    done = False
    while not done:
        masks = env.unwrapped.action_masks()  # bool: the devices whose memory holds the node
        action, _ = model.predict(obs, action_masks=masks, deterministic=True)
        obs, reward, terminated, truncated, info = env.step(action)
        done = terminated or truncated
    runtime, best_single = float(info["runtime"]), float(info["best_single_runtime"])
    devices, evaluations = sorted(sampled.devices), env.unwrapped.evaluations
    refined = f" (refined from {start * 1e3:.2f} ms)" if start else ""
    print(f"{env_id}: policy {runtime * 1e3:.2f} ms{refined}; "
          f"best single device {best_single * 1e3:.2f} ms; sampled actions used devices {devices}; "
          f"{evaluations} placements evaluated")
    print(json.dumps({"env_id": env_id, "graph": env.unwrapped.task.graph.name, "dataset": dataset,
                      "cluster": cluster,
                      "runtime": runtime, "best_single_runtime": best_single, "sampled_devices": devices,
                      "evaluations": evaluations, "torch_threads": torch.get_num_threads()}))
    return runtime


if __name__ == "__main__":
    torch.set_num_threads(1)  # small MLPs: one thread is faster, more so on a shared machine
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--env-id", default="DevicePlacementRefine-v0")
    parser.add_argument("--timesteps", type=int, default=4096, help="env steps to train for")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--dataset", default=None, help="a dataset split (synthetic-mini-v1:train)")
    args = parser.parse_args()
    main(timesteps=args.timesteps, seed=args.seed, env_id=args.env_id, dataset=args.dataset)
