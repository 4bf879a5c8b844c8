"""Task ids, ``graph/cluster/objective``: names that two different tasks never share.

* graph: a bundled graph's name (``bert_base``) when the graph is that bundled graph
  (`placement_gym.graph.bundled.is_bundled_graph`: same file, same content), or a dataset graph's
  (``synthetic-v1:regal-17``) when it has that graph's content. Any other graph, a
  user's file or a graph built in Python, is its name, ``@`` and the first 12 hex digits of its
  content sha256 (`OpGraph.content_sha256`), such as ``bert_base@3f2a9c1d0b7e``.
* cluster: a preset's name (``k80x4``) when the cluster has that preset's figures, the machine's
  own ``local`` / ``cpu<N>`` (`placement_gym.cluster.load.is_named_cluster`), or a family cluster's
  (``random-v1:3``) with that cluster's figures. Any other cluster
  (a JSON file, a `Cluster` built in Python, a preset with a figure changed) is its name, ``@``
  and 12 hex digits of `Cluster.content_sha256`.
* objective: the step's (`placement_gym.task.step.Step.suffix`): ``train`` or ``inference``, then
  the step's options that are not the defaults, each after a ``+``: the optimizer, the precision, ``rc``
  for activation recomputation and ``mb<M>`` for M > 1 micro-batches (``train+sgd``, ``inference+bf16``,
  ``train+sgd+bf16+rc+mb8``), so an id names its task one way only.

Bundled graph names, preset names and objectives hold no ``@`` or ``+``, so a hashed part never
equals a plain one, and the ids of bundled graphs on presets with Adam (the leaderboard suite's)
are the plain ``graph/cluster/objective`` they always were. A ``/`` in a name becomes ``_``, so an
id always has three parts. An id with a content hash names a graph or cluster that only its file
can rebuild: `split_task_id` says so rather than guessing.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from placement_gym.cluster.cluster import Cluster
from placement_gym.cluster.load import REAL_CLUSTER_NAME, is_named_cluster
from placement_gym.datasets import dataset_graph, is_dataset_graph_name
from placement_gym.datasets.clusters import family_cluster, is_family_cluster_name
from placement_gym.graph.bundled import is_bundled_graph
from placement_gym.graph.opgraph import OpGraph
from placement_gym.task.step import DEFAULT_PRECISION, Step

if TYPE_CHECKING:
    from placement_gym.task.compiled import Task

HASH_MARK = "@"
HASH_DIGITS = 12


def _hashed(name: str, sha256: str) -> str:
    return f"{name.replace('/', '_')}{HASH_MARK}{sha256[:HASH_DIGITS]}"


@functools.lru_cache(maxsize=256)
def _rebuilt_sha256(name: str, build: Callable[[str], OpGraph | Cluster]) -> str | None:
    """The content hash of what ``build`` makes of ``name`` (a dataset graph, a family cluster), or
    None when the name is not one; once per name."""
    try:
        return build(name).content_sha256
    except ValueError:
        return None


def graph_id(graph: OpGraph) -> str:
    """The graph part of a task id: the bundled or dataset graph's name, or ``name@<12 hex digits of
    its content>``."""
    named = is_bundled_graph(graph) or (
        is_dataset_graph_name(graph.name)
        and _rebuilt_sha256(graph.name, dataset_graph) == graph.content_sha256)
    return graph.name if named else _hashed(graph.name, graph.content_sha256)


def cluster_id(cluster: Cluster) -> str:
    """The cluster part of a task id: a preset's (or ``local``/``cpu<N>``'s, or a family cluster's)
    name, or ``name@<hash>``."""
    named = is_named_cluster(cluster) or (
        is_family_cluster_name(cluster.name)
        and _rebuilt_sha256(cluster.name, family_cluster) == cluster.content_sha256)
    return cluster.name if named else _hashed(cluster.name, cluster.content_sha256)


def make_task_id(graph: OpGraph, cluster: Cluster, step: Step) -> str:
    """``graph/cluster/objective`` (module docstring), the objective being ``step``'s suffix."""
    return f"{graph_id(graph)}/{cluster_id(cluster)}/{step.suffix}"


