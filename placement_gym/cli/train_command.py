"""`placement-gym train`: train a learned agent (or run a search agent) on an evaluation budget.

The agent comes from a provider of the entry-point group ``placement_gym.agents``
(`placement_gym.evaluation.agents.find_trainer`): the `baselines` package's learned agents and its search
agents (anneal, cem: one run, with the same curve), or another package's.

Outputs go to ``--out`` (default ``<output root>/runs/<run name>``, the output root being
``$PLACEMENT_GYM_OUTPUT`` or ``~/placement-gym-output``: `placement_gym.common.paths.output_root`);
``--tensorboard DIR`` also logs the curve for TensorBoard. The run ends with its speedup over the
best single device.

``--evaluator`` picks what scores the agent's placements, as the envs' ``evaluator=`` does, through the
same registry of scoring backends (`placement_gym.evaluation.evaluator.evaluator_backend`): ``cost_model``
(default), ``profiled`` (the cost model with measured op times: ``--profile FILE``, else the cached profile
of the graph on ``--devices`` or on the cluster's device names), ``real`` (every placement run on the torch
devices of ``--devices``, or of an explicit ``--cluster`` such as ``cpu2``), or any backend a package
declared (`placement_gym.evaluation.evaluator.evaluator_names`). What a backend declares decides the rest,
with no case per backend here: which of ``--profile``, ``--devices``, ``--batch`` and ``--seed`` it takes
(`EvaluatorBackend.options`), whether it runs on this machine's devices (``runs_on_devices``: then
``--devices`` or a ``--cluster`` of this machine is needed) and how the result table names it
(``label``). The device options are
read as ``placement-gym profile`` and ``fidelity`` read them (`placement_gym.real.fidelity.resolve_devices`).
``--optimizer`` is the task's optimizer (default adam): what the cost model costs, the update a real
train step runs, and the optimizer a profile must have been measured with.
"""

from __future__ import annotations

import argparse
import inspect
import sys
from pathlib import Path
from typing import Any

from placement_gym.cli.common import (
    DEFAULT_CLUSTER,
    add_task_arguments,
    microbatches_int,
    positive_int,
    step_from_args,
)
from placement_gym.cli.output import print_json, print_table
from placement_gym.cli.real_commands import graph_and_model
from placement_gym.cli.subcommands import Subcommands, add_command
from placement_gym.common.extras import install_command
from placement_gym.common.paths import OUTPUT_ROOT_HELP, output_root
from placement_gym.cost_model import single_device
from placement_gym.evaluation.agents import find_trainer
from placement_gym.evaluation.evaluator import (
    COST_MODEL,
    EvaluatorBackend,
    evaluator_backend,
    evaluator_names,
)
from placement_gym.task.compiled import Task
from placement_gym.task.named import get_task
from placement_gym.task.step import OPTIMIZERS, PRECISIONS

DESCRIPTION = (
    "Train a learned placement agent (pg, spotlight, hierarchical, hsdag, placeto, sb3-ppo, "
    "random-search, ...) or run a search agent (anneal, cem) until --budget evaluations are spent, "
    "scored by the cost model (default), the profiled cost model or real runs (--evaluator). Writes "
    "a checkpoint (learned agents), the learning curve (CSV, and a PNG with the best single device, "
    "HEFT and the simple lower bound as reference lines) and the best placement (JSON) to --out, and "
    "prints the speedup over the best single device at the end."
)
"""What `placement-gym train --help` says the command does."""


RENAMED_FLAG = "--reward-mode"
"""``--evaluator``'s name until the envs' ``reward_mode=`` became ``evaluator=``: it still works, with a
warning on stderr, for as long as the envs' keyword does (docs/changelog.md)."""


class EvaluatorFlag(argparse.Action):
    """Stores ``--evaluator``; warns once on stderr when it was given by `RENAMED_FLAG`."""

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: Any,
                 option_string: str | None = None) -> None:
        if option_string == RENAMED_FLAG:
            print(f"warning: {RENAMED_FLAG} is deprecated; give --evaluator {values}", file=sys.stderr)
        setattr(namespace, self.dest, values)


# The options of an --evaluator backend the command line gives, as `EvaluatorBackend.options` names them.


BACKEND_FLAGS = {"profile": "--profile", "devices": "--devices", "batch": "--batch"}


def _check_backend_flags(args: argparse.Namespace, backend: EvaluatorBackend) -> None:
    """A clear error for an option the chosen ``--evaluator`` does not take (what its
    `EvaluatorBackend` says it takes), or for a backend that runs on this machine's devices given
    neither ``--devices`` nor a ``--cluster`` whose devices map to torch devices."""
    for option, flag in BACKEND_FLAGS.items():
        if getattr(args, option) is not None and option not in backend.options:
            takers = [name for name in evaluator_names() if option in evaluator_backend(name).options]
            raise ValueError(f"{flag} is for --evaluator {' or '.join(takers)}, not {backend.name}")
    if backend.runs_on_devices and args.devices is None and args.cluster is None:
        raise ValueError(
            f"--evaluator {backend.name} needs --devices (cluster device name = torch device, such as "
            "cpu:0=cpu,cpu:1=cpu or cpu:0=cpu,gpu:0=cuda:0) or an explicit --cluster whose devices map "
            "to torch devices (such as cpu2 or local)"
        )


