"""Any of the three placement envs over the graphs of a dataset split: a new graph at every `reset`.

``gym.make("DevicePlacement-v0", dataset="synthetic-v1:train", cluster="k80x4")`` builds a
`DatasetPlacementEnv` around `DevicePlacementEnv` (likewise the staged and refine ids). Each `reset`
draws a graph of the split from the env's seeded generator (``reset(options={"graph": "regal-17"})``
picks one) and starts an episode of the env of that graph; ``env.unwrapped.task`` is the current
task. Every other keyword is the inner env's (`placement_gym.envs.config.EnvConfig` and the env's
own), the same for every graph.

Spaces. The observation space is the inner envs' with ``max_ops`` and ``max_edges`` (unless given)
at the split's largest graph, read from the dataset's manifest (built once on first use:
`placement_gym.datasets.dataset.Dataset.manifest`), so that every graph's observation fits it. The
staged and refine envs act one device a step, a space every graph shares; the single-shot env's
action is padded to ``max_ops`` nodes, of which a graph reads its first ``n_nodes`` (the rest are
ignored), and its ``action_masks()`` has rows for the padding (every device allowed there).
``mask_in_obs=True`` is refused with the single-shot env (its mask's shape is the graph's).

Episodes are the inner env's. Inner envs are kept for the `CACHED_ENVS` graphs used last; a graph
drawn again after that is built again (milliseconds to compile for the synthetic datasets).

Version history: v0 (issue 26), with the ids' own version.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from placement_gym.datasets import dataset_split
from placement_gym.envs.base import check_reset_options
from placement_gym.task.compiled import Task

CACHED_ENVS = 32
# Settings that name the graph: a dataset env draws its graphs itself.
_GRAPH_SETTINGS = ("graph", "config")


class DatasetPlacementEnv(gym.Env):
    """``env_class`` over the graphs of ``dataset`` (``"<name>:<split>"``), see the module docstring."""

    def __init__(self, env_class: type[gym.Env], *, dataset: str, **settings: Any) -> None:
        given = [key for key in _GRAPH_SETTINGS if settings.get(key) is not None]
        if given:
            raise ValueError(f"{env_class.__name__} over dataset {dataset!r} draws its graphs: "
                             f"{', '.join(given)}= is not taken with dataset=")
        self.dataset, self.graph_ids = dataset_split(dataset)
        self._in_split = frozenset(self.graph_ids)
        if not self.graph_ids:
            raise ValueError(f"dataset {dataset!r} has no graph in that split")
        self.env_class = env_class
        rows = {row.id: row for row in self.dataset.manifest()}
        settings.setdefault("max_ops", max(rows[i].ops for i in self.graph_ids))
        settings.setdefault("max_edges", max(rows[i].edges for i in self.graph_ids))
        self.settings = settings
        self._envs: OrderedDict[str, gym.Env] = OrderedDict()
        first = self._env_of(self.graph_ids[0])
        if settings.get("mask_in_obs") and isinstance(first.action_space, spaces.MultiDiscrete):
            raise ValueError(f"{env_class.__name__} over a dataset does not take mask_in_obs=True: its "
                             "mask has the shape of each graph (call action_masks() instead)")
        self.observation_space = first.observation_space
        self.max_nodes = int(settings["max_ops"])
        if isinstance(first.action_space, spaces.MultiDiscrete):
            devices = np.full(self.max_nodes, first.task.n_devices, dtype=np.int64)
            self.action_space = spaces.MultiDiscrete(devices)
        else:
            self.action_space = first.action_space
        self.metadata = dict(first.metadata)
        self.render_mode = first.render_mode
        self.graph_id = self.graph_ids[0]
        self.evaluations = 0

    # --- the current graph ---------------------------------------------------------------------------

    def _env_of(self, graph_id: str) -> gym.Env:
        if graph_id not in self._envs:
            self._envs[graph_id] = self.env_class(graph=f"{self.dataset.name}:{graph_id}", **self.settings)
            while len(self._envs) > CACHED_ENVS:
                self._envs.popitem(last=False)[1].close()
        self._envs.move_to_end(graph_id)
        return self._envs[graph_id]

    @property
    def env(self) -> gym.Env:
        """The env of the current graph."""
        return self._env_of(self.graph_id)

    @property
    def task(self) -> Task:
        """The current graph's task."""
        return self.env.task

    # --- the MDP ---------------------------------------------------------------------------------------

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        """Draw a graph of the split (``options["graph"]``: that graph, by its id in the dataset) and
        reset its env; the other ``options`` go to it."""
        options = dict(check_reset_options(options))
        super().reset(seed=seed)
        chosen = options.pop("graph", None)
        if chosen is None:
            chosen = self.graph_ids[int(self.np_random.integers(len(self.graph_ids)))]
        elif chosen not in self._in_split:
            self.dataset.locate(chosen)  # a clear error for an id the dataset lacks
            raise ValueError(f"graph {chosen!r} is not in this env's split of {self.dataset.name}")
        self.graph_id = chosen
        env = self.env
        before = env.evaluations
        result = env.reset(seed=int(self.np_random.integers(2**32)), options=options or None)
        self.evaluations += env.evaluations - before
        return result

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
        """The current graph's masks; for the single-shot env padded to ``max_ops`` rows (all allowed)."""
        masks = self.env.action_masks()
        if not isinstance(self.action_space, spaces.MultiDiscrete):
            return masks
        padded = np.ones((self.max_nodes, masks.shape[1]), dtype=bool)
        padded[: len(masks)] = masks
        return padded

    def render(self):
        return self.env.render()

    def close(self) -> None:
        for env in self._envs.values():
            env.close()
        self._envs.clear()
