"""`placement-gym profile` and `placement-gym fidelity`: measure a graph on real devices, and check
the cost models against real runs (`placement_gym.real.profile`, `placement_gym.real.fidelity`)."""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

from placement_gym.cli.common import positive_int
from placement_gym.cli.output import fmt_seconds, print_json, print_table
from placement_gym.cli.subcommands import Subcommands, add_command
from placement_gym.common.paths import output_root
from placement_gym.task.compiled import OPTIMIZERS

DESCRIPTIONS = {
    "profile": (
        "Measure every op's forward and backward time on each device, the update time of each "
        "parameterised op with --optimizer, and the bandwidth and latency of each link; write a profile "
        "(keyed by the graph's sha256, the devices, the batch and the optimizer) that the profiled cost "
        "model uses. A cached profile is reused unless --force or --out."
    ),
    "fidelity": (
        "Run --samples placements (single-device, heuristic and random ones) on real devices and "
        "in the analytical and profiled cost models; print Spearman's rank correlation and the mean absolute "
        "percentage error of each model against the measurements, and write a scatter plot (PNG). The "
        "profile comes from the cache (measured first when missing)."
    ),
}
"""What each command's ``--help`` says it does, by command."""


# Default timed runs of each op, link and whole-graph step of a profile, and default fidelity rounds.


PROFILE_REPEATS = 5
FIDELITY_ROUNDS = 5


def _plot_path(out: str | None, name: str) -> Path:
    """Where a fidelity plot goes: ``--out``, else ``fidelity/<name>`` under the output root."""
    return Path(out) if out is not None else output_root() / "fidelity" / name


def graph_and_model(name: str) -> tuple[Any, str | None]:
    """The graph of ``--graph`` and, for an ONNX file, its path (the executor needs the model).

    A file with an op the torch executor cannot run ends here, in one line (`UnsupportedOpError`,
    exit code 2), before the import's warnings (an op without a cost formula) and any measuring."""
    import warnings

    from placement_gym.graph import load_graph

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        graph = load_graph(name)
    model = name if Path(name).is_file() else None
    if model is not None:
        from placement_gym.real.program import check_runnable, load_model

        check_runnable(load_model(graph, model), graph.name)
    for warning in caught:  # the graph runs: its import's warnings still concern the cost model
        warnings.warn_explicit(warning.message, warning.category, warning.filename, warning.lineno)
    return graph, model


def _note(args: argparse.Namespace, message: str) -> None:
    """Progress for humans: stderr, so that --json output stays one JSON object."""
    print(message, file=sys.stderr if args.json else sys.stdout, flush=True)


def _get_profile(
    args,
    graph,
    model,
    devices: dict[str, str],
    force: bool = False,
    out: str | None = None,
    repeats: int = PROFILE_REPEATS,
    any_optimizer: bool = False,
) -> tuple[dict, str, bool]:
    """The cached profile of ``graph`` on ``devices`` at ``--batch`` for ``--optimizer`` (measured and
    saved, to ``out`` or the cache, when missing or ``force``, with ``repeats`` timed runs):
    ``(profile, path, measured_now)``. ``any_optimizer``: a cached profile of another optimizer will
    do (an inference task has no update op)."""
    from placement_gym.real.devices import intra_op_threads, virtual_cpus
    from placement_gym.real.measure import measure_profile
    from placement_gym.real.profile import cache_dir, find_profile, save_profile

    if not force:
        cached = find_profile(graph, devices, args.batch, None if any_optimizer else args.optimizer)
        if cached is not None:
            return cached, str(cache_dir() / f"{graph.name}-{cached['key']}.json"), False
    batch = f" at batch {args.batch}" if args.batch else ""
    _note(
        args,
        f"measuring the profile of {graph.name}{batch} on {', '.join(sorted(devices))} "
        f"(optimizer {args.optimizer}) ...",
    )
    with intra_op_threads(1 if virtual_cpus(devices.values()) else None):
        profile = measure_profile(
            graph,
            devices,
            batch=args.batch,
            repeats=repeats,
            warmup=args.warmup,
            model=model,
            optimizer=args.optimizer,
        )
    path = save_profile(profile, out)
    return profile, str(path), True


