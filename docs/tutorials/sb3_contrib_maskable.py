"""sb3-contrib MaskablePPO on the refine env: the env's action_masks() keeps devices that fit; then the
trained policy refines one random placement.

``python docs/tutorials/sb3_contrib_maskable.py [--timesteps N] [--seed S]``; the last line it prints
is JSON: the refined placement's runtime, the best single device's, the devices the sampled moves chose
and the placements evaluated (``env.unwrapped.evaluations``)."""

import argparse
import json

import gymnasium as gym
import numpy as np
import torch
from sb3_contrib import MaskablePPO
from stable_baselines3.common.callbacks import BaseCallback

import placement_gym  # noqa: F401 - registers the environments


class SampledDevices(BaseCallback):
    """The devices of every action MaskablePPO sampled in its rollouts."""

    def __init__(self):
        super().__init__()
        self.devices: set[int] = set()

    def _on_step(self) -> bool:
        self.devices.update(np.unique(self.locals["actions"]).tolist())
        return True


def main(timesteps: int = 4096, seed: int = 0, graph: str = "cifar10_cnn", cluster: str = "k80x4") -> float:
    # Placeto's MDP: start from a random placement, move one node per step, reward = improvement.
    env = gym.make("DevicePlacementRefine-v0", graph=graph, cluster=cluster)
    model = MaskablePPO("MultiInputPolicy", env, n_steps=256, batch_size=64, seed=seed, verbose=0)
    sampled = SampledDevices()
    model.learn(total_timesteps=timesteps, callback=sampled)  # calls env.action_masks() at every step

    obs, info = env.reset(seed=seed)
    start = float(info["runtime"])  # the random initial placement, simulated at reset
    done = False
    while not done:
        masks = env.unwrapped.action_masks()  # bool (n_devices,): devices whose memory holds the node
        action, _ = model.predict(obs, action_masks=masks, deterministic=True)
        obs, reward, terminated, truncated, info = env.step(action)
        done = terminated or truncated
    runtime, best_single = float(info["runtime"]), float(info["best_single_runtime"])
    devices, evaluations = sorted(sampled.devices), env.unwrapped.evaluations
    print(f"refined {start * 1e3:.2f} ms -> {runtime * 1e3:.2f} ms; "
          f"best single device {best_single * 1e3:.2f} ms; sampled moves used devices {devices}; "
          f"{evaluations} placements evaluated")
    print(json.dumps({"env_id": "DevicePlacementRefine-v0", "graph": graph, "cluster": cluster,
                      "runtime": runtime, "best_single_runtime": best_single, "sampled_devices": devices,
                      "evaluations": evaluations, "torch_threads": torch.get_num_threads()}))
    return runtime


if __name__ == "__main__":
    torch.set_num_threads(1)  # small MLPs: one thread is faster, more so on a shared machine
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--timesteps", type=int, default=4096, help="env steps to train for")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    main(timesteps=args.timesteps, seed=args.seed)
