"""Building tasks from names: ``get_task("inception_v3", "k80x4", "train_step")`` or a task id.

A graph name may also be a dataset graph's (``synthetic-v1:regal-17``, `placement_gym.datasets`) and a
cluster name a family cluster's (``random-v1:3``, `placement_gym.datasets.clusters`)."""

from __future__ import annotations

import functools
from pathlib import Path

from placement_gym.cluster import Cluster, load_cluster
from placement_gym.common.names import DATASET_GRAPH_NAMES, FAMILY_CLUSTER_NAMES, also_allowed
from placement_gym.common.paths import is_file
from placement_gym.datasets import dataset_graph, is_dataset_graph_name
from placement_gym.datasets.clusters import family_cluster, is_family_cluster_name
from placement_gym.graph import OpGraph, load_graph
from placement_gym.task.compiled import OBJECTIVES, Task, check_applies, check_microbatches, make_task
from placement_gym.task.ids import DEFAULT_OPTIMIZER, DEFAULT_PRECISION, split_task_id

_OBJECTIVE_BY_SUFFIX = {suffix: name for name, suffix in OBJECTIVES.items()}


def _source_key(name_or_path: str | Path) -> tuple:
    """A graph or cluster argument as a cache key: the argument (what the loaders read), and for an
    existing file also its resolved path, modification time and size, so that a file written anew,
    or another file of the same name in another directory, is read anew."""
    path = Path(name_or_path)
    if is_file(path):
        stat = path.stat()
        return (str(name_or_path), str(path.resolve()), stat.st_mtime_ns, stat.st_size)
    return (str(name_or_path),)


def named_graph(name: str | Path) -> OpGraph:
    """A bundled graph, an ONNX file or a dataset graph (``<dataset>:<family>-<k>``) by name."""
    if is_dataset_graph_name(name):
        return dataset_graph(name)
    try:
        return load_graph(name)
    except ValueError as error:
        raise also_allowed(error, "graph", DATASET_GRAPH_NAMES) from None


def named_cluster(name: str | Path) -> Cluster:
    """A preset, ``local``/``cpu<N>``, a cluster JSON file or a family cluster (``random-v1:<k>``)."""
    if is_family_cluster_name(name):
        return family_cluster(name)
    try:
        return load_cluster(name)
    except ValueError as error:
        raise also_allowed(error, "cluster", FAMILY_CLUSTER_NAMES) from None


# Room for every task of the largest suite (gen-v2: 300 tasks, about 100 MB compiled), so that validating
# file after file of it compiles each task once.
@functools.lru_cache(maxsize=512)
def _cached_task(
    graph_key: tuple, cluster_key: tuple, objective: str, optimizer: str, precision: str, microbatches: int,
    recompute: bool,
) -> Task:
    graph, cluster = named_graph(graph_key[0]), named_cluster(cluster_key[0])
    return make_task(graph, cluster, objective, optimizer, precision, microbatches, recompute)


def get_task(
    graph: str | Path | OpGraph = "inception_v3",
    cluster: str | Path | Cluster = "k80x4",
    objective: str = "train_step",
    optimizer: str = DEFAULT_OPTIMIZER,
    precision: str = DEFAULT_PRECISION,
    microbatches: int = 1,
    recompute: bool = False,
) -> Task:
    """A compiled task from a graph (bundled name, ONNX path, dataset graph name or `OpGraph`), a cluster
    (preset name, JSON path, family cluster name or `Cluster`), an objective (``"train_step"`` or
    ``"inference"``; the id suffixes ``"train"`` and ``"inference"`` are accepted too) and, for training, an
    optimizer (``"adam"``, ``"momentum"``, ``"sgd"``; another than the default with inference is
    refused), a precision (``"fp32"``, or ``"bf16"``/``"fp16"``: mixed precision on the tensor cores,
    `placement_gym.task.compiled`) and the micro-batches of a
    pipelined step (``microbatches``, 1 to 1024: `placement_gym.task.compiled.make_task`) and whether
    it recomputes activations (``recompute``, training only: `placement_gym.task.compiled`). Tasks built
    from names or files are cached (a file until it changes)."""
    objective = _OBJECTIVE_BY_SUFFIX.get(objective, objective)
    if objective not in OBJECTIVES:
        raise ValueError(f"unknown objective {objective!r}; allowed: {', '.join(OBJECTIVES)}")
    check_applies(objective, optimizer)  # an optimizer with inference, which has no update op
    microbatches = check_microbatches(microbatches)
    if isinstance(graph, (str, Path)) and isinstance(cluster, (str, Path)):
        return _cached_task(_source_key(graph), _source_key(cluster), objective, optimizer, precision,
                            microbatches, recompute)
    graph = graph if isinstance(graph, OpGraph) else named_graph(graph)
    cluster = cluster if isinstance(cluster, Cluster) else named_cluster(cluster)
    return make_task(graph, cluster, objective, optimizer, precision, microbatches, recompute)


def parse_task_id(task_id: str) -> Task:
    """The task of an id such as ``"inception_v3/k80x4/train"``, ``"resnet50/v100x8/train+sgd"`` or
    ``"bert_large/h100x8/train+bf16"``
    (format: `placement_gym.task.ids`). An id whose graph or cluster carries a content hash
    (``my_model@3f2a9c1d0b7e``) is refused with a clear error: only its file rebuilds that task."""
    graph, cluster, suffix, optimizer, precision, microbatches, recompute = split_task_id(task_id)
    if optimizer is not None and _OBJECTIVE_BY_SUFFIX.get(suffix) != "train_step":
        raise ValueError(
            f"task {task_id}: only a training step has an optimizer "
            f"({OBJECTIVES['train_step']}+{optimizer}), not {suffix!r}"
        )
    if recompute and _OBJECTIVE_BY_SUFFIX.get(suffix) != "train_step":
        raise ValueError(f"task {task_id}: only a training step recomputes activations, not {suffix!r}")
    optimizer = optimizer or DEFAULT_OPTIMIZER
    return get_task(graph, cluster, suffix, optimizer, precision, microbatches, recompute)
