"""What the two parallel-plan environments share (`ParallelPlan-v0`, `ParallelPlanStaged-v0`): the
problem each episode poses (one `PlanTask`, or one drawn from a plans dataset at every reset), the
observation of the model, the mesh, the batch and the plan so far, the reward of a priced plan and the
info keys."""

from __future__ import annotations

import math
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from placement_gym.plans.dataset import NAME as DATASET_NAME
from placement_gym.plans.dataset import SPLITS, plan_dataset_ids, plan_dataset_task
from placement_gym.plans.evaluate import PlanResult
from placement_gym.plans.models import FAMILIES, TransformerModel
from placement_gym.plans.space import DIMENSION_NAMES, OPTION_COUNTS, PlanTask, plan_task

REWARDS = ("mfu", "neg_step")
RENDER_MODES = ("ansi",)
MODEL_FEATURES = 9 + len(FAMILIES)
MESH_FEATURES = 6
BREAKDOWN_KEYS = ("compute", "communication", "bubble", "optimizer")
# info: the same keys, numpy scalars, at reset and every step
INFO_KEYS = ("simulated", "feasible", "step_s", "mfu", "tokens_per_s_per_gpu", "peak_memory_bytes",
             *(f"breakdown_{key}" for key in BREAKDOWN_KEYS))


def model_features(model: TransformerModel) -> np.ndarray:
    """log2 of layers, hidden, heads, key/value heads, MLP width, vocabulary, sequence, experts and
    top-k, then the family one-hot."""
    sizes = (model.layers, model.hidden, model.heads, model.key_value_heads, model.ffn_width,
             model.vocab, model.seq, model.experts, model.top_k)
    family = [float(model.family == name) for name in FAMILIES]
    return np.array([math.log2(s) for s in sizes] + family, dtype=np.float32)


def mesh_features(task: PlanTask) -> np.ndarray:
    """log2 nodes, log2 GPUs a node, the task precision's peak (PFLOP/s), GPU memory (100 GB), NVSwitch
    bus bandwidth (TB/s) and one NIC's (100 GB/s)."""
    mesh = task.mesh
    return np.array([math.log2(mesh.nodes), math.log2(mesh.gpus_per_node),
                     mesh.gpu.peak[task.precision] / 1e15, mesh.gpu.memory / 1e11, mesh.intra_busbw / 1e12,
                     mesh.nic_busbw / 1e11], dtype=np.float32)


