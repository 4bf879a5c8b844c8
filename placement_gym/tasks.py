"""Building tasks from names: ``get_task("inception_v3", "k80x4", "train_step")`` or a task id."""

from __future__ import annotations

import functools
from pathlib import Path

from placement_gym.cluster import Cluster, load_cluster
from placement_gym.graph import OpGraph, load_graph
from placement_gym.task import OBJECTIVES, Task, make_task

_OBJECTIVE_BY_SUFFIX = {suffix: name for name, suffix in OBJECTIVES.items()}


@functools.lru_cache(maxsize=64)
def _cached_task(graph: str, cluster: str, objective: str, optimizer: str) -> Task:
    return make_task(load_graph(graph), load_cluster(cluster), objective, optimizer)


def get_task(
    graph: str | Path | OpGraph = "inception_v3",
    cluster: str | Path | Cluster = "k80x4",
    objective: str = "train_step",
    optimizer: str = "adam",
) -> Task:
    """A compiled task from a graph (bundled name, ONNX path or `OpGraph`), a cluster (preset name,
    JSON path or `Cluster`) and an objective (``"train_step"`` or ``"inference"``; the id suffixes
    ``"train"`` and ``"inference"`` are accepted too). Tasks built from names are cached."""
    objective = _OBJECTIVE_BY_SUFFIX.get(objective, objective)
    if objective not in OBJECTIVES:
        raise ValueError(f"unknown objective {objective!r}; allowed: {', '.join(OBJECTIVES)}")
    if isinstance(graph, (str, Path)) and isinstance(cluster, (str, Path)):
        return _cached_task(str(graph), str(cluster), objective, optimizer)
    graph = graph if isinstance(graph, OpGraph) else load_graph(graph)
    cluster = cluster if isinstance(cluster, Cluster) else load_cluster(cluster)
    return make_task(graph, cluster, objective, optimizer)


def parse_task_id(task_id: str) -> Task:
    """The task of an id such as ``"inception_v3/k80x4/train"``."""
    parts = task_id.split("/")
    if len(parts) != 3:
        raise ValueError(
            f"a task id is graph/cluster/objective, such as inception_v3/k80x4/train; got {task_id!r}"
        )
    return get_task(*parts)
