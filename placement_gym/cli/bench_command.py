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
from placement_gym.benchmarks.targets import BenchTarget, bench_targets
from placement_gym.cli.common import positive_int
from placement_gym.cli.output import print_json, print_table, print_text
from placement_gym.cli.subcommands import Subcommands, add_command
from placement_gym.real.segments import COMPILE_MODES

DESCRIPTION = (
    "Time the fast simulator (one call and batched) and the reference simulator on the bundled "
    f"graphs and on synthetic layered graphs (train_step on {BENCH_CLUSTER}, random placements). "
    "Each row first checks that they agree. Prints the machine (CPU, cores) and the load average "
    "at the start and the end: the figures hold for that machine and load only. --check adds the "
    "developers' speed targets, with why each is set, and exits 1 when one fails."
)
"""What `placement-gym bench --help` says the command does."""

# `--real-overhead`'s rows by default (placement_gym.real.overhead; kept here so that --help imports
# no torch): graph -> batch, each objective.
DEFAULT_OVERHEAD_GRAPHS = {"tiny-chain": 4, "cifar10_cnn": 8, "resnet50": 1, "bert_base": 1}
TINY_CHAIN = "tiny-chain"  # placement_gym.real.overhead.TINY_CHAIN (a test holds the two equal)
DEFAULT_OVERHEAD_REPEATS = 5
OVERHEAD_OBJECTIVES = ("inference", "train_step")


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
    overhead_rows = _overhead_plan(args) if args.real_overhead else None  # bad names fail before anything
    if args.repeats is None:
        args.repeats = DEFAULT_OVERHEAD_REPEATS if args.real_overhead else 3
    machine = machine_description()
    cores = machine["usable_cores"]
    stream = sys.stderr if args.json else sys.stdout
    print(describe_machine(machine), file=stream)
    print(f"at the start: {describe_load(machine['load_average'], cores)}", file=stream, flush=True)
    if args.import_scaling is not None:
        return _run_import(args, stream, machine)
    if args.startup is not None:
        return _run_startup(args, stream, machine)
    if overhead_rows is not None:
        return _run_real_overhead(args, stream, machine, overhead_rows)
    if args.plans:
        return _run_plans(args, stream, machine)
    if args.plan_sweep:
        return _run_plan_sweep(args, stream, machine)
    graphs = _names("all" if args.graphs is None else args.graphs)
    rows = run_bench(graphs, args.sizes, repeats=args.repeats, seconds=args.seconds,
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
    """The rows (objects with ``to_dict``, or dicts) as JSON ({machine, load_average_end, rows}) or as
    ``table()`` prints them, with the load at the end."""
    end = load_average()
    end_load = f"at the end: {describe_load(end, machine['usable_cores'])}"
    if args.json:
        print(end_load, file=stream)
        print_json({"machine": machine, "load_average_end": end,
                    "rows": [row if isinstance(row, dict) else row.to_dict() for row in rows]})
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


def _overhead_plan(args: argparse.Namespace) -> list[tuple[str, int, str]]:
    """The rows `--real-overhead` measures, (graph, batch, objective), checked before anything runs:
    ``--graphs NAME[:BATCH],...`` (default `DEFAULT_OVERHEAD_GRAPHS`, each at its batch there; a name
    without one runs at that batch, else at 1), bundled graphs only, each objective of ``--objective``.
    Needs torch (a one-line error naming the extra otherwise) and, with ``--device cuda``, a CUDA GPU."""
    from placement_gym.common.extras import require
    from placement_gym.graph import bundled_graph_names, load_graph

    torch = require("torch", "placement-gym bench --real-overhead")
    if args.device == "cuda" and not torch.cuda.is_available():
        raise ValueError("bench --real-overhead --device cuda: torch sees no CUDA device on this machine")
    text = args.graphs
    if text is None:
        specs = list(DEFAULT_OVERHEAD_GRAPHS.items())
    else:
        if text.strip() in ("", "all", "none"):
            raise ValueError(f"bench --real-overhead: --graphs takes bundled graph names (NAME or "
                             f"NAME:BATCH, comma-separated), not {text.strip()!r}; default: "
                             + ",".join(f"{g}:{b}" for g, b in DEFAULT_OVERHEAD_GRAPHS.items()))
        specs = []
        for part in (p.strip() for p in text.split(",") if p.strip()):
            name, _, batch_text = part.partition(":")
            try:
                batch = int(batch_text) if batch_text else DEFAULT_OVERHEAD_GRAPHS.get(name, 1)
            except ValueError:
                batch = 0
            if batch < 1:
                raise ValueError(f"bench --real-overhead: {part!r}: the batch after ':' must be a positive "
                                 "integer (NAME:BATCH)")
            specs.append((name, batch))
    known = [TINY_CHAIN, *bundled_graph_names()]
    for name, batch in specs:
        if name not in known:
            raise ValueError(f"bench --real-overhead: unknown graph {name!r}; allowed: {', '.join(known)}")
        largest = 4 if name == TINY_CHAIN else load_graph(name).data_inputs[0][1][0]
        if batch > largest:
            raise ValueError(f"bench --real-overhead: {name}:{batch}: the batch may be at most the graph's "
                             f"own ({largest})")
    objectives = OVERHEAD_OBJECTIVES if args.objective == "both" else (args.objective,)
    return [(name, batch, objective) for name, batch in specs for objective in objectives]


def _run_real_overhead(args: argparse.Namespace, stream, machine: dict,
                       plan: list[tuple[str, int, str]]) -> int:
    from placement_gym.real.overhead import measure_overhead

    rows, failed = [], []
    for i, (name, batch, objective) in enumerate(plan):
        label = f"{name} {objective}, batch {batch}, {args.device}"
        print(f"[{i + 1}/{len(plan)}] {label} ...", file=sys.stderr, flush=True)
        start = time.perf_counter()
        try:
            options = {} if args.executor_compile is None else {"compile": args.executor_compile}
            row = measure_overhead(name, objective, batch, repeats=args.repeats, device=args.device,
                                   compiled=args.compiled, executor_options=options)
        except RuntimeError as error:  # the executor's step failed on the device (out of memory, ...)
            print(f"[{i + 1}/{len(plan)}] {label}: failed: {error}", file=sys.stderr, flush=True)
            failed.append(label)
            continue
        rows.append(row)
        print(f"[{i + 1}/{len(plan)}] {label}: executor {row['executor_ms']:,.2f} ms, torch "
              f"{row['torch_ms']:,.2f} ms ({time.perf_counter() - start:.1f} s)", file=sys.stderr, flush=True)
        if row["note"]:
            print(f"  note: {row['note']}", file=sys.stderr, flush=True)
    compiled = any(row["compiled_ms"] is not None for row in rows)

    def table() -> None:
        columns = ["graph", "objective", "batch", "ops", "executor ms", "torch ms", "overhead us/op",
                   "vs torch"]
        cells = [[r["graph"], "train" if r["objective"] == "train_step" else r["objective"], str(r["batch"]),
                  f"{r['n_jobs']:,}", f"{r['executor_ms']:,.2f}", f"{r['torch_ms']:,.2f}",
                  f"{r['overhead_us_per_op']:,.1f}", f"{r['vs_torch']:.2f}x"] for r in rows]
        if compiled:
            columns += ["compiled ms", "vs comp."]
            for r, line in zip(rows, cells):
                line += (["-", "-"] if r["compiled_ms"] is None else
                         [f"{r['compiled_ms']:,.2f}", f"{r['vs_compiled']:.2f}x"])
        threads = "one intra-op thread" if args.device == "cpu" else "one CUDA GPU"
        print_table(columns, cells, numeric=[False, False] + [True] * (len(columns) - 2),
                    title=f"the executor's one-device step against torch running the same graph directly "
                          f"({args.device}, {threads}; median of {args.repeats} interleaved rounds; "
                          "ops: task ops; overhead: (executor - torch) / ops)")
        if rows:
            worst = max(rows, key=lambda r: r["overhead_us_per_op"])
            least = min(r["overhead_us_per_op"] for r in rows)
            ratios = [r["vs_torch"] for r in rows]
            most = worst["overhead_us_per_op"]
            counted = f"{len(rows)} row{'' if len(rows) == 1 else 's'}"
            print_text(f"summary: {counted}; overhead {least:,.1f} to {most:,.1f} us per task op "
                       f"(most: {worst['graph']} {worst['objective']}); executor / torch "
                       f"{min(ratios):.2f}x to {max(ratios):.2f}x")

    _print_rows(args, stream, machine, rows, table)
    if failed:
        print(f"warning: {len(failed)} row(s) failed: {'; '.join(failed)}", file=sys.stderr)
    code = 1 if failed else 0
    if args.check:
        # With --json stdout stays one JSON object: the targets go to stderr.
        code = max(code, _print_targets(_overhead_targets(rows, args.device), stream))
    return code


def _overhead_targets(rows: list[dict], device: str) -> list[BenchTarget]:
    """Issue 67's targets for the executor's overhead, measured on ``rows``: on the CPU the largest
    overhead per job and the largest executor / torch ratio; on a GPU executor / torch eager of
    ResNet-50 inference at batch 32."""
    from placement_gym.real import overhead as o

    if device == "cuda":
        gpu = [r for r in rows
               if (r["graph"], r["objective"], r["batch"]) == ("resnet50", "inference", 32)]
        return [BenchTarget("one-device step / torch eager, resnet50 inference at batch 32, GPU",
                            gpu[0]["vs_torch"] if gpu else None, o.TARGET_VS_TORCH_GPU, False,
                            "needs --graphs resnet50:32" if not gpu else "resnet50:32", o.WHY_VS_TORCH_GPU)]
    # The overhead per op is measurable where ops cost next to nothing (the tiny chain: on real graphs
    # the noise of a shared machine, tens of microseconds per op, swamps it); the ratio is meaningful
    # on real graphs (on the tiny chain the ops themselves are a few microseconds).
    tiny = [r for r in rows if r["graph"] == TINY_CHAIN] or rows
    real = [r for r in rows if r["graph"] != TINY_CHAIN] or rows
    most = max(tiny, key=lambda r: r["overhead_us_per_op"], default=None)
    slowest = max(real, key=lambda r: r["vs_torch"], default=None)
    return [
        BenchTarget("executor overhead, us per task op (the tiny chain's rows)",
                    None if most is None else most["overhead_us_per_op"], o.TARGET_US_PER_OP, False,
                    "no rows" if most is None else f"most: {most['graph']} {most['objective']}",
                    o.WHY_US_PER_OP),
        BenchTarget("one-device step / torch direct (the bundled graphs' rows)",
                    None if slowest is None else slowest["vs_torch"], o.TARGET_VS_TORCH, False,
                    "no rows" if slowest is None else f"most: {slowest['graph']} {slowest['objective']}",
                    o.WHY_VS_TORCH),
    ]


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
    failed = _print_targets(bench_targets(rows))
    return 1 if failed or not all(row.agree for row in rows) else 0


def _print_targets(targets: list[BenchTarget], stream=None) -> int:
    """Print each target with its measure, verdict and why (on ``stream``, default stdout); 1 when
    one fails, else 0."""
    stream = sys.stdout if stream is None else stream
    print("\nspeed targets (developers' checks, set on an idle 2-core machine; a busy or smaller "
          "machine can fail them with nothing wrong):", file=stream)
    for target in targets:
        bound = ">=" if target.at_least else "<="
        measured = "not measured" if target.measured is None else f"{target.measured:,.2f}"
        verdict = {True: "PASS", False: "FAIL", None: "-"}[target.passed]
        print(f"  {target.name}: {measured} (target {bound} {target.target:g}; {target.detail}) {verdict}",
              file=stream)
        print(f"    why: {target.why}", file=stream)
    return 1 if any(t.passed is False for t in targets) else 0


def add_parser(subparsers: Subcommands) -> None:
    parser = add_command(subparsers, "bench", DESCRIPTION)
    parser.add_argument("--graphs", default=None,
                        help="bundled graphs to time: all, none, or comma-separated names (default: all); "
                             "with --real-overhead NAME[:BATCH],... (default: "
                             + ",".join(f"{g}:{b}" for g, b in DEFAULT_OVERHEAD_GRAPHS.items()) + ")")
    parser.add_argument("--sizes", type=_sizes, default=list(DEFAULT_SIZES),
                        help="op counts of the synthetic layered graphs, comma-separated, or none "
                             "(default: 1000,10000,100000); 1000000 works, slowly: on a 2-core VM its task "
                             "takes about 40 s to build and its row about 6 minutes (3 of them one reference "
                             "call) and 6 GB of memory with --batch 16")
    parser.add_argument("--tasks", default="none",
                        help="task ids to time as well, comma-separated, or none (default: none), as the "
                             "leaderboard names tasks: graph/cluster/objective with options, such as "
                             "gnmt8/k40x8/train+mb4 (a pipelined step on 8 K40s)")
    parser.add_argument("--repeats", type=positive_int, default=None,
                        help="least number of fast and batched calls per row (default: 3); with "
                             f"--real-overhead, timed rounds per row (default: {DEFAULT_OVERHEAD_REPEATS})")
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
    parser.add_argument("--real-overhead", action="store_true",
                        help="instead of the simulators, measure the real executor's own overhead: per graph "
                             "its one-device step against torch running the same graph directly (one "
                             "straight-line program, same ops, weights and data), median of --repeats "
                             "interleaved rounds, in the same process, on the CPU under one intra-op thread "
                             "(placement_gym.real.overhead; needs torch, the real extra); --check adds issue "
                             "67's targets (<= 5 us per task op, <= 1.2x torch)")
    parser.add_argument("--objective", choices=("both", *OVERHEAD_OBJECTIVES), default="both",
                        help="with --real-overhead: the steps to measure (default: both)")
    parser.add_argument("--device", choices=("cpu", "cuda"), default="cpu",
                        help="with --real-overhead: where both run (cuda: the first CUDA GPU, the executor's "
                             "task on a one-GPU cluster; default: cpu)")
    parser.add_argument("--compiled", action="store_true",
                        help="with --real-overhead: also time the direct forward compiled by torch.compile "
                             "(inference rows; columns compiled ms and vs compiled; a compile that fails "
                             "leaves them empty, with a note)")
    parser.add_argument("--executor-compile", choices=COMPILE_MODES, default=None, metavar="MODE",
                        help="with --real-overhead: the executor compiles its units with torch.compile in "
                             f"this mode ({', '.join(COMPILE_MODES)}; reduce-overhead: CUDA graphs on a GPU; "
                             "the Executor's compile=; default: none, ops one by one)")
    parser.add_argument("--json", action="store_true",
                        help="print JSON instead of a table: {machine, load_average_end, rows} "
                             "(docs/cost_model.md#speed lists every key; progress goes to stderr)")
    parser.add_argument("--check", action="store_true",
                        help="for developers: also check the speed targets, explain each, and "
                             "exit 1 when one fails (they assume an idle 2-core machine)")
    parser.set_defaults(run=run)
