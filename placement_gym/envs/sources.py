"""What an env places: a *task source*, drawn at every `reset`, as Jumanji's generator is.

A task source is any object with

- ``sample(rng, options) -> Task``: the task of the next episode, drawn from ``rng`` (the env's seeded
  generator: the same seed gives the same tasks, bit for bit) or picked by ``options`` (the reset
  options of ``reset_options``, only those given);
- ``reset_options``: the keys of ``reset(options=...)`` it reads (the env refuses any other);
- ``limits``: a `SpaceLimits`, the most forward ops, edges and devices of a task it draws, to which the
  env pads its spaces so that every task's observation and action fit them; a None limit is one every
  task it draws shares (the env takes it from the task);
- ``draws``: whether `sample` takes anything from ``rng``. An env over such a source gives each episode
  a generator of its own, seeded by one draw after the task's (``env.episode_random``), so that what an
  episode draws (a random starting placement) does not depend on how many draws picking its task took;
  over a source that draws nothing the episode draws from the env's generator itself.

It may also have ``origin``: the ``graph`` argument its task was built from (an ONNX file's path: the
model the real backend runs), and, for `DatasetTasks`, ``graph_id`` and ``cluster_name`` of the last draw.

The sources here: `FixedTask` (one task: what ``graph=`` and ``cluster=`` give) and `DatasetTasks` (a
graph of a dataset split and/or a cluster of a family or of a list: ``dataset=`` and ``clusters=``).
`task_source_of` makes the source of an `EnvConfig`; ``task_source=`` gives one of your own
(``tests/envs/test_env_injection.py`` writes one; `limits_of` gives the limits of tasks known in advance).
The env classes draw from it themselves; nothing here depends on which env places the tasks.
"""

from __future__ import annotations

import os
from collections import OrderedDict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

import numpy as np

from placement_gym.cluster.cluster import Cluster
from placement_gym.common.untrusted import shown
from placement_gym.datasets import dataset_split
from placement_gym.datasets.clusters import FAMILY, MAX_GPUS, cluster_ids
from placement_gym.envs.config import EnvConfig
from placement_gym.envs.observation import op_edges
from placement_gym.task.compiled import Task
from placement_gym.task.named import get_task, named_cluster
from placement_gym.task.step import Step

# Tasks a `DatasetTasks` keeps built (the (graph, cluster) pairs drawn last); an env keeps as many
# tasks' set-ups (`placement_gym.envs.base.CACHED_TASKS`).
CACHED_TASKS = 32
CLUSTER_SPLITS: tuple[str, ...] = ("train", "test", "all")
# The settings a task source makes its tasks of, which ``task_source=`` replaces.
_MADE_BY_A_SOURCE: tuple[str, ...] = ("graph", "cluster", "step", "dataset", "clusters")
CLUSTERS_ACCEPTS = (
    f"a cluster family ({FAMILY!r}), a family and split "
    f"({', '.join(f'{FAMILY}:{s}' for s in CLUSTER_SPLITS)}) or a list of cluster names (presets, family "
    "clusters, JSON paths) or Cluster objects"
)


@dataclass(frozen=True)
class SpaceLimits:
    """The largest task a source draws, which an env pads its spaces to: ``max_ops`` (forward ops, the
    most nodes), ``max_edges`` and ``max_devices``; None for a size every task it draws shares."""

    max_ops: int | None = None
    max_edges: int | None = None
    max_devices: int | None = None


def limits_of(tasks: Iterable[Task]) -> SpaceLimits:
    """The `SpaceLimits` that hold every one of ``tasks``: their most forward ops, op-to-op edges and
    devices (for a source of your own over tasks known in advance)."""
    tasks = list(tasks)
    if not tasks:
        raise ValueError("limits_of needs at least one task")
    return SpaceLimits(max(task.n_forward for task in tasks),
                       max(max(len(op_edges(task.graph)[0]), 1) for task in tasks),
                       max(task.n_devices for task in tasks))


@runtime_checkable
class TaskSource(Protocol):
    """What an env draws its tasks from (see the module docstring)."""

    reset_options: tuple[str, ...]
    limits: SpaceLimits
    draws: bool

    def sample(self, rng: np.random.Generator, options: Mapping[str, Any]) -> Task: ...


class FixedTask:
    """One task, every episode: ``task``; ``origin``, the ``graph`` argument it was built from."""

    reset_options: tuple[str, ...] = ()
    limits = SpaceLimits()
    draws = False

    def __init__(self, task: Task, origin: Any = None) -> None:
        if not isinstance(task, Task):
            raise ValueError(f"FixedTask takes a compiled Task, got {type(task).__name__}")
        self.task = task
        self.origin = origin

    def __repr__(self) -> str:
        return f"FixedTask({self.task.id})"

    def sample(self, rng: np.random.Generator, options: Mapping[str, Any]) -> Task:
        """The task (drawing nothing)."""
        return self.task


