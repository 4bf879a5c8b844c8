"""Deprecated: the envs draw a graph of a dataset split and/or a cluster of a family themselves
(``dataset=``, ``clusters=``; `placement_gym.envs.sources.DatasetTasks`). `DatasetPlacementEnv` still
builds that env, and the names below still import, each with a DeprecationWarning naming its
replacement."""

from __future__ import annotations

import warnings
from typing import Any

import gymnasium as gym

from placement_gym.envs import sources

_MOVED = {"cluster_pool": "cluster_pool", "CLUSTER_SPLITS": "CLUSTER_SPLITS",
          "CLUSTERS_ACCEPTS": "CLUSTERS_ACCEPTS", "CACHED_ENVS": "CACHED_TASKS"}


def DatasetPlacementEnv(env_class: type[gym.Env], **settings: Any) -> gym.Env:  # noqa: N802 - the class it was
    """``env_class(**settings)`` (with ``dataset=`` and/or ``clusters=`` among them), with a
    DeprecationWarning: the env classes take those keywords themselves."""
    warnings.warn("DatasetPlacementEnv(env_class, dataset=..., clusters=...) is deprecated: the envs take "
                  "dataset= and clusters= themselves (env_class(dataset=..., clusters=...))",
                  DeprecationWarning, stacklevel=2)
    return env_class(**settings)


def __getattr__(name: str) -> Any:
    if name in _MOVED:
        warnings.warn(f"placement_gym.envs.dataset.{name} is deprecated: use "
                      f"placement_gym.envs.sources.{_MOVED[name]}", DeprecationWarning, stacklevel=2)
        return getattr(sources, _MOVED[name])
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
