"""`placement-gym evaluate` (score a placement, or an agent on every graph of a dataset split) and
`placement-gym show` (draw its timeline).

``evaluate --agent NAME --dataset NAME:SPLIT --cluster C`` runs the agent on every graph of the split
(`evaluate_dataset`), one independent job per graph (`GraphJob`), serial or on Ray (``--ray``,
``--address``, ``--workers``: `placement_gym.evaluation.parallel.run_jobs`), with the same results
either way. Every graph gets ``--seed`` itself, as the leaderboard harness gives every task of a
submission its one seed, so a row is reproduced by ``evaluate --graph <dataset>:<id>`` with the same
seed, budget and cluster.
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from dataclasses import dataclass
from typing import Any

from placement_gym.cli.common import (
    DEFAULT_GRAPH,
    FLAG,
    add_optimizer_argument,
    add_options,
    add_placement_arguments,
    add_task_arguments,
    check_agent,
    find_placement,
    place_with_agent,
    positive_int,
    step_from_args,
    task_from_args,
)
from placement_gym.cli.output import fmt_bytes, fmt_seconds, print_json, print_table
from placement_gym.cli.subcommands import Subcommands, add_command
from placement_gym.common.progress import Progress
from placement_gym.evaluation.parallel import check_backend, run_jobs
from placement_gym.task.named import get_task
from placement_gym.task.step import Step, step_of_call

DESCRIPTIONS = {
    "evaluate": (
        "Evaluate an agent's placement (or a saved placement file) with the cost model: runtime, "
        "feasibility, peak memory per device, simple lower bound and the best single device. "
        "--agent all runs every baseline and prints one table sorted by runtime."
    ),
    "show": (
        "Simulate a placement and draw its timeline: one row per device, one per used link "
        "(needs matplotlib, the viz extra)."
    ),
}
"""What each command's ``--help`` says it does, by command."""


def evaluation_report(args: argparse.Namespace) -> dict[str, Any]:
    """Find the placement, evaluate it, and gather everything `evaluate` prints."""
    task = task_from_args(args)  # first: an unknown --graph is refused before numba loads (0.3 s)
    found = find_placement(task, args)
    from placement_gym.cost_model import lower_bound, simulate, single_device
    from placement_gym.evaluation.placements import placement_to_dict, save_placement

    start = time.perf_counter()
    result = simulate(task, found.placement)
    evaluate_s = time.perf_counter() - start
    bound = lower_bound(task)
    single = single_device(task)
    names = task.cluster.device_names
    if args.save:
        save_placement(task, found.placement, args.save)
    return {
        "task": task.id,
        "agent": args.agent,
        "placement_file": args.placement,
        "seed": args.seed,
        "runtime": result.runtime,
        "feasible": result.feasible,
        "peak_memory": dict(zip(names, result.peak_memory.tolist())),
        "memory_capacity": dict(zip(names, task.cluster.memory_capacity.tolist())),
        "lower_bound": bound,
        "best_single_device": names[single.best],
        "best_single_runtime": single.runtime,
        "best_single_feasible": single.best_feasible,
        "speedup": single.runtime / result.runtime,
        "gap_to_lower_bound": result.runtime / bound - 1.0,
        "evaluations": found.evaluations,
        "info": found.info,
        # The agent's search plus the one evaluation of its placement.
        "wall_s": found.wall_s + evaluate_s,
        "devices_used": sorted({names[d] for d in found.placement.tolist()}, key=names.index),
        "saved_to": args.save,
        "placement": placement_to_dict(task, found.placement),
    }


def all_agents_report(args: argparse.Namespace) -> list[dict[str, Any]]:
    """Run every agent the providers choose for ``--agent all``
    (`placement_gym.evaluation.agents.agents_for_all`) and evaluate each placement; rows sorted by runtime,
    infeasible ones last."""
    task = task_from_args(args)
    from placement_gym.evaluation import agents

    chosen = agents.agents_for_all(task)
    if chosen is None:
        raise ValueError(f"--agent all needs the baselines package: {agents.baselines_hint()}")
    rows: list[dict[str, Any]] = []
    # Progress on stderr, one line per agent as it ends and one every 3 s while a long one runs: the whole
    # run takes tens of seconds.
    print(f"running {len(chosen)} agents on {task.id}: {', '.join(chosen)}", file=sys.stderr, flush=True)
    with Progress() as progress:
        for number, agent in enumerate(chosen, 1):
            progress("running agents", number - 1, len(chosen), agent)
            rows.append(_agent_row(task, agents.evaluate_agent(task, agent, args.seed, args.budget), number,
                                   len(chosen)))
    rows.sort(key=lambda row: (not row["feasible"], row["runtime"]))
    return rows


