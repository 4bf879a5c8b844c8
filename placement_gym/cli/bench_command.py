"""`placement-gym bench`: its options and its output; the benchmarks it runs are `placement_gym.benchmarks`
(the fast simulator against the reference on bundled and synthetic graphs, the ONNX import's scaling,
the commands' startup)."""

from __future__ import annotations

import argparse
import sys
import time

from placement_gym.benchmarks.cost_model import BENCH_CLUSTER, BENCH_OBJECTIVE, DEFAULT_SIZES, run_bench
from placement_gym.benchmarks.machine import (
    describe_load,
    describe_machine,
    load_average,
    machine_description,
)
from placement_gym.benchmarks.onnx_import import DEFAULT_IMPORT_SIZES, ImportRow, run_import_bench
from placement_gym.benchmarks.simulators import DEFAULT_BATCH, BenchRow
from placement_gym.benchmarks.startup import STARTUP_COMMANDS, StartupRow, run_startup_bench
from placement_gym.benchmarks.targets import bench_targets
from placement_gym.cli.common import positive_int
from placement_gym.cli.output import print_json, print_table, print_text
from placement_gym.cli.subcommands import Subcommands, add_command

DESCRIPTION = (
    "Time the fast simulator (one call and batched) and the reference simulator on the bundled "
    f"graphs and on synthetic layered graphs (train_step on {BENCH_CLUSTER}, random placements). "
    "Each row first checks that they agree. Prints the machine (CPU, cores) and the load average "
    "at the start and the end: the figures hold for that machine and load only. --check adds the "
    "developers' speed targets, with why each is set, and exits 1 when one fails."
)
"""What `placement-gym bench --help` says the command does."""


def _names(text: str) -> list[str] | None:
    """``all`` -> None (every bundled graph), ``none`` -> [], else comma-separated names."""
    if text.strip() == "all":
        return None
    if text.strip() in ("", "none"):
        return []
    return [name.strip() for name in text.split(",") if name.strip()]


