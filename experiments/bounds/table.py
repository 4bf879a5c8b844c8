"""The proven lower bounds of every task of the current leaderboard suite, as a markdown table.

Per task: the frozen `lower_bound` (critical path or work / devices), every argument of
`placement_gym.cost_model.proven_bound`, the new bound and the argument that gives it, CP-SAT's bound
on the ungrouped model where the task is small enough (`baselines.exact.cpsat_bound`, ``--cpsat``),
the best known runtime (the best feasible runtime stored in ``leaderboard/submissions``) and the gap
that remains (best known / bound). Run from the repository root:

    python experiments/bounds/table.py [--cpsat SECONDS] [--tasks ID ...]
"""

from __future__ import annotations

import argparse
import math
import time

from placement_gym.cost_model import lower_bound, proven_bound
from placement_gym.cost_model.proven_bounds import (
    CRITICAL_PATH,
    ENERGETIC,
    LOAD_LP,
    PHASES,
    PLACED_PATH,
    WORK,
)
from placement_gym.leaderboard import CURRENT_SUITE, get_suite
from placement_gym.leaderboard.ranking import best_known_runtimes
from placement_gym.leaderboard.render import load_submissions

ARGUMENTS = (CRITICAL_PATH, WORK, PLACED_PATH, ENERGETIC, PHASES, LOAD_LP)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--cpsat", type=float, default=0.0, metavar="SECONDS",
                        help="also CP-SAT's bound (time limit per task) where the task has <= 60 forward ops")
    parser.add_argument("--tasks", nargs="*", help="task ids (default: every task of the suite)")
    parser.add_argument("--submissions", default="leaderboard/submissions")
    args = parser.parse_args()
    suite = get_suite(CURRENT_SUITE)
    best = best_known_runtimes(load_submissions(args.submissions), suite)
    columns = ["task", "lower_bound", *ARGUMENTS]
    if args.cpsat:
        columns.append("CP-SAT")
    columns += ["bound", "source", "best known", "best / bound", "seconds"]
    print("| " + " | ".join(columns) + " |")
    print("|---" + "|---:" * (len(columns) - 1) + "|")
    for task_id in args.tasks or suite.task_ids:
        task = suite.get(task_id).task()
        began = time.perf_counter()
        bound = proven_bound(task)
        value, source = bound.value, bound.source
        cells = [task_id, f"{lower_bound(task):.4g}"]
        cells += [f"{bound.arguments[name]:.4g}" if name in bound.arguments else "-" for name in ARGUMENTS]
        if args.cpsat:
            cpsat = "-"
            if task.n_forward <= 60:
                from baselines.exact import cpsat_bound

                seconds, status = cpsat_bound(task, args.cpsat)
                cpsat = f"{seconds:.4g} ({status})"
                if seconds > value:
                    value, source = seconds, "CP-SAT"
            cells.append(cpsat)
        elapsed = time.perf_counter() - began
        known = best[task_id]
        ratio = known / value if math.isfinite(known) and value > 0 else math.nan
        cells += [f"{value:.4g}", source, f"{known:.4g}", f"{ratio:.2f}", f"{elapsed:.1f}"]
        print("| " + " | ".join(cells) + " |", flush=True)


if __name__ == "__main__":
    main()