def cluster_pool(clusters: Any) -> tuple[list[str], dict[str, Any], int]:
    """``clusters=`` as (the cluster names, name -> the ``cluster=`` argument of each, the largest
    device count), or a one-line ValueError saying what is allowed. A family split's names are its
    ids (built when drawn) and its device count the family's largest; a list's clusters are built
    here, which checks their names."""
    if isinstance(clusters, str):
        family, colon, split = clusters.partition(":")
        if family != FAMILY:
            raise ValueError(f"clusters={shown(clusters)}: clusters must be {CLUSTERS_ACCEPTS}; for one "
                             "cluster give cluster=")
        if colon and split not in CLUSTER_SPLITS:
            one = f" names one cluster (give cluster={shown(clusters)})" if split.isdigit() else ""
            which = f"unknown split {shown(split)}" if split else "no split after the colon"
            raise ValueError(f"clusters={shown(clusters)}{one}: {which} of {FAMILY}; allowed: "
                             f"{', '.join(CLUSTER_SPLITS)}")
        names = cluster_ids(split or "all")
        return names, dict.fromkeys(names), 1 + MAX_GPUS
    if not isinstance(clusters, (list, tuple)) or not clusters:
        raise ValueError(f"clusters must be {CLUSTERS_ACCEPTS}; got {shown(clusters)}")
    arguments: dict[str, Any] = {}
    largest = 0
    for i, entry in enumerate(clusters):
        if isinstance(entry, Cluster):
            name, cluster = entry.name, entry
        elif isinstance(entry, (str, os.PathLike)):
            name = str(entry)
            try:
                cluster = named_cluster(entry)
            except ValueError as error:
                raise ValueError(f"clusters[{i}]: {error}") from None
        else:
            raise ValueError(f"clusters[{i}] must be a cluster name, a JSON path or a Cluster, got "
                             f"{shown(entry)} ({type(entry).__name__})")
        if name in arguments:
            raise ValueError(f"clusters lists {name!r} twice; give each cluster once")
        arguments[name] = entry
        largest = max(largest, cluster.n_devices)
    return list(arguments), arguments, largest


class DatasetTasks:
    """A graph of a dataset split (``dataset="<name>:<split>"``) and/or a cluster of ``clusters``
    (``"random-v1:train"``, ``"random-v1"``, or a list of anything ``cluster=`` takes), drawn in that
    order at every `sample`; ``graph`` (with ``clusters`` alone) and ``cluster`` (with ``dataset``
    alone) are the one graph or cluster, ``step`` the step of every task.

    ``reset(options={"graph": id, "cluster": name})`` picks either or both (a graph by its id in the
    dataset, a cluster by name; a `Cluster` of a list by its ``name``). ``graph_id`` and
    ``cluster_name`` are the last draw's (None where there is one graph or one cluster). Limits: the
    split's largest graph (its ops and edges, read from the dataset's manifest: built once on first
    use) and the pool's largest cluster (for a family split the family's largest, ``1 + MAX_GPUS``,
    known without building its clusters; a list's clusters are built to count their devices)."""

    reset_options: tuple[str, ...] = ("graph", "cluster")
    draws = True

    def __init__(self, dataset: str | None = None, clusters: Any = None, *, graph: Any = None,
                 cluster: Any = None, step: Step | None = None) -> None:
        if dataset is None and clusters is None:
            raise ValueError("DatasetTasks needs dataset= or clusters=")
        self.graph, self.cluster, self.step = graph, cluster, step or Step()
        self.dataset = None
        self.graph_ids: list[str | None] = [None]
        max_ops = max_edges = max_devices = None
        if dataset is not None:
            self.dataset, self.graph_ids = dataset_split(dataset)
            if not self.graph_ids:
                raise ValueError(f"dataset {dataset!r} has no graph in that split")
            rows = {row.id: row for row in self.dataset.manifest()}
            max_ops = max(rows[i].ops for i in self.graph_ids)
            max_edges = max(rows[i].edges for i in self.graph_ids)
        self._in_split = frozenset(self.graph_ids)
        self._cluster_arguments: dict[str, Any] = {}
        self.cluster_names: list[str | None] = [None]
        if clusters is not None:
            if isinstance(graph, Task):
                raise ValueError("graph= is a compiled Task, whose cluster is its own: clusters= needs a "
                                 "graph name, an ONNX path or an OpGraph")
            names, self._cluster_arguments, max_devices = cluster_pool(clusters)
            self.cluster_names = list(names)
        self._in_pool = frozenset(self.cluster_names)
        self.limits = SpaceLimits(max_ops, max_edges, max_devices)
        self.graph_id, self.cluster_name = self.graph_ids[0], self.cluster_names[0]
        self._tasks: OrderedDict[tuple[str | None, str | None], Task] = OrderedDict()

    def __repr__(self) -> str:
        graphs = f"{self.dataset.name}: {len(self.graph_ids)} graphs" if self.dataset else "one graph"
        return f"DatasetTasks({graphs}, {len(self.cluster_names)} cluster(s))"

    def sample(self, rng: np.random.Generator, options: Mapping[str, Any]) -> Task:
        """A graph of the split, then a cluster of the pool, each drawn from ``rng`` unless
        ``options`` names it."""
        graph_id = self._chosen_graph(options.get("graph"), rng)
        cluster_name = self._chosen_cluster(options.get("cluster"), rng)
        self.graph_id, self.cluster_name = graph_id, cluster_name
        return self._task(graph_id, cluster_name)

    def _task(self, graph_id: str | None, cluster_name: str | None) -> Task:
        key = (graph_id, cluster_name)
        if key not in self._tasks:
            graph = self.graph if graph_id is None else f"{self.dataset.name}:{graph_id}"
            cluster = self.cluster
            if cluster_name is not None:
                argument = self._cluster_arguments[cluster_name]
                cluster = cluster_name if argument is None else argument
            self._tasks[key] = get_task(graph, cluster, self.step)
            while len(self._tasks) > CACHED_TASKS:
                self._tasks.popitem(last=False)
        self._tasks.move_to_end(key)
        return self._tasks[key]

    def _chosen_graph(self, chosen: Any, rng: np.random.Generator) -> str | None:
        if self.dataset is None:
            if chosen is not None:
                raise ValueError("options['graph'] picks a graph of dataset=; this env has one graph")
            return None
        if chosen is None:
            return self.graph_ids[int(rng.integers(len(self.graph_ids)))]
        if not isinstance(chosen, str):
            raise ValueError(f"options['graph'] is a graph id of {self.dataset.name} (a str such as "
                             f"{self.graph_ids[0]!r}), got {shown(chosen)} ({type(chosen).__name__})")
        if chosen not in self._in_split:
            self.dataset.locate(chosen)  # a clear error for an id the dataset lacks
            raise ValueError(f"graph {shown(chosen)} is not in this env's split of {self.dataset.name}")
        return chosen

    def _chosen_cluster(self, chosen: Any, rng: np.random.Generator) -> str | None:
        if not self._cluster_arguments:
            if chosen is not None:
                raise ValueError("options['cluster'] picks a cluster of clusters=; this env has one cluster")
            return None
        if chosen is None:
            return self.cluster_names[int(rng.integers(len(self.cluster_names)))]
        if not isinstance(chosen, str) or chosen not in self._in_pool:
            first, last = self.cluster_names[0], self.cluster_names[-1]
            raise ValueError(f"cluster {shown(chosen)} is not among this env's {len(self.cluster_names)} "
                             f"clusters ({first} .. {last})")
        return chosen


