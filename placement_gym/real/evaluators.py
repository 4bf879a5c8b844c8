"""The scoring backends beyond the cost model: who turns a placement into a runtime.
`PROFILED_BACKEND` and `REAL_BACKEND` (factories `profiled_evaluator` and `real_evaluator`) are the
backends ``"profiled"`` and ``"real"`` of the envs' ``evaluator=`` and of
`placement_gym.evaluation.evaluator.make_evaluator`, declared as entry points of the group
``placement_gym.evaluators`` in the package's pyproject.toml, as another package declares its own.

- ``"cost_model"``: the analytical cost model on the task itself (`CostModelEvaluator`).
- ``"profiled"``: the same cost model on `profiled_task` (measured op times and links; for a
  ``train_step`` task, a profile measured with the task's optimizer).
- ``"real"``: the torch executor of `placement_gym.real.executor` runs the placement (a train step
  updates the weights with the task's optimizer).

Each implements `placement_gym.evaluation.evaluator.Evaluator` (``name``, ``task``, ``simulate``,
``simulate_batch``, ``evaluations``), the interface the envs, the searches and the learned agents take;
the real one also adds its summary of the last measured run to an env's ``info`` (`REAL_INFO_KEYS`).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from placement_gym.cluster.load import REAL_CLUSTER_NAME, is_named_cluster
from placement_gym.common.extras import require
from placement_gym.cost_model import SimulationResult
from placement_gym.evaluation.evaluator import (
    BatchResult,
    CostModelEvaluator,
    EvaluatorBackend,
    stacked_results,
)
from placement_gym.graph.bundled import bundled_onnx_file
from placement_gym.real.devices import cluster_device_map
from placement_gym.real.profile import find_profile, load_profile
from placement_gym.real.profiled import profiled_task
from placement_gym.real.program import model_source
from placement_gym.task.compiled import Task

# What the real backend adds to an env's ``info``: the median timed step (seconds; equals ``runtime``), the
# spread of the timed steps ((max - min) / median), how many were timed (int64) and the last train step's
# loss (0 for inference); zeros, 0 repeats, where no run was measured.
REAL_INFO_KEYS: tuple[str, ...] = ("real_runtime", "real_spread", "real_repeats", "real_loss")


class ProfiledEvaluator(CostModelEvaluator):
    """The cost model on the profiled task (``self.task``: measured op times and links); that task
    shares the evaluation counter of the task it was made for, so its evaluations count there."""

    name = "profiled"

    def __init__(self, task: Task, profile: Mapping[str, Any] | str | Path) -> None:
        self.profile = load_profile(profile) if isinstance(profile, (str, Path)) else profile
        super().__init__(profiled_task(task, self.profile))


def machine_devices(task: Task) -> dict[str, str] | None:
    """The torch devices of a task whose cluster is this machine's own (``cpu<N>``: every device
    ``"cpu"``, virtual CPU devices; ``local``: the CPU and the CUDA devices it was measured from),
    else None: a preset or a JSON cluster describes hardware that need not be here, so only the
    caller can say which torch device stands for each of its devices."""
    if REAL_CLUSTER_NAME.fullmatch(task.cluster.name) and is_named_cluster(task.cluster):
        return cluster_device_map(task.cluster)
    return None


class RealEvaluator:
    """Runs placements on real devices with `placement_gym.real.executor.Executor`.

    ``simulate`` returns the measured result as a `SimulationResult` (no schedule: a real run has
    no simulated timeline); ``last_result`` keeps the executor's full result and ``last_info`` a
    JSON-able summary of it (repeats, spread, explanation; the error text of a failed run), whose
    numbers `env_info` gives an env's ``info``."""

    name = "real"
    info_keys = REAL_INFO_KEYS

    def __init__(self, task: Task, devices: Mapping[str, str] | None = None, seed: int = 0,
                 **options: Any) -> None:
        if devices is None:
            devices = machine_devices(task)  # this machine's cluster (cpu<N>, local) maps itself
        if not isinstance(devices, Mapping) or not devices:
            raise ValueError(
                'evaluator="real" needs devices=: a mapping from each device name of the cluster '
                f"({', '.join(task.cluster.device_names)}) to a torch device, such as "
                "{'cpu:0': 'cpu', 'gpu:0': 'cuda:0'} (or a cluster of this machine, cpu<N> or local, "
                "whose devices map themselves)"
            )
        missing = sorted(set(task.cluster.device_names) - set(devices))
        if missing:
            raise ValueError(f"devices= lacks a torch device for {', '.join(missing)} of task {task.id}")
        require("torch", 'evaluator="real"')
        from placement_gym.real.executor import Executor

        self.task = task
        self.executor = Executor(task, devices, seed, **options)
        # What makes two real runs comparable (`placement_gym.evaluation.evaluator.scoring_identity`): the
        # same torch devices and run options (batch, repeats...); objects such as a model are left out.
        self._identity = {
            "devices": dict(sorted(devices.items())),
            "seed": seed,
            "options": {k: v for k, v in sorted(options.items())
                        if v is None or isinstance(v, (bool, int, float, str))},
        }
        self.last_result = None
        self.last_info: dict[str, Any] | None = None
        self.evaluations = 0

    def identity(self) -> dict[str, Any]:
        """The devices and run options of this evaluator
        (`placement_gym.evaluation.evaluator.scoring_identity`)."""
        return dict(self._identity)

    def simulate(self, placement, schedule: bool = False) -> SimulationResult:
        result = self.executor.run(placement)
        self.evaluations += 1
        self.task.count_evaluations(1)  # a measured run is an evaluation of the task (`Task.evaluations`)
        self.last_result = result
        self.last_info = _summary(result)
        return result.to_simulation_result()

    def simulate_batch(self, rows) -> BatchResult:
        """One measured run per row, in row order (runs on the same devices cannot overlap)."""
        return stacked_results([self.simulate(row) for row in rows], self.task.n_devices)

    def env_info(self, scored: bool) -> dict[str, Any]:
        """`REAL_INFO_KEYS` as numpy numbers: the summary of the last measured run when ``scored`` and
        one was measured, else zeros (0 repeats)."""
        summary = (self.last_info if scored else None) or {}
        loss = summary.get("loss")
        return {
            "real_runtime": np.float64(summary.get("runtime", 0.0)),
            "real_spread": np.float64(summary.get("spread", 0.0)),
            "real_repeats": np.int64(len(summary.get("runtimes", ()))),
            "real_loss": np.float64(0.0 if loss is None else loss),
        }


