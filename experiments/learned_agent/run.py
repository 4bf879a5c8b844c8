"""Run `move-policy` (or its ablation) through the leaderboard harness, and compare runs with anneal.

Run (one process at a time on a shared machine)::

    nice -n 15 python experiments/learned_agent/run.py run --seeds 0,1,2 --out-dir /tmp/fill/move-policy-10k
    nice -n 15 python experiments/learned_agent/run.py run --variant off --seeds 0,1,2 \\
        --out-dir /tmp/fill/move-policy-off-10k
    python experiments/learned_agent/run.py compare /tmp/fill/anneal-10k /tmp/fill/move-policy-10k

(`move-bandit`'s runs are the leaderboard fill's: ``python -m baselines.leaderboard_fill.learned --agents
move-bandit --budget 10000 --seeds 0,1,2 --no-render --out-dir DIR``; ``compare`` takes any folders of
submission files.) ``run`` writes one submission per seed (``v1-<algorithm>-10k-seed<s>.json``) for
the qualifying tasks (`QUALIFYING`: best known below 0.97 x the best single device) with the
harness's own evaluation counts. ``compare`` prints the per-task table of medians over the seeds, as
a markdown table.
"""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path

from baselines.learning.move_policy import move_policy
from placement_gym.leaderboard.harness import evaluate
from placement_gym.leaderboard.suite import get_suite

QUALIFYING: tuple[str, ...] = (
    "inception_v3/k80x4/train", "rnnlm/k80x4/train", "gnmt4/k80x4/train", "gnmt4/k40x8/train",
    "bert_base/v100x8/train", "bert_large/k80x4/train", "bert_large/h100x8/train",
    "inception_v3/cpu-igpu/inference", "resnet50/cpu-igpu/inference", "bert_base/cpu-igpu/inference",
)
# The variants: the agent at its defaults (the leaderboard entry), and ablations of its learning.
VARIANTS: dict[str, tuple[str, dict]] = {
    "full": ("move-policy", {}),
    "off": ("move-policy-uniform", {"weights": "zero", "learning_rate": 0.0}),
    "pretrained-only": ("move-policy-frozen", {"learning_rate": 0.0}),
    "online-only": ("move-policy-online", {"weights": "zero"}),
}


def run(variant: str, seeds: list[int], budget: int, out_dir: Path, tasks: list[str]) -> None:
    """Harness runs of one variant, one submission per seed."""
    algorithm, config = VARIANTS[variant]

    def agent(task, seed, budget):
        return move_policy(task, seed=seed, budget=budget, **config)

    suite = get_suite("v1").subset(tasks)
    out_dir.mkdir(parents=True, exist_ok=True)
    for seed in seeds:
        out = out_dir / f"v1-{algorithm}-{budget // 1000}k-seed{seed}.json"
        submission = evaluate(
            agent, suite, budget, algorithm=algorithm, seed=seed, out=out,
            description=f"move-policy variant {variant!r} ({config or 'defaults'}); pre-trained on "
                        "synthetic graphs only (experiments/learned_agent/pretrain.py)",
        )
        for task_id, result in submission["results"].items():
            print(f"{algorithm} seed {seed} {task_id}: runtime {result['runtime']:.6g} "
                  f"evaluations {result['evaluations']} wall {result['wall_s']:.1f}s", flush=True)


def _runtimes(folder: Path) -> dict[str, list[float]]:
    runs: dict[str, list[float]] = {}
    for path in sorted(folder.glob("*.json")):
        data = json.loads(path.read_text())
        for task_id, result in data["results"].items():
            runs.setdefault(task_id, []).append(result["runtime"] if result["feasible"] else float("inf"))
    return runs


def compare(baseline: Path, others: list[Path]) -> None:
    """Markdown table: per qualifying task, the median runtime of each folder's seeds (/ best single)."""
    suite = get_suite("v1")
    folders = [baseline, *others]
    tables = [_runtimes(f) for f in folders]
    print("| task | " + " | ".join(f.name for f in folders) + " | wins |")
    print("|---|" + "---:|" * len(folders) + "---|")
    wins = [0] * len(others)
    for task_id in QUALIFYING:
        single = suite.get(task_id).best_single_runtime
        cells, medians = [], []
        for table in tables:
            values = table.get(task_id, [])
            median = statistics.median_low(values) if values else None
            medians.append(median)
            cells.append("-" if median is None else f"{median / single:.4f} ({len(values)})")
        beats = []
        for i, median in enumerate(medians[1:]):
            if median is not None and medians[0] is not None and median < medians[0]:
                wins[i] += 1
                beats.append(folders[i + 1].name)
        print(f"| {task_id} | " + " | ".join(cells) + f" | {', '.join(beats)} |")
    print("wins over", baseline.name, dict(zip([f.name for f in others], wins)))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    r = sub.add_parser("run")
    r.add_argument("--variant", choices=sorted(VARIANTS), default="full")
    r.add_argument("--seeds", default="0,1,2")
    r.add_argument("--budget", type=int, default=10_000)
    r.add_argument("--tasks", default=",".join(QUALIFYING))
    r.add_argument("--out-dir", type=Path, required=True)
    c = sub.add_parser("compare")
    c.add_argument("baseline", type=Path)
    c.add_argument("others", type=Path, nargs="+")
    args = parser.parse_args()
    if args.command == "run":
        run(args.variant, [int(s) for s in args.seeds.split(",")], args.budget, args.out_dir,
            args.tasks.split(","))
    else:
        compare(args.baseline, args.others)


if __name__ == "__main__":
    main()
