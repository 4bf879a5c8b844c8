"""Env steps per second of the natively vectorised `DevicePlacement-v0` against Gymnasium's
`SyncVectorEnv` of the plain env, side by side in one run.

Both get the same seeded random actions; each row times ``--steps`` vector steps per repeat and keeps
the best of ``--repeats`` (the two envs take turns, so a busy machine slows both alike). In the default
``NEXT_STEP`` autoreset mode every other step resets the envs instead of placing, as an RL library
sees it; ``placements/s`` counts the placements scored. Run from the repository root::

    python experiments/vector_env/run.py [--cases bert_base:64:dict,...] [--steps 20] [--repeats 5]

A case is ``graph:num_envs:obs_mode`` (obs_mode dict, flat or graph), on k80x4, training step.
"""

from __future__ import annotations

import argparse
import time

import gymnasium as gym
import numpy as np

import placement_gym  # noqa: F401  (registers the ids)

DEFAULT_CASES = (
    "cifar10_cnn:256:dict,bert_base:64:dict,bert_base:64:flat,bert_base:64:graph,inception_v3:16:dict"
)


def _steps_per_second(env, actions: list[np.ndarray], steps: int) -> float:
    start = time.perf_counter()
    for k in range(steps):
        env.step(actions[k % len(actions)])
    return steps / (time.perf_counter() - start)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", default=DEFAULT_CASES, help="graph:num_envs:obs_mode, comma-separated")
    parser.add_argument("--steps", type=int, default=20, help="vector steps per timing (default: 20)")
    parser.add_argument("--repeats", type=int, default=5, help="timings per env, best kept (default: 5)")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    print("| graph | envs | obs_mode | native steps/s | sync steps/s | native / sync | native placements/s |")
    print("|---|---:|---|---:|---:|---:|---:|")
    for case in args.cases.split(","):
        graph, num_envs, obs_mode = case.split(":")
        kwargs = dict(graph=graph, cluster="k80x4", obs_mode=obs_mode)
        envs = {
            "native": gym.make_vec("DevicePlacement-v0", num_envs=int(num_envs),
                                   vectorization_mode="vector_entry_point", **kwargs),
            "sync": gym.make_vec("DevicePlacement-v0", num_envs=int(num_envs), vectorization_mode="sync",
                                 **kwargs),
        }
        space = envs["native"].action_space
        space.seed(args.seed)
        actions = [space.sample() for _ in range(4)]
        best = dict.fromkeys(envs, 0.0)
        for env in envs.values():
            env.reset(seed=args.seed)
            _steps_per_second(env, actions, 4)  # compiles and warms the caches
        for _ in range(args.repeats):
            for name, env in envs.items():
                best[name] = max(best[name], _steps_per_second(env, actions, args.steps))
        native, sync = best["native"], best["sync"]
        print(f"| {graph} | {num_envs} | {obs_mode} | {native:.1f} | {sync:.1f} | {native / sync:.2f} | "
              f"{native * int(num_envs) / 2:,.0f} |", flush=True)
        for env in envs.values():
            env.close()


if __name__ == "__main__":
    main()