def _summary(result: Any) -> dict[str, Any]:
    """The plain attributes of a real result (numbers, strings, short lists), for ``info``."""
    fields = getattr(result, "__dataclass_fields__", None) or vars(result)
    summary = {}
    for name in fields:
        value = getattr(result, name, None)
        if isinstance(value, (int, float, str, bool)) or value is None:
            summary[name] = value
        elif hasattr(value, "tolist") and getattr(value, "size", 1e9) <= 64:
            summary[name] = value.tolist()
        elif isinstance(value, (tuple, list)) and len(value) <= 64:
            summary[name] = list(value)
    return summary


def _fp32_only(task: Task, backend: str) -> None:
    """Profiles are measured in fp32: a half-precision task is refused with one line rather than
    costed with fp32 times (the real executor runs every precision)."""
    if task.precision != "fp32":
        raise ValueError(
            f"evaluator {backend!r} runs and measures the graph in fp32; task {task.id} is "
            f"{task.precision}: use the cost model (evaluator 'cost_model') for it, or precision 'fp32'"
        )


def profiled_evaluator(
    task: Task,
    *,
    source: Any = None,
    profile: Mapping[str, Any] | str | Path | None = None,
    devices: Mapping[str, str] | None = None,
) -> ProfiledEvaluator:
    """The ``"profiled"`` backend: a `ProfiledEvaluator` of ``task`` (``profile``: a profile dict or
    file; default the cached profile of the task's graph on ``devices``, or without ``devices`` on the
    cluster's device names; for a ``train_step`` task it must be measured with ``task.optimizer``).
    ``source``: the ``graph`` argument the task was built from; an ONNX file's path names the file in
    the message of a missing profile."""
    _fp32_only(task, "profiled")
    if profile is None:
        model = model_source(source)
        # An inference task has no update op: a profile of any optimizer serves it.
        optimizer = task.optimizer if task.objective == "train_step" else None
        profile = find_profile(task.graph, devices if devices is not None else task.cluster.device_names,
                               optimizer=optimizer)
        if profile is None:
            names = ",".join(task.cluster.device_names)
            if isinstance(model, (str, Path)):
                graph = str(model)
            elif bundled_onnx_file(task.graph) is not None:
                graph = task.graph.name
            else:  # the profile command reads the graph's file, which only the caller knows
                graph = f"<the .onnx file of {task.graph.name}>"
            which = f" for optimizer {optimizer}" if optimizer else ""
            flag = f" --optimizer {optimizer}" if optimizer else ""
            # --devices takes NAME=TORCH pairs; only this machine's own clusters resolve by name.
            if devices is not None:
                where = f"--devices {','.join(f'{n}={d}' for n, d in devices.items())}"
            elif REAL_CLUSTER_NAME.fullmatch(task.cluster.name):
                where = f"--cluster {task.cluster.name}"
            else:
                where = f"--devices {','.join(f'{n}=<torch device>' for n in task.cluster.device_names)}"
            raise ValueError(
                f"no cached profile of graph {task.graph.name!r} on devices {names}{which}; run "
                f"placement-gym profile --graph {graph} {where}{flag} (or pass profile=)"
            )
    return ProfiledEvaluator(task, profile)


def real_evaluator(
    task: Task, *, source: Any = None, devices: Mapping[str, str] | None = None, **options: Any
) -> RealEvaluator:
    """The ``"real"`` backend: a `RealEvaluator` of ``task`` (``devices``: cluster device name -> torch
    device, which a cluster of this machine, ``cpu<N>`` or ``local``, may leave out; ``options`` go to
    the executor: ``seed``, ``batch``, ``model``, ``lr``, ``compile``; its train steps run
    ``task.optimizer`` at ``task.precision``).
    ``source``: the ``graph`` argument the task was built from; when it is an ONNX file or a
    ModelProto (`placement_gym.real.program.model_source`) the executor runs that model unless
    ``model=`` is given."""
    model = model_source(source)
    if model is not None:
        options.setdefault("model", model)
    return RealEvaluator(task, devices, **options)


PROFILED_BACKEND = EvaluatorBackend(
    "profiled", profiled_evaluator, ("profile", "devices"),
    "the cost model with measured op times and links (placement-gym profile)", label="profiled cost model")
REAL_BACKEND = EvaluatorBackend(
    "real", real_evaluator, ("devices", "seed", "batch", "model", "lr", "compile"),
    "every placement run on torch devices (the real-hardware executor)", info_keys=REAL_INFO_KEYS,
    label="measured on the devices", runs_on_devices=True)