def _agent_row(task: Any, row: dict[str, Any], number: int, total: int) -> dict[str, Any]:
    """An agent's report with its placement and memory by name; its line on stderr."""
    agent, names = row["agent"], task.cluster.device_names
    print(f"  [{number}/{total}] {agent}: {fmt_seconds(row['runtime'])}"
          f"{'' if row['feasible'] else ' (out of memory)'}, {row['wall_s']:.1f} s",
          file=sys.stderr, flush=True)
    row["placement"] = dict(zip(task.graph.op_names, (names[d] for d in row["placement"])))
    row["peak_memory"] = dict(zip(names, row["peak_memory"]))
    return row


def run_all(args: argparse.Namespace) -> int:
    rows = all_agents_report(args)
    if args.json:
        print_json(rows)
        return 0
    task_id = rows[0]["task"] if rows else task_from_args(args).id
    print_table(
        ["agent", "runtime", "speedup", "gap to simple bound", "feasible", "evaluations", "wall s"],
        [[row["agent"], fmt_seconds(row["runtime"]), f"{row['speedup']:.3f}x", f"{row['gap'] * 100:.1f}%",
          "yes" if row["feasible"] else "NO (OOM)", str(row["evaluations"]), f"{row['wall_s']:.2f}"]
         for row in rows],
        numeric=[False, True, True, True, False, True, True],
        title=f"every baseline on {task_id} (seed {args.seed}"
              + (f", budget {args.budget})" if args.budget else ")"),
    )
    return 0


@dataclass(frozen=True)
class GraphJob:
    """One graph of a dataset-wide evaluation: names and numbers only, so that it travels to a Ray
    worker in a few hundred bytes and its result does not depend on where it runs. ``graph`` is
    ``<dataset>:<id>``; ``cluster`` a preset, a family cluster or a JSON path (which must exist on
    every node); ``step`` the `Step` of every graph's task."""

    graph: str
    cluster: str
    agent: str
    seed: int = 0
    budget: int | None = None
    step: Step = Step()


def evaluate_graph(job: GraphJob) -> dict[str, Any]:
    """Run ``job``'s agent on its graph and report it: the keys of
    `placement_gym.evaluation.agents.agent_report` and ``graph`` (the id in its dataset) and ``ops``
    (forward ops). Only ``wall_s`` depends on the machine."""
    task = get_task(job.graph, job.cluster, job.step)
    found = place_with_agent(task, job.agent, job.seed, job.budget)
    from placement_gym.evaluation import agents

    report = agents.agent_report(task, job.agent, job.seed, found, found.wall_s)
    return {"graph": job.graph.partition(":")[2], "ops": task.n_forward, **report}