class PlanEnvBase(gym.Env):
    """The shared part of the plan environments (module docstring; each env's docstring states its
    spaces, rewards and episode end).

    Keywords: ``model`` (a preset of `placement_gym.plans.MODEL_PRESETS`, ``family:key=value,...`` or a
    `TransformerModel`; default ``llama2-70b``), ``cluster`` (``dgx-h100xN``, ``dgx-a100xN`` or mixed
    ``dgx-a100xN+dgx-h100xM``; default ``dgx-h100x8``), ``global_batch`` (default 128), ``precision``
    (bf16, fp16 or fp8; default bf16), or ``dataset="plans-v1:<split>"`` to draw a problem of that split
    at every reset instead (the model, cluster and batch keywords are then refused); ``reward``
    (``"mfu"``, the default, or ``"neg_step"``: minus the step's seconds over the step at 100% MFU);
    ``infeasible_reward`` (default -0.1: a plan that does not divide or does not fit); ``render_mode``
    (None or ``"ansi"``). ``reset(options={"task": id})`` poses a given problem of the dataset."""

    metadata = {"render_modes": list(RENDER_MODES), "render_fps": 4}

    def __init__(self, model: str | TransformerModel = "llama2-70b", cluster: str = "dgx-h100x8",
                 global_batch: int = 128, precision: str = "bf16", dataset: str | None = None,
                 reward: str = "mfu", infeasible_reward: float = -0.1, render_mode: str | None = None,
                 **unknown: Any) -> None:
        if unknown:
            raise TypeError(f"{type(self).__name__} got unexpected keyword argument(s) "
                            f"{', '.join(map(repr, unknown))}; its keywords are model, cluster, "
                            "global_batch, precision, dataset, reward, infeasible_reward, render_mode")
        if reward not in REWARDS:
            raise ValueError(f"unknown reward {reward!r}; allowed: {', '.join(REWARDS)}")
        if render_mode is not None and render_mode not in RENDER_MODES:
            raise ValueError(f"render_mode {render_mode!r} is not one of {RENDER_MODES} (or None)")
        if not isinstance(infeasible_reward, (int, float)) or not math.isfinite(infeasible_reward):
            raise ValueError(f"infeasible_reward must be a finite number, got {infeasible_reward!r}")
        self.reward_name, self.render_mode = reward, render_mode
        self.infeasible_reward = float(infeasible_reward)
        self.task_ids: tuple[str, ...] = ()
        if dataset is not None:
            name, _, split = str(dataset).partition(":")
            if name != DATASET_NAME or split not in SPLITS:
                raise ValueError(f"dataset must be '{DATASET_NAME}:<split>' with a split of "
                                 f"{', '.join(SPLITS)}, got {dataset!r}")
            self.task_ids = plan_dataset_ids(split)
            self.task = plan_dataset_task(self.task_ids[0])
        else:
            self.task = plan_task(model, cluster, global_batch, precision)
        self.observation_space = spaces.Dict({
            # log2 of sizes up to 2^32 and the family one-hot; the mesh's figures in the units below 64
            "model": spaces.Box(0.0, 32.0, (MODEL_FEATURES,), np.float32),
            "mesh": spaces.Box(0.0, 64.0, (MESH_FEATURES,), np.float32),
            "batch": spaces.Box(0.0, 32.0, (1,), np.float32),
            "plan": spaces.Box(-1, max(OPTION_COUNTS) - 1, (len(DIMENSION_NAMES),), np.int64),
        })
        self.choice = np.full(len(DIMENSION_NAMES), -1, dtype=np.int64)
        self.result: PlanResult | None = None

    def _draw(self, options: dict | None) -> None:
        """The episode's problem: ``options["task"]`` of the dataset, else a draw of the env's generator
        (with a dataset), else the env's one problem; the plan so far cleared."""
        wanted = (options or {}).get("task")
        if wanted is not None:
            if wanted not in self.task_ids:
                raise ValueError(f"reset option task {wanted!r} is not a problem of this env's dataset split")
            self.task = plan_dataset_task(wanted)
        elif self.task_ids:
            self.task = plan_dataset_task(self.task_ids[int(self.np_random.integers(len(self.task_ids)))])
        self.choice = np.full(len(DIMENSION_NAMES), -1, dtype=np.int64)
        self.result = None

    def _observation(self) -> dict[str, np.ndarray]:
        return {"model": model_features(self.task.model), "mesh": mesh_features(self.task),
                "batch": np.array([math.log2(self.task.global_batch)], dtype=np.float32),
                "plan": self.choice.copy()}

    def _info(self) -> dict[str, Any]:
        result = self.result
        if result is None or not result.feasible:
            values = dict.fromkeys(INFO_KEYS, 0.0)
        else:
            values = {"step_s": result.step_s, "mfu": result.mfu,
                      "tokens_per_s_per_gpu": result.tokens_per_s_per_gpu,
                      "peak_memory_bytes": result.peak_memory_bytes,
                      **{f"breakdown_{key}": result.breakdown.get(key, 0.0) for key in BREAKDOWN_KEYS}}
        values["simulated"] = result is not None
        values["feasible"] = bool(result is not None and result.feasible)
        return {key: np.bool_(values[key]) if key in ("simulated", "feasible") else np.float64(values[key])
                for key in INFO_KEYS}

    def _price(self) -> float:
        """Price the chosen plan; its reward (class docstring)."""
        self.result = result = self.task.evaluate(self.choice)
        if not result.feasible:
            return self.infeasible_reward
        if self.reward_name == "mfu":
            return float(result.mfu)
        return -1.0 / result.mfu  # the step over the step at 100% MFU, negated

    def render(self) -> str | None:
        if self.render_mode != "ansi":
            return None
        decided = self.choice >= 0
        lines = [f"task {self.task.id}"]
        if decided.all():
            lines.append(f"plan {self.task.plan_of(self.choice).describe()}")
        else:
            lines.append("chosen: " + ", ".join(f"{name} {k}" for name, k, d in
                                                zip(DIMENSION_NAMES, self.choice, decided) if d))
        if self.result is not None:
            result = self.result
            lines.append(f"step {result.step_s:.3f} s, MFU {result.mfu:.1%}" if result.feasible else
                         "infeasible: " + ("; ".join(result.problems) or "out of memory"))
        return "\n".join(lines) + "\n"