def _check_warmup(args: argparse.Namespace) -> None:
    if args.warmup < 0:
        raise ValueError(f"--warmup must be an integer >= 0, got {args.warmup}")


def run_profile(args: argparse.Namespace) -> int:
    from placement_gym.real.fidelity import resolve_devices
    from placement_gym.real.profile import profile_optimizer

    _check_warmup(args)
    cluster, devices = resolve_devices(args.devices, args.cluster)
    graph, model = graph_and_model(args.graph)
    start = time.perf_counter()
    profile, path, measured = _get_profile(
        args,
        graph,
        model,
        devices,
        force=args.force or args.out is not None,
        out=args.out,
        repeats=args.repeats or PROFILE_REPEATS,
    )
    summary = {
        "graph": graph.name,
        "sha256": profile["graph"]["sha256"],
        "batch": profile.get("batch"),
        "optimizer": profile_optimizer(profile),
        "devices": devices,
        "cluster": cluster.name,
        "key": profile["key"],
        "path": path,
        "measured": measured,
        "ops": len(profile["forward_s"]),
        "wall_s": time.perf_counter() - start,
        "forward_total_s": {d: sum(row[d] for row in profile["forward_s"].values()) for d in devices},
        "backward_total_s": {
            d: sum(row[d] for row in (profile.get("backward_s") or {}).values()) for d in devices
        },
        "link_bandwidth": profile["link_bandwidth"],
        "link_latency": profile["link_latency"],
    }
    if args.json:
        print_json(summary)
        return 0
    rows = [
        [
            "graph",
            f"{graph.name} ({summary['ops']} ops, batch "
            f"{profile.get('batch') if profile.get('batch') else 'of the graph'})",
        ],
        ["devices", ", ".join(f"{n}={s}" for n, s in devices.items())],
        ["optimizer", f"{summary['optimizer']} (update ops and train steps)"],
        ["profile", f"{path} ({'measured now' if measured else 'cached, reused; --force re-measures'})"],
    ]
    for d in devices:
        rows.append(
            [
                f"{d} forward / backward sum",
                f"{fmt_seconds(summary['forward_total_s'][d])} / "
                f"{fmt_seconds(summary['backward_total_s'][d])}",
            ]
        )
    for src, row in profile["link_bandwidth"].items():
        for dst, bandwidth in row.items():
            rows.append(
                [
                    f"link {src} -> {dst}",
                    f"{bandwidth / 1e9:.2f} GB/s, latency {profile['link_latency'][src][dst] * 1e6:.1f} us",
                ]
            )
    print_table(["", ""], rows, header=False, title="profile")
    return 0


def run_published_command(args: argparse.Namespace) -> int:
    """``fidelity --published``: the cost model against every published measurement."""
    from placement_gym.calibration.compare import (
        compare_published,
        page_block,
        page_is_current,
        scatter_plot,
        update_page,
    )
    from placement_gym.calibration.plans import UNITS, compare_plans, format_figure, plans_block

    results = compare_published()
    plan_results = compare_plans()
    rows = [
        [
            r.row.id,
            r.row.figure,
            f"{r.row.published:.3f}",
            f"{r.model:.3f}",
            f"{r.error:+.1%}",
            f"{'yes' if r.within else 'NO'} (±{r.row.tolerance:.0%})" if r.held
            else f"{'yes' if r.within else 'no'} (not held: beyond the model)",
        ]
        for r in results
    ]
    print_table(
        ["row", "published figure", "published", "model", "error", "within"],
        rows,
        title="cost model against published measurements (s per step, one device / placement, or "
        "matmul utilisation)",
    )
    print_table(
        ["row", "unit", "published", "model", "error", "within"],
        [
            [r.row.id + (" (held out)" if r.row.role == "held-out" else ""), UNITS[r.row.kind],
             format_figure(r.row.kind, r.row.published), format_figure(r.row.kind, r.model),
             f"{r.error:+.1%}", f"{'yes' if r.within else 'NO'} ±{r.row.tolerance:.0%}"]
            for r in plan_results
        ],
        title="parallel plans against published whole steps (placement-gym plan; docs/calibration.md)",
    )
    args.out = _plot_path(args.out, "published.png")
    image = None
    if args.page:
        image = (
            Path(args.out).name if Path(args.out).parent == Path(args.page).parent else str(Path(args.out))
        )
    block = page_block(results, image)
    plans = plans_block(plan_results)
    if args.check:
        if not args.page:
            raise ValueError("--check needs --page FILE (the page to check)")
        if not (page_is_current(args.page, block) and page_is_current(args.page, plans)):
            print(f"{args.page} is out of date: run placement-gym fidelity --published --page {args.page}")
            return 1
        print(f"{args.page} is up to date")
        return 0
    args.out.parent.mkdir(parents=True, exist_ok=True)
    scatter_plot(results, args.out)
    _note(args, f"wrote {args.out}")
    if args.page:
        update_page(args.page, block)
        update_page(args.page, plans)
        _note(args, f"wrote {args.page}")
    held = all(r.within for r in results if r.held) and all(r.within for r in plan_results)
    return 0 if held else 1  # a row beyond the model is shown, not held


