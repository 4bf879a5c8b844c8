"""Any of the three placement envs over a set of tasks: a graph of a dataset split and/or a cluster of a
family drawn at every `reset`.

``gym.make("DevicePlacement-v0", dataset="synthetic-v1:train", cluster="k80x4")`` builds a
`DatasetPlacementEnv` around `DevicePlacementEnv` (likewise the staged and refine ids) that draws a
graph of the split at each reset. ``clusters=`` draws the cluster too, beside ``dataset=`` or beside
one ``graph=``:

* ``clusters="random-v1:train"`` (or ``"random-v1:test"``): a split of the cluster family
  `placement_gym.datasets.clusters`; ``clusters="random-v1"``: all of it;
* ``clusters=["k80x4", "p100x4", "random-v1:3"]``: a list of anything ``cluster=`` takes (preset
  names, family cluster names, cluster JSON paths, `Cluster` objects); a `Cluster` is named by its
  ``name`` in ``reset`` options.

What varies at reset. Each `reset` draws, from the env's seeded generator, a graph of the split (when
``dataset=`` is given), then a cluster (when ``clusters=`` is given), then the seed of the inner env's
reset; ``reset(options={"graph": "regal-2", "cluster": "random-v1:3"})`` picks either or both. The
same seed gives the same sequence of (graph, cluster) draws, bit for bit. ``env.unwrapped.task`` is
the current task, ``graph_id`` the current graph's id in the dataset (None with one graph) and
``cluster_name`` the current cluster's name (None with one cluster); the current inner env's other
public attributes (``n_nodes``, ``device_features``, ``flat_layout``...) read through. Every other
keyword is the inner env's (`placement_gym.envs.config.EnvConfig` and the env's own), the same for
every task; ``cluster=`` beside ``clusters=``, ``graph=`` beside ``dataset=``, and ``config=`` beside
either are refused.

Spaces. The observation space is the inner envs' with ``max_ops`` and ``max_edges`` (unless given) at
the split's largest graph, read from the dataset's manifest (built once on first use:
`placement_gym.datasets.dataset.Dataset.manifest`), and with ``clusters=`` ``max_devices`` (unless
given) at the largest device count among the clusters, so that every task's observation fits it. For a
family split that count is the family's largest (``1 + MAX_GPUS`` = 16 for ``random-v1``, reached in
both splits), known without building a thousand clusters; a list's clusters are built to count their
devices. The staged and refine envs act one device a step: ``Discrete(max_devices)``. The single-shot
env's action is ``MultiDiscrete`` over ``max_devices`` for each of ``max_ops`` nodes with
``dataset=`` (a graph reads its first ``n_nodes``; the rest are ignored), or the graph's ``n_nodes``
with one graph. ``action_masks()`` masks out the padded devices (the current cluster's devices past its
``n_devices``); the single-shot env's padding rows allow every real device. An unmasked action naming
a padded device ``d`` places on device ``d % n_devices`` of the current cluster, so that libraries
without masks run unchanged (`placement_gym.envs.base.PlacementEnvBase`, Padded devices); ``info``'s
``peak_memory`` is padded to ``max_devices`` with zeros. ``mask_in_obs=True`` is refused with the
single-shot env over a dataset (its mask's shape is each graph's).

Episodes are the inner env's. Inner envs are kept for the `CACHED_ENVS` (graph, cluster) pairs used
last; a pair drawn again after that is built again (milliseconds for the synthetic datasets and the
family clusters).

Version history: v0 (issue 26): ``dataset=``; ``clusters=`` and ``max_devices`` padding added, with the
ids' own version.
"""

from __future__ import annotations

import os
from collections import OrderedDict
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from placement_gym.cluster.cluster import Cluster
from placement_gym.common.untrusted import shown
from placement_gym.datasets import dataset_split
from placement_gym.datasets.clusters import FAMILY, MAX_GPUS, cluster_ids
from placement_gym.envs.base import check_reset_options
from placement_gym.task.compiled import Task
from placement_gym.task.named import named_cluster

CACHED_ENVS = 32
RESET_OPTIONS: tuple[str, ...] = ("graph", "cluster")  # what `DatasetPlacementEnv.reset` reads
CLUSTER_SPLITS: tuple[str, ...] = ("train", "test", "all")
CLUSTERS_ACCEPTS = (
    f"a cluster family ({FAMILY!r}), a family and split "
    f"({', '.join(f'{FAMILY}:{s}' for s in CLUSTER_SPLITS)}) or a list of cluster names (presets, family "
    "clusters, JSON paths) or Cluster objects"
)


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


