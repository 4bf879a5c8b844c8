"""Pre-train the move policy of `baselines.learning.move_policy` on synthetic graphs only.

For each synthetic task (random and layered DAGs of `placement_gym.graph.synthetic`, on the suite's
cluster presets, training step and inference) it runs the move-policy search with every candidate
evaluated (``candidates == batch``), so that each candidate move's features come with its measured
gain, and fits a logistic regression of "the move improves the current placement" on the features.
Its weights are the policy's start, `PRETRAINED_WEIGHTS` (paste the printed tuple there). No suite
graph is used, so the suite's tasks are never evaluated here.

    nice -n 15 python experiments/learned_agent/pretrain.py --budget 3000 --out /tmp/pretrain.json

Prints and writes the weights, the evaluations and the CPU/wall seconds it took, and the hit rate of
the top-ranked quarter of each batch against the batch's mean (how much the ranking concentrates the
improving moves), on the training tasks and on held-out synthetic tasks.
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np

from baselines.learning.move_policy import FEATURES, move_policy
from placement_gym.cluster import PRESETS
from placement_gym.graph.synthetic import layered_graph, random_graph
from placement_gym.task.compiled import Task, make_task

# A move counts as improving when it shortens the runtime by more than this fraction (a rounding-size
# gain, such as moving a tiny op off a device, teaches nothing).
MIN_GAIN = 1e-6
CLUSTERS = ("k80x4", "k40x8", "v100x8", "h100x8", "p100x4", "cpu-igpu")


def synthetic_tasks(seed: int, count: int) -> list[Task]:
    """``count`` synthetic tasks drawn with ``seed``: graph family, size, cluster and objective."""
    rng = np.random.default_rng(seed)
    tasks = []
    for i in range(count):
        n_ops = int(rng.integers(120, 700))
        graph_seed = int(rng.integers(1 << 30))
        if rng.random() < 0.5:
            graph = random_graph(n_ops, seed=graph_seed, window=int(rng.integers(4, 40)), name=f"syn{i}")
        else:
            graph = layered_graph(n_ops, width=int(rng.integers(2, 12)), seed=graph_seed)
        cluster = PRESETS[CLUSTERS[int(rng.integers(len(CLUSTERS)))]]()
        objective = "train_step" if rng.random() < 0.7 else "inference"
        tasks.append(make_task(graph, cluster, objective))
    return tasks


def collect(tasks: list[Task], budget: int, batch: int, seed: int) -> tuple[np.ndarray, np.ndarray, list]:
    """Features and gains of every candidate evaluated by full-batch searches on ``tasks``."""
    xs, gains, groups = [], [], []

    def watch(x: np.ndarray, gain: np.ndarray) -> None:
        xs.append(x)
        gains.append(gain)
        groups.append(len(x))

    for i, task in enumerate(tasks):
        move_policy(task, seed=seed + i, budget=budget, weights="zero", learning_rate=0.0,
                    candidates=batch, batch=batch, on_step=watch, start=["best-single", "heft", "m-etf"])
    return np.concatenate(xs), np.concatenate(gains), groups


def fit_logistic(
    x: np.ndarray, y: np.ndarray, l2: float = 1e-3, steps: int = 3000, lr: float = 0.5
) -> np.ndarray:
    """Weights (no intercept: a constant shift changes no softmax) of an L2-regularised logistic
    regression of ``y`` on ``x``, by full-batch gradient descent; the classes are balanced by weight."""
    y = y.astype(float)
    positive = max(y.mean(), 1e-6)
    sample_weight = np.where(y > 0, 0.5 / positive, 0.5 / max(1 - positive, 1e-6))
    x1 = np.hstack([x, np.ones((len(x), 1))])
    w = np.zeros(x1.shape[1])
    for _ in range(steps):
        p = 1.0 / (1.0 + np.exp(-(x1 @ w)))
        grad = x1.T @ (sample_weight * (p - y)) / len(x) + l2 * np.r_[w[:-1], 0.0]
        w -= lr * grad
    return w[:-1]


def fit_listwise(x: np.ndarray, gains: np.ndarray, groups: list, l2: float = 1e-3, steps: int = 2000,
                 lr: float = 1.0) -> np.ndarray:
    """Weights of the softmax policy ``softmax(x @ w)`` over each batch that best matches the batch's
    distribution of gains (cross-entropy to ``gain / sum of gains``; ListNet): the policy the search
    samples from, fitted to put its mass where the improvement is. Batches without a gain are left out."""
    starts = np.cumsum([0, *groups[:-1]])
    totals = np.add.reduceat(np.maximum(gains, 0.0), starts)
    keep_group = totals > MIN_GAIN
    group_id = np.repeat(np.arange(len(groups)), groups)
    keep = keep_group[group_id]
    x, gains, group_id = x[keep], np.maximum(gains[keep], 0.0), group_id[keep]
    _, group_id = np.unique(group_id, return_inverse=True)
    n_groups = int(group_id.max()) + 1
    target = gains / np.bincount(group_id, weights=gains)[group_id]
    w = np.zeros(x.shape[1])
    for _ in range(steps):
        logits = x @ w
        peak = np.full(n_groups, -np.inf)
        np.maximum.at(peak, group_id, logits)
        e = np.exp(logits - peak[group_id])
        p = e / np.bincount(group_id, weights=e)[group_id]
        grad = x.T @ (p - target) / n_groups + l2 * w
        w -= lr * grad
    return w


def gain_share_top_quarter(x: np.ndarray, gains: np.ndarray, groups: list, w: np.ndarray) -> float:
    """Share of each batch's total gain found in its top quarter ranked by ``x @ w``, averaged over the
    batches with a gain, over the same share for a uniform pick (0.25): 1 means no better than uniform."""
    shares, start = [], 0
    for size in groups:
        xb, gb = x[start: start + size], np.maximum(gains[start: start + size], 0.0)
        start += size
        if gb.sum() <= MIN_GAIN:
            continue
        top = np.argsort(-(xb @ w), kind="stable")[: max(1, size // 4)]
        shares.append(gb[top].sum() / gb.sum())
    return float(np.mean(shares)) / 0.25 if shares else float("nan")


def top_quarter_lift(x: np.ndarray, gains: np.ndarray, groups: list, w: np.ndarray) -> float:
    """Hit rate (share of improving moves) of the top quarter of each batch ranked by ``x @ w``,
    over the overall hit rate: 1 means the ranking is no better than uniform."""
    hits, count, start = 0.0, 0, 0
    for size in groups:
        xb, gb = x[start: start + size], gains[start: start + size]
        top = np.argsort(-(xb @ w), kind="stable")[: max(1, size // 4)]
        hits += float((gb[top] > 0).sum())
        count += len(top)
        start += size
    overall = float((gains > 0).mean())
    return (hits / count) / overall if overall > 0 else float("nan")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=24, help="synthetic training tasks")
    parser.add_argument("--held-out", type=int, default=6, help="synthetic held-out tasks")
    parser.add_argument("--budget", type=int, default=3000, help="evaluations per synthetic task")
    parser.add_argument("--batch", type=int, default=64, help="candidates per step, all evaluated")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--fit", choices=("listwise", "logistic"), default="listwise",
                        help="listwise: softmax matched to the gains (default); logistic: P(improves)")
    parser.add_argument("--out", default=None, help="JSON file for the weights and the figures")
    args = parser.parse_args()
    wall, cpu = time.perf_counter(), time.process_time()
    train = synthetic_tasks(args.seed, args.tasks)
    x, gains, groups = collect(train, args.budget, args.batch, args.seed)
    evaluations = sum(t.evaluations for t in train)
    w = fit_logistic(x, gains > MIN_GAIN) if args.fit == "logistic" else fit_listwise(x, gains, groups)
    held = synthetic_tasks(args.seed + 1000, args.held_out)
    hx, hgains, hgroups = collect(held, args.budget, args.batch, args.seed + 1000)
    report = {
        "weights": dict(zip(FEATURES, np.round(w, 4).tolist())),
        "weights_tuple": tuple(float(v) for v in np.round(w, 4)),
        "training_tasks": args.tasks,
        "budget_per_task": args.budget,
        "samples": int(len(x)),
        "hit_rate": float((gains > 0).mean()),
        "lift_top_quarter_train": top_quarter_lift(x, gains, groups, w),
        "lift_top_quarter_held_out": top_quarter_lift(hx, hgains, hgroups, w),
        "gain_share_top_quarter_train": gain_share_top_quarter(x, gains, groups, w),
        "gain_share_top_quarter_held_out": gain_share_top_quarter(hx, hgains, hgroups, w),
        "fit": args.fit,
        "evaluations": int(evaluations + sum(t.evaluations for t in held)),
        "wall_s": round(time.perf_counter() - wall, 1),
        "cpu_s": round(time.process_time() - cpu, 1),
    }
    print(json.dumps(report, indent=1))
    if args.out:
        with open(args.out, "w") as handle:
            json.dump(report, handle, indent=1)


if __name__ == "__main__":
    main()
