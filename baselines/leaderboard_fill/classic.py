"""Fill the leaderboard with the heuristic, search and exact baselines: one submission per algorithm.

Run from the repository root (``--dir``, default ``leaderboard``: the submissions go to its
``submissions/`` folder and its README.md is rendered)::

    python -m baselines.leaderboard_fill.classic [--agents heft,cpop] [--seed 0] [--dir leaderboard]
        [--suite VERSION] [--no-render]
    python -m baselines.leaderboard_fill.classic --agents exact [--exact-time-limit 60]
    python -m baselines.leaderboard_fill.classic --write-suite VERSION   # measure suites/VERSION.json, stop

``--suite`` picks the accepted suite the entries run on, among those whose suite file names this script
in its ``fill`` (default: the current suite). ``--write-suite VERSION`` measures the suite of
``placement_gym/leaderboard/suites/VERSION.json`` as its ``measure`` says
(`placement_gym.leaderboard.suite_measure.write_suite_file`: the tasks of the suite it inherits with
their frozen figures, which the code must still reproduce, then the new tasks' fingerprints, after
checking that the heuristic of ``fitted_by`` fits each task it names) and writes the measured tasks into
that file.

By default the fast agents (`FAST_AGENTS`) run, each as `baselines.registry.harness_agent` gives it
(the agent at its default settings: what ``placement-gym leaderboard validate --rerun`` runs again); the
search agents among them (anneal, cem) at their default budget of 2,000 evaluations per task.

``--agents exact`` runs the CP-SAT solver of `baselines.exact` (not in the default list: it takes about
a quarter of an hour) with the settings of `EXACT_SETTINGS`: per task the grouping ``groups="auto"``
(single ops up to 60 forward ops, else chain merging when it gives at most 60 groups, else a balanced
40-way partition), the best single device as the hint, link contention and memory constraints
modelled, 2 CP-SAT workers, and a wall-clock time limit of ``--exact-time-limit`` seconds per task
(default 60; model building comes on top, up to about 20 s on gnmt4). The submission's description
states these settings. A run stopped by its time limit is not reproducible bit for bit (CP-SAT's
parallel search); its placement is re-checked like any other. The learned agents have their own
module, `baselines.leaderboard_fill.learned`.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from baselines.leaderboard_fill import add_suite_options, suite_written
from baselines.registry import agent_descriptions, get_agent, harness_agent
from placement_gym.evaluation.agents import AgentResult
from placement_gym.leaderboard import evaluate, render, save_submission, submission_filename
from placement_gym.task.compiled import Task

FAST_AGENTS = ("best-single", "round-robin", "random", "expert", "partition", "heft", "cpop",
               "m-topo", "m-etf", "m-sct", "anneal", "cem")
FILL = Path(__file__).stem  # how a suite file's "fill" names this script
LEADERBOARD = Path("leaderboard")  # the default --dir, relative to the repository root the fill runs from
EXACT_TIME_LIMIT = 60.0  # seconds per task: 13 tasks, most stopped by the limit, fit in ~15 minutes
EXACT_SETTINGS = {"groups": "auto", "links": True, "memory": True, "fallback_to_hint": True}


def exact_agent(time_limit: float, statuses: dict[str, str]):
    """The `exact` agent with `EXACT_SETTINGS` and ``time_limit`` seconds per task, as a harness agent,
    and the description its submission carries. ``statuses`` collects the solver's status per task id
    (``"hint"`` where it found nothing in time and the hint was returned, ``"model too large, hint"``
    where the model was not built, `baselines.exact.MAX_MODEL_TERMS`)."""
    from baselines.exact import MAX_MODEL_TERMS  # needs ortools, which only this agent does

    solver = get_agent("exact")

    def agent(task: Task, seed: int, budget: int | None) -> AgentResult:
        result = solver(task, seed=seed, budget=time_limit, **EXACT_SETTINGS)
        status = result.info["status"]
        statuses[task.id] = "model too large, hint" if status == "MODEL_TOO_LARGE" else (
            "hint" if result.info["fallback"] else status)
        print(f"  exact {task.id}: {statuses[task.id]}, {result.info['units']} units, runtime "
              f"{result.info['runtime']:.6g} s, {result.info['wall_s']:.0f} s", flush=True)
        return result

    description = (
        f"{agent_descriptions()['exact']}. Settings: groups='auto' (single ops up to 60 forward ops, else "
        "chain merging when it gives at most 60 groups, else a balanced 40-way partition); hint: the best "
        f"single device; link contention and memory constraints modelled; 2 CP-SAT workers; time limit "
        f"{time_limit:g} s of wall clock per task (2 shared CPU cores). Evaluations: 3 per task (the hint's "
        "schedule, then the runtimes of the result and of the hint). Where the solver stopped at the time "
        "limit its placement is its best by then, not "
        "a proven optimum; where it found no solution in time (presolve of the largest graphs) the entry is "
        f"the hint, and so it is without a solve where the model would exceed {MAX_MODEL_TERMS:,} terms "
        "(ops x devices plus transfers x links: memory)."
    )
    return agent, description


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--agents", default=",".join(FAST_AGENTS), help="comma-separated agent names")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--exact-time-limit", type=float, default=EXACT_TIME_LIMIT,
                        help="seconds per task for the exact solver (default: %(default)s)")
    parser.add_argument("--dir", type=Path, default=LEADERBOARD,
                        help="leaderboard folder (submissions/ and README.md); default: %(default)s")
    add_suite_options(parser, FILL)
    args = parser.parse_args()
    if suite_written(parser, args, FILL):
        return
    if not args.exact_time_limit > 0:
        parser.error(f"--exact-time-limit must be > 0 seconds, got {args.exact_time_limit}")
    descriptions = agent_descriptions()
    for name in [a.strip() for a in args.agents.split(",") if a.strip()]:
        start = time.perf_counter()
        statuses: dict[str, str] = {}
        if name == "exact":
            agent, description = exact_agent(args.exact_time_limit, statuses)
        else:
            agent = harness_agent(name)
            if agent is None:
                parser.error(f"unknown agent {name!r}")
            description = descriptions.get(name, "")
        submission = evaluate(agent, args.suite, algorithm=name, authors=["placement-gym baselines"],
                              description=description, seed=args.seed)
        if statuses:
            by_status: dict[str, list[str]] = {}
            for task_id, status in statuses.items():
                by_status.setdefault(status, []).append(task_id)
            submission["description"] += " Solver status per task: " + "; ".join(
                f"{status}: {', '.join(tasks)}" for status, tasks in sorted(by_status.items())) + "."
        path = args.dir / "submissions" / submission_filename(submission)
        save_submission(submission, path)
        print(f"{name}: {path.name} ({time.perf_counter() - start:.1f} s)", flush=True)
    if not args.no_render:
        render(args.dir, suite=args.suite)


if __name__ == "__main__":
    main()
