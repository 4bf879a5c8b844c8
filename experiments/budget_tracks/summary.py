"""Per task of suite v1: the proven bound (and its argument), the best known runtime, and the best
heuristic, best search agent and best learned agent at each budget track, from the committed leaderboard.

Each cell is the runtime of the class's best entry in that track (per entry the median seed, as the
leaderboard shows it) with the entry's name; ratios are to the bound. Run from the repository root::

    python experiments/budget_tracks/summary.py [--dir leaderboard]
"""

from __future__ import annotations

import argparse
import math
from pathlib import Path

from placement_gym.leaderboard import get_suite, load_submissions
from placement_gym.leaderboard.ranking import (
    TRACK_BUDGETS,
    best_known_runtimes,
    budget_track,
    entries,
    geomean,
    group_submissions,
)
from placement_gym.leaderboard.submission import budget_label
from placement_gym.leaderboard.task_bounds import load_bounds

SEARCH = {"anneal", "anneal-groups", "cem", "random-search"}
LEARNED = {
    "pg", "spotlight", "hierarchical", "hsdag", "placeto", "sb3-ppo", "sb3-maskable-ppo", "move-policy",
    "move-bandit",
}
NOT_COMPARED = {"best-known", "exact"}  # the portfolio is the reference; exact counts time, not evaluations


def agent_class(algorithm: str) -> str:
    if algorithm in SEARCH:
        return "search"
    if algorithm in LEARNED:
        return "learned"
    return "other" if algorithm in NOT_COMPARED else "heuristic"


def summary(directory: Path) -> str:
    suite = get_suite()
    submissions = load_submissions(directory / "submissions")
    bounds = load_bounds(directory, suite)
    best_known = best_known_runtimes(submissions, suite)
    groups = group_submissions(submissions, suite)
    best: dict[tuple[str, int, str], tuple[float, str]] = {}
    for budget in TRACK_BUDGETS:
        track = budget_track(groups, budget)
        for task_id, task_entries in entries(submissions, suite, track).items():
            for entry in task_entries:
                kind = agent_class(entry.algorithm.split(" (")[0])
                key = (task_id, budget, kind)
                if entry.feasible and entry.runtime < best.get(key, (math.inf, ""))[0]:
                    best[key] = (entry.runtime, f"{entry.algorithm.split(' (')[0]} ({entry.budget})")
    columns = ["task", "bound (s)", "argument", "best known (s)", "known / bound", "best heuristic"]
    for budget in TRACK_BUDGETS:
        columns += [f"best search {budget_label(budget)}", f"best learned {budget_label(budget)}"]
    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    ratios = []
    for task_id in suite.task_ids:
        bound = bounds[task_id]
        ratio = best_known[task_id] / bound.value
        ratios.append(ratio)
        cells = [f"`{task_id}`", f"{bound.value:.4g}", bound.source, f"{best_known[task_id]:.4g}"]
        cells.append(f"{ratio:.3f}")

        def cell(key: tuple) -> str:
            if key not in best:
                return "-"
            runtime, name = best[key]
            return f"{runtime:.4g} {name}"

        cells.append(cell((task_id, TRACK_BUDGETS[0], "heuristic")))
        for budget in TRACK_BUDGETS:
            cells += [cell((task_id, budget, "search")), cell((task_id, budget, "learned"))]
        lines.append("| " + " | ".join(cells) + " |")
    lines += ["", f"Geomean best known / bound over {len(ratios)} tasks: {geomean(ratios):.3f}"]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dir", type=Path, default=Path("leaderboard"))
    print(summary(parser.parse_args().dir))


if __name__ == "__main__":
    main()