def fixed_task(config: EnvConfig) -> FixedTask:
    """The one task of ``config``: ``config.graph`` when it is a `Task` (after checking the cluster and
    the step against it: what they set other than the defaults must be the task's), else the task
    `get_task` builds of ``graph``, ``cluster`` and ``step``."""
    graph, cluster = config.graph, config.cluster
    if not isinstance(graph, Task):
        return FixedTask(get_task(graph, cluster, config.step), origin=graph)
    cluster_agrees = cluster is graph.cluster or cluster == graph.cluster.name
    contradicted = {**({} if cluster_agrees or config.is_default("cluster") else {"cluster": cluster}),
                    **config.step.disagreements(graph.step)}
    if contradicted:
        name, value = next(iter(contradicted.items()))
        raise ValueError(
            f"graph is the compiled task {graph.id}; {name}={value!r} is not the task's "
            f"(leave {name} out or give the task's)"
        )
    return FixedTask(graph, origin=graph)


def task_source_of(config: EnvConfig, env: str = "the env") -> TaskSource:
    """The task source of ``config``: ``task_source`` as given; else a `DatasetTasks` of ``dataset`` and
    ``clusters`` (with ``graph`` or ``cluster`` as the one graph or cluster) when either is given; else
    `fixed_task`. A one-line ValueError for settings that contradict each other (``graph=`` beside
    ``dataset=``, ``cluster=`` beside ``clusters=``, any of them or the step beside ``task_source=``);
    ``env`` names the env in it."""
    if config.task_source is not None:
        given = [name for name in _MADE_BY_A_SOURCE if not config.is_default(name)]
        if given:
            raise ValueError(f"{env} draws its tasks from task_source=, which makes them whole: "
                             f"{', '.join(name + '=' for name in given)} {'are' if given[1:] else 'is'} not "
                             "taken beside it")
        source = config.task_source
        if not isinstance(source, TaskSource):
            raise ValueError(f"task_source must have sample(rng, options) -> Task, reset_options, limits and "
                             f"draws (placement_gym.envs.sources.TaskSource); got {type(source).__name__}")
        return source
    if config.dataset is None and config.clusters is None:
        return fixed_task(config)
    if config.dataset is not None and not config.is_default("graph"):
        raise ValueError(f"{env} over dataset {config.dataset!r} draws its graphs: graph= is not taken with "
                         "dataset=")
    if config.clusters is not None and not config.is_default("cluster"):
        raise ValueError("give cluster= (one cluster) or clusters= (one drawn at each reset), not both "
                         f"(cluster={config.cluster!r}, clusters={config.clusters!r})")
    return DatasetTasks(config.dataset, config.clusters, graph=config.graph, cluster=config.cluster,
                        step=config.step)
