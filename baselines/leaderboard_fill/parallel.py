"""Fill the parallel track (a parallel-plan suite: placement_gym/leaderboard/plan_suite.py) with the plan
agents of `baselines.plans`: one submission per agent, budget and seed.

Run from the repository root (``--dir``, default ``leaderboard``: the submissions go to its
``submissions/`` folder and the suite's page is rendered)::

    python -m baselines.leaderboard_fill.parallel [--entries megatron,sweep,plan-anneal@1000]
        [--seeds 0,1,2] [--dir leaderboard] [--suite VERSION] [--no-render]
    python -m baselines.leaderboard_fill.parallel --write-suite VERSION   # measure suites/VERSION.json, stop

An entry is an agent name, ``@`` and a budget of plans priced per task where it searches (`ENTRIES`: the
rules, the sweep, alpa and galvatron once, at their own budgets, being deterministic, with one seed; the
searches at 1,000 and 10,000 plans with seeds 0, 1 and 2). Every entry is what ``placement-gym leaderboard
validate --rerun`` runs again: the plan agent of that name at the file's seed and budget.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from baselines.leaderboard_fill import add_suite_options, suite_written
from baselines.plans import get_plan_agent, plan_agent_descriptions
from placement_gym.leaderboard import evaluate, render, save_submission, submission_filename

FILL = Path(__file__).stem  # how a suite file's "fill" names this script
LEADERBOARD = Path("leaderboard")
# (agent, budget or None for the agent's own, seeds)
ENTRIES: tuple[tuple[str, int | None, tuple[int, ...]], ...] = (
    *((agent, None, (0,)) for agent in ("megatron", "sweep", "alpa", "galvatron")),
    *((agent, budget, (0, 1, 2)) for agent in ("plan-random", "plan-anneal", "plan-move-bandit")
      for budget in (1_000, 10_000)),
)


def parse_entries(text: str, seeds: tuple[int, ...]) -> list[tuple[str, int | None, tuple[int, ...]]]:
    """``agent[@budget],...`` as entries with ``seeds``; ValueError naming an unknown agent or a bad
    budget."""
    parsed = []
    for item in (part.strip() for part in text.split(",") if part.strip()):
        name, _, budget = item.partition("@")
        if get_plan_agent(name) is None:
            raise ValueError(f"unknown plan agent {name!r}; plan agents: "
                             f"{', '.join(plan_agent_descriptions())}")
        if budget and not (budget.isdigit() and int(budget) > 0):
            raise ValueError(f"budget of {item!r} is a positive number of plans, got {budget!r}")
        parsed.append((name, int(budget) if budget else None, seeds))
    return parsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--entries", help="agent[@budget],... (default: every entry of ENTRIES)")
    parser.add_argument("--seeds", default="0,1,2", help="seeds of --entries (default: %(default)s)")
    parser.add_argument("--dir", type=Path, default=LEADERBOARD,
                        help="leaderboard folder (submissions/ and the pages); default: %(default)s")
    add_suite_options(parser, FILL)
    args = parser.parse_args()
    if suite_written(parser, args, FILL):
        return
    try:
        seeds = tuple(int(s) for s in args.seeds.split(","))
        entries = ENTRIES if args.entries is None else parse_entries(args.entries, seeds)
    except ValueError as error:
        parser.error(str(error))
    descriptions = plan_agent_descriptions()
    for name, budget, entry_seeds in entries:
        for seed in entry_seeds:
            start = time.perf_counter()
            submission = evaluate(get_plan_agent(name), args.suite, budget, algorithm=name,
                                  authors=["placement-gym baselines"], description=descriptions[name],
                                  seed=seed, track="parallel")
            path = args.dir / "submissions" / submission_filename(submission)
            save_submission(submission, path)
            print(f"{name} budget {budget or 'default'} seed {seed}: {path.name} "
                  f"({time.perf_counter() - start:.1f} s)", flush=True)
    if not args.no_render:
        render(args.dir, suite=args.suite)


if __name__ == "__main__":
    main()
