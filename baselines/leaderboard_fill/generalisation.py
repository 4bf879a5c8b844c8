"""Fill the generalisation track: the GNN placers trained on the split's training tasks, placing the
held-out tasks zero-shot and after a short fine-tuning.

Run from the repository root (about 12 minutes of CPU at the defaults, on one core)::

    python -m baselines.leaderboard_fill.generalisation [--agents hsdag,placeto] [--seeds 0,1,2]
        [--train-budget 5000] [--zero-shot 16] [--finetune 1000] [--dir leaderboard] [--suite VERSION]
        [--no-render]

For each agent (`hsdag`, `placeto`; both have `set_task` and `propose`, see
`baselines.learning.generalize`) and the generalisation split of the suite (``--suite``, default: the
suite whose file names this script in its ``fill``; `placement_gym.leaderboard.generalisation`):

1. Their policies have an output per device, so a model moves only between clusters with the same
   number of devices. One model is trained per device count, on the training tasks with that count
   (`train_on_tasks`: ``--train-budget`` evaluations per task, round-robin, 1,000 at a time); the
   split gives every held-out task a training task with its device count.
2. Every held-out task is placed by a copy of its device count's model (`place_held_out`):
   ``--zero-shot`` placements of the policy (the first greedy, the others sampled), the best kept:
   the ``<agent>-zero-shot`` entry. The same copy then trains on the task for ``--finetune`` more
   evaluations: the ``<agent>-finetuned`` entry (best over zero-shot and fine-tuning evaluations).

Each entry is a generalisation-track submission written through the leaderboard harness to
``leaderboard/submissions/<suite>-<agent>-<zero-shot|finetuned>-seed<seed>.json``, with ``trained_on``
= every training task and per task the held-out evaluations and wall time (training time is in the
description). Everything is seeded (one run per seed of ``--seeds``; the leaderboard shows the median
seed per task), with one torch thread.
"""

from __future__ import annotations

import argparse
import copy
import time
from pathlib import Path

FILL = Path(__file__).stem  # how a suite file's "fill" names this script
LEADERBOARD = Path("leaderboard")  # the default --dir, relative to the repository root the fill runs from
AGENTS = ("hsdag", "placeto")
SEEDS = (0, 1, 2)
TRAIN_BUDGET = 5000  # evaluations per training task
ZERO_SHOT = 16  # zero-shot placements evaluated per held-out task
FINETUNE = 1000  # fine-tuning evaluations per held-out task
SWITCH_EVERY = 1000  # evaluations on one training task before moving to the next


def train_models(agent: str, training: list, seed: int, budget: int) -> tuple[dict, float]:
    """One model per device count, trained on the training tasks with that count; and the seconds."""
    from baselines.learning.generalize import train_on_tasks

    by_devices: dict[int, list] = {}
    for task in training:
        by_devices.setdefault(task.n_devices, []).append(task)
    models = {}
    started = time.perf_counter()
    for n_devices, tasks in sorted(by_devices.items()):
        begin = time.perf_counter()
        model, evaluators = train_on_tasks(agent, tasks, budget, seed=seed, switch_every=SWITCH_EVERY)
        models[n_devices] = model
        speedups = ", ".join(f"{e.task.id} {e.best_single_runtime / e.best_runtime:.3f}x" for e in evaluators)
        print(f"  {agent} on {n_devices} devices: trained {time.perf_counter() - begin:.0f} s ({speedups})",
              flush=True)
    return models, time.perf_counter() - started


def held_out_agent(models: dict, seed: int, zero_shot: int, finetune: int):
    """A harness agent placing a held-out task with a copy of the trained model of its device count
    (so every task starts from the same trained weights): zero-shot only when ``finetune`` is 0."""
    import torch

    from baselines.learning.generalize import place_held_out
    from placement_gym.evaluation.agents import AgentResult

    def agent(task, _seed, _budget):
        trained = models[task.n_devices]
        # The task and its graph inputs are shared, not copied: the model only reads them.
        shared = {id(trained.task): trained.task, id(trained.graph): trained.graph}
        model = copy.deepcopy(trained, memo=shared)
        torch.manual_seed(seed)
        evaluator, _, zero_shot_placement = place_held_out(model, task, zero_shot, finetune)
        if finetune:
            return AgentResult(evaluator.best_placement, evaluator.used)
        return AgentResult(zero_shot_placement, zero_shot)

    return agent


