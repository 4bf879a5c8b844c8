"""RLlib's stock PPO on the flat observation (``obs_mode="flat"``), no glue.

RLlib pins its own gymnasium (1.2.x for ray 2.60), so install it in a venv of its own beside the
project (docs/tutorials/rllib.md)::

    python -m venv .venv-rllib && . .venv-rllib/bin/activate
    pip install torch 'ray[rllib]' && pip install -e .
    python examples/rllib_ppo_flat.py --iterations 4

RLlib's default encoder takes a 1-D `Box` and nothing else (a `Dict` observation needs its
``FlattenObservations`` connector), hence ``obs_mode="flat"``. It builds the env itself from the
registered id (``"placement_gym:..."`` imports the package, which registers the ids) and the
``env_config`` dict, which it passes to ``gym.make`` as keyword arguments.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

ENV_IDS = ("DevicePlacementStaged-v0", "DevicePlacementRefine-v0", "DevicePlacement-v0")


def make_config(env_id: str, seed: int = 0, batch: int = 256):
    """A stock `PPOConfig` for ``placement_gym:<env_id>`` on cifar10_cnn over two K80s, sized for a
    laptop: sampling and learning in this process (no remote env runners or learners)."""
    from ray.rllib.algorithms.ppo import PPOConfig

    return (
        PPOConfig()
        .environment(
            f"placement_gym:{env_id}",
            env_config={"graph": "cifar10_cnn", "cluster": "k80x2", "obs_mode": "flat"},
        )
        .env_runners(num_env_runners=0, num_envs_per_env_runner=1)
        .learners(num_learners=0)
        # gamma 1: the staged env rewards only the last stage; the episode return is the objective.
        .training(gamma=1.0, lr=3e-4, train_batch_size_per_learner=batch, minibatch_size=64, num_epochs=2)
        .debugging(seed=seed)
    )


def main(
    env_id: str = "DevicePlacementStaged-v0", iterations: int = 2, seed: int = 0, batch: int = 256
) -> float:
    """Train ``iterations`` PPO iterations; print and return the last mean episode return."""
    import ray

    ray.init(num_cpus=1, include_dashboard=False, log_to_driver=False, ignore_reinit_error=True)
    algo = make_config(env_id, seed, batch).build_algo()
    try:
        mean_return = float("nan")
        for i in range(iterations):
            start = time.perf_counter()
            result = algo.train()
            runners = result["env_runners"]
            mean_return = float(runners.get("episode_return_mean", np.nan))
            steps = int(runners.get("num_env_steps_sampled", 0))
            print(f"{env_id} iteration {i + 1}: {steps} env steps in {time.perf_counter() - start:.1f} s, "
                  f"mean episode return {mean_return:.3f}")
        return mean_return
    finally:
        algo.stop()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--env", default="DevicePlacementStaged-v0", choices=ENV_IDS)
    parser.add_argument("--iterations", type=int, default=2)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--batch", type=int, default=256, help="env steps per iteration")
    args = parser.parse_args()
    main(args.env, args.iterations, args.seed, args.batch)
