"""Spotlight against policy gradient, as in the Spotlight paper: per task, Spotlight's runtime / PG's.

Reads the leaderboard's committed submissions of `pg` and `spotlight` (same seeds, same budgets: the
baselines' fill, baselines/leaderboard_fill/learned.py) and prints, per budget and task, the ratio of the
median seeds' runtimes and the span of the per-seed ratios (seed s of spotlight / seed s of pg), beside
the paper's 60.9% (Gao, Chen and Li, ICML 2018: Spotlight's placements train in 60.9% of the time of
PG's), and the least ratio any algorithm could reach on the task: the best runtime any submission has
reached / PG's median. Run from the repository root::

    python experiments/spotlight_vs_pg/table.py [--dir leaderboard/submissions]
"""

from __future__ import annotations

import argparse
import math
import statistics
from pathlib import Path

from placement_gym.leaderboard import get_suite, load_submissions
from placement_gym.leaderboard.ranking import best_known_runtimes, geomean
from placement_gym.leaderboard.submission import budget_label

PAPER_RATIO = 0.609


def runs(submissions: list[tuple[str, dict]], algorithm: str) -> dict[int, dict[int, dict]]:
    """budget -> seed -> results of ``algorithm``'s cost-model submissions."""
    found: dict[int, dict[int, dict]] = {}
    for _, data in submissions:
        if data["algorithm"] == algorithm and data.get("track", "cost_model") == "cost_model":
            found.setdefault(data["budget"], {})[data["seed"]] = data["results"]
    return found


def runtime(result: dict) -> float:
    return float(result["runtime"]) if result["feasible"] else math.inf


def table(directory: Path) -> str:
    submissions = load_submissions(directory)
    suite = get_suite()
    pg, spotlight = runs(submissions, "pg"), runs(submissions, "spotlight")
    best_known = best_known_runtimes(submissions, suite)
    lines = []
    for budget in sorted(set(pg) & set(spotlight)):
        seeds = sorted(set(pg[budget]) & set(spotlight[budget]))
        lines += [
            f"Budget {budget_label(budget)} evaluations per task, seeds {', '.join(map(str, seeds))}:",
            "",
            "| task | pg median (s) | spotlight median (s) | spotlight / pg | per-seed ratios "
            "| best known / pg |",
            "|---|---:|---:|---:|---|---:|",
        ]
        medians = []
        for task_id in suite.task_ids:
            if not all(task_id in pg[budget][s] and task_id in spotlight[budget][s] for s in seeds):
                continue
            pg_runtimes = [runtime(pg[budget][s][task_id]) for s in seeds]
            sp_runtimes = [runtime(spotlight[budget][s][task_id]) for s in seeds]
            ratio = statistics.median(sp_runtimes) / statistics.median(pg_runtimes)
            medians.append(ratio)
            per_seed = ", ".join(f"{a / b:.3f}" for a, b in zip(sp_runtimes, pg_runtimes))
            floor = best_known[task_id] / statistics.median(pg_runtimes)
            lines.append(f"| `{task_id}` | {statistics.median(pg_runtimes):.6g} | "
                         f"{statistics.median(sp_runtimes):.6g} | {ratio:.3f} | {per_seed} | {floor:.3f} |")
        lines += ["", f"Geomean spotlight / pg over {len(medians)} tasks: **{geomean(medians):.3f}** "
                  f"(paper: {PAPER_RATIO:.3f}).", ""]
    return "\n".join(lines)


if __name__ == "__main__":
    arguments = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    arguments.add_argument("--dir", type=Path, default=Path("leaderboard/submissions"),
                           help="the submissions folder (default: leaderboard/submissions)")
    print(table(arguments.parse_args().dir))
