"""PPO training speed: SB3's stock ``MultiInputPolicy`` vs `FactorizedPlacementPolicy`.

Measures env steps per second of ``model.learn(total_timesteps=N)`` (rollouts and PPO updates, not
the model's construction) on ``DevicePlacement-v0`` for graphs of growing size, side by side.
Stock SB3 builds one torch ``Categorical`` per op; the factorised policy one over (ops, devices).

    PYTHONPATH=. python examples/bench_policies.py                  # the table
    PYTHONPATH=. python examples/bench_policies.py --json           # the same as JSON
    PYTHONPATH=. python examples/bench_policies.py --graphs cifar10_cnn --stock-steps 64

Needs torch and stable-baselines3 (the ``baselines`` extra). The stock policy on gnmt4 takes
about a minute of the run's two to three.
"""

from __future__ import annotations

import argparse
import json
import time

import torch as th
from stable_baselines3 import PPO

from baselines.policies import FactorizedPlacementPolicy
from placement_gym.common.progress import Progress
from placement_gym.envs.single_shot import DevicePlacementEnv

GRAPHS = ("cifar10_cnn", "bert_large", "gnmt4")


def measure(graph: str, cluster: str, policy, steps: int, n_steps: int, seed: int) -> dict:
    """Steps per second of ``PPO(policy, env).learn(steps)`` on ``DevicePlacement-v0``."""
    env = DevicePlacementEnv(graph=graph, cluster=cluster)
    model = PPO(policy, env, n_steps=n_steps, batch_size=n_steps, seed=seed, verbose=0)
    start = time.perf_counter()
    model.learn(total_timesteps=steps)
    seconds = time.perf_counter() - start
    name = policy if isinstance(policy, str) else policy.__name__
    return {
        "graph": graph, "cluster": cluster, "ops": env.task.n_forward, "policy": name,
        "parameters": sum(p.numel() for p in model.policy.parameters()),
        "steps": model.num_timesteps, "seconds": seconds, "steps_per_s": model.num_timesteps / seconds,
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--graphs", nargs="+", default=list(GRAPHS), help="bundled graph names")
    parser.add_argument("--cluster", default="k80x4")
    parser.add_argument("--stock-steps", type=int, default=256, help="learn() steps of MultiInputPolicy")
    parser.add_argument("--factorized-steps", type=int, default=2048,
                        help="learn() steps of FactorizedPlacementPolicy")
    parser.add_argument("--n-steps", type=int, default=64, help="PPO rollout length (also the batch size)")
    parser.add_argument("--threads", type=int, default=1, help="torch intra-op threads")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
    args = parser.parse_args(argv)
    th.set_num_threads(args.threads)

    rows = []
    progress = Progress()  # a line on stderr at least every 3 s; stdout keeps the results
    for i, graph in enumerate(args.graphs):
        progress("measuring", 2 * i, 2 * len(args.graphs), f"{graph}, MultiInputPolicy")
        stock = measure(graph, args.cluster, "MultiInputPolicy", args.stock_steps, args.n_steps, args.seed)
        progress("measuring", 2 * i + 1, 2 * len(args.graphs), f"{graph}, FactorizedPlacementPolicy")
        fact = measure(graph, args.cluster, FactorizedPlacementPolicy, args.factorized_steps, args.n_steps,
                       args.seed)
        fact["speedup"] = fact["steps_per_s"] / stock["steps_per_s"]
        rows += [stock, fact]
    progress.close()
    if args.json:
        print(json.dumps({"settings": vars(args), "results": rows}, indent=2))
        return
    print(f"PPO on DevicePlacement-v0, {args.cluster}, n_steps={args.n_steps}, torch threads={args.threads}")
    print(f"{'graph':<14}{'ops':>6}  {'policy':<28}{'parameters':>12}{'steps':>7}{'s':>8}{'steps/s':>10}"
          f"{'speedup':>9}")
    for row in rows:
        speedup = f"{row['speedup']:.0f}x" if "speedup" in row else ""
        print(f"{row['graph']:<14}{row['ops']:>6}  {row['policy']:<28}{row['parameters']:>12,}"
              f"{row['steps']:>7}{row['seconds']:>8.1f}{row['steps_per_s']:>10.1f}{speedup:>9}")


if __name__ == "__main__":
    main()
