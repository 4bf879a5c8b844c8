"""Fill the leaderboard with the learned baselines: 10,000 evaluations per task, seeds 0, 1 and 2.

Run from the repository root (hours of CPU; stop it any time and run it again to resume)::

    PYTHONPATH=. python leaderboard/fill_learned.py [--agents pg,spotlight] [--seeds 0,1,2] [--workers 2]

Each (agent, seed, task) runs once through the leaderboard harness on a one-task subset of the suite
and is kept in ``leaderboard/.partial/`` (not committed); runs already there are skipped. Tasks run
cheapest first, so that a stopped fill leaves every agent on the same tasks. Every (agent, seed) whose
tasks are all done is merged into ``leaderboard/submissions/<suite>-<agent>-seed<seed>.json``, and the
leaderboard is rendered (it shows the median seed per task).
"""

from __future__ import annotations

import argparse
import json
import os
import time
from concurrent.futures import ProcessPoolExecutor, as_completed
from multiprocessing import get_context
from pathlib import Path

LEADERBOARD = Path(__file__).resolve().parent
PARTIAL = LEADERBOARD / ".partial"
LEARNED_AGENTS = ("pg", "spotlight", "hierarchical", "hsdag", "placeto", "sb3-ppo", "sb3-maskable-ppo",
                  "random-search")
BUDGET = 10_000
SEEDS = (0, 1, 2)


def partial_path(agent: str, seed: int, task_id: str, budget: int) -> Path:
    return PARTIAL / f"{agent}-budget{budget}-seed{seed}" / (task_id.replace("/", "__") + ".json")


def run_one(agent: str, seed: int, task_id: str, budget: int) -> tuple[str, int, str, float]:
    """One harness run on a one-task suite; writes its partial submission. Runs in a worker process."""
    import torch

    from baselines.registry import agent_descriptions, run_agent
    from placement_gym.leaderboard import evaluate, get_suite, save_submission

    torch.set_num_threads(1)
    start = time.perf_counter()
    submission = evaluate(
        lambda task, s, b: run_agent(task, agent, s, b),
        get_suite().subset([task_id]), budget, algorithm=agent, authors=["placement-gym baselines"],
        description=agent_descriptions().get(agent, ""), seed=seed,
    )
    save_submission(submission, partial_path(agent, seed, task_id, budget))
    return agent, seed, task_id, time.perf_counter() - start


def merge(agent: str, seed: int, budget: int) -> Path | None:
    """The (agent, seed) submission over the whole suite, when every task has its partial run."""
    from placement_gym.leaderboard import get_suite, load_submission, save_submission, submission_filename

    suite = get_suite()
    paths = [partial_path(agent, seed, t, budget) for t in suite.task_ids]
    if not all(p.is_file() for p in paths):
        return None
    parts = [load_submission(p) for p in paths]
    merged = dict(parts[0])
    merged["results"] = {task_id: part["results"][task_id] for task_id, part in zip(suite.task_ids, parts)}
    return save_submission(merged, LEADERBOARD / "submissions" / submission_filename(merged))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--agents", default=",".join(LEARNED_AGENTS), help="comma-separated agent names")
    parser.add_argument("--seeds", default=",".join(map(str, SEEDS)), help="comma-separated seeds")
    parser.add_argument("--budget", type=int, default=BUDGET, help="evaluations per task")
    parser.add_argument("--workers", type=int, default=min(2, os.cpu_count() or 1))
    parser.add_argument("--no-render", action="store_true")
    args = parser.parse_args()

    from rich.progress import track

    from placement_gym.leaderboard import get_suite, render

    agents = [a.strip() for a in args.agents.split(",") if a.strip()]
    seeds = [int(s) for s in args.seeds.split(",") if s.strip()]
    suite = get_suite()
    # Cheapest first: forward ops x devices is roughly what an evaluation and a policy step cost.
    cost = {t: suite.get(t).task().n_forward * suite.get(t).task().n_devices for t in suite.task_ids}
    tasks = sorted(suite.task_ids, key=cost.__getitem__)
    jobs = [(a, s, t) for t in tasks for a in agents for s in seeds
            if not partial_path(a, s, t, args.budget).is_file()]
    print(f"{len(jobs)} runs to do ({len(agents)} agents x {len(seeds)} seeds x {len(tasks)} tasks, "
          f"{len(agents) * len(seeds) * len(tasks) - len(jobs)} done)", flush=True)
    log = PARTIAL / "log.jsonl"
    PARTIAL.mkdir(parents=True, exist_ok=True)
    with ProcessPoolExecutor(args.workers, mp_context=get_context("spawn")) as pool:
        futures = [pool.submit(run_one, a, s, t, args.budget) for a, s, t in jobs]
        for future in track(as_completed(futures), total=len(futures), description="learned runs"):
            agent, seed, task_id, wall = future.result()
            with log.open("a") as handle:
                record = {"agent": agent, "seed": seed, "task": task_id, "wall_s": wall}
                handle.write(json.dumps(record) + "\n")
    for agent in agents:
        for seed in seeds:
            if (path := merge(agent, seed, args.budget)) is not None:
                print(f"{agent} seed {seed}: {path.relative_to(LEADERBOARD)}")
    if not args.no_render:
        render(LEADERBOARD)


if __name__ == "__main__":
    main()
