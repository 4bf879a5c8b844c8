"""Seeded placements of every agent, to compare two versions of the code: a refactor must leave them
bit for bit as they were.

    python experiments/same_placements/run.py OUT.json       # in one checkout, then in the other
    python experiments/same_placements/run.py --compare A.json B.json

For every registered agent (``evaluate``: seed 0, budget 64; learned and SB3 agents only on the small
task) on cifar10_cnn/k80x2 and inception_v3/k80x4, and for every trainable agent (``train``: seed 0,
budget 40, on cifar10_cnn/k80x2): a digest of the placement, its runtime, the evaluations counted and,
for ``train``, the learning curve (evaluation number and runtime of every evaluation).
"""

from __future__ import annotations

import hashlib
import json
import sys
import warnings

import numpy as np

GRAPHS = (("cifar10_cnn", "k80x2"), ("inception_v3", "k80x4"))
# Trained per evaluation: only on the small task, where they take seconds.
SMALL_ONLY = ("sb3-ppo", "sb3-maskable-ppo", "placeto", "hierarchical", "hsdag", "spotlight", "pg")
EVALUATE_BUDGET, TRAIN_BUDGET = 64, 40


def digest(placement) -> str:
    return hashlib.sha256(np.asarray(placement, dtype=np.int64).tobytes()).hexdigest()[:16]


def measure() -> dict:
    from baselines.learning.trainer import train, trainable_agents
    from baselines.registry import get_agent, registered_names
    from placement_gym.cost_model import simulate
    try:
        from placement_gym.task.named import get_task
    except ImportError:  # the code before the layout by stage (issue 25)
        from placement_gym.named_tasks import get_task

    found = {}
    for graph, cluster in GRAPHS:
        for name in registered_names():
            task = get_task(graph, cluster)
            if name.startswith("single:") or (name == "exact" and task.n_forward > 40):
                continue
            if graph != GRAPHS[0][0] and name in SMALL_ONLY:
                continue
            key = f"evaluate {name} {graph}/{cluster}"
            try:
                result = get_agent(name)(task, seed=0, budget=EVALUATE_BUDGET)
            except Exception as error:  # an agent's refusal is an outcome to compare too
                found[key] = f"{type(error).__name__}: {error}"
                continue
            found[key] = [digest(result.placement), simulate(task, result.placement).runtime,
                          int(result.evaluations)]
            print(key, found[key], file=sys.stderr, flush=True)
    for name in trainable_agents():
        result = train(name, get_task(*GRAPHS[0]), TRAIN_BUDGET, seed=0, progress=False)
        found[f"train {name}"] = [digest(result.best_placement), result.best_runtime, result.evaluations,
                                  [[int(row[0]), float(row[1])] for row in result.curve]]
        print(f"train {name}", found[f"train {name}"][:3], file=sys.stderr, flush=True)
    return found


def compare(before: dict, after: dict) -> int:
    differ = sorted(key for key in before.keys() | after.keys() if before.get(key) != after.get(key))
    for key in differ:
        print(f"differs: {key}: {str(before.get(key))[:80]} -> {str(after.get(key))[:80]}")
    print(f"{len(before.keys() | after.keys())} outcomes compared, {len(differ)} differ")
    return 1 if differ else 0


def main(argv: list[str]) -> int:
    if argv[:1] == ["--compare"] and len(argv) == 3:
        with open(argv[1]) as first, open(argv[2]) as second:
            return compare(json.load(first), json.load(second))
    if len(argv) != 1:
        print(__doc__, file=sys.stderr)
        return 2
    warnings.filterwarnings("ignore")
    with open(argv[0], "w") as handle:
        json.dump(measure(), handle, indent=1, sort_keys=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
