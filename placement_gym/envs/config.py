"""`EnvConfig`: the settings every placement env shares, in one frozen, validated object.

The three envs and the native vector env take these settings as keyword arguments (what `gym.make`
passes on) or as one ``config=EnvConfig(...)`` (keywords given beside it replace its fields), and keep
the result as ``env.config``. Each env adds only its own keywords (single-shot and staged: ``reward``;
staged: ``dense``; refine: ``initial``, ``sweeps``)."""

from __future__ import annotations

import dataclasses
import functools
import inspect
import os
import warnings
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from gymnasium import __file__ as gym_file

from placement_gym.cluster.cluster import Cluster
from placement_gym.envs.observation import check_obs_mode
from placement_gym.envs.rewards import DEFAULT_OOM_RUNTIME_FACTOR, check_oom_settings
from placement_gym.evaluation.evaluator import COST_MODEL
from placement_gym.graph.opgraph import OpGraph
from placement_gym.task.compiled import Task
from placement_gym.task.step import STEP_OPTIONS, Step, as_step

RENDER_MODES: tuple[str, ...] = ("ansi", "rgb_array")
# Settings that work, with a DeprecationWarning, until the env ids' next version -> what replaces each.
DEPRECATED: dict[str, str] = {
    "reward_mode": "evaluator= (a backend's name, an EvaluatorBackend or an evaluator object)",
    "profile": 'evaluator_options={"profile": ...}',
    "devices": 'evaluator_options={"devices": ...}',
}
_MOVED_OPTIONS = ("profile", "devices")  # the deprecated settings that are options of a backend


def _is_str(value: Any) -> bool:
    return isinstance(value, str)


# Where the frames of a call that builds a config run before the caller's own: this package, the
# ``__init__`` dataclasses generates (compiled from a string), `dataclasses.replace` and `gym.make`.
_PASSED_THROUGH = (str(Path(__file__).resolve().parents[1]), "<string>", dataclasses.__file__,
                   str(Path(gym_file).resolve().parent))


