"""`EnvConfig`: the settings every placement env shares, in one frozen, validated object.

The three envs and the native vector env take these settings as keyword arguments (what `gym.make`
passes on) or as one ``config=EnvConfig(...)`` (keywords given beside it replace its fields), and keep
the result as ``env.config``. Each env adds only its own keywords (single-shot and staged: ``reward``;
staged: ``dense``; refine: ``initial``, ``sweeps``)."""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from placement_gym.cluster.cluster import Cluster
from placement_gym.envs.observation import check_obs_mode
from placement_gym.envs.rewards import DEFAULT_OOM_RUNTIME_FACTOR, check_oom_settings
from placement_gym.evaluation.evaluator import COST_MODEL
from placement_gym.graph.opgraph import OpGraph
from placement_gym.task.compiled import PRECISIONS, Task, check_applies, check_microbatches

RENDER_MODES: tuple[str, ...] = ("ansi", "rgb_array")


class _FromConfig:
    """The default of an env's ``graph`` and ``cluster`` arguments: the value of its config."""

    def __repr__(self) -> str:
        return "<the config's>"


FROM_CONFIG: Any = _FromConfig()
GRAPH_ACCEPTS = (
    "a bundled graph name (placement_gym.bundled_graph_names()), the path to an .onnx file, an OpGraph "
    "or a compiled Task"
)
CLUSTER_ACCEPTS = (
    "a preset name (placement_gym.cluster.PRESETS), 'local', 'cpu<N>', the path to a cluster JSON file "
    "or a Cluster"
)


