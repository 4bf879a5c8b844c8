"""`placement-gym demo`: a short tour on bundled graphs (README's first command runs it)."""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from placement_gym.cli.common import add_optimizer_argument, step_from_args
from placement_gym.cli.output import print_json, print_table, print_text
from placement_gym.cli.subcommands import Subcommands, add_command
from placement_gym.common.paths import OUTPUT_ROOT_HELP, output_root

DESCRIPTION = (
    "Evaluate the best single device, HEFT (from an installed agent package, the bundled "
    "baselines by default) and simple placements of three bundled models' training steps (set by "
    "--cluster, --optimizer, --precision, --microbatches and --recompute), play one episode of "
    "DevicePlacement-v0 "
    "and draw the schedules of the best single device and HEFT."
)
"""What `placement-gym demo --help` says the command does."""


PICTURE_NAME = "placement-gym-demo.png"


def picture_path(out: str | None) -> Path | None:
    """Where the schedule picture goes: ``--out`` as a file when it ends in ``.png``, else as a
    folder (the picture is `PICTURE_NAME` in it); None for ``none``; by default
    ``<output root>/demo/`` (`output_root`), never the current folder."""
    if out == "none":
        return None
    if out is None:
        return output_root() / "demo" / PICTURE_NAME
    path = Path(out).expanduser()
    return path if path.suffix.lower() == ".png" else path / PICTURE_NAME


def run_demo(args: argparse.Namespace) -> int:
    from placement_gym.cli.demo import DEMO_GRAPHS, demo_episode, demo_rows, demo_timeline

    started = time.perf_counter()
    step = step_from_args(args)
    rows = demo_rows(DEMO_GRAPHS, args.cluster, samples=args.samples, seed=args.seed, step=step)
    episode = demo_episode(args.seed)
    picture = None
    path = picture_path(args.out)
    if path is not None:
        try:
            picture = str(
                demo_timeline(path, cluster=args.cluster, samples=args.samples, seed=args.seed, step=step)
            )
        except ImportError as error:  # matplotlib (the viz extra) missing: the rest still ran
            picture = f"skipped ({error})"
    result = {"rows": rows, "episode": episode, "timeline": picture, "wall_s": time.perf_counter() - started}
    if args.json:
        print_json(result)
        return 0
    print_table(
        ["task", "ops", "placement", "runtime (ms)", "feasible", "speedup", "simple lower bound (ms)"],
        [
            [
                r["task"],
                r["ops"],
                r["agent"],
                f"{r['runtime'] * 1e3:,.1f}",
                "yes" if r["feasible"] else "out of memory",
                f"{r['speedup']:.2f}x" if r["feasible"] else "-",
                f"{r['lower_bound'] * 1e3:,.1f}",
            ]
            for r in rows
        ],
        numeric=[False, True, False, True, False, True, True],
        title=f"Training steps on {args.cluster}: simulated runtime, "
        "speedup over the best single device that fits",
    )
    print()
    print_text(
        f"DevicePlacement-v0 on cifar10_cnn / k80x2, one random action: reward {episode['reward']:.3f} "
        f"(runtime {episode['runtime'] * 1e3:.1f} ms, "
        f"best single device {episode['best_single_runtime'] * 1e3:.1f} ms)"
    )
    if picture:
        shown = "HEFT" if any(r["agent"] == "HEFT" for r in rows) else f"the best of {args.samples} random"
        print_text(f"Schedules of the best single device and {shown} on inception_v3 / {args.cluster}, "
                   f"one time axis: {picture}")
    print_text(
        f"Done in {result['wall_s']:.1f} s. "
        "Next: placement-gym evaluate --help, placement-gym bench, README.md."
    )
    return 0


def add_parser(subparsers: Subcommands) -> None:
    parser = add_command(subparsers, "demo", DESCRIPTION)
    parser.add_argument("--cluster", default="k80x4", help="cluster preset or JSON file (default: k80x4)")
    parser.add_argument(
        "--samples", type=int, default=256, help="random placements to try per graph (default: 256)"
    )
    parser.add_argument("--seed", type=int, default=0, help="seed of the random placements and the episode")
    add_optimizer_argument(parser)
    parser.add_argument(
        "--out",
        default=None,
        metavar="DIR",
        help=f"folder for the schedule picture ({PICTURE_NAME}; created if missing), a path ending in .png "
        f"for the file itself, or 'none' for no picture (default: <output root>/demo, the output root "
        f"being {OUTPUT_ROOT_HELP})",
    )
    parser.add_argument("--json", action="store_true", help="print a JSON object instead of tables")
    parser.set_defaults(run=run_demo)
