"""`DevicePlacement-v0`: place every op in one step (Mirhoseini et al. 2017, HSDAG)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from placement_gym.cluster.cluster import Cluster
from placement_gym.cost_model import lower_bound, simulate, single_device
from placement_gym.envs.observation import GraphObservation
from placement_gym.envs.rewards import (
    DEFAULT_OOM_RUNTIME_FACTOR,
    check_oom_settings,
    check_reward_name,
    penalty_runtime,
    shape_reward,
)
from placement_gym.graph.opgraph import OpGraph
from placement_gym.tasks import get_task

RENDER_MODES: tuple[str, ...] = ("ansi", "rgb_array")


class DevicePlacementEnv(gym.Env):
    """Single-shot device placement: one action assigns a device to every op of a neural network.

    ## Description
    The problem of Mirhoseini et al. (ICML 2017) and HSDAG (Duan et al., NeurIPS 2024): a policy
    sees the computation graph of a model and a cluster of devices, emits one device per op, and is
    rewarded by how fast the placement runs. The runtime comes from placement-gym's cost model
    (`placement_gym.simulate`): one training step (``objective="train_step"``: forward, backward and
    optimizer ops, the backward and update ops on their forward op's device) or one inference pass.
    Each episode is a single step; the task, and so the observation, never changes.

    ## Action Space
    `MultiDiscrete([n_devices] * n_forward)`: the device index of every forward op, in the graph's
    topological order (the order of ``task.graph.op_names``). `action_masks()` returns the
    ``(n_forward, n_devices)`` bool array of allowed choices (for sb3-contrib's MaskablePPO): a
    device is masked out for an op whose static memory alone (parameters, and for training their
    gradients and optimizer state) exceeds the device's capacity; an op that fits on no device
    keeps every device allowed.

    ## Observation Space
    A `Dict` of fixed-size `Box`es (use stable-baselines3's ``MultiInputPolicy``), padded to
    ``max_ops`` ops and ``max_edges`` edges: ``node_features``, ``node_mask``, ``edge_index``,
    ``edge_features``, ``edge_mask``, ``device_features``. Every column is documented in
    `placement_gym.envs.observation` (`NODE_FEATURES`, `EDGE_FEATURES`, `DEVICE_FEATURES`).

    ## Rewards
    A strictly decreasing function of the simulated runtime, chosen with ``reward``:

    - ``"log_speedup"`` (default): ``log(best_single_runtime / runtime)``; 0 for the best
      single-device placement, positive when faster.
    - ``"neg_runtime"``: ``-runtime`` (seconds).
    - ``"neg_sqrt_runtime"``: ``-sqrt(runtime)`` (seconds), the reward of Mirhoseini et al. 2017.
    - ``"inverse"``: ``best_single_runtime / runtime``, the speedup. HSDAG rewards with the execution
      time; dividing the best single-device time by it keeps the reward scale-free.

    A placement that runs out of memory on some device is not an error: it is rewarded as if it ran
    for ``oom_runtime`` seconds when that is given (Mirhoseini et al. 2017 used 100 s), else for
    ``oom_runtime_factor`` (default 10) times the best single-device runtime. That is below the
    reward of every feasible placement that is less than ``oom_runtime_factor`` times slower than
    the best single device.

    ## Episode End
    Every episode ends after its one step (``terminated=True``, ``truncated=False``). Call `reset`
    before the first step and after each step; stepping otherwise raises a RuntimeError.

    ## Arguments
    - ``graph``: a bundled graph name (``placement_gym.bundled_graph_names()``), an ONNX file path,
      or an `OpGraph`. Default ``"inception_v3"``.
    - ``cluster``: a preset name (``placement_gym.cluster.PRESETS``), a JSON file path, or a
      `Cluster`. Default ``"k80x4"``.
    - ``objective``: ``"train_step"`` (default) or ``"inference"``.
    - ``optimizer``: ``"adam"`` (default), ``"momentum"`` or ``"sgd"`` (training only).
    - ``reward``: one of `placement_gym.envs.rewards.REWARDS` (see Rewards).
    - ``oom_runtime``: seconds an out-of-memory placement is rewarded with; None (default) uses
      ``oom_runtime_factor`` x the best single-device runtime.
    - ``oom_runtime_factor``: see ``oom_runtime``; at least 1. Default 10.
    - ``max_ops``, ``max_edges``: pad the observation to these sizes (default: the task's own), so
      that envs of different graphs share one observation space.
    - ``render_mode``: None, ``"ansi"`` (a text table of the placement per device) or
      ``"rgb_array"`` (the Gantt chart of the simulated schedule; needs matplotlib).

    ## Info
    `reset`: ``task_id``, ``lower_bound`` (seconds no placement can beat), ``best_single_runtime``
    (seconds, the fastest device that holds the whole task). `step`, in addition: ``runtime``
    (simulated seconds, also for an infeasible placement), ``feasible`` (bool), ``peak_memory``
    (bytes per device), ``speedup`` (``best_single_runtime / runtime``) and ``reward_runtime`` (the
    runtime the reward was computed from: the penalty runtime for an out-of-memory placement).
    """

    metadata = {"render_modes": list(RENDER_MODES), "render_fps": 1}

    def __init__(
        self,
        graph: str | Path | OpGraph = "inception_v3",
        cluster: str | Path | Cluster = "k80x4",
        objective: str = "train_step",
        reward: str = "log_speedup",
        oom_runtime: float | None = None,
        oom_runtime_factor: float = DEFAULT_OOM_RUNTIME_FACTOR,
        max_ops: int | None = None,
        max_edges: int | None = None,
        render_mode: str | None = None,
        optimizer: str = "adam",
    ) -> None:
        check_reward_name(reward)
        check_oom_settings(oom_runtime, oom_runtime_factor)
        if render_mode is not None and render_mode not in RENDER_MODES:
            raise ValueError(f"unknown render_mode {render_mode!r}; allowed: None, {', '.join(RENDER_MODES)}")
        self.task = get_task(graph, cluster, objective, optimizer)
        self.reward_name = reward
        self.oom_runtime = oom_runtime
        self.oom_runtime_factor = float(oom_runtime_factor)
        self.render_mode = render_mode
        self._observation = GraphObservation(self.task, max_ops=max_ops, max_edges=max_edges)
        self.observation_space = self._observation.space
        self.action_space = spaces.MultiDiscrete(
            np.full(self.task.n_forward, self.task.n_devices, dtype=np.int64)
        )
        reference = single_device(self.task)
        self.best_single_runtime = reference.runtime
        self.best_single_device = reference.best
        self.lower_bound = lower_bound(self.task)
        self.penalty_runtime = penalty_runtime(self.best_single_runtime, oom_runtime, self.oom_runtime_factor)
        self._masks = self._static_memory_masks()
        self._needs_reset = True
        self._placement: np.ndarray | None = None
        self._result = None

    def _static_memory_masks(self) -> np.ndarray:
        fits = self.task.static_bytes[:, None] <= self.task.cluster.memory_capacity[None, :]
        fits[~fits.any(axis=1)] = True  # an op that fits nowhere: every choice is as bad, keep all
        fits.setflags(write=False)
        return fits

    def _reset_info(self) -> dict[str, Any]:
        return {
            "task_id": self.task.id,
            "lower_bound": self.lower_bound,
            "best_single_runtime": self.best_single_runtime,
        }

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        """Start an episode; returns ``(observation, info)``. ``options`` are not used."""
        super().reset(seed=seed)
        self._needs_reset = False
        self._placement = None
        self._result = None
        return self._observation.observation(), self._reset_info()

    def step(self, action):
        """Evaluate the placement ``action`` (one device index per forward op); the episode ends."""
        if self._needs_reset:
            raise RuntimeError(
                "DevicePlacementEnv.step called before reset() or after the episode ended; "
                "each episode is one step: call reset() first"
            )
        placement = self.task.check_placement(action)  # clear ValueError for a bad action
        result = simulate(self.task, placement)
        reward = shape_reward(self.reward_name, result.runtime, result.feasible, self.best_single_runtime,
                              self.oom_runtime, self.oom_runtime_factor)
        self._needs_reset = True
        self._placement = placement
        self._result = result
        info = self._reset_info()
        info.update(
            runtime=result.runtime,
            feasible=result.feasible,
            peak_memory=result.peak_memory.copy(),
            speedup=self.best_single_runtime / result.runtime,
            reward_runtime=result.runtime if result.feasible else self.penalty_runtime,
        )
        return self._observation.observation(), float(reward), True, False, info

    def action_masks(self) -> np.ndarray:
        """Allowed devices per forward op, bool ``(n_forward, n_devices)`` (see Action Space)."""
        return self._masks.copy()

    def render(self):
        """The last placement as text (``"ansi"``) or as a timeline image (``"rgb_array"``); before
        the first step, the best single-device placement, labelled as such. None without a mode."""
        if self.render_mode is None:
            return None
        if self._placement is None:
            placement = np.full(self.task.n_forward, self.best_single_device, dtype=np.int64)
            label = f"no placement yet; reference: every op on {self.task.cluster.device_names[placement[0]]}"
        else:
            placement, label = self._placement, "last placement"
        if self.render_mode == "ansi":
            result = self._result if self._placement is not None else simulate(self.task, placement)
            return self._text_table(placement, result, label)
        from placement_gym.timeline import draw_timeline

        result = simulate(self.task, placement, schedule=True)
        return draw_timeline(self.task, result.schedule, title=f"{self.task.id} ({label})")

    def _text_table(self, placement: np.ndarray, result, label: str) -> str:
        task, cluster = self.task, self.task.cluster
        devices = task.expand(placement)
        busy = np.bincount(devices, weights=task.duration[np.arange(task.n_ops), devices],
                           minlength=task.n_devices)
        ops = np.bincount(placement, minlength=task.n_devices)
        status = "feasible" if result.feasible else "OUT OF MEMORY"
        lines = [
            f"{task.id} ({label})",
            f"runtime {result.runtime * 1e3:.3f} ms, {status}, speedup "
            f"{self.best_single_runtime / result.runtime:.3f}x over the best single device "
            f"({cluster.device_names[self.best_single_device]}, {self.best_single_runtime * 1e3:.3f} ms); "
            f"lower bound {self.lower_bound * 1e3:.3f} ms",
            f"{'device':<12}{'kind':<6}{'ops':>7}{'busy ms':>12}{'peak GB':>10}{'capacity GB':>13}",
        ]
        for d in range(task.n_devices):
            over = " OOM" if result.peak_memory[d] > cluster.memory_capacity[d] else ""
            lines.append(
                f"{cluster.device_names[d]:<12}{cluster.device_kinds[d]:<6}{ops[d]:>7}{busy[d] * 1e3:>12.3f}"
                f"{result.peak_memory[d] / 1e9:>10.3f}{cluster.memory_capacity[d] / 1e9:>13.3f}{over}"
            )
        return "\n".join(lines) + "\n"
