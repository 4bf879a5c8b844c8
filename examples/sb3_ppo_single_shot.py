"""PPO (stable-baselines3) with `FactorizedPlacementPolicy` on `DevicePlacement-v0`.

Each episode is one step: the policy places every op at once and is rewarded with
log(best single-device runtime / runtime). The script trains for ``--steps`` placements, keeps the
fastest feasible placement it saw, and compares it (and the trained policy's most likely placement)
with the best single device.

    PYTHONPATH=. python examples/sb3_ppo_single_shot.py                    # inception_v3 on k80x4
    PYTHONPATH=. python examples/sb3_ppo_single_shot.py --graph bert_large --steps 8192
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import torch as th
from stable_baselines3 import PPO
from stable_baselines3.common.callbacks import BaseCallback

from baselines.policies import FactorizedPlacementPolicy
from baselines.sb3_progress import TrainingProgress
from placement_gym.envs.single_shot import DevicePlacementEnv


class BestPlacement(BaseCallback):
    """Remembers the fastest feasible placement among those PPO tried."""

    def __init__(self) -> None:
        super().__init__()
        self.runtime, self.placement = float("inf"), None

    def _on_step(self) -> bool:
        for info, action in zip(self.locals["infos"], self.locals["actions"]):
            if info["feasible"] and info["runtime"] < self.runtime:
                self.runtime, self.placement = info["runtime"], np.array(action)
        return True


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--graph", default="inception_v3")
    parser.add_argument("--cluster", default="k80x4")
    parser.add_argument("--steps", type=int, default=8192, help="placements tried (one per episode)")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    th.set_num_threads(1)  # small networks: more threads only add overhead on a few cores

    env = DevicePlacementEnv(graph=args.graph, cluster=args.cluster)
    # One-step episodes: gamma and GAE do not matter. The observation never changes, so a minibatch
    # costs one graph encoding (see PlacementGraphNet) and 10 epochs per rollout are cheap; a larger
    # learning rate than PPO's default 3e-4 gets further in a short run.
    model = PPO(FactorizedPlacementPolicy, env, n_steps=128, batch_size=64, n_epochs=10, learning_rate=3e-3,
                seed=args.seed)
    best = BestPlacement()
    start = time.perf_counter()
    model.learn(total_timesteps=args.steps, callback=[best, TrainingProgress(args.steps)])
    seconds = time.perf_counter() - start

    obs, _ = env.reset()
    _, _, _, _, info = env.step(model.predict(obs, deterministic=True)[0])
    single = env.best_single_runtime
    print(f"{env.task.id}: {env.task.n_forward} ops, {args.steps} placements in {seconds:.1f} s")
    device = env.task.cluster.device_names[env.best_single_device]
    print(f"best single device ({device}): {single * 1e3:.2f} ms")
    if best.placement is not None:
        print(f"best placement found:  {best.runtime * 1e3:.2f} ms "
              f"({single / best.runtime:.2f}x the single device's speed)")
    status = "feasible" if info["feasible"] else "OUT OF MEMORY"
    print(f"policy's most likely:  {info['runtime'] * 1e3:.2f} ms ({status}, "
          f"{single / info['runtime']:.2f}x)")
    print(f"lower bound:           {env.lower_bound * 1e3:.2f} ms")


if __name__ == "__main__":
    main()