def run_fidelity_command(args: argparse.Namespace) -> int:
    if args.published:
        return run_published_command(args)
    if args.graph is None:
        raise ValueError("fidelity needs --graph (a bundled graph name or an ONNX file), or --published")
    from placement_gym.real.fidelity import (
        fidelity_placements,
        rebatched_graph,
        resolve_devices,
        run_fidelity,
        scatter_plot,
    )
    from placement_gym.task.compiled import make_task
    from placement_gym.task.step import Step

    _check_warmup(args)
    cluster, devices = resolve_devices(args.devices, args.cluster)
    graph, model = graph_and_model(args.graph)

    step = Step(args.objective, args.optimizer)  # refuses an unknown objective, an optimizer with inference
    task = make_task(graph, cluster, step)
    scaled = rebatched_graph(graph, args.batch, model)  # checks --batch before any measuring
    profile, path, measured_now = _get_profile(
        args, graph, model, devices, any_optimizer=args.objective == "inference"
    )
    if not measured_now:
        _note(args, f"using the cached profile {path}")
    placements = fidelity_placements(
        make_task(scaled, cluster, step), args.samples, args.seed
    )
    rounds = args.repeats or FIDELITY_ROUNDS

    def announce_round(i: int, label: str) -> None:
        if i % len(placements) == 0:  # one line per round, not per run
            _note(args, f"  round {i // len(placements) + 1}/{rounds}: {len(placements)} placements")

    start = time.perf_counter()
    report = run_fidelity(
        task,
        devices,
        profile,
        placements,
        batch=args.batch,
        seed=args.seed,
        repeats=rounds,
        statistic=args.statistic,
        warmup=args.warmup,
        model=model,
        progress=None if args.json else announce_round,
    )
    out = _plot_path(args.out, "fidelity.png")
    out.parent.mkdir(parents=True, exist_ok=True)
    out = scatter_plot(report, out)
    summary = {
        **report.to_dict(),
        "objective": args.objective,
        "profile": path,
        "profile_measured_now": measured_now,
        "scatter_png": str(out),
        "rounds": rounds,
        "wall_s": time.perf_counter() - start,
    }
    if args.json:
        print_json(summary)
        return 0
    rows = [
        [
            r["label"],
            fmt_seconds(r["measured_s"]) if r["error"] is None else "FAILED",
            fmt_seconds(r["profiled_s"]),
            fmt_seconds(r["analytical_s"]),
        ]
        for r in summary["placements"]
    ]
    batch = f"batch {args.batch} (smaller than the graph's)" if args.batch else "the graph's batch"
    trained_with = f" with {report.optimizer}" if report.optimizer else ""
    print_table(
        ["placement", "measured", "profiled", "analytical"],
        rows,
        numeric=[False, True, True, True],
        title=f"{task.id}{trained_with} at {batch}, {args.statistic} of {rounds} rounds",
    )
    print_table(
        ["model", "Spearman", "MAPE"],
        [
            *[
                [name, f"{summary[f'spearman_{name}']:.3f}", f"{summary[f'mape_{name}']:.1f}%"]
                for name in ("profiled", "analytical")
            ],
            ["measured, even vs odd rounds", f"{summary['spearman_repeat']:.3f}", "-"],
        ],
        title=f"fidelity over {summary['scored']} of {summary['samples']} placements",
    )
    for name, other in summary["other_statistics"].items():
        print(
            f"with the {name} of the rounds: Spearman profiled {other['spearman_profiled']:.3f}, "
            f"analytical {other['spearman_analytical']:.3f}, "
            f"measured even vs odd {other['spearman_repeat']:.3f}"
        )
    print(f"scatter plot: {out}")
    return 0