def task_id_parts(task_id: str) -> tuple[str, str, str]:
    """``(graph, cluster, objective)``, the three parts of any well-formed task id, hashed parts and
    ``+optimizer`` kept as they are; ValueError for an id that is not three non-empty parts."""
    parts = task_id.split("/") if isinstance(task_id, str) else []
    if len(parts) != 3 or not all(parts):
        raise ValueError(
            "a task id is graph/cluster/objective, such as inception_v3/k80x4/train or "
            f"my_model@3f2a9c1d0b7e/k80x4/train+sgd; got {task_id!r}"
        )
    graph, cluster, objective = parts
    return graph, cluster, objective


def split_task_id(task_id: str) -> tuple[str, str, Step]:
    """``(graph name, cluster name, step)`` of an id that names can rebuild.

    Raises ValueError for an id that is not ``graph/cluster/objective`` with an objective that
    `Step.from_suffix` reads (an unknown option, an option written twice or out of order, a default
    written out), and for a part with a content hash (``name@hash``): such a graph or cluster is not
    bundled (not a preset), so no name rebuilds it; the task is built from its file."""
    graph, cluster, objective = task_id_parts(task_id)
    for what, part, known, example in (
        ("graph", graph, "a graph bundled with placement-gym", "get_task('path/to/{}.onnx', ...)"),
        ("cluster", cluster, "a preset", "get_task(graph, 'path/to/{}.json', ...)"),
    ):
        if HASH_MARK in part:
            name = part.rsplit(HASH_MARK, 1)[0]
            raise ValueError(
                f"task {task_id}: {what} {part!r} is not {known} (the part after {HASH_MARK!r} is a hash "
                f"of its content), so no name rebuilds it: such a task is built from its {what}'s file, "
                f"{example.format(name)} or --{what} FILE on the command line"
            )
    try:
        step = Step.from_suffix(objective)
    except ValueError as error:
        raise ValueError(f"task {task_id}: {error}") from None
    return graph, cluster, step


# Recorded in every identity; every other option of the step only where it departs from its default, so
# that what was recorded before an option existed matches.
_ALWAYS_RECORDED: tuple[str, ...] = ("objective", "optimizer", "precision")


def task_identity(task: Task) -> dict[str, Any]:
    """What a task is, in full, for files that must only be used with the same task (checkpoints):
    its id, the full content sha256 of its graph and cluster, its objective, optimizer (None for
    inference) and precision, and its step's other options that are not their defaults. The
    machine's own clusters (``local``, ``cpu<N>``) are recorded by their device names and kinds:
    their figures are measured anew in each process."""
    cluster = task.cluster
    if REAL_CLUSTER_NAME.fullmatch(cluster.name) and is_named_cluster(cluster):
        cluster_content = "machine: " + ", ".join(
            f"{name} ({kind})" for name, kind in zip(cluster.device_names, cluster.device_kinds)
        )
    else:
        cluster_content = cluster.content_sha256
    step = task.step
    options = {name: getattr(step, name) for name in _ALWAYS_RECORDED}
    options["optimizer"] = step.update_optimizer
    options.update((name, value) for name, value in step.departures().items() if name not in options)
    return {
        "id": task.id,
        "graph_sha256": task.graph.content_sha256,
        "cluster": cluster_content,
        **options,
    }


# What an identity recorded before a key existed stands for: the default it had then.
_IDENTITY_DEFAULTS: dict[str, Any] = {"precision": DEFAULT_PRECISION}


def identity_mismatch(recorded: Mapping[str, Any], task: Task) -> str | None:
    """None when ``recorded`` (a `task_identity`) is ``task``'s; else what differs, both sides named."""
    current = task_identity(task)
    differences = [
        f"{key} {recorded.get(key, _IDENTITY_DEFAULTS.get(key))!r} there, {value!r} here"
        for key, value in current.items()
        if recorded.get(key, _IDENTITY_DEFAULTS.get(key)) != value
    ]
    return "; ".join(differences) or None
