"""sb3-contrib's MaskablePPO on `DevicePlacementRefine-v0` (Placeto's MDP).

An episode starts from a random placement and visits every node once in topological order; each
step moves the current node to a device (or keeps it) and is rewarded with the runtime it saved,
normalised by the best single-device runtime. ``env.action_masks()`` forbids devices whose memory
the move would overflow; MaskablePPO calls it by itself. The observation is the graph ``Dict``
(``MultiInputPolicy``), with the current placement and the node being revisited.

After training, the script refines a few fresh random placements with the learnt policy and with
random moves, and prints the runtimes before and after.

    PYTHONPATH=. python examples/maskable_ppo_refine.py
    PYTHONPATH=. python examples/maskable_ppo_refine.py --graph resnet50 --steps 20000
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import torch as th
from sb3_contrib import MaskablePPO

from baselines.sb3_progress import TrainingProgress
from placement_gym.envs.refine import DevicePlacementRefineEnv


def refine(env: DevicePlacementRefineEnv, choose, seed: int) -> tuple[float, float]:
    """(initial runtime, final runtime) of one episode whose moves come from ``choose(obs, masks)``."""
    obs, info = env.reset(seed=seed)
    initial = info["runtime"]
    terminated = False
    while not terminated:
        obs, _, terminated, _, info = env.step(choose(obs, env.action_masks()))
    return initial, info["runtime"]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--graph", default="cifar10_cnn")
    parser.add_argument("--cluster", default="k80x4")
    parser.add_argument("--steps", type=int, default=8192, help="training steps (node moves)")
    parser.add_argument("--episodes", type=int, default=10, help="evaluation episodes")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    th.set_num_threads(1)

    env = DevicePlacementRefineEnv(graph=args.graph, cluster=args.cluster)  # initial="random"
    model = MaskablePPO("MultiInputPolicy", env, n_steps=512, batch_size=128, learning_rate=1e-3,
                        gamma=1.0, seed=args.seed)  # gamma=1: the episode's rewards sum to its whole gain
    start = time.perf_counter()
    model.learn(total_timesteps=args.steps, callback=TrainingProgress(args.steps))
    seconds = time.perf_counter() - start

    rng = np.random.default_rng(args.seed)
    seeds = range(1000, 1000 + args.episodes)  # not the training episodes' seeds

    def learnt(obs, masks):
        return int(model.predict(obs, action_masks=masks, deterministic=True)[0])

    def random_move(_obs, masks):
        return int(rng.choice(np.flatnonzero(masks)))

    print(f"{env.task.id}: {env.n_nodes} nodes, trained {args.steps} steps in {seconds:.1f} s; "
          f"best single device {env.best_single_runtime * 1e3:.2f} ms")
    for name, choose in (("MaskablePPO", learnt), ("random moves", random_move)):
        runs = np.array([refine(env, choose, seed) for seed in seeds]) * 1e3
        print(f"{name:<13} mean runtime {runs[:, 0].mean():8.2f} ms (random start) -> "
              f"{runs[:, 1].mean():8.2f} ms")


if __name__ == "__main__":
    main()