def evaluate_dataset(
    agent: str,
    dataset: str,
    cluster: str,
    *,
    seed: int = 0,
    budget: int | None = None,
    step: Step | str | None = None,
    backend: str = "serial",
    address: str | None = None,
    workers: int | None = None,
    progress: bool = False,
    **step_options: Any,
) -> dict[str, Any]:
    """``agent`` on every graph of ``dataset`` (``"<name>:<split>"``, or a name for every graph), each
    with ``seed`` (see the module docstring) and the step ``step`` (as `get_task` takes it: a `Step`,
    an objective or an id's objective, its fields replaced by keywords such as ``precision="bf16"``;
    default: a training step). ``backend``, ``address``, ``workers``: as in
    `run_jobs`. ``progress``: a line per graph on stderr as it ends. Returns ``{"summary": ...,
    "graphs": [...]}``: per graph `evaluate_graph`'s report, in split order; the summary has dataset,
    cluster, agent, seed, budget, graphs, feasible, geomean_speedup (over the feasible graphs),
    evaluations, backend, workers and wall_s (the whole run's)."""
    from placement_gym.datasets import dataset_split

    step = step_of_call("evaluate_dataset", step, (), step_options)
    check_backend(backend, address, workers)
    data, ids = dataset_split(dataset)
    if not ids:
        raise ValueError(f"dataset split {dataset!r} holds no graph")
    jobs = [GraphJob(f"{data.name}:{graph_id}", cluster, agent, seed, budget, step) for graph_id in ids]
    # a bad agent or cluster: one error here, before Ray starts
    check_agent(agent)
    get_task(jobs[0].graph, cluster, step)
    done = 0

    def report(_index: int, row: dict[str, Any]) -> None:
        nonlocal done
        done += 1
        print(f"  [{done}/{len(jobs)}] {row['graph']}: {fmt_seconds(row['runtime'])}"
              f"{'' if row['feasible'] else ' (out of memory)'}, {row['wall_s']:.1f} s",
              file=sys.stderr, flush=True)

    if progress:
        where = "serial" if backend == "serial" else f"on Ray ({address or 'local'}" + (
            f", {workers} workers)" if workers else ")")
        print(f"running {agent} on {len(jobs)} graphs of {dataset}, {where}", file=sys.stderr, flush=True)
    start = time.perf_counter()
    rows = run_jobs(evaluate_graph, jobs, backend=backend, address=address, workers=workers,
                    progress=report if progress else None)
    wall_s = time.perf_counter() - start
    speedups = [row["speedup"] for row in rows if row["feasible"]]
    summary = {
        "dataset": dataset, "cluster": cluster, "agent": agent, "seed": seed, "budget": budget,
        "graphs": len(rows), "feasible": len(speedups),
        "geomean_speedup": math.exp(sum(map(math.log, speedups)) / len(speedups)) if speedups else None,
        "evaluations": sum(row["evaluations"] for row in rows),
        "backend": backend, "workers": workers, "wall_s": wall_s,
    }
    return {"summary": summary, "graphs": rows}


def run_dataset(args: argparse.Namespace) -> int:
    if args.placement is not None or args.agent == "all" or args.save:
        raise ValueError("--dataset runs one agent (--agent NAME) on every graph of the split; "
                         "--placement, --save and --agent all take one graph")
    report = evaluate_dataset(
        args.agent, args.dataset, args.cluster, seed=args.seed, budget=args.budget, step=step_from_args(args),
        backend="ray" if args.ray else "serial", address=args.address, workers=args.workers, progress=True,
    )
    if args.json:
        print_json(report)
        return 0
    summary = report["summary"]
    print_table(
        ["graph", "ops", "runtime", "speedup", "gap to simple bound", "feasible", "evaluations", "wall s"],
        [[row["graph"], str(row["ops"]), fmt_seconds(row["runtime"]), f"{row['speedup']:.3f}x",
          f"{row['gap'] * 100:.1f}%", "yes" if row["feasible"] else "NO (OOM)", str(row["evaluations"]),
          f"{row['wall_s']:.2f}"] for row in report["graphs"]],
        numeric=[False, True, True, True, True, False, True, True],
        title=f"{args.agent} on {args.dataset} with {args.cluster} (seed {args.seed}"
              + (f", budget {args.budget})" if args.budget else ")"),
    )
    mean = summary["geomean_speedup"]
    print(f"{summary['graphs']} graphs, {summary['feasible']} feasible"
          + (f", geometric mean speedup over the best single device {mean:.3f}x" if mean else "")
          + f"; {summary['evaluations']} evaluations; {summary['wall_s']:.1f} s wall "
          + ("(serial)" if summary["backend"] == "serial"
             else f"(Ray{', ' + str(summary['workers']) + ' workers' if summary['workers'] else ''})"))
    return 0