def _callers_level() -> int:
    """The ``stacklevel`` of `warnings.warn`, called in this module's caller, that names the first frame
    outside `_PASSED_THROUGH`: the line of the user's code that gave the setting, however many envs,
    wrappers and `gym.make` calls stand between."""
    frame = inspect.currentframe()  # this function's; two back: its caller's caller
    level, frame = 2, frame.f_back.f_back if frame is not None and frame.f_back is not None else None
    while frame is not None and frame.f_code.co_filename.startswith(_PASSED_THROUGH):
        level, frame = level + 1, frame.f_back
    return level


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
      to its counter; ``cluster`` and the step are then the task's, and a cluster or a step option
      other than the default given beside it must agree with it).
      Default ``"inception_v3"``.
    - ``cluster``: a preset name (``placement_gym.cluster.PRESETS``), ``"local"``, ``"cpu<N>"``, a JSON
      file path, or a `Cluster`. Default ``"k80x4"``.
    - ``step``: the step the task times, one `placement_gym.task.step.Step` (a `Step`, an objective
      ``"train_step"`` or ``"inference"``, or a task id's objective such as ``"train+sgd+bf16"``; default
      ``Step()``, a training step with Adam in fp32): its ``objective``, ``optimizer`` (training only),
      ``precision`` (``"fp32"``, ``"bf16"`` or ``"fp16"``), ``microbatches`` (of a pipelined step, 1 to
      1024), ``recompute`` (activation recomputation, training only) and ``tensor_parallel`` (each op
      split over groups of that many GPUs, the groups then being the devices). The placement stays one
      device per op of the task's graph.
    - the step's fields (`placement_gym.task.step.STEP_OPTIONS`: ``objective``, ``optimizer``,
      ``precision``, ``microbatches``, ``recompute``, ``tensor_parallel``) as keywords, each replacing
      that field of ``step`` (``EnvConfig(precision="bf16")`` is
      ``EnvConfig(step=Step(precision="bf16"))``); they read back as attributes (``config.precision``
      is ``config.step.precision``).
    - ``groups``: None (default: one node per op), ``"colocate"``, ``"chains"``, an int k (a k-way
      partition) or an array of one group label per op (`placement_gym.task.groups.make_grouping`).
    - ``obs_mode``: ``"dict"`` (default), ``"flat"`` or ``"graph"``.
    - ``max_ops``, ``max_edges``: pad the dict observation to these numbers of nodes and edges
      (default: the task's own, or the largest of the tasks the task source draws), so that envs of
      different graphs share one observation space.
    - ``max_devices``: pad everything per device to this number of devices (default: the cluster's
      own, or the largest of the clusters the task source draws), so that envs of different clusters
      share one observation and action space: the observation's device rows and columns, the action
      space, `action_masks()` (padded devices masked out) and ``info["peak_memory"]``. An action
      naming a padded device ``d`` places on the real device ``d % n_devices``
      (`placement_gym.envs.base.PlacementEnvBase`, Padded devices).
    - ``render_mode``: None, ``"ansi"`` (a text table of the placement per device) or
      ``"rgb_array"`` (the Gantt chart of the simulated schedule; needs matplotlib).
    - ``oom_runtime``: seconds an out-of-memory placement is rewarded with; None (default) uses
      ``oom_runtime_factor`` x the best single-device runtime.
    - ``oom_runtime_factor``: see ``oom_runtime``; at least 1. Default 10.
    - ``mask_in_obs``: put the action mask in the observation (not with ``obs_mode="graph"``).
    - ``evaluator``: what scores a placement (`placement_gym.evaluation.evaluator.evaluator_for`): None
      (default: the cost model), a backend's name (``"cost_model"``, ``"profiled"``, ``"real"`` or one a
      package declared, `placement_gym.evaluation.evaluator.evaluator_names`), an ``EvaluatorBackend``,
      or an evaluator object (the `placement_gym.evaluation.evaluator.Evaluator` protocol), which scores
      one task as given.
    - ``evaluator_options``: a dict of the options of the backend ``evaluator`` names, those its
      ``EvaluatorBackend.options`` lists (``"profiled"``: ``profile``, a profile dict or file, and
      ``devices``; ``"real"``: ``devices``, device name -> torch device, ``seed``, ``batch``, ``model``,
      ``lr``); an option the backend does not take is refused by name.
    - ``dataset``: ``"<name>:<split>"``: each reset draws a graph of that dataset split (not with
      ``graph=``); ``clusters``: a cluster family split (``"random-v1:train"``) or a list of clusters, of
      which each reset draws one (not with ``cluster=``); `placement_gym.envs.sources.DatasetTasks`.
    - ``task_source``: a task source of your own (`placement_gym.envs.sources.TaskSource`), drawn at
      each reset, in place of ``graph``, ``cluster``, the step, ``dataset`` and ``clusters``.
    - Deprecated, accepted through version 0 of the env ids with a DeprecationWarning: ``reward_mode``
      (a backend's name: give ``evaluator=``), ``profile`` and ``devices`` (give them in
      ``evaluator_options``).

    ## Version History
    The shared settings of every placement env, by version of the env ids:

    - v0: ``dataset=``, ``clusters=`` and ``max_devices`` padding, ``step=``, ``evaluator=`` with
      ``evaluator_options=``, and ``task_source=`` came as keywords whose defaults keep each env's MDP.
      The keywords ``reward_mode``, ``profile`` and ``devices`` are deprecated (``evaluator=``,
      ``evaluator_options=``): accepted through v0 with a DeprecationWarning, gone in v1.
    """

    graph: str | Path | OpGraph | Task = "inception_v3"
    cluster: str | Path | Cluster = "k80x4"
    step: Step = Step()
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
    dataset: str | None = None
    clusters: Any = None
    task_source: Any = None
    evaluator_options: Mapping[str, Any] | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "step", as_step(self.step))
        for name, replacement in DEPRECATED.items():
            if not self.is_default(name):
                warnings.warn(f"{name}= is deprecated (removed with the env ids' next version): give "
                              f"{replacement}", DeprecationWarning, stacklevel=_callers_level())
        if not isinstance(self.graph, (str, os.PathLike, OpGraph, Task)):
            raise ValueError(
                f"graph must be {GRAPH_ACCEPTS}; got {self.graph!r} ({type(self.graph).__name__})"
            )
        if not isinstance(self.cluster, (str, os.PathLike, Cluster)):
            raise ValueError(
                f"cluster must be {CLUSTER_ACCEPTS}; got {self.cluster!r} ({type(self.cluster).__name__})"
            )
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
        options = self.evaluator_options
        if options is not None and not (isinstance(options, Mapping) and all(map(_is_str, options))):
            raise ValueError(f"evaluator_options must be a dict of option name -> value, got {options!r}")
        twice = [name for name in _MOVED_OPTIONS
                 if getattr(self, name) is not None and name in (options or {})]
        if twice:
            raise ValueError(f"{twice[0]} is given twice, as {twice[0]}= and in evaluator_options: give it "
                             "in evaluator_options only")
        if self.dataset is not None and not isinstance(self.dataset, str):
            raise ValueError(f"dataset must be a str '<name>:<split>', got {self.dataset!r}")

    @classmethod
    def of(cls, config: EnvConfig | None, settings: dict[str, Any], env: str, graph: Any = FROM_CONFIG,
           cluster: Any = FROM_CONFIG) -> EnvConfig:
        """``config`` (default: the defaults) with the fields in ``settings`` replaced, and ``graph``
        and ``cluster`` unless `FROM_CONFIG` (an env's first two arguments); a setting naming a field
        of the step (`placement_gym.task.step.STEP_OPTIONS`) replaces that field of the step. A
        TypeError naming the env and the settings for a keyword that is neither, as for any keyword an
        ``__init__`` does not take."""
        settings = {**({} if graph is FROM_CONFIG else {"graph": graph}),
                    **({} if cluster is FROM_CONFIG else {"cluster": cluster}), **settings}
        if config is not None and not isinstance(config, EnvConfig):
            raise TypeError(f"{env}: config must be an EnvConfig, got {type(config).__name__}")
        unknown = [name for name in settings if name not in DEFAULTS and name not in STEP_OPTIONS]
        if unknown:
            # Python's own wording: libraries probe envs with keywords and read this message (torchrl
            # passes frameskip and drops it on "unexpected keyword argument 'frameskip'").
            raise TypeError(f"{env}.__init__() got an unexpected keyword argument {unknown[0]!r}; the "
                            f"shared settings are {', '.join(FIELDS)} and the step's fields "
                            f"{', '.join(STEP_OPTIONS)} (placement_gym.envs.config.EnvConfig)")
        base = config or cls()
        step_options = {name: settings.pop(name) for name in STEP_OPTIONS if name in settings}
        if step_options:
            settings["step"] = as_step(settings.get("step", base.step), **step_options)
        return dataclasses.replace(base, **settings)

    def scoring(self) -> tuple[Any, dict[str, Any]]:
        """What scores a placement and its options, as `placement_gym.evaluation.evaluator.evaluator_for`
        takes them: ``evaluator`` (else the deprecated ``reward_mode``) and ``evaluator_options`` (with
        the deprecated ``profile`` and ``devices`` where given)."""
        options = dict(self.evaluator_options or {})
        options |= {name: getattr(self, name) for name in _MOVED_OPTIONS if getattr(self, name) is not None}
        return (self.reward_mode if self.evaluator is None else self.evaluator), options

    def is_default(self, name: str) -> bool:
        """Whether field ``name`` holds its default (a value the caller did not choose)."""
        default = DEFAULTS[name]
        value = getattr(self, name)
        return value is default or (type(value) is type(default) and value == default)


FIELDS: tuple[str, ...] = tuple(field.name for field in dataclasses.fields(EnvConfig))
DEFAULTS: dict[str, Any] = {field.name: field.default for field in dataclasses.fields(EnvConfig)}
# The step's fields, which `EnvConfig` takes as keywords beside its own, each replacing that field of
# ``step``, and reads back as attributes. They are not fields, so that `dataclasses.replace` (which passes
# every field on) never passes an old value of one over a new ``step``.
_STEP_SHORTHANDS: tuple[str, ...] = tuple(name for name in STEP_OPTIONS if name not in FIELDS)


def _with_step_shorthands(init: Any) -> Any:
    @functools.wraps(init)
    def __init__(self: EnvConfig, *args: Any, **kwargs: Any) -> None:
        shorthands = {name: kwargs.pop(name) for name in _STEP_SHORTHANDS if name in kwargs}
        init(self, *args, **kwargs)
        given = {name: value for name, value in shorthands.items() if value is not None}
        if given:
            object.__setattr__(self, "step", as_step(self.step, **given))

    signature = inspect.signature(init)
    __init__.__signature__ = signature.replace(parameters=[  # type: ignore[attr-defined]
        *signature.parameters.values(),
        *(inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=None) for name in _STEP_SHORTHANDS),
    ])
    return __init__


def _shorthand(name: str) -> property:
    return property(lambda config: getattr(config.step, name), doc=f"The step's ``{name}``.")


EnvConfig.__init__ = _with_step_shorthands(EnvConfig.__init__)  # type: ignore[method-assign]
for _name in _STEP_SHORTHANDS:
    setattr(EnvConfig, _name, _shorthand(_name))