def task_and_evaluator(args: argparse.Namespace) -> tuple[Task, Any]:
    """The task of ``--graph``/``--cluster`` and the step options (`step_from_args`; the cluster of
    ``--devices`` where the backend takes device names and they are given, or where it runs on this
    machine's devices) and the evaluator of ``--evaluator``, built through the registry of scoring
    backends with the options it declares (`EvaluatorBackend.options`) that the command line gives."""
    backend = evaluator_backend(args.evaluator)
    _check_backend_flags(args, backend)
    cluster, devices = args.cluster or DEFAULT_CLUSTER, None
    if "devices" in backend.options and (args.devices is not None or backend.runs_on_devices):
        from placement_gym.real.fidelity import resolve_devices

        cluster, devices = resolve_devices(args.devices, args.cluster)
    if backend.runs_on_devices:
        graph_and_model(args.graph)  # a graph the executor cannot run ends here, before any warning
    task = get_task(args.graph, cluster, step_from_args(args))
    given = {"profile": args.profile, "devices": devices, "batch": args.batch, "seed": args.seed}
    options = {option: value for option, value in given.items() if option in backend.options}
    try:
        return task, backend.build(task, source=args.graph, **options)
    except ValueError as error:
        hint = " (or give --profile FILE)" if "profile" in backend.options and args.profile is None else ""
        raise ValueError(f"--evaluator {backend.name}: {error}{hint}") from None


def _takes(function: Any, keyword: str) -> bool:
    """Whether ``function`` (a provider's trainer) accepts the keyword argument ``keyword``."""
    try:
        parameters = inspect.signature(function).parameters.values()
    except (TypeError, ValueError):
        return False
    return any(p.name == keyword or p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters)


def speedup_line(result: Any, task: Task) -> str:
    """``speedup over the best single device: 1.23x (best single device 25.63 ms)``, from the
    result's ``best_single_runtime`` (on the scale of its runtimes), else, for a run the cost model
    scored, the cost model's best single device; a note instead when there is no such figure or the
    best placement does not fit in memory."""
    single = getattr(result, "best_single_runtime", None)
    if single is None and getattr(result, "scored_by", COST_MODEL) == COST_MODEL:
        single = single_device(task).runtime
    if single is None:
        return "speedup over the best single device: not measured"
    if not result.best_feasible:
        return ("speedup over the best single device: none (the best placement is out of memory; "
                f"best single device {single * 1e3:,.2f} ms)")
    return (f"speedup over the best single device: {single / result.best_runtime:.3f}x "
            f"(best single device {single * 1e3:,.2f} ms)")


def run_train(args: argparse.Namespace) -> int:
    # The agent from a provider of the entry-point group placement_gym.agents (the baselines package,
    # or another): a clear error for an unknown agent, or a missing extra, before any work.
    train = find_trainer(args.agent)
    options: dict[str, Any] = {}
    if args.tensorboard is not None:
        if not _takes(train, "tensorboard"):
            raise ValueError(
                f"--tensorboard: the trainer of agent {args.agent!r} does not log to TensorBoard")
        options["tensorboard"] = Path(args.tensorboard).expanduser()
    try:
        task, evaluator = task_and_evaluator(args)
    except ImportError as error:  # torch for the real devices: training needs the baselines extra anyway
        if "pip install" in str(error):
            raise
        raise ImportError(f"{error}: {install_command('baselines')}") from None
    mode = "" if args.evaluator == COST_MODEL else f"-{args.evaluator}"
    out = (
        Path(args.out).expanduser()
        if args.out
        else output_root() / "runs" / f"{args.agent}-{task.id.replace('/', '-')}{mode}-s{args.seed}"
    )
    result = train(
        task,
        args.budget,
        seed=args.seed,
        out_dir=out,
        resume=args.resume,
        progress=not args.json and not args.quiet,
        threads=args.threads,
        evaluator=evaluator,
        **options,
    )
    summary = result.to_dict(task)
    if args.json:
        print_json(summary)
        return 0
    scored_by = (evaluator_backend(result.scored_by).shown_as() if result.scored_by in evaluator_names()
                 else result.scored_by)
    print_table(
        ["", ""],
        [
            ["task", task.id],
            ["agent", args.agent],
            ["seed", args.seed],
            [
                f"best runtime ({scored_by})",
                f"{result.best_runtime * 1e3:,.2f} ms" + ("" if result.best_feasible else " (OUT OF MEMORY)"),
            ],
            ["evaluations", f"{result.evaluations:,} in {result.iterations:,} iterations"],
            ["wall time", f"{result.wall_s:.1f} s ({result.evaluations_per_s:,.0f} evaluations/s)"],
            *[[name, path] for name, path in result.files.items()],
        ],
        header=False,
        title=f"{args.agent} trained on {task.id}",
    )
    if args.tensorboard is not None:
        print(f"TensorBoard: tensorboard --logdir {options['tensorboard']}")
    print(speedup_line(result, task))
    return 0


