"""The learned agents' experiment: every learned agent on four tasks at two budgets, three seeds.

Runs each (agent, task, budget, seed) with `baselines.learning.train` and appends one JSON line per
run to ``--out``; runs already in the file are skipped, so the experiment can be stopped and resumed
across sessions. The heuristics (constructive ones once per task, the budgeted searches ``anneal``
and ``cem`` at each budget) and each task's lower bound are computed once and cached in the same
file. ``--summary`` prints the table from the file: per task and budget, per agent the median best
runtime over seeds with its spread (min-max), beside random search at the same budget, the best
heuristic and the lower bound, and the ratio spotlight / pg of median best runtimes (Spotlight,
Gao et al. ICML 2018, reports 60.9%).

    PYTHONPATH=. python experiments/learned_agents/run.py              # the whole experiment (hours)
    PYTHONPATH=. python experiments/learned_agents/run.py --tasks cifar10_cnn/k80x2/train --budgets 1000 \\
        --seeds 0
    PYTHONPATH=. python experiments/learned_agents/run.py --summary    # the committed results.jsonl

Lines of the file (``kind``): ``learned`` (agent, task, budget, seed, best_runtime, feasible,
evaluations, wall_s, evaluations_per_s), ``heuristic`` (agent, task, budget: null for a
constructive heuristic, runtime, feasible, evaluations, wall_s) and ``reference`` (task,
lower_bound, best_single_runtime). Runtimes are seconds.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
import time
from collections.abc import Iterable
from concurrent.futures import ProcessPoolExecutor, as_completed
from multiprocessing import get_context
from pathlib import Path
from typing import Any

# The committed results of this experiment, beside this script (summary.txt is their --summary).
RESULTS = Path(__file__).resolve().parent / "results.jsonl"
TASKS = ("cifar10_cnn/k80x2/train", "inception_v3/k80x4/train", "gnmt4/k80x4/train", "bert_large/k80x4/train")
LEARNED_AGENTS = ("pg", "spotlight", "hierarchical", "hsdag", "placeto", "sb3-ppo", "sb3-maskable-ppo",
                  "random-search")
BUDGETS = (1000, 10000)
SEEDS = (0, 1, 2)
# Heuristics that build one placement (run once per task) and searches whose budget is in evaluations
# (run at each budget of the table, so that they compare at the learned agents' cost).
CONSTRUCTIVE_HEURISTICS = ("expert", "partition", "heft", "cpop", "m-topo", "m-etf", "m-sct")
SEARCH_HEURISTICS = ("anneal", "cem")
HEURISTIC_SEED = 0
# Spotlight (Gao et al., ICML 2018; docs/references.md): its placements train in 60.9% of the time of
# policy-gradient's placements.
SPOTLIGHT_PAPER_RATIO = 0.609

# ("reference", task) | ("heuristic", agent, task, budget) | ("learned", agent, task, budget, seed)
Job = tuple


# --- the results file --------------------------------------------------------------------------


def read_records(path: Path) -> list[dict[str, Any]]:
    """Every JSON line of ``path`` (none if it does not exist); a half-written last line (a run
    stopped while writing) is ignored."""
    if not path.is_file():
        return []
    records = []
    for number, line in enumerate(path.read_text().splitlines(), 1):
        if not line.strip():
            continue
        try:
            records.append(json.loads(line))
        except json.JSONDecodeError:
            print(f"{path}:{number}: not a JSON line, ignored", file=sys.stderr)
    return records


def record_key(record: dict[str, Any]) -> Job:
    """The job a record answers (so that a resumed experiment skips it)."""
    kind = record["kind"]
    if kind == "reference":
        return ("reference", record["task"])
    if kind == "heuristic":
        return ("heuristic", record["agent"], record["task"], record["budget"])
    return ("learned", record["agent"], record["task"], record["budget"], record["seed"])


def _json_number(value: float) -> float | None:
    return value if math.isfinite(value) else None


# --- running ------------------------------------------------------------------------------------


def available_agents(wanted: Iterable[str], kind: str) -> list[str]:
    """The names of ``wanted`` that are registered (learned agents for ``kind="learned"``)."""
    from baselines.learning import LEARNED_AGENTS as registered_learned
    from baselines.registry import registered_names

    names = set(registered_names())
    if kind == "learned":
        names = set(registered_learned)
    return [name for name in wanted if name in names]


def plan(tasks: list[str], agents: list[str], budgets: list[int], seeds: list[int]) -> list[Job]:
    """Every job of the experiment, references and heuristics first (the summary needs them)."""
    jobs: list[Job] = [("reference", task) for task in tasks]
    for task in tasks:
        jobs += [("heuristic", name, task, None) for name in available_agents(CONSTRUCTIVE_HEURISTICS, "all")]
        jobs += [("heuristic", name, task, budget) for name in available_agents(SEARCH_HEURISTICS, "all")
                 for budget in budgets]
    jobs += [("learned", agent, task, budget, seed)
             for task in tasks for budget in budgets for agent in agents for seed in seeds]
    return jobs


def run_job(job: Job, threads: int) -> dict[str, Any]:
    """Run one job and return its record (called in a worker process when ``--jobs`` > 1)."""
    import torch

    from baselines.learning import train
    from placement_gym.cost_model import lower_bound, single_device
    from placement_gym.evaluation.agents import evaluate_agent
    from placement_gym.task.named import parse_task_id

    torch.set_num_threads(threads)
    kind = job[0]
    task = parse_task_id(job[1] if kind == "reference" else job[2])
    if kind == "reference":
        return {"kind": kind, "task": task.id, "lower_bound": lower_bound(task),
                "best_single_runtime": single_device(task).runtime}
    if kind == "heuristic":
        _, agent, _, budget = job
        result = evaluate_agent(task, agent, seed=HEURISTIC_SEED, budget=budget)
        return {"kind": kind, "agent": agent, "task": task.id, "budget": budget,
                "runtime": result["runtime"], "feasible": result["feasible"],
                "evaluations": result["evaluations"], "wall_s": result["wall_s"]}
    _, agent, _, budget, seed = job
    result = train(agent, task, budget, seed=seed, progress=False)
    return {"kind": kind, "agent": agent, "task": task.id, "budget": budget, "seed": seed,
            "best_runtime": _json_number(result.best_runtime), "feasible": result.best_feasible,
            "evaluations": result.evaluations, "wall_s": result.wall_s,
            "evaluations_per_s": _json_number(result.evaluations_per_s)}


def _describe(job: Job) -> str:
    if job[0] == "reference":
        return f"lower bound of {job[1]}"
    if job[0] == "heuristic":
        return f"{job[1]} on {job[2]}" + (f" (budget {job[3]:,})" if job[3] is not None else "")
    return f"{job[1]} on {job[2]}, budget {job[3]:,}, seed {job[4]}"


def run(jobs: list[Job], out: Path, n_jobs: int, threads: int) -> None:
    """Run ``jobs`` not yet in ``out``, appending each record as it finishes."""
    done = {record_key(record) for record in read_records(out)}
    todo = [job for job in jobs if job not in done]
    print(f"{len(jobs) - len(todo)} of {len(jobs)} runs already in {out}; {len(todo)} to run", flush=True)
    out.parent.mkdir(parents=True, exist_ok=True)
    with open(out, "a") as handle:

        def write(job: Job, record: dict[str, Any], index: int) -> None:
            handle.write(json.dumps(record) + "\n")
            handle.flush()  # a run that finished is kept even if the experiment is stopped later
            value = record.get("best_runtime", record.get("runtime", record.get("lower_bound")))
            shown = f"{value * 1e3:,.2f} ms" if isinstance(value, float) else "-"
            print(f"[{index}/{len(todo)}] {_describe(job)}: {shown}", flush=True)

        if n_jobs == 1:
            for index, job in enumerate(todo, 1):
                write(job, run_job(job, threads), index)
            return
        # spawn: no copy of a parent's torch thread pools or open files in the workers
        with ProcessPoolExecutor(n_jobs, mp_context=get_context("spawn")) as pool:
            futures = {pool.submit(run_job, job, threads): job for job in todo}
            for index, future in enumerate(as_completed(futures), 1):
                write(futures[future], future.result(), index)


# --- the summary --------------------------------------------------------------------------------


def _ms(seconds: float | None) -> str:
    """Milliseconds to five significant figures or more (whole above a second: the table fits 80 columns)."""
    if seconds is None or not math.isfinite(seconds):
        return "-"
    return f"{seconds * 1e3:,.2f}" if seconds < 1.0 else f"{seconds * 1e3:,.0f}"


def _ratio(value: float | None, reference: float | None) -> str:
    if value is None or reference is None or not reference or not math.isfinite(value):
        return "-"
    return f"{value / reference:.3f}"


def summarise(records: list[dict[str, Any]], tasks: list[str] | None = None) -> list[dict[str, Any]]:
    """One row per (task, budget, learned agent): median best runtime over seeds, min, max, seeds,
    how many of the seeds' best placements were feasible, mean evaluations/s."""
    runs: dict[tuple[str, int, str], list[dict[str, Any]]] = {}
    for record in records:
        if record["kind"] == "learned" and (tasks is None or record["task"] in tasks):
            runs.setdefault((record["task"], record["budget"], record["agent"]), []).append(record)
    rows = []
    for (task, budget, agent), group in runs.items():
        values = [r["best_runtime"] if r["best_runtime"] is not None else math.inf for r in group]
        speeds = [r["evaluations_per_s"] for r in group if r["evaluations_per_s"] is not None]
        rows.append({"task": task, "budget": budget, "agent": agent, "median": statistics.median(values),
                     "min": min(values), "max": max(values), "seeds": len(group),
                     "feasible": sum(bool(r["feasible"]) for r in group),
                     "evaluations_per_s": statistics.fmean(speeds) if speeds else None})
    return rows


