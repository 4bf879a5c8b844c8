"""Reward shapes: how a placement's simulated runtime becomes a reward (shared by every env).

Every shape is a strictly decreasing function of the runtime, so a faster placement always earns a
larger reward. An out-of-memory placement is rewarded as if it ran for a penalty runtime (see
`penalty_runtime`) instead of its simulated one: the placement could not run at all.

The envs score one placement at a time (`shape_reward`, `improvement_reward`); the learned agents in
`baselines/learning/` score a batch with the same rules (`OomPenalty`'s methods, `improvement_reward`),
so this module is the one place they are written.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

RewardFunction = Callable[[float, float], float]
"""A reward shape as a function: ``reward(runtime, best_single) -> float``, both in seconds, where
``runtime`` is the placement's runtime, or the penalty runtime of an out-of-memory placement
(`penalty_runtime`), and ``best_single`` the task's best single-device runtime. It should decrease
strictly with the runtime, so that a faster placement always earns more."""

SHAPES: dict[str, RewardFunction] = {
    "log_speedup": lambda runtime, best_single: math.log(best_single / runtime),
    "neg_runtime": lambda runtime, best_single: -runtime,
    "neg_sqrt_runtime": lambda runtime, best_single: -math.sqrt(runtime),
    "inverse": lambda runtime, best_single: best_single / runtime,
}
REWARDS: tuple[str, ...] = tuple(SHAPES)
"""The reward shapes by name (an env's ``reward=`` also takes any `RewardFunction`):

* ``log_speedup``: ``log(best_single / runtime)``; 0 for the best single-device placement, positive
  when faster. Scale-free across graphs and clusters (the default).
* ``neg_runtime``: ``-runtime`` in seconds.
* ``neg_sqrt_runtime``: ``-sqrt(runtime)`` in seconds (Mirhoseini et al. 2017; docs/references.md).
* ``inverse``: ``best_single / runtime``, the speedup over the best single device. HSDAG (Duan et al.
  2024) rewards with the execution time; dividing the best single-device time by it keeps the reward
  scale-free.
"""

DEFAULT_OOM_RUNTIME_FACTOR = 10.0


def check_reward(reward: Any) -> str | RewardFunction:
    """``reward`` if it is a shape's name (`REWARDS`) or a `RewardFunction` (any callable), else a
    ValueError naming what is allowed."""
    if callable(reward) or (isinstance(reward, str) and reward in SHAPES):
        return reward
    raise ValueError(f"unknown reward {reward!r}; allowed: {', '.join(REWARDS)}, "
                     "or a function reward(runtime, best_single) -> float")


def check_oom_settings(oom_runtime: float | None, oom_runtime_factor: float) -> None:
    """Clear errors for penalty settings that would not make an OOM placement score low."""
    if oom_runtime is not None and not (
        isinstance(oom_runtime, (int, float)) and math.isfinite(oom_runtime) and oom_runtime > 0
    ):
        raise ValueError(
            f"oom_runtime must be a positive finite number of seconds or None, got {oom_runtime!r}"
        )
    if not (isinstance(oom_runtime_factor, (int, float)) and math.isfinite(oom_runtime_factor)
            and oom_runtime_factor >= 1):
        # Below 1 an OOM placement would score better than the best single device.
        raise ValueError(f"oom_runtime_factor must be a finite number >= 1, got {oom_runtime_factor!r}")


def penalty_runtime(
    best_single: float,
    oom_runtime: float | None = None,
    oom_runtime_factor: float = DEFAULT_OOM_RUNTIME_FACTOR,
) -> float:
    """The runtime (seconds) an out-of-memory placement is rewarded with: ``oom_runtime`` when given
    (Mirhoseini et al. 2017 used a fixed 100 s), else ``oom_runtime_factor x best_single``."""
    return float(oom_runtime) if oom_runtime is not None else float(oom_runtime_factor) * float(best_single)


def shape_reward(
    reward: str | RewardFunction,
    runtime: float,
    feasible: bool,
    best_single: float,
    oom_runtime: float | None = None,
    oom_runtime_factor: float = DEFAULT_OOM_RUNTIME_FACTOR,
) -> float:
    """The reward of a placement whose simulated runtime is ``runtime`` seconds: ``reward`` is a
    shape's name (`REWARDS`) or a `RewardFunction`.

    ``best_single``: the best single-device runtime of the task (seconds). An infeasible placement
    (``feasible=False``) gets the reward of `penalty_runtime` instead of its own runtime."""
    check_reward(reward)
    function = SHAPES[reward] if isinstance(reward, str) else reward
    if not feasible:
        runtime = penalty_runtime(best_single, oom_runtime, oom_runtime_factor)
    if not (math.isfinite(runtime) and runtime > 0):
        raise ValueError(f"runtime must be a positive finite number of seconds, got {runtime!r}")
    value = float(function(runtime, best_single))
    if not math.isfinite(value):
        raise ValueError(f"reward {reward!r} gave {value!r} for a runtime of {runtime!r} s, not a number")
    return value


def improvement_reward(before, after, best_single: float):
    """The runtime saved by a move, ``(before - after) / best_single`` (the refine env's reward and the
    staged env's dense one; ``before`` and ``after`` are reward runtimes: numbers or arrays)."""
    return (before - after) / best_single


@dataclass(frozen=True)
class OomPenalty:
    """The envs' rule for out-of-memory placements, applied to a batch: an infeasible placement is
    rewarded as if it ran ``oom_runtime`` seconds when given, else ``oom_runtime_factor`` best
    single-device runtimes (`penalty_runtime`). Each method takes the runtimes of a batch of placements
    and whether each is feasible (arrays of one length) and the task's best single-device runtime
    ``best_single`` (seconds), and gives one number per placement."""

    oom_runtime: float | None = None
    oom_runtime_factor: float = DEFAULT_OOM_RUNTIME_FACTOR

    def reward_runtimes(self, runtimes: np.ndarray, feasible: np.ndarray, best_single: float) -> np.ndarray:
        """The runtime each reward is computed from: its own, or `penalty_runtime` when infeasible."""
        penalty = penalty_runtime(best_single, self.oom_runtime, self.oom_runtime_factor)
        return np.where(np.asarray(feasible, dtype=bool), runtimes, penalty)

    def log_speedups(self, runtimes: np.ndarray, feasible: np.ndarray, best_single: float) -> np.ndarray:
        """The ``log_speedup`` shape, ``log(best_single / reward runtime)`` (numpy's log)."""
        return np.log(best_single / self.reward_runtimes(runtimes, feasible, best_single))

    def relative_runtimes(self, runtimes: np.ndarray, feasible: np.ndarray, best_single: float) -> np.ndarray:
        """Runtimes in best-single-device runtimes; an infeasible one is the penalty in those units:
        ``oom_runtime / best_single`` when given, else ``oom_runtime_factor`` itself (not
        ``oom_runtime_factor x best_single / best_single``, which rounding could move off the factor)."""
        scaled = np.asarray(runtimes, dtype=np.float64) / best_single
        if self.oom_runtime is None:
            penalty = float(self.oom_runtime_factor)
        else:
            penalty = float(self.oom_runtime) / float(best_single)
        return np.where(np.asarray(feasible, dtype=bool), scaled, penalty)

    def neg_sqrt_relative_runtimes(
        self, runtimes: np.ndarray, feasible: np.ndarray, best_single: float
    ) -> np.ndarray:
        """``-sqrt(runtime / best_single)`` (`relative_runtimes`): Mirhoseini et al. 2017's ``-sqrt(runtime)``
        made scale-free, the reward of the seq2seq agents ``pg`` and ``hierarchical``."""
        return -np.sqrt(self.relative_runtimes(runtimes, feasible, best_single))
