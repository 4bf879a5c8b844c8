"""Arguments and helpers shared by the subcommands: the task options and agent resolution."""

from __future__ import annotations

import argparse
import time
from dataclasses import dataclass

import numpy as np

from placement_gym.placements import SIMPLE_AGENTS, load_placement, simple_placement
from placement_gym.task import OBJECTIVES, Task
from placement_gym.tasks import get_task

DEFAULT_GRAPH = "inception_v3"
DEFAULT_CLUSTER = "k80x4"


def add_task_arguments(parser: argparse.ArgumentParser) -> None:
    """--graph, --cluster, --objective."""
    parser.add_argument("--graph", default=DEFAULT_GRAPH,
                        help=f"bundled graph name or path to an ONNX file (default: {DEFAULT_GRAPH})")
    parser.add_argument("--cluster", default=DEFAULT_CLUSTER,
                        help=f"cluster preset or path to a cluster JSON file (default: {DEFAULT_CLUSTER})")
    parser.add_argument("--objective", default="train_step",
                        help=f"{' or '.join(OBJECTIVES)} (default: train_step)")


def add_placement_arguments(parser: argparse.ArgumentParser, required: bool) -> None:
    """--agent / --placement (one of them), --seed."""
    group = parser.add_mutually_exclusive_group(required=required)
    group.add_argument("--agent", help=f"agent that places the ops: {', '.join(SIMPLE_AGENTS)}, "
                                       "or an agent of the baselines package")
    group.add_argument("--placement", metavar="FILE", help="use a saved placement file instead of an agent")
    parser.add_argument("--seed", type=int, default=0, help="seed of the agent's random choices (default: 0)")


def task_from_args(args: argparse.Namespace) -> Task:
    return get_task(args.graph, args.cluster, args.objective)


@dataclass(frozen=True)
class Found:
    """A placement and what it cost to find: cost-model evaluations the agent made, wall seconds."""

    placement: np.ndarray
    evaluations: int
    wall_s: float
    source: str


def _baseline_agent(name: str):
    """The agent ``name`` of the optional `baselines` package, or None when it has none by that name."""
    try:
        import baselines
    except ImportError:
        return None, []
    get_agent = getattr(baselines, "get_agent", None)
    names = list(getattr(baselines, "AGENT_NAMES", ()))
    if get_agent is None:
        return None, names
    try:
        return get_agent(name), names
    except (KeyError, ValueError):
        return None, names


def _is_simple(agent: str) -> bool:
    return agent.startswith("single:") or agent in SIMPLE_AGENTS


def run_agent(task: Task, agent: str, seed: int) -> Found:
    """Place ``task`` with a simple agent or a baselines agent.

    A baselines agent is a callable ``agent(task, seed=seed)`` returning a placement array, or an
    object with ``placement`` and (optionally) ``evaluations`` attributes."""
    start = time.perf_counter()
    if _is_simple(agent):
        placement = simple_placement(task, agent, seed)
        # best-single simulates every device once (single_device); the others evaluate nothing.
        evaluations = task.n_devices if agent == "best-single" else 0
        return Found(task.check_placement(placement), evaluations, time.perf_counter() - start, agent)
    baseline, names = _baseline_agent(agent)
    if baseline is None:
        allowed = ", ".join(list(SIMPLE_AGENTS) + names)
        raise ValueError(f"unknown agent {agent!r}; allowed: {allowed}")
    result = baseline(task, seed=seed)
    placement = getattr(result, "placement", result)
    evaluations = int(getattr(result, "evaluations", 0))
    return Found(task.check_placement(placement), evaluations, time.perf_counter() - start, agent)


def find_placement(task: Task, args: argparse.Namespace) -> Found:
    """The placement named by --placement FILE or made by --agent."""
    if args.placement is not None:
        start = time.perf_counter()
        return Found(load_placement(task, args.placement), 0, time.perf_counter() - start, args.placement)
    return run_agent(task, args.agent, args.seed)