def fill_one(agent: str, seed: int, args: argparse.Namespace) -> None:
    """Train ``agent`` with ``seed`` and write its zero-shot and fine-tuned submissions."""
    from placement_gym.leaderboard import evaluate, get_suite, save_submission, submission_filename
    from placement_gym.leaderboard.generalisation import get_split
    from placement_gym.leaderboard.registry import suite_registry

    suite = get_suite(args.suite or suite_registry().default_fill_suite(FILL))
    split = get_split(suite)
    training_ids = list(split.training_tasks())
    training = [suite.get(t).task() for t in training_ids]
    print(f"{agent} seed {seed}: training on {len(training)} tasks, {args.train_budget} evaluations each",
          flush=True)
    models, train_s = train_models(agent, training, seed, args.train_budget)
    groups = "; ".join(f"{n} devices: {', '.join(t.id for t in training if t.n_devices == n)}"
                       for n in sorted(models))
    trained = (
        f"{agent} (default config) trained on the {suite.version} generalisation split's training "
        f"tasks, {args.train_budget} cost-model evaluations each (round-robin, {SWITCH_EVERY} at a time), "
        f"one model per device count since its policy has one output per device ({groups}); training "
        f"took {train_s:.0f} s on one torch thread (not in the per-task wall times). Each held-out task "
        "is placed by a copy of the model of its device count"
    )
    entries = (
        ("zero-shot", 0, f"{trained}, zero-shot: {args.zero_shot} placements of the policy (the first "
                         "greedy, the others sampled), the best kept."),
        ("finetuned", args.finetune,
         f"{trained}, zero-shot ({args.zero_shot} placements) then fine-tuned on the task for "
         f"{args.finetune} more evaluations; the best of all {args.zero_shot + args.finetune} kept."),
    )
    for kind, finetune, description in entries:
        start = time.perf_counter()
        submission = evaluate(
            # The generalisation track runs the split's held-out tasks only.
            held_out_agent(models, seed, args.zero_shot, finetune), suite, budget=args.zero_shot + finetune,
            algorithm=f"{agent}-{kind}", authors=["placement-gym baselines"], description=description,
            seed=seed, trained_on=training_ids, track="generalisation",
        )
        path = save_submission(submission, args.dir / "submissions" / submission_filename(submission))
        speedups = ", ".join(f"{t} {suite.get(t).best_single_runtime / r['runtime']:.3f}x"
                             for t, r in submission["results"].items())
        print(f"  {path.name} ({time.perf_counter() - start:.0f} s): {speedups}", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--agents", default=",".join(AGENTS), help="comma-separated agent names")
    parser.add_argument("--seeds", default=",".join(map(str, SEEDS)), help="comma-separated seeds")
    parser.add_argument("--train-budget", type=int, default=TRAIN_BUDGET,
                        help="evaluations per training task")
    parser.add_argument("--zero-shot", type=int, default=ZERO_SHOT, help="zero-shot placements per task")
    parser.add_argument("--finetune", type=int, default=FINETUNE, help="fine-tuning evaluations per task")
    parser.add_argument("--dir", type=Path, default=LEADERBOARD,
                        help="leaderboard folder (submissions/ and README.md); default: %(default)s")
    parser.add_argument("--suite", default=None,
                        help="the suite whose split to fill, one whose suite file names this script in its "
                        "fill (default: the current one among them, else the latest)")
    parser.add_argument("--no-render", action="store_true")
    args = parser.parse_args()
    for name in ("train_budget", "zero_shot", "finetune"):
        if getattr(args, name) < 1:
            parser.error(f"--{name.replace('_', '-')} must be at least 1, got {getattr(args, name)}")

    from placement_gym.common.threads import set_torch_threads
    from placement_gym.leaderboard import get_suite, render
    from placement_gym.leaderboard.registry import suite_registry

    set_torch_threads(1)
    seeds = [int(v) for v in args.seeds.split(",") if v.strip()]
    if not seeds:
        parser.error("--seeds names no seed")
    for seed in seeds:
        for agent in [a.strip() for a in args.agents.split(",") if a.strip()]:
            fill_one(agent, seed, args)
    if not args.no_render:
        render(args.dir, suite=get_suite(args.suite or suite_registry().default_fill_suite(FILL)).version)


if __name__ == "__main__":
    main()