def best_heuristic(records: list[dict[str, Any]], task: str, budget: int) -> dict[str, Any] | None:
    """The fastest feasible heuristic placement of ``task``: constructive heuristics and the
    searches run at ``budget``."""
    candidates = [r for r in records if r["kind"] == "heuristic" and r["task"] == task and r["feasible"]
                  and (r["budget"] is None or r["budget"] == budget)]
    return min(candidates, key=lambda r: r["runtime"]) if candidates else None


def print_summary(records: list[dict[str, Any]], tasks: list[str] | None = None) -> None:
    from placement_gym.cli.output import print_table

    rows = summarise(records, tasks)
    references = {r["task"]: r for r in records if r["kind"] == "reference"}
    order = {name: i for i, name in enumerate(LEARNED_AGENTS)}
    keys = sorted({(r["task"], r["budget"]) for r in rows},
                  key=lambda key: (TASKS.index(key[0]) if key[0] in TASKS else len(TASKS), key[0], key[1]))
    ratios = []
    for task, budget in keys:
        mine = sorted((r for r in rows if (r["task"], r["budget"]) == (task, budget)),
                      key=lambda r: (order.get(r["agent"], len(order)), r["agent"]))
        by_agent = {r["agent"]: r for r in mine}
        random_median = by_agent["random-search"]["median"] if "random-search" in by_agent else None
        heuristic = best_heuristic(records, task, budget)
        heuristic_runtime = heuristic["runtime"] if heuristic else None
        bound = references.get(task, {}).get("lower_bound")
        table = []
        for r in mine:
            infeasible = r["seeds"] - r["feasible"]
            table.append([
                r["agent"], _ms(r["median"]), f"{_ms(r['min'])}-{_ms(r['max'])}",
                f"{r['seeds']}" + (f" ({infeasible} OOM)" if infeasible else ""),
                _ratio(r["median"], random_median), _ratio(r["median"], heuristic_runtime),
                _ratio(r["median"], bound),
                "-" if r["evaluations_per_s"] is None else f"{r['evaluations_per_s']:,.0f}",
            ])
        if heuristic is not None:
            table.append([f"best heuristic: {heuristic['agent']}", _ms(heuristic_runtime), "", "",
                          _ratio(heuristic_runtime, random_median), "1.000",
                          _ratio(heuristic_runtime, bound), ""])
        if bound is not None:
            table.append(["lower bound", _ms(bound), "", "", "", "", "1.000", ""])
        print_table(
            ["agent", "median ms", "min-max ms", "seeds", "/ random", "/ heuristic", "/ bound", "evals/s"],
            table, numeric=[False, True, True, True, True, True, True, True],
            title=f"{task}, budget {budget:,} evaluations",
        )
        if "spotlight" in by_agent and "pg" in by_agent:
            ratios.append((task, budget, by_agent["spotlight"]["median"] / by_agent["pg"]["median"]))
        print()
    if ratios:
        print(f"spotlight / pg, median best runtimes (Spotlight's paper: {SPOTLIGHT_PAPER_RATIO:.1%}):")
        for task, budget, ratio in ratios:
            print(f"  {task}, budget {budget:,}: {ratio:.1%}")
    else:
        print("spotlight / pg: no task and budget with runs of both")


