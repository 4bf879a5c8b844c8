"""Arguments and helpers shared by the subcommands: the task options and agent resolution."""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from placement_gym.evaluation.placements import SIMPLE_AGENTS, is_simple_agent, load_placement, simple_agent
from placement_gym.task.compiled import Task
from placement_gym.task.named import get_task
from placement_gym.task.step import (
    DEFAULT_OPTIMIZER,
    DEFAULT_PRECISION,
    MAX_MICROBATCHES,
    MAX_TENSOR_PARALLEL,
    OBJECTIVES,
    OPTIMIZERS,
    PRECISIONS,
    STEP_OPTIONS,
    Step,
    check_microbatches,
    check_tensor_parallel,
)

DEFAULT_GRAPH = "inception_v3"
DEFAULT_CLUSTER = "k80x4"
def add_task_arguments(parser: argparse.ArgumentParser) -> None:
    """--graph, --cluster, --objective."""
    parser.add_argument("--graph", default=DEFAULT_GRAPH,
                        help=f"bundled graph name (placement-gym graphs), a dataset graph "
                        f"'<dataset>:<id>' such as synthetic-v1:regal-17 (placement-gym datasets) or path "
                        f"to an ONNX file (default: {DEFAULT_GRAPH})")
    parser.add_argument("--cluster", default=DEFAULT_CLUSTER,
                        help=f"cluster preset (placement-gym clusters), a family cluster 'random-v1:<k>' "
                        f"such as random-v1:3, or path to a cluster JSON file (default: {DEFAULT_CLUSTER})")
    parser.add_argument("--objective", default="train_step",
                        help=f"{' or '.join(OBJECTIVES)} (default: train_step)")


def add_placement_arguments(parser: argparse.ArgumentParser, required: bool, allow_all: bool = False) -> None:
    """--agent / --placement (one of them), --seed, --budget."""
    group = parser.add_mutually_exclusive_group(required=required)
    group.add_argument("--agent", help=f"agent that places the ops: {', '.join(SIMPLE_AGENTS)}, or an "
                                       "agent of an installed agent package (baselines: heft, expert, ...)"
                                       + (", or 'all' for every baseline" if allow_all else ""))
    group.add_argument("--placement", metavar="FILE", help="use a saved placement file instead of an agent")
    parser.add_argument("--seed", type=int, default=0, help="seed of the agent's random choices (default: 0)")
    parser.add_argument("--budget", type=positive_int, default=None, metavar="N",
                        help="cost-model evaluations a searching agent may use (default: the agent's own)")


FLAG: dict[str, Any] = {"action": "store_true"}
"""The argparse keywords of an on/off option, in an `add_options` row."""


def add_options(parser: argparse.ArgumentParser, rows: Iterable[tuple[str, dict[str, Any], str]]) -> None:
    """Adds the options of ``rows``, a table of ``(flag, argparse keywords, help)`` (keywords `FLAG` for
    an on/off option), to ``parser`` in their order."""
    for flag, keywords, help_text in rows:
        parser.add_argument(flag, help=help_text, **keywords)


def positive_int(text: str) -> int:
    """argparse type of a positive integer option (argparse names the option in its message)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {value}")
    return value


def add_optimizer_argument(parser: argparse.ArgumentParser) -> None:
    """--optimizer: the optimizer of a train step, which sets its update ops and optimizer state (a
    GNMT-8 step fits one K40 with SGD and not with Adam, so it can change the answer); --precision:
    fp32 or mixed precision; --microbatches: the micro-batches of a pipelined step; --recompute:
    activation recomputation; --tensor-parallel: the ops split over groups of the cluster's GPUs."""
    parser.add_argument("--optimizer", choices=tuple(OPTIMIZERS), default=DEFAULT_OPTIMIZER,
                        help=f"optimizer of a train step: its update ops and state memory (default: "
                        f"{DEFAULT_OPTIMIZER}; the task id ends in '+<optimizer>' for any other)")
    parser.add_argument("--precision", choices=tuple(PRECISIONS), default=DEFAULT_PRECISION,
                        help=f"precision of the step (default: {DEFAULT_PRECISION}); bf16 and fp16 are mixed "
                        "precision: matrix products on the tensor cores, 2-byte activations, fp32 master "
                        "weights (the task id ends in '+bf16' or '+fp16')")
    parser.add_argument("--microbatches", type=microbatches_int, default=1, metavar="M",
                        help=f"micro-batches of a pipelined step, 1 to {MAX_MICROBATCHES}: M copies of the "
                        "graph at its own batch in GPipe's fill-drain order, so that a placement across "
                        "devices is a pipeline (default: 1; the task id ends in '+mb<M>' for M > 1)")
    parser.add_argument("--recompute", action="store_true",
                        help="activation recomputation (training only): keep only the activations at the "
                        "boundaries of about sqrt(n) segments and replay each segment's forward ops in the "
                        "backward pass, as Megatron-LM trains large models (the task id gets '+rc')")
    parser.add_argument("--tensor-parallel", dest="tensor_parallel", type=tensor_parallel_int, default=1,
                        metavar="T",
                        help=f"split each op over groups of T of the cluster's GPUs (one host each), 1 "
                        f"to {MAX_TENSOR_PARALLEL}, as Megatron-LM splits a layer, the collectives timed as "
                        "ops; the task's devices are then the groups (default: 1, one device per op; the "
                        "task id ends in '+tp<T>' for T > 1)")