@dataclass(frozen=True)
class EnvConfig:
    """The shared settings of the placement envs, checked when made (a ValueError names the setting
    and what it allows).

    - ``graph``: a bundled graph name (``placement_gym.bundled_graph_names()``), an ONNX file path,
      an `OpGraph`, or a compiled `Task` (the env then places that very task, so its evaluations add
      to its counter; ``cluster``, ``objective``, ``optimizer``, ``precision``, ``microbatches`` and
      ``recompute`` are then the task's, and a value other than the default given for one of them must
      agree with it).
      Default ``"inception_v3"``.
    - ``cluster``: a preset name (``placement_gym.cluster.PRESETS``), ``"local"``, ``"cpu<N>"``, a JSON
      file path, or a `Cluster`. Default ``"k80x4"``.
    - ``objective``: ``"train_step"`` (default) or ``"inference"``.
    - ``optimizer``: ``"adam"`` (default), ``"momentum"`` or ``"sgd"`` (training only: another with
      ``objective="inference"`` is refused, as is ``recompute``; `placement_gym.task.compiled.check_applies`).
    - ``precision``: ``"fp32"`` (default), ``"bf16"`` or ``"fp16"`` (mixed precision: matrix products
      on the tensor cores, 2-byte activations; `placement_gym.task.compiled`).
    - ``microbatches``: micro-batches of a pipelined step, 1 (default: none) to 1024, each a copy of
      the graph at its own batch, in GPipe's fill-drain order (`placement_gym.task.compiled`); the
      placement stays one device per op of the graph.
    - ``recompute``: activation recomputation (training only; default False): the forward pass is
      replayed segment by segment in the backward pass instead of keeping its activations
      (`placement_gym.task.compiled`); the placement stays one device per op of the graph.
    - ``groups``: None (default: one node per op), ``"colocate"``, ``"chains"``, an int k (a k-way
      partition) or an array of one group label per op (`placement_gym.task.groups.make_grouping`).
    - ``obs_mode``: ``"dict"`` (default), ``"flat"`` or ``"graph"``.
    - ``max_ops``, ``max_edges``: pad the dict observation to these numbers of nodes and edges
      (default: the task's own), so that envs of different graphs share one observation space.
    - ``max_devices``: pad everything per device to this number of devices (default: the cluster's
      own), so that envs of different clusters share one observation and action space: the
      observation's device rows and columns, the action space, `action_masks()` (padded devices
      masked out) and ``info["peak_memory"]``. An action naming a padded device ``d`` places on the
      real device ``d % n_devices`` (`placement_gym.envs.base.PlacementEnvBase`, Padded devices).
    - ``render_mode``: None, ``"ansi"`` (a text table of the placement per device) or
      ``"rgb_array"`` (the Gantt chart of the simulated schedule; needs matplotlib).
    - ``oom_runtime``: seconds an out-of-memory placement is rewarded with; None (default) uses
      ``oom_runtime_factor`` x the best single-device runtime.
    - ``oom_runtime_factor``: see ``oom_runtime``; at least 1. Default 10.
    - ``reward_mode``: what scores a placement, a backend's name: ``"cost_model"`` (default),
      ``"profiled"``, ``"real"`` or one a package registered
      (`placement_gym.evaluation.evaluator.make_evaluator`).
    - ``profile``: for ``"profiled"``, a profile dict or file (`placement_gym.real.profile`).
    - ``devices``: device name -> torch device, for ``"real"`` (and to pick a ``"profiled"`` profile).
    - ``mask_in_obs``: put the action mask in the observation (not with ``obs_mode="graph"``).
    - ``evaluator``: what scores a placement, in place of ``reward_mode``: a backend's name or an
      evaluator object (`placement_gym.evaluation.evaluator.Evaluator`); None (default) takes ``reward_mode``.
    """

    graph: str | Path | OpGraph | Task = "inception_v3"
    cluster: str | Path | Cluster = "k80x4"
    objective: str = "train_step"
    optimizer: str = "adam"
    precision: str = "fp32"
    microbatches: int = 1
    recompute: bool = False
    groups: Any = None
    obs_mode: str = "dict"
    max_ops: int | None = None
    max_edges: int | None = None
    max_devices: int | None = None
    render_mode: str | None = None
    oom_runtime: float | None = None
    oom_runtime_factor: float = DEFAULT_OOM_RUNTIME_FACTOR
    reward_mode: str = COST_MODEL
    profile: Any = None
    devices: Any = None
    mask_in_obs: bool = False
    evaluator: Any = None

    def __post_init__(self) -> None:
        if not isinstance(self.graph, (str, os.PathLike, OpGraph, Task)):
            raise ValueError(
                f"graph must be {GRAPH_ACCEPTS}; got {self.graph!r} ({type(self.graph).__name__})"
            )
        if not isinstance(self.cluster, (str, os.PathLike, Cluster)):
            raise ValueError(
                f"cluster must be {CLUSTER_ACCEPTS}; got {self.cluster!r} ({type(self.cluster).__name__})"
            )
        if self.precision not in PRECISIONS:
            raise ValueError(f"unknown precision {self.precision!r}; allowed: {', '.join(PRECISIONS)}")
        check_microbatches(self.microbatches)
        if not isinstance(self.recompute, (bool, np.bool_)):
            raise ValueError(f"recompute must be True or False, got {self.recompute!r}")
        check_applies(self.objective, self.optimizer, bool(self.recompute))
        check_oom_settings(self.oom_runtime, self.oom_runtime_factor)
        check_obs_mode(self.obs_mode)
        if not isinstance(self.mask_in_obs, (bool, np.bool_)):
            raise ValueError(f"mask_in_obs must be True or False, got {self.mask_in_obs!r}")
        if self.mask_in_obs and self.obs_mode == "graph":
            raise ValueError(
                'mask_in_obs=True needs obs_mode "dict" or "flat": a Gymnasium Graph observation has no '
                "room for the mask; with obs_mode=\"graph\" read env.unwrapped.action_masks() instead"
            )
        if self.render_mode is not None and self.render_mode not in RENDER_MODES:
            raise ValueError(
                f"unknown render_mode {self.render_mode!r}; allowed: None, {', '.join(RENDER_MODES)}"
            )
        if self.evaluator is not None and self.reward_mode != COST_MODEL:
            raise ValueError(
                f"give evaluator= or reward_mode=, not both (evaluator={self.evaluator!r}, "
                f"reward_mode={self.reward_mode!r})"
            )

    @classmethod
    def of(cls, config: EnvConfig | None, settings: dict[str, Any], env: str, graph: Any = FROM_CONFIG,
           cluster: Any = FROM_CONFIG) -> EnvConfig:
        """``config`` (default: the defaults) with the fields in ``settings`` replaced, and ``graph``
        and ``cluster`` unless `FROM_CONFIG` (an env's first two arguments); a TypeError naming the
        env and the settings for a keyword that is not a field, as for any keyword an ``__init__``
        does not take."""
        settings = {**({} if graph is FROM_CONFIG else {"graph": graph}),
                    **({} if cluster is FROM_CONFIG else {"cluster": cluster}), **settings}
        if config is not None and not isinstance(config, EnvConfig):
            raise TypeError(f"{env}: config must be an EnvConfig, got {type(config).__name__}")
        unknown = [name for name in settings if name not in DEFAULTS]
        if unknown:
            # Python's own wording: libraries probe envs with keywords and read this message (torchrl
            # passes frameskip and drops it on "unexpected keyword argument 'frameskip'").
            raise TypeError(f"{env}.__init__() got an unexpected keyword argument {unknown[0]!r}; the "
                            f"shared settings are {', '.join(FIELDS)} (placement_gym.envs.config.EnvConfig)")
        return dataclasses.replace(config or cls(), **settings)

    def is_default(self, name: str) -> bool:
        """Whether field ``name`` holds its default (a value the caller did not choose)."""
        default = DEFAULTS[name]
        value = getattr(self, name)
        return value is default or (type(value) is type(default) and value == default)


FIELDS: tuple[str, ...] = tuple(field.name for field in dataclasses.fields(EnvConfig))
DEFAULTS: dict[str, Any] = {field.name: field.default for field in dataclasses.fields(EnvConfig)}
