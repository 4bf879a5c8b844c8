"""Building tasks from names: ``get_task("inception_v3", "k80x4", "train_step")``,
``get_task("bert_large", "h100x8", Step(precision="bf16", microbatches=4))`` or a task id.

A graph name may also be a dataset graph's (``synthetic-v1:regal-17``, `placement_gym.datasets`) and a
cluster name a family cluster's (``random-v1:3``, `placement_gym.datasets.clusters`)."""

from __future__ import annotations

import functools
from collections.abc import Callable
from pathlib import Path
from typing import Any

from placement_gym.cluster import Cluster, load_cluster
from placement_gym.common.names import DATASET_GRAPH_NAMES, FAMILY_CLUSTER_NAMES, also_allowed
from placement_gym.common.paths import is_file
from placement_gym.datasets import dataset_graph, is_dataset_graph_name
from placement_gym.datasets.clusters import family_cluster, is_family_cluster_name
from placement_gym.graph import OpGraph, load_graph
from placement_gym.task.compiled import Task, make_task
from placement_gym.task.ids import split_task_id
from placement_gym.task.step import Step, step_of_call


def _source_key(name_or_path: str | Path) -> tuple:
    """A graph or cluster argument as a cache key: the argument (what the loaders read), and for an
    existing file also its resolved path, modification time and size, so that a file written anew,
    or another file of the same name in another directory, is read anew."""
    path = Path(name_or_path)
    if is_file(path):
        stat = path.stat()
        return (str(name_or_path), str(path.resolve()), stat.st_mtime_ns, stat.st_size)
    return (str(name_or_path),)


def _by_name(name: str | Path, kind: str, load: Callable, is_member: Callable, member: Callable,
             member_names: str) -> Any:
    """``member(name)`` when ``is_member(name)`` (a dataset's graph, a family's cluster), else
    ``load(name)``, whose ValueError then also names the ``member_names`` a ``kind`` name may be."""
    if is_member(name):
        return member(name)
    try:
        return load(name)
    except ValueError as error:
        raise also_allowed(error, kind, member_names) from None


def named_graph(name: str | Path) -> OpGraph:
    """A bundled graph, an ONNX file or a dataset graph (``<dataset>:<family>-<k>``) by name."""
    return _by_name(name, "graph", load_graph, is_dataset_graph_name, dataset_graph, DATASET_GRAPH_NAMES)


def named_cluster(name: str | Path) -> Cluster:
    """A preset, ``local``/``cpu<N>``, a cluster JSON file or a family cluster (``random-v1:<k>``)."""
    return _by_name(
        name, "cluster", load_cluster, is_family_cluster_name, family_cluster, FAMILY_CLUSTER_NAMES
    )


# Room for every task of the largest suite (gen-v2: 300 tasks, about 100 MB compiled), so that validating
# file after file of it compiles each task once.
@functools.lru_cache(maxsize=512)
def _cached_task(graph_key: tuple, cluster_key: tuple, step: Step) -> Task:
    graph, cluster = named_graph(graph_key[0]), named_cluster(cluster_key[0])
    return make_task(graph, cluster, step)


def get_task(
    graph: str | Path | OpGraph = "inception_v3",
    cluster: str | Path | Cluster = "k80x4",
    step: Step | str | None = None,
    *positional: Any,
    **options: Any,
) -> Task:
    """A compiled task from a graph (bundled name, ONNX path, dataset graph name or `OpGraph`), a cluster
    (preset name, JSON path, family cluster name or `Cluster`) and a step: a `placement_gym.task.step.Step`,
    an objective (``"train_step"``, the default, or ``"inference"``; the id suffixes ``"train"`` and
    ``"inference"`` are accepted too) or a task id's objective (``"train+sgd+bf16"``), its fields replaced
    by the keywords ``objective``, ``optimizer`` (``"adam"``, ``"momentum"``, ``"sgd"``: training only,
    another than the default with inference is refused), ``precision`` (``"fp32"``, or
    ``"bf16"``/``"fp16"``: mixed precision on the tensor cores), ``microbatches`` (the micro-batches of a
    pipelined step, 1 to 1024), ``recompute`` (activation recomputation, training only) and
    ``tensor_parallel`` (each op split over groups of that many GPUs, 1 to 72); what each
    does: `placement_gym.task.compiled`. Passing the options by position after the step is deprecated.
    Tasks built from names or files are cached (a file until it changes)."""
    step = step_of_call("get_task", step, positional, options)
    if isinstance(graph, (str, Path)) and isinstance(cluster, (str, Path)):
        return _cached_task(_source_key(graph), _source_key(cluster), step)
    graph = graph if isinstance(graph, OpGraph) else named_graph(graph)
    cluster = cluster if isinstance(cluster, Cluster) else named_cluster(cluster)
    return make_task(graph, cluster, step)


def parse_task_id(task_id: str) -> Task:
    """The task of an id such as ``"inception_v3/k80x4/train"``, ``"resnet50/v100x8/train+sgd"`` or
    ``"bert_large/h100x8/train+bf16"``
    (format: `placement_gym.task.ids`). An id whose graph or cluster carries a content hash
    (``my_model@3f2a9c1d0b7e``) is refused with a clear error: only its file rebuilds that task."""
    graph, cluster, step = split_task_id(task_id)
    return get_task(graph, cluster, step)