def run_evaluate(args: argparse.Namespace) -> int:
    if (args.ray or args.address is not None or args.workers is not None) and args.dataset is None:
        raise ValueError("--ray, --address and --workers spread the graphs of --dataset over Ray: "
                         "give --dataset NAME:SPLIT")
    if (args.address is not None or args.workers is not None) and not args.ray:
        raise ValueError("--address and --workers say where Ray runs the graphs: add --ray")
    if args.dataset is not None:
        if args.graph is not None:
            raise ValueError("--graph and --dataset both name what to place: give one")
        return run_dataset(args)
    if args.graph is None:
        args.graph = DEFAULT_GRAPH
    if args.agent == "all":
        if args.save:
            raise ValueError("--save takes one placement; it cannot be used with --agent all")
        return run_all(args)
    report = evaluation_report(args)
    if args.json:
        print_json(report)
        return 0
    over = [d for d, peak in report["peak_memory"].items() if peak > report["memory_capacity"][d]]
    feasible = "yes" if report["feasible"] else f"NO: out of memory on {', '.join(over)}"
    single_note = "" if report["best_single_feasible"] else " (no single device holds the task)"
    print_table(
        ["", ""],
        [
            ["task", report["task"]],
            ["placement", report["placement_file"] or f"agent {report['agent']} (seed {report['seed']})"],
            ["runtime", fmt_seconds(report["runtime"])],
            ["feasible", feasible],
            ["simple lower bound", fmt_seconds(report["lower_bound"])],
            ["best single device", f"{fmt_seconds(report['best_single_runtime'])} on "
                                   f"{report['best_single_device']}{single_note}"],
            ["speedup over best single", f"{report['speedup']:.3f}x"],
            ["gap to simple lower bound", f"{report['gap_to_lower_bound'] * 100:.1f}%"],
            ["evaluations used", str(report["evaluations"])],
            ["wall time", f"{report['wall_s']:.3f} s"],
        ],
        numeric=[False, False],
        header=False,
        title=f"evaluate {report['task']}",
    )
    print_table(
        ["device", "peak memory", "capacity", "use", "status"],
        [[d, fmt_bytes(peak), fmt_bytes(report["memory_capacity"][d]),
          f"{peak / report['memory_capacity'][d] * 100:.1f}%",
          "OOM" if d in over else "ok"] for d, peak in report["peak_memory"].items()],
        numeric=[False, True, True, True, False],
    )
    if report["saved_to"]:
        print(f"placement saved to {report['saved_to']}")
    return 0


def run_show(args: argparse.Namespace) -> int:
    from placement_gym.cost_model.timeline import draw_timeline

    task = task_from_args(args)
    found = find_placement(task, args)
    from placement_gym.cost_model import simulate

    result = simulate(task, found.placement, schedule=True)
    draw_timeline(task, result.schedule, args.out)
    if args.json:
        print_json({"task": task.id, "path": str(args.out), "runtime": result.runtime,
                    "feasible": result.feasible})
    else:
        print(f"{args.out}: timeline of {task.id}, runtime {fmt_seconds(result.runtime)}"
              + ("" if result.feasible else " (infeasible: out of memory)"))
    return 0


def add_parsers(subparsers: Subcommands) -> None:
    evaluate = add_command(subparsers, "evaluate", DESCRIPTIONS["evaluate"])
    add_task_arguments(evaluate)
    add_optimizer_argument(evaluate)
    add_placement_arguments(evaluate, required=True, allow_all=True)
    add_options(evaluate, (
        ("--save", {"metavar": "FILE"}, "write the placement to this JSON file"),
        ("--json", FLAG, "print a JSON object instead of tables"),
        ("--dataset", {"metavar": "NAME:SPLIT"},
         "run --agent on every graph of a dataset split (synthetic-mini-v1:test), "
         "each with --seed; one row per graph and a summary line"),
        ("--ray", FLAG,
         "with --dataset: run the graphs as Ray jobs (the distributed extra), same "
         "results as serial; a local Ray instance unless --address is given"),
        ("--address", {"metavar": "ADDR"},
         "with --ray: the Ray cluster to use ('auto': the one this node joined; "
         "'ray://HEAD:10001': Ray Client)"),
        ("--workers", {"type": positive_int, "metavar": "K"},
         "with --ray: jobs at once (default: every core of a local instance)"),
    ))
    # --graph's default applies only without --dataset, so that giving both is an error
    evaluate.set_defaults(run=run_evaluate, graph=None)

    show = add_command(subparsers, "show", DESCRIPTIONS["show"])
    add_task_arguments(show)
    add_optimizer_argument(show)
    add_placement_arguments(show, required=True)
    show.add_argument("--out", required=True, metavar="PNG", help="path of the PNG file to write")
    show.add_argument("--json", action="store_true", help="print a JSON object instead of a line")
    show.set_defaults(run=run_show)