def _sizes(text: str) -> list[int]:
    if text.strip() in ("", "none"):
        return []
    try:
        return [int(part.replace("_", "")) for part in text.split(",") if part.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected comma-separated op counts such as 1000,10000 (or none), got {text!r}") from None


def _positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not value >= 0:
        raise argparse.ArgumentTypeError(f"expected a number of seconds >= 0, got {text!r}")
    return value


class _Progress:
    """One line on stderr per row, so that stdout stays a clean table or JSON."""

    def __init__(self) -> None:
        self.start = 0.0

    def __call__(self, i: int, total: int, label: str, row: BenchRow | ImportRow | None) -> None:
        if row is None:
            self.start = time.perf_counter()
            print(f"[{i + 1}/{total}] {label} ...", file=sys.stderr, flush=True)
        else:
            print(f"[{i + 1}/{total}] {label}: {row.ops:,} ops, {time.perf_counter() - self.start:.1f} s",
                  file=sys.stderr, flush=True)


def _rate(value: float) -> str:
    return f"{value:,.0f}" if value >= 100 else f"{value:,.2f}"


def run(args: argparse.Namespace) -> int:
    # Every figure depends on the machine and its load: say both, at the start and at the end (on
    # stderr with --json, whose stdout stays the list of rows).
    machine = machine_description()
    cores = machine["usable_cores"]
    stream = sys.stderr if args.json else sys.stdout
    print(describe_machine(machine), file=stream)
    print(f"at the start: {describe_load(machine['load_average'], cores)}", file=stream, flush=True)
    if args.import_scaling is not None:
        return _run_import(args, stream, machine)
    if args.startup is not None:
        return _run_startup(args, stream, machine)
    if args.plans:
        return _run_plans(args, stream, machine)
    if args.plan_sweep:
        return _run_plan_sweep(args, stream, machine)
    rows = run_bench(_names(args.graphs), args.sizes, repeats=args.repeats, seconds=args.seconds,
                     batch=args.batch, seed=args.seed, progress=_Progress(),
                     incremental_moves=args.incremental_moves or 0, incremental_from=args.incremental_from,
                     against=args.against, cutoff_moves=args.cutoff_moves or 0,
                     tasks=_names(args.tasks) or [])
    end = load_average()
    if args.json:
        print(f"at the end: {describe_load(end, cores)}", file=stream)
        print_json({"machine": machine, "load_average_end": end, "rows": [row.to_dict() for row in rows]})
        return _check(rows) if args.check else 0
    columns = ["graph", "task ops", "fwd ops", "agree", "fast eval/s", f"batch{args.batch} eval/s",
               "batch/fast", "reference eval/s", "fast/ref", "fast ns/op"]
    cells = [[r.graph, f"{r.ops:,}", f"{r.forward_ops:,}", "yes" if r.agree else "NO",
              _rate(r.fast_evals_per_s), _rate(r.batch_evals_per_s), f"{r.batch_speedup:.2f}x",
              _rate(r.reference_evals_per_s), f"{r.ratio:,.1f}x", f"{r.ns_per_op:,.0f}"] for r in rows]
    if args.incremental_moves:
        columns += ["incr. ceiling", "changed"]
        for r, line in zip(rows, cells):
            line += (["-", "-"] if r.incremental_ceiling is None or r.changed_fraction is None else
                     [f"{r.incremental_ceiling:.2f}x", f"{r.changed_fraction:.2f}"])
    if args.cutoff_moves:
        columns += ["cutoff speedup", "cut"]
        for r, line in zip(rows, cells):
            line += (["-", "-"] if r.cutoff_speedup is None or r.cut_fraction is None else
                     [f"{r.cutoff_speedup:.2f}x", f"{r.cut_fraction:.2f}"])
    if args.against is not None:
        columns += ["against ns/op", "alternating ns/op", "against/ours", "identical"]
        for r, line in zip(rows, cells):
            line += (["-"] * 4 if r.ns_per_op_against is None or r.ns_per_op_alternating is None
                     or r.speedup_against is None else
                     [f"{r.ns_per_op_against:,.0f}", f"{r.ns_per_op_alternating:,.0f}",
                      f"{r.speedup_against:.2f}x", "yes" if r.identical_against else "NO"])
    print_table(columns, cells, numeric=[False, True, True, False] + [True] * (len(columns) - 4),
                title=f"cost model speed, random placements (seed {args.seed})"
                      + ("" if all("/" in r.graph for r in rows) else
                         f"; graphs not named by a task id: {BENCH_OBJECTIVE} on {BENCH_CLUSTER}"))
    print(f"at the end: {describe_load(end, cores)}")
    if not all(row.agree for row in rows):
        print("warning: the fast simulator and the reference disagree on a row marked NO", file=sys.stderr)
    if any(row.identical_against is False for row in rows):
        print(f"warning: {args.against} gives other runtimes on a row marked NO", file=sys.stderr)
    return _check(rows) if args.check else 0


def _run_import(args: argparse.Namespace, stream, machine: dict) -> int:
    cores = machine["usable_cores"]
    rows = run_import_bench(args.import_scaling, progress=_Progress())
    end = load_average()
    end_load = f"at the end: {describe_load(end, cores)}"
    if args.json:
        print(end_load, file=stream)
        print_json({"machine": machine, "load_average_end": end, "rows": [row.to_dict() for row in rows]})
        return 0
    print_table(
        ["nodes", "file MB", "ops", "edges", "load+infer cpu s", "import cpu s", "import/(load+infer)",
         "load+infer wall s", "import wall s"],
        [[f"{r.nodes:,}", f"{r.file_mb:.1f}", f"{r.ops:,}", f"{r.edges:,}", f"{r.baseline_cpu_s:.2f}",
          f"{r.import_cpu_s:.2f}", f"{r.ratio:.1f}x", f"{r.baseline_wall_s:.2f}", f"{r.import_wall_s:.2f}"]
         for r in rows],
        numeric=[True] * 9,
        title="ONNX import (graph_from_onnx) against onnx.load + infer_shapes of the same chain file",
    )
    print(end_load)
    return 0


def _startup_progress(i: int, total: int, name: str, row: StartupRow | None) -> None:
    """A line on stderr before and after each command: a cold run that compiles takes a minute or more."""
    if row is None:
        print(f"[{i + 1}/{total}] {name}: a cold run (empty caches: the first command compiles the numba "
              "kernels, up to a minute or two), then the warm runs ...", file=sys.stderr, flush=True)
    else:
        print(f"[{i + 1}/{total}] {name}: cold {row.cold_s:.2f} s, warm {row.warm_s:.2f} s",
              file=sys.stderr, flush=True)


def _print_rows(args: argparse.Namespace, stream, machine: dict, rows: list, table) -> None:
    """The rows as JSON ({machine, load_average_end, rows}) or as ``table()`` prints them, with the
    load at the end."""
    end = load_average()
    end_load = f"at the end: {describe_load(end, machine['usable_cores'])}"
    if args.json:
        print(end_load, file=stream)
        print_json({"machine": machine, "load_average_end": end, "rows": [row.to_dict() for row in rows]})
        return
    table()
    print(end_load)


def _run_startup(args: argparse.Namespace, stream, machine: dict) -> int:
    rows = run_startup_bench(args.startup, args.repeats, progress=_startup_progress)
    _print_rows(args, stream, machine, rows, lambda: print_table(
        ["command", "cold s", "warm s", "warm median s", "target s", "exit"],
        [[r.command, f"{r.cold_s:.2f}", f"{r.warm_s:.2f}", f"{r.warm_median_s:.2f}",
          f"<= {r.target_s:g}", f"{r.exit_code}" + ("" if r.ok else " (unexpected)")] for r in rows],
        numeric=[False, True, True, True, True, True],
        title=f"startup: wall time of a fresh process (warm: least of {args.repeats} runs after the cold "
              "one; targets: warm, on an idle 2-core machine)"))
    if not all(row.ok for row in rows):
        print("warning: a command ended with an unexpected exit code (marked in the exit column)",
              file=sys.stderr)
        return 1
    return 0


def _run_plans(args: argparse.Namespace, stream, machine: dict) -> int:
    from placement_gym.benchmarks.plans import run_plans_bench

    def progress(i: int, total: int, name: str) -> None:
        print(f"[{i + 1}/{total}] {name}", file=sys.stderr, flush=True)

    rows = run_plans_bench(args.repeats, args.seconds, progress=progress)
    _print_rows(args, stream, machine, rows, lambda: print_table(
        ["plan", "model on mesh", "units", "step s", "ms per plan", "target ms"],
        [[r.name, f"{r.model} on {r.mesh}", f"{r.units:,}", f"{r.step_s:,.3f}",
          f"{r.seconds_per_plan * 1e3:.3f}", "-" if r.target_s is None else f"<= {r.target_s * 1e3:g}"]
         for r in rows],
        numeric=[False, False, True, True, True, True],
        title=f"parallel plans: one evaluate_plan, in-process, one core (median of {args.repeats} rounds; "
              "units: stage-micro-batch passes the schedule simulates; the plans: "
              "placement_gym/benchmarks/plans.py)"))
    failed = [r for r in rows if r.target_s is not None and r.seconds_per_plan > r.target_s]
    return 1 if args.check and failed else 0


def _run_plan_sweep(args: argparse.Namespace, stream, machine: dict) -> int:
    from placement_gym.benchmarks.plans import (
        SWEEP_TARGET_PLANS_PER_S,
        SWEEP_TARGET_S,
        run_sweep_bench,
    )
    from placement_gym.evaluation.agents import baselines_hint, lookup_plan_agent

    agent = lookup_plan_agent("sweep")
    if agent is None:
        raise ValueError(f"bench --plan-sweep needs the plan agent 'sweep' ({baselines_hint()})")

    def progress(i: int, total: int, name: str) -> None:
        print(f"[{i + 1}/{total}] {name}", file=sys.stderr, flush=True)

    rows = run_sweep_bench(agent, progress=progress)

    def table() -> None:
        print_table(
            ["sweep", "priced", "skipped", "seconds", "plans/s", "workers", "best step s"],
            [[r.task, f"{r.priced:,}", f"{r.skipped:,}", f"{r.seconds:.1f}", f"{r.plans_per_s:,.0f}",
              str(r.workers), f"{r.step_s:.3f}"] for r in rows],
            numeric=[False, True, True, True, True, True, True],
            title=f"plan sweeps (every uniform plan that divides; skipped: weights and state alone do not "
                  f"fit; targets on the first: <= {SWEEP_TARGET_S:g} s, >= {SWEEP_TARGET_PLANS_PER_S:,.0f} "
                  "plans/s, 5x Calculon's search; placement_gym/benchmarks/plans.py)")
        for row in rows:
            print_text(f"{row.task}: {row.best}")

    _print_rows(args, stream, machine, rows, table)
    first = rows[0]
    failed = first.seconds > SWEEP_TARGET_S or first.plans_per_s < SWEEP_TARGET_PLANS_PER_S
    return 1 if args.check and failed else 0


def _startup_names(text: str) -> list[str]:
    names = [name.strip() for name in text.split(",") if name.strip()]
    wrong = [name for name in names if name not in STARTUP_COMMANDS]
    if wrong or not names:
        raise argparse.ArgumentTypeError(
            f"expected some of {','.join(STARTUP_COMMANDS)} (comma-separated), got {text!r}")
    return names


def _check(rows: list[BenchRow]) -> int:
    """Print the developers' speed targets against ``rows``, each with why it is set
    there; 1 when one fails or a row disagrees with the reference, else 0."""
    print("\nspeed targets (developers' checks, set on an idle 2-core machine; a busy or smaller "
          "machine can fail them with nothing wrong):")
    for target in bench_targets(rows):
        bound = ">=" if target.at_least else "<="
        measured = "not measured" if target.measured is None else f"{target.measured:,.2f}"
        verdict = {True: "PASS", False: "FAIL", None: "-"}[target.passed]
        print(f"  {target.name}: {measured} (target {bound} {target.target:g}; {target.detail}) {verdict}")
        print(f"    why: {target.why}")
    failed = any(t.passed is False for t in bench_targets(rows)) or not all(row.agree for row in rows)
    return 1 if failed else 0


def add_parser(subparsers: Subcommands) -> None:
    parser = add_command(subparsers, "bench", DESCRIPTION)
    parser.add_argument("--graphs", default="all",
                        help="bundled graphs to time: all, none, or comma-separated names (default: all)")
    parser.add_argument("--sizes", type=_sizes, default=list(DEFAULT_SIZES),
                        help="op counts of the synthetic layered graphs, comma-separated, or none "
                             "(default: 1000,10000,100000); 1000000 works, slowly: on a 2-core VM its task "
                             "takes about 40 s to build and its row about 6 minutes (3 of them one reference "
                             "call) and 6 GB of memory with --batch 16")
    parser.add_argument("--tasks", default="none",
                        help="task ids to time as well, comma-separated, or none (default: none), as the "
                             "leaderboard names tasks: graph/cluster/objective with options, such as "
                             "gnmt8/k40x8/train+mb4 (a pipelined step on 8 K40s)")
    parser.add_argument("--repeats", type=positive_int, default=3,
                        help="least number of fast and batched calls per row (default: 3)")
    parser.add_argument("--seconds", type=_positive_float, default=1.0,
                        help="least seconds spent on each measurement; the reference runs at least once "
                             "(default: 1.0)")
    parser.add_argument("--batch", type=positive_int, default=DEFAULT_BATCH,
                        help=f"placements per batched call (default: {DEFAULT_BATCH})")
    parser.add_argument("--seed", type=int, default=0, help="seed of the random placements (default: 0)")
    parser.add_argument("--import-scaling", type=_sizes, nargs="?", const=list(DEFAULT_IMPORT_SIZES),
                        default=None, metavar="NODES",
                        help="instead of the simulators, time the ONNX import of synthetic chains of these "
                             "node counts (comma-separated; default 25000,50000,100000,200000) against "
                             "onnx.load + shape inference of the same file, in CPU and wall seconds")
    # The measurements over R seeded random one-op moves of each graph, each off by default.
    for flag, measured in (
        ("--incremental-moves",
         "for each bundled graph, also measure incremental_ceiling and changed_fraction "
         "over R seeded random one-op moves: the most that any exact incremental "
         "evaluation (re-simulating from the first op whose start or device a move "
         "changes) could save over a full simulation; R + 1 simulations with their "
         "schedules per graph (default: off)"),
        ("--cutoff-moves",
         "for each graph, also measure cutoff_speedup and cut_fraction over R seeded "
         "random one-op moves: how much faster a move is evaluated with the start's "
         "runtime as cutoff (as hill climbing asks) than in full, median over the moves, "
         "and the share of moves cut; 10 R + R + 1 simulations per graph (default: off)"),
    ):
        parser.add_argument(flag, type=positive_int, default=None, metavar="R", help=measured)
    parser.add_argument("--incremental-from", default="random", metavar="AGENT",
                        help="the placement the moves (--incremental-moves, --cutoff-moves) start from: "
                             "random (seeded) or an installed agent such as m-topo or m-etf "
                             "(default: random)")
    parser.add_argument("--against", metavar="PATH", default=None,
                        help="a checkout of another commit of placement-gym (a git worktree): time its "
                             "simulator on the same rows and placements in a subprocess, in rounds "
                             "alternating with this one, and report its ns per op, against / ours, and "
                             "whether the runtimes are bit for bit the same")
    parser.add_argument("--startup", type=_startup_names, nargs="?", const=list(STARTUP_COMMANDS),
                        default=None, metavar="COMMANDS",
                        help="instead of the simulators, time how long a user waits for a command: the wall "
                             "time of a fresh process running it, once cold (numba's and placement-gym's "
                             "caches empty, in temporary folders) and --repeats times warm, for "
                             f"{', '.join(STARTUP_COMMANDS)} (comma-separated; default all): --help, "
                             "evaluate --graph inception_v3 --agent heft, and the same with a misspelled "
                             "graph name")
    parser.add_argument("--plans", action="store_true",
                        help="instead of the simulators, time how long pricing a parallel plan takes "
                             "(placement-gym plan; placement_gym.benchmarks.plans: GPT-3 175B on 512 H100, "
                             "target <= 1 ms, and three more), with --repeats rounds of --seconds each")
    parser.add_argument("--plan-sweep", action="store_true",
                        help="instead of the simulators, time the plan agent 'sweep' (every uniform plan of "
                             "Llama-2 70B on 1,024 H100, target <= 60 s and >= 3,640 plans/s, and of GPT-3 "
                             "175B on 64 A100; placement_gym.benchmarks.plans)")
    parser.add_argument("--json", action="store_true",
                        help="print JSON instead of a table: {machine, load_average_end, rows} "
                             "(docs/cost_model.md#speed lists every key; progress goes to stderr)")
    parser.add_argument("--check", action="store_true",
                        help="for developers: also check the speed targets, explain each, and "
                             "exit 1 when one fails (they assume an idle 2-core machine)")
    parser.set_defaults(run=run)
