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
* objective: ``train`` or ``inference``; a training step whose optimizer is not Adam, the default,
  adds ``+`` and the optimizer (``train+sgd``, ``train+momentum``): the optimizer changes the update
  ops and the memory. Inference has no optimizer. Then a precision other than ``fp32``, the
  default, adds ``+bf16`` or ``+fp16`` (``train+bf16``, ``train+sgd+fp16``, ``inference+bf16``),
  a training step with activation recomputation (`placement_gym.task.compiled.make_task`'s
  ``recompute``) adds ``+rc`` (``train+bf16+rc``), and a pipelined step of M > 1 micro-batches
  (``microbatches``) ends in ``+mb<M>`` (``train+mb4``, ``train+sgd+bf16+rc+mb8``, ``inference+mb2``).
  The parts come in that order; a default (``+adam``, ``+fp32``, ``+mb1``, no recomputation) is never
  written, so an id names its task one way only.

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

if TYPE_CHECKING:
    from placement_gym.task.compiled import Task

HASH_MARK = "@"
OPTIMIZER_MARK = "+"
HASH_DIGITS = 12
DEFAULT_OPTIMIZER = "adam"
MICROBATCH_MARK = "mb"
RECOMPUTE_MARK = "rc"
DEFAULT_PRECISION = "fp32"
HALF_PRECISIONS: tuple[str, ...] = ("bf16", "fp16")


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


def objective_id(
    objective_suffix: str,
    optimizer: str | None,
    precision: str = DEFAULT_PRECISION,
    microbatches: int = 1,
    recompute: bool = False,
) -> str:
    """``train``/``inference``, with ``+<optimizer>`` for a training step that does not use Adam
    (``optimizer`` None: inference, which has none), then ``+<precision>`` for one that is not fp32,
    then ``+rc`` for activation recomputation, then ``+mb<M>`` for a pipelined step of M > 1
    micro-batches."""
    parts = [objective_suffix]
    if optimizer is not None and optimizer != DEFAULT_OPTIMIZER:
        parts.append(optimizer)
    if precision != DEFAULT_PRECISION:
        parts.append(precision)
    if recompute:
        parts.append(RECOMPUTE_MARK)
    if microbatches != 1:
        parts.append(f"{MICROBATCH_MARK}{microbatches}")
    return OPTIMIZER_MARK.join(parts)


def make_task_id(
    graph: OpGraph,
    cluster: Cluster,
    objective_suffix: str,
    optimizer: str | None,
    precision: str = DEFAULT_PRECISION,
    microbatches: int = 1,
    recompute: bool = False,
) -> str:
    """``graph/cluster/objective`` (module docstring)."""
    objective = objective_id(objective_suffix, optimizer, precision, microbatches, recompute)
    return f"{graph_id(graph)}/{cluster_id(cluster)}/{objective}"


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


def _microbatches_of(token: str) -> int | None:
    """M of a ``mb<M>`` token written as an id writes it (M > 1, no leading zero); 0 for any other
    token starting with ``mb`` (no optimizer's name does); None for a token that is not one."""
    if not token.startswith(MICROBATCH_MARK):
        return None
    digits = token[len(MICROBATCH_MARK):]
    canonical = digits.isascii() and digits.isdigit() and digits[0] != "0" and int(digits) > 1
    return int(digits) if canonical else 0


def split_task_id(task_id: str) -> tuple[str, str, str, str | None, str, int, bool]:
    """``(graph name, cluster name, objective suffix, optimizer, precision, microbatches, recompute)``
    of an id that names can rebuild (optimizer None where the id names none: Adam for a training step;
    precision ``fp32``, microbatches 1 and recompute False where it names none).

    Raises ValueError for an id that is not
    ``graph/cluster/objective[+optimizer][+precision][+rc][+mb<M>]``
    (an unknown part, a part written twice or out of that order, a default written out), and for a
    part with a content hash (``name@hash``): such a graph or cluster is not bundled (not a preset), so
    no name rebuilds it; the task is built from its file."""
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
    suffix, *tokens = objective.split(OPTIMIZER_MARK)
    optimizer: str | None = None
    precision = DEFAULT_PRECISION
    microbatches = 1
    wrong = False
    if tokens and _microbatches_of(tokens[-1]) is not None:
        microbatches = _microbatches_of(tokens.pop())
        wrong = microbatches == 0
    recompute = bool(tokens) and tokens[-1] == RECOMPUTE_MARK
    if recompute:
        tokens.pop()
    if tokens and tokens[-1] in HALF_PRECISIONS:
        precision = tokens.pop()
    if tokens:
        optimizer = tokens.pop(0)
        not_optimizers = ("", DEFAULT_OPTIMIZER, DEFAULT_PRECISION, RECOMPUTE_MARK, *HALF_PRECISIONS)
        wrong = wrong or optimizer in not_optimizers or _microbatches_of(optimizer) is not None
    if wrong or tokens:
        raise ValueError(
            f"task {task_id}: {objective!r} is not the objective of a task id: that is {suffix}, then "
            f"optionally {OPTIMIZER_MARK}<optimizer> (any but {DEFAULT_OPTIMIZER}, the default), then "
            f"optionally {OPTIMIZER_MARK}<precision> ({' or '.join(HALF_PRECISIONS)}; {DEFAULT_PRECISION} is "
            f"the default), then optionally {OPTIMIZER_MARK}{RECOMPUTE_MARK} (activation recomputation), "
            f"then optionally {OPTIMIZER_MARK}{MICROBATCH_MARK}<M> for M > 1 micro-batches, such as "
            f"train{OPTIMIZER_MARK}sgd{OPTIMIZER_MARK}bf16{OPTIMIZER_MARK}{RECOMPUTE_MARK}{OPTIMIZER_MARK}"
            f"{MICROBATCH_MARK}4"
        )
    return graph, cluster, suffix, optimizer, precision, microbatches, recompute


def task_identity(task: Task) -> dict[str, Any]:
    """What a task is, in full, for files that must only be used with the same task (checkpoints):
    its id, the full content sha256 of its graph and cluster, its objective, optimizer and
    precision. The
    machine's own clusters (``local``, ``cpu<N>``) are recorded by their device names and kinds:
    their figures are measured anew in each process."""
    cluster = task.cluster
    if REAL_CLUSTER_NAME.fullmatch(cluster.name) and is_named_cluster(cluster):
        cluster_content = "machine: " + ", ".join(
            f"{name} ({kind})" for name, kind in zip(cluster.device_names, cluster.device_kinds)
        )
    else:
        cluster_content = cluster.content_sha256
    return {
        "id": task.id,
        "graph_sha256": task.graph.content_sha256,
        "cluster": cluster_content,
        "objective": task.objective,
        "optimizer": task.optimizer if task.objective == "train_step" else None,
        "precision": task.precision,
        # Recorded only where it is not the default, so that what was recorded before it existed matches.
        **({"microbatches": task.microbatches} if task.microbatches != 1 else {}),
        **({"recompute": True} if task.recompute else {}),
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
