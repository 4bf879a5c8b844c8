"""Anneal at 10,000 evaluations with more of its moves on whole chains and co-location groups.

`baselines.search.anneal` moves a whole group (a chain, or ops that must share a device) with
probability ``group_move_prob`` (default 0.3) and single ops otherwise. This runs it at 0.3, 0.6 and
0.9 on the qualifying tasks where anneal and the best known differ most, seeds 0-2, and prints the
median and each seed's runtime (seconds). Run from the repository root, one task per process::

    python experiments/group_moves/run.py rnnlm/k80x4/train [--budget 10000] [--probs 0.3,0.6,0.9]
"""

from __future__ import annotations

import argparse
import statistics
import time

from baselines.search import anneal
from placement_gym.leaderboard.suite import get_suite


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("task", help="a task id of suite v1, e.g. rnnlm/k80x4/train")
    parser.add_argument("--budget", type=int, default=10_000)
    parser.add_argument("--probs", default="0.3,0.6,0.9", help="values of group_move_prob, comma-separated")
    parser.add_argument("--seeds", default="0,1,2")
    args = parser.parse_args()
    task = get_suite("v1").get(args.task).task()
    seeds = [int(s) for s in args.seeds.split(",")]
    for prob in (float(p) for p in args.probs.split(",")):
        start = time.time()
        runtimes = [anneal(task, seed=s, budget=args.budget, group_move_prob=prob).info["runtime"]
                    for s in seeds]
        each = ", ".join(f"{r:.4f}" for r in runtimes)
        print(f"{args.task} group_move_prob={prob}: median {statistics.median(runtimes):.4f} s, "
              f"seeds {each}, wall {time.time() - start:.0f} s", flush=True)


if __name__ == "__main__":
    main()
