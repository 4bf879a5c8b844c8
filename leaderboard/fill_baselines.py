"""Fill the leaderboard with the fast heuristic baselines: one submission per algorithm (seed 0).

Run from the repository root::

    PYTHONPATH=. python leaderboard/fill_baselines.py [--agents heft,cpop] [--no-render]

The search agents (anneal, cem) run at their default budget of 2,000 evaluations per task. The exact
solver (60 ops or groups at most) and the learned agents are left out: they take far longer and
belong in their own, budgeted submissions.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from baselines.registry import agent_descriptions, run_agent
from placement_gym.leaderboard import evaluate, render, save_submission, submission_filename

FAST_AGENTS = ("best-single", "round-robin", "random", "expert", "partition", "heft", "cpop",
               "m-topo", "m-etf", "m-sct", "anneal", "cem")
LEADERBOARD = Path(__file__).resolve().parent


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--agents", default=",".join(FAST_AGENTS), help="comma-separated agent names")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--no-render", action="store_true")
    args = parser.parse_args()
    descriptions = agent_descriptions()
    for name in [a.strip() for a in args.agents.split(",") if a.strip()]:
        start = time.perf_counter()
        submission = evaluate(
            lambda task, seed, budget, name=name: run_agent(task, name, seed, budget),
            algorithm=name, authors=["placement-gym baselines"],
            description=descriptions.get(name, ""), seed=args.seed,
        )
        path = LEADERBOARD / "submissions" / submission_filename(submission)
        save_submission(submission, path)
        print(f"{name}: {path.name} ({time.perf_counter() - start:.1f} s)", flush=True)
    if not args.no_render:
        render(LEADERBOARD)


if __name__ == "__main__":
    main()