def _add_device_arguments(
    parser: argparse.ArgumentParser, repeats_help: str, graph_required: bool = True
) -> None:
    parser.add_argument("--graph", required=graph_required, help="bundled graph name or path to an ONNX file")
    parser.add_argument(
        "--devices",
        default=None,
        metavar="MAP",
        help="cluster device name = torch device, comma separated, such as cpu:0=cpu,cpu:1=cpu "
        "(two virtual CPU devices) or cpu:0=cpu,gpu:0=cuda:0",
    )
    parser.add_argument(
        "--cluster",
        default=None,
        help="cluster of the devices (cpu<N>, local, a preset or a JSON file); alone, its devices "
        "map to torch devices (cpu -> cpu, gpu:i -> cuda:i). Default with --devices cpu:0..: cpu<N>",
    )
    parser.add_argument(
        "--batch",
        type=positive_int,
        default=None,
        help="a smaller batch than the graph's (default: the graph's)",
    )
    parser.add_argument("--repeats", type=positive_int, default=None, help=repeats_help)
    parser.add_argument("--warmup", type=int, default=1, help="untimed runs before them (default: 1)")
    parser.add_argument(
        "--optimizer",
        default="adam",
        choices=tuple(OPTIMIZERS),
        help="optimizer of a train step, as the task's (default: adam): the update the executor runs and "
        "the profile times; a profile is kept per optimizer",
    )
    parser.add_argument("--json", action="store_true", help="print a JSON object")


def add_parsers(subparsers: Subcommands) -> None:
    profile = add_command(subparsers, "profile", DESCRIPTIONS["profile"])
    _add_device_arguments(
        profile,
        f"timed runs of each op, link and whole-graph step; each time is their median "
        f"(default: {PROFILE_REPEATS})",
    )
    profile.add_argument("--out", default=None, help="profile file to write (default: the profile cache)")
    profile.add_argument("--force", action="store_true", help="measure again even if a cached profile exists")
    profile.set_defaults(run=run_profile)

    fidelity = add_command(subparsers, "fidelity", DESCRIPTIONS["fidelity"])
    _add_device_arguments(
        fidelity,
        f"rounds: each round runs every placement once, in a seeded random order, and a "
        f"placement's runtime is the --statistic of its rounds (default: {FIDELITY_ROUNDS}). A profile "
        f"measured first uses {PROFILE_REPEATS} timed runs",
        graph_required=False,
    )
    fidelity.add_argument("--samples", type=positive_int, default=20, help="placements to run (default: 20)")
    fidelity.add_argument(
        "--objective", default="train_step", help="train_step or inference (default: train_step)"
    )
    fidelity.add_argument(
        "--seed", type=int, default=0, help="seed of placements, weights and data (default: 0)"
    )
    fidelity.add_argument(
        "--statistic",
        default="min",
        choices=("min", "median"),
        help="how a placement's rounds become its runtime: min (default; interference only slows runs "
        "down, so the fastest round is the placement's own cost, as timeit advises) or median; the JSON "
        "has the figures of both",
    )
    fidelity.add_argument("--out", default=None,
                          help="scatter plot PNG (default: fidelity/fidelity.png, or fidelity/published.png "
                               "with --published, under $PLACEMENT_GYM_OUTPUT or ~/placement-gym-output)")
    fidelity.add_argument(
        "--published",
        action="store_true",
        help="instead of real runs: the cost model against every published measurement of "
        "docs/calibration.md (no device needed); prints the table, writes the plot to --out, exits 1 "
        "when a row is outside its tolerance",
    )
    fidelity.add_argument(
        "--page",
        default=None,
        help="with --published: markdown page to update (its generated part), such as docs/calibration.md",
    )
    fidelity.add_argument(
        "--check",
        action="store_true",
        help="with --published --page: exit 1 if the page is not what the model gives now",
    )
    fidelity.set_defaults(run=run_fidelity_command)
