"""`placement-gym train`: train a learned agent of the `baselines` package on an evaluation budget."""

from __future__ import annotations

import argparse
from pathlib import Path

from placement_gym.cli.common import _budget, add_task_arguments, task_from_args
from placement_gym.cli.output import print_json, print_table

REWARD_MODES = ("cost_model",)  # "profiled" and "real" arrive with the real-hardware mode


def run_train(args: argparse.Namespace) -> int:
    if args.reward_mode not in REWARD_MODES:
        raise ValueError(
            f"--reward-mode {args.reward_mode!r} is not available yet; allowed: {', '.join(REWARD_MODES)}"
        )
    try:
        from baselines.learning import get_learned, train
    except ImportError as error:
        raise ImportError(
            f"training needs the baselines extra: pip install 'placement-gym[baselines]' ({error})"
        ) from None
    get_learned(args.agent)  # a clear error for an unknown agent before any work
    task = task_from_args(args)
    out = (
        Path(args.out)
        if args.out
        else Path("runs") / f"{args.agent}-{task.id.replace('/', '-')}-s{args.seed}"
    )
    result = train(
        args.agent,
        task,
        args.budget,
        seed=args.seed,
        out_dir=out,
        resume=args.resume,
        progress=not args.json and not args.quiet,
        threads=args.threads,
    )
    summary = result.to_dict(task)
    if args.json:
        print_json(summary)
        return 0
    print_table(
        ["", ""],
        [
            ["task", task.id],
            ["agent", args.agent],
            ["seed", args.seed],
            [
                "best runtime",
                f"{result.best_runtime * 1e3:,.2f} ms" + ("" if result.best_feasible else " (OUT OF MEMORY)"),
            ],
            ["evaluations", f"{result.evaluations:,} in {result.iterations:,} iterations"],
            ["wall time", f"{result.wall_s:.1f} s ({result.evaluations_per_s:,.0f} evaluations/s)"],
            *[[name, path] for name, path in result.files.items()],
        ],
        header=False,
        title=f"{args.agent} trained on {task.id}",
    )
    return 0


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "train",
        help="train a learned agent on an evaluation budget",
        description="Train a learned placement agent (pg, spotlight, hierarchical, hsdag, placeto, sb3-ppo, "
        "random-search, ...) until --budget cost-model evaluations are spent. Writes a checkpoint, "
        "the learning curve (CSV, PNG) and the best placement (JSON) to --out.",
    )
    parser.add_argument("--agent", required=True, help="learned agent name")
    add_task_arguments(parser)
    parser.add_argument(
        "--budget",
        type=_budget,
        default=1000,
        metavar="N",
        help="cost-model evaluations to spend (default: 1000)",
    )
    parser.add_argument("--seed", type=int, default=0, help="seed (runs are deterministic on the CPU)")
    parser.add_argument("--reward-mode", default="cost_model", help=f"{', '.join(REWARD_MODES)}")
    parser.add_argument(
        "--out",
        default=None,
        help="output folder (default: runs/<agent>-<graph>-<cluster>-<objective>-s<seed>)",
    )
    parser.add_argument(
        "--resume",
        action="store_true",
        help="continue from the checkpoint in --out (a larger --budget continues the run)",
    )
    parser.add_argument("--threads", type=int, default=1, help="torch intra-op threads (default: 1)")
    parser.add_argument("--quiet", action="store_true", help="no progress bar")
    parser.add_argument("--json", action="store_true", help="print a JSON object at the end")
    parser.set_defaults(run=run_train)