def add_parser(subparsers: Subcommands) -> None:
    parser = add_command(subparsers, "train", DESCRIPTION)
    parser.add_argument(
        "--agent",
        required=True,
        help="a learned agent (pg, spotlight, hierarchical, placeto, hsdag, sb3-ppo, sb3-maskable-ppo, "
        "random-search) or a search agent (anneal, cem), or an agent of another installed agent package",
    )
    add_task_arguments(parser)
    # No default in the namespace: --evaluator real with --devices alone takes the cluster of the
    # devices (cpu<N>), as `placement-gym profile` does; elsewhere the default cluster applies.
    parser.set_defaults(cluster=None)
    parser.add_argument(
        "--optimizer",
        default="adam",
        choices=tuple(OPTIMIZERS),
        help="optimizer of a train step (default: adam): its update ops and memory in the cost model, the "
        "update a --evaluator real step runs, and the optimizer a --evaluator profiled profile was "
        "measured with",
    )
    parser.add_argument(
        "--precision",
        default="fp32",
        choices=tuple(PRECISIONS),
        help="precision of the step in the cost model (default: fp32); bf16 and fp16 are mixed precision "
        "(matrix products on the tensor cores, 2-byte activations; cost model only)",
    )
    parser.add_argument(
        "--microbatches", type=microbatches_int, default=1, metavar="M",
        help="micro-batches of a pipelined step (the cost models: a real run refuses it), 1 to 1024 "
        "(default: 1; placement_gym.task.compiled)",
    )
    parser.add_argument(
        "--recompute", action="store_true",
        help="activation recomputation (the cost models, training only): replay the forward pass segment "
        "by segment in the backward pass instead of keeping its activations (placement_gym.task.compiled)",
    )
    parser.add_argument(
        "--budget",
        type=positive_int,
        default=1000,
        metavar="N",
        help="evaluations to spend (default: 1000)",
    )
    parser.add_argument("--seed", type=int, default=0, help="seed (runs are deterministic on the CPU)")
    parser.add_argument(
        "--evaluator",
        RENAMED_FLAG,
        dest="evaluator",
        metavar="NAME",
        action=EvaluatorFlag,
        default="cost_model",
        choices=evaluator_names(),
        help="what scores the placements (one of: %(choices)s): cost_model (default), profiled (the cost "
        "model with measured op times: --profile, or a cached profile), real (runs on --devices), or a "
        f"backend a package registered (placement_gym.evaluation.evaluator); {RENAMED_FLAG} is its "
        "deprecated name",
    )
    parser.add_argument(
        "--profile",
        default=None,
        metavar="FILE",
        help="profile file for --evaluator profiled (default: the cached profile of the graph on "
        "--devices, or on the cluster's device names; see placement-gym profile)",
    )
    parser.add_argument(
        "--devices",
        default=None,
        metavar="MAP",
        help="for --evaluator real or profiled: cluster device name = torch device, comma separated, "
        "such as cpu:0=cpu,cpu:1=cpu (two virtual CPU devices; the cluster is then cpu2 unless --cluster) "
        "or cpu:0=cpu,gpu:0=cuda:0",
    )
    parser.add_argument(
        "--batch",
        type=positive_int,
        default=None,
        help="for --evaluator real: run at a smaller batch than the graph's (default: the graph's)",
    )
    parser.add_argument(
        "--out",
        default=None,
        metavar="DIR",
        help="output folder (default: <output root>/runs/<agent>-<graph>-<cluster>-<objective>"
        f"[-<evaluator>]-s<seed>, the output root being {OUTPUT_ROOT_HELP})",
    )
    parser.add_argument(
        "--tensorboard",
        default=None,
        metavar="DIR",
        help="also log the curve for TensorBoard in DIR/<agent>-<graph>-<cluster>-<objective>[-<evaluator>]"
        "-s<seed>: best "
        "runtime so far, mean runtime and the agent's own scalars (mean reward, loss...) per update, "
        "evaluations, and the reference runtimes (needs torch and tensorboard: the baselines extra); view "
        "with tensorboard --logdir DIR",
    )
    parser.add_argument(
        "--resume",
        action="store_true",
        help="continue from the checkpoint in --out (a larger --budget continues the run); a checkpoint "
        "made on another task (other graph or cluster content, objective or optimizer) is refused; "
        "learned agents only (a search agent keeps no checkpoint)",
    )
    parser.add_argument("--threads", type=int, default=1, help="torch intra-op threads (default: 1)")
    parser.add_argument("--quiet", action="store_true", help="no progress bar")
    parser.add_argument("--json", action="store_true", help="print a JSON object at the end")
    parser.set_defaults(run=run_train)