class DatasetPlacementEnv(gym.Env):
    """``env_class`` over the graphs of ``dataset`` (``"<name>:<split>"``) and/or the clusters of
    ``clusters``, see the module docstring."""

    def __init__(self, env_class: type[gym.Env], *, dataset: str | None = None, clusters: Any = None,
                 **settings: Any) -> None:
        if dataset is None and clusters is None:
            raise ValueError(f"{env_class.__name__} over a set of tasks needs dataset= or clusters=")
        if settings.get("config") is not None:
            raise ValueError(f"{env_class.__name__} with dataset= or clusters= draws its tasks: config= is "
                             "not taken (give its settings as keywords)")
        settings.pop("config", None)
        if dataset is not None and settings.get("graph") is not None:
            raise ValueError(f"{env_class.__name__} over dataset {dataset!r} draws its graphs: graph= is not "
                             "taken with dataset=")
        self.env_class = env_class
        # --- the graphs ---
        self.dataset = None
        self.graph_ids: list[str | None] = [None]
        if dataset is not None:
            self.dataset, self.graph_ids = dataset_split(dataset)
            if not self.graph_ids:
                raise ValueError(f"dataset {dataset!r} has no graph in that split")
            rows = {row.id: row for row in self.dataset.manifest()}
            settings.setdefault("max_ops", max(rows[i].ops for i in self.graph_ids))
            settings.setdefault("max_edges", max(rows[i].edges for i in self.graph_ids))
        self._in_split = frozenset(self.graph_ids)
        # --- the clusters ---
        self._cluster_arguments: dict[str, Any] = {}
        self.cluster_names: list[str | None] = [None]
        if clusters is not None:
            if settings.get("cluster") is not None:
                raise ValueError("give cluster= (one cluster) or clusters= (one drawn at each reset), not "
                                 f"both (cluster={settings['cluster']!r}, clusters={clusters!r})")
            settings.pop("cluster", None)
            if isinstance(settings.get("graph"), Task):
                raise ValueError("graph= is a compiled Task, whose cluster is its own: clusters= needs a "
                                 "graph name, an ONNX path or an OpGraph")
            names, self._cluster_arguments, largest = cluster_pool(clusters)
            self.cluster_names = list(names)
            given = settings.get("max_devices")
            if given is not None and not (isinstance(given, (int, np.integer)) and not isinstance(given, bool)
                                          and given >= largest):
                raise ValueError(f"max_devices must be an integer >= {largest} (the largest cluster of "
                                 f"clusters={clusters!r}), got {given!r}")
            settings.setdefault("max_devices", largest)
        self._in_pool = frozenset(self.cluster_names)
        self.settings = settings
        self._envs: OrderedDict[tuple[str | None, str | None], gym.Env] = OrderedDict()
        self.graph_id, self.cluster_name = self.graph_ids[0], self.cluster_names[0]
        first = self.env
        multi = isinstance(first.action_space, spaces.MultiDiscrete)
        if settings.get("mask_in_obs") and multi and self.dataset is not None:
            raise ValueError(f"{env_class.__name__} over a dataset does not take mask_in_obs=True: its "
                             "mask has the shape of each graph (call action_masks() instead)")
        self.observation_space = first.observation_space
        self.max_devices = int(first.max_devices)
        self.max_nodes = int(settings["max_ops"]) if self.dataset is not None else int(first.n_nodes)
        if multi:
            devices = np.full(self.max_nodes, self.max_devices, dtype=np.int64)
            self.action_space = spaces.MultiDiscrete(devices)
        else:
            self.action_space = first.action_space
        self.metadata = dict(first.metadata)
        self.render_mode = first.render_mode
        self.evaluations = 0

    # --- the current task ----------------------------------------------------------------------------

    def _env_of(self, graph_id: str | None, cluster_name: str | None) -> gym.Env:
        key = (graph_id, cluster_name)
        if key not in self._envs:
            settings = dict(self.settings)
            if graph_id is not None:
                settings["graph"] = f"{self.dataset.name}:{graph_id}"
            if cluster_name is not None:
                argument = self._cluster_arguments[cluster_name]
                settings["cluster"] = cluster_name if argument is None else argument
            self._envs[key] = self.env_class(**settings)
            while len(self._envs) > CACHED_ENVS:
                self._envs.popitem(last=False)[1].close()
        self._envs.move_to_end(key)
        return self._envs[key]

    @property
    def env(self) -> gym.Env:
        """The env of the current task."""
        return self._env_of(self.graph_id, self.cluster_name)

    @property
    def task(self) -> Task:
        """The current task."""
        return self.env.task

    def __getattr__(self, name: str) -> Any:
        """The current inner env's public attributes (``n_nodes``, ``device_features``, ``flat_layout``,
        ``best_single_runtime``...) read through, so that code written for one env (such as
        ``envs.get_attr("device_features")`` on a vector env) reads the current task's."""
        if name.startswith("_"):
            raise AttributeError(f"{type(self).__name__} has no attribute {name!r}")
        return getattr(self.env, name)

    # --- the MDP ---------------------------------------------------------------------------------------

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        """Draw a graph of the split and a cluster of ``clusters`` (``options["graph"]``: that graph, by
        its id in the dataset; ``options["cluster"]``: that cluster, by name) and reset their env; any
        other key is refused."""
        where = f"{self.env_class.__name__} over a set of tasks"
        options = check_reset_options(options, RESET_OPTIONS, where)
        super().reset(seed=seed)
        graph_id = self._chosen_graph(options.get("graph"))
        cluster_name = self._chosen_cluster(options.get("cluster"))
        self.graph_id, self.cluster_name = graph_id, cluster_name
        env = self.env
        before = env.evaluations
        result = env.reset(seed=int(self.np_random.integers(2**32)))
        self.evaluations += env.evaluations - before
        return result

    def _chosen_graph(self, chosen: Any) -> str | None:
        if self.dataset is None:
            if chosen is not None:
                raise ValueError("options['graph'] picks a graph of dataset=; this env has one graph")
            return None
        if chosen is None:
            return self.graph_ids[int(self.np_random.integers(len(self.graph_ids)))]
        if not isinstance(chosen, str):
            raise ValueError(f"options['graph'] is a graph id of {self.dataset.name} (a str such as "
                             f"{self.graph_ids[0]!r}), got {shown(chosen)} ({type(chosen).__name__})")
        if chosen not in self._in_split:
            self.dataset.locate(chosen)  # a clear error for an id the dataset lacks
            raise ValueError(f"graph {shown(chosen)} is not in this env's split of {self.dataset.name}")
        return chosen

    def _chosen_cluster(self, chosen: Any) -> str | None:
        if not self._cluster_arguments:
            if chosen is not None:
                raise ValueError("options['cluster'] picks a cluster of clusters=; this env has one cluster")
            return None
        if chosen is None:
            return self.cluster_names[int(self.np_random.integers(len(self.cluster_names)))]
        if not isinstance(chosen, str) or chosen not in self._in_pool:
            first, last = self.cluster_names[0], self.cluster_names[-1]
            raise ValueError(f"cluster {shown(chosen)} is not among this env's {len(self.cluster_names)} "
                             f"clusters ({first} .. {last})")
        return chosen

    def step(self, action):
        env = self.env
        if isinstance(self.action_space, spaces.MultiDiscrete):
            action = np.asarray(action)
            if action.shape != (self.max_nodes,):
                raise ValueError(f"action must have shape ({self.max_nodes},): one device per node, padded "
                                 f"to max_ops; got shape {action.shape}")
            action = action[: env.n_nodes]
        before = env.evaluations
        result = env.step(action)
        self.evaluations += env.evaluations - before
        return result

    def action_masks(self) -> np.ndarray:
        """The current task's masks (padded devices masked out); for the single-shot env padded to
        ``max_ops`` rows that allow every real device."""
        masks = self.env.action_masks()
        if not isinstance(self.action_space, spaces.MultiDiscrete):
            return masks
        padded = np.zeros((self.max_nodes, self.max_devices), dtype=bool)
        padded[:, : self.task.n_devices] = True
        padded[: len(masks)] = masks
        return padded

    def render(self):
        return self.env.render()

    def close(self) -> None:
        for env in self._envs.values():
            env.close()
        self._envs.clear()