def _count_type(check: Callable[[int], int], most: int) -> Callable[[str], int]:
    """An argparse type that reads an integer from 1 to ``most`` and checks it with ``check`` (argparse
    names the option in its message)."""

    def read(text: str) -> int:
        try:
            return check(int(text))
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected an integer from 1 to {most}, got {text!r}") from None

    return read


microbatches_int = _count_type(check_microbatches, MAX_MICROBATCHES)
tensor_parallel_int = _count_type(check_tensor_parallel, MAX_TENSOR_PARALLEL)


def step_from_args(args: argparse.Namespace) -> Step:
    """The step of the command's step options (--objective, and where the command has them --optimizer,
    --precision, --microbatches, --recompute, --tensor-parallel: each argument named as a field of
    `Step`), the defaults for those it does not have."""
    return Step(**{name: getattr(args, name) for name in STEP_OPTIONS if hasattr(args, name)})


def task_from_args(args: argparse.Namespace) -> Task:
    """The task of --graph, --cluster and the step options (`step_from_args`)."""
    return get_task(args.graph, args.cluster, step_from_args(args))


@dataclass(frozen=True)
class Found:
    """A placement and what it cost to find: cost-model evaluations the agent made, wall seconds,
    and the agent's extras (``info`` of the agent's result)."""

    placement: np.ndarray
    evaluations: int
    wall_s: float
    source: str
    info: dict = field(default_factory=dict)


def _known_agents() -> list[str]:
    from placement_gym.evaluation import agents  # numba: loaded late, so a wrong --graph is refused at once

    return list(dict.fromkeys([*SIMPLE_AGENTS, *agents.agent_names()]))


def check_agent(agent: str) -> None:
    """ValueError naming the known agents unless ``agent`` names a simple agent or a provider's."""
    from placement_gym.evaluation import agents  # numba: loaded late, so a wrong --graph is refused at once

    if is_simple_agent(agent) or (agent != "all" and agents.lookup_agent(agent) is not None):
        return
    raise agents.unknown_agent_error(agent, _known_agents(), agents.providers().note())


def place_with_agent(task: Task, agent: str, seed: int, budget: int | None = None) -> Found:
    """Place ``task`` with a simple agent or an agent of a provider of the entry-point group
    ``placement_gym.agents`` (`placement_gym.evaluation.agents`: the baselines package, or any other)."""
    from placement_gym.evaluation import agents  # numba: loaded late, so a wrong --graph is refused at once

    start = time.perf_counter()
    if is_simple_agent(agent):
        placement, evaluations = simple_agent(task, agent, seed)
        return Found(task.check_placement(placement), evaluations, time.perf_counter() - start, agent)
    found = None if agent == "all" else agents.lookup_agent(agent)
    if found is None:
        raise agents.unknown_agent_error(agent, _known_agents(), agents.providers().note())
    result = agents.AgentResult.checked(task, found(task, seed, budget))
    return Found(result.placement, result.evaluations, time.perf_counter() - start, agent, result.info)


def find_placement(task: Task, args: argparse.Namespace) -> Found:
    """The placement named by --placement FILE or made by --agent."""
    if args.placement is not None:
        start = time.perf_counter()
        return Found(load_placement(task, args.placement), 0, time.perf_counter() - start, args.placement)
    return place_with_agent(task, args.agent, args.seed, getattr(args, "budget", None))