# --- command line -------------------------------------------------------------------------------


def _positive_int(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be a positive integer, got {text}")
    return value


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tasks", nargs="+", default=list(TASKS), help="task ids (default: the four)")
    parser.add_argument("--agents", nargs="+", default=None,
                        help=f"learned agents (default: those of {', '.join(LEARNED_AGENTS)} that are "
                        "registered)")
    parser.add_argument("--budgets", nargs="+", type=_positive_int, default=list(BUDGETS))
    parser.add_argument("--seeds", nargs="+", type=int, default=list(SEEDS))
    parser.add_argument("--out", default=str(RESULTS), help="JSON-lines results file (appended to; default: "
                        "the committed results.jsonl beside this script, so --summary prints the committed "
                        "results)")
    parser.add_argument("--jobs", type=_positive_int, default=1, help="runs in parallel (processes)")
    parser.add_argument("--threads", type=_positive_int, default=1,
                        help="torch threads per run (default 1: the networks are small)")
    parser.add_argument("--summary", action="store_true", help="print the table of --out and exit")
    args = parser.parse_args(argv)
    out = Path(args.out)
    if args.summary:
        if not out.is_file():
            parser.error(f"no results file {out}")
        print_summary(read_records(out), None if args.tasks == list(TASKS) else args.tasks)
        return 0
    from placement_gym.task.named import parse_task_id

    for task in args.tasks:
        try:
            parse_task_id(task)
        except (ValueError, FileNotFoundError) as error:
            parser.error(f"--tasks: {error}")
    registered = available_agents(LEARNED_AGENTS, "learned")
    if args.agents is None:
        agents = registered
    else:
        from baselines.learning import LEARNED_AGENTS as known

        unknown = [name for name in args.agents if name not in known]
        if unknown:
            parser.error(
                f"--agents: unknown learned agent(s) {', '.join(unknown)}; allowed: {', '.join(known)}"
            )
        agents = args.agents
    print(f"agents: {', '.join(agents)}", flush=True)
    started = time.perf_counter()
    run(plan(args.tasks, agents, args.budgets, args.seeds), out, args.jobs, args.threads)
    print(f"done in {time.perf_counter() - started:,.0f} s; summary: --summary --out {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
