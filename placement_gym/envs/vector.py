"""A natively vectorised `DevicePlacement-v0`: N single-shot envs whose step scores every action in one
batched call of the cost model.

``gym.make_vec("DevicePlacement-v0", num_envs=N, vectorization_mode="vector_entry_point", graph=...,
...)`` builds `DevicePlacementVectorEnv`. It behaves as ``gym.vector.SyncVectorEnv`` over N
``gym.make("DevicePlacement-v0", ...)`` envs (the same observations, rewards, terminations, infos and
autoreset, tests/test_env_vector.py), but a step hands all placements to the env's evaluator at once
(`Evaluator.simulate_batch`: one parallel `simulate_batch` call of the cost model) instead of
simulating them one env at a time.

All N envs share one task, so they share one `DevicePlacementEnv` (``self.env``) for everything but
their episode state: its spaces, reward settings, observation builder, evaluator and counter of
evaluations. ``reward_mode="real"`` is refused (each measured run has its own executor summary in
``info``; use ``vectorization_mode="sync"``), as is rendering.
"""

from __future__ import annotations

import copy
from typing import Any

import numpy as np
from gymnasium.vector import AutoresetMode, VectorEnv
from gymnasium.vector.utils import batch_space, concatenate, create_empty_array

from placement_gym.cost_model.result import SimulationResult
from placement_gym.envs.single_shot import DevicePlacementEnv


class DevicePlacementVectorEnv(VectorEnv):
    """``num_envs`` copies of `DevicePlacementEnv` (same keyword arguments) stepped together.

    ``autoreset_mode``: Gymnasium's `AutoresetMode` (or its name), as for ``SyncVectorEnv``:
    ``NEXT_STEP`` (default; the step after an episode's end resets that env, ignores its action and
    returns reward 0), ``SAME_STEP`` (the ending step returns the next episode's first observation,
    with ``final_obs`` and ``final_info`` in ``info``) or ``DISABLED`` (reset ended envs yourself with
    ``reset(options={"reset_mask": mask})``). Every episode is one step long.

    ``evaluations``: the evaluations made for steps (all envs together); each also counts on
    ``self.env.task.evaluations``."""

    def __init__(self, num_envs: int = 1, autoreset_mode: str | AutoresetMode = AutoresetMode.NEXT_STEP,
                 **kwargs: Any) -> None:
        if isinstance(num_envs, bool) or not isinstance(num_envs, (int, np.integer)) or num_envs < 1:
            raise ValueError(f"num_envs must be a positive int, got {num_envs!r}")
        try:
            mode = AutoresetMode(autoreset_mode)
        except ValueError:
            allowed = ", ".join(m.value for m in AutoresetMode)
            raise ValueError(f"unknown autoreset_mode {autoreset_mode!r}; allowed: {allowed}") from None
        if kwargs.get("reward_mode", "cost_model") == "real":
            raise ValueError(
                'DevicePlacementVectorEnv does not take reward_mode="real" (each measured run has its own '
                'summary in info); use gym.make_vec(..., vectorization_mode="sync") for real runs'
            )
        if kwargs.get("render_mode") is not None:
            raise ValueError('DevicePlacementVectorEnv does not render; use vectorization_mode="sync"')
        self.env = DevicePlacementEnv(**kwargs)
        self.num_envs = int(num_envs)
        self.autoreset_mode = mode
        self.metadata = dict(self.env.metadata) | {"autoreset_mode": mode}
        self.render_mode = None
        self.single_observation_space = self.env.observation_space
        self.single_action_space = self.env.action_space
        self.observation_space = batch_space(self.single_observation_space, self.num_envs)
        self.action_space = batch_space(self.single_action_space, self.num_envs)
        # Per env: an episode is running (a step may place); its episode ended at the last step (in
        # NEXT_STEP mode the next step resets it); its last observation.
        self._running = np.zeros(self.num_envs, dtype=np.bool_)
        self._autoreset = np.zeros(self.num_envs, dtype=np.bool_)
        self._last_obs: list[Any] = [None] * self.num_envs
        self._first: tuple[Any, dict[str, Any]] | None = None  # an episode's first (obs, info)

    @property
    def evaluations(self) -> int:
        """Evaluations made for steps, all envs together."""
        return self.env.evaluations

    def reset(self, *, seed: int | list[int | None] | None = None,
              options: dict[str, Any] | None = None) -> tuple[Any, dict[str, Any]]:
        """Start an episode in every env, or in those of ``options["reset_mask"]`` (a bool array of
        ``num_envs``); returns the batched observations and infos. ``seed``: None, an int (env i gets
        ``seed + i``) or one seed (or None) per env."""
        if isinstance(seed, (int, np.integer)):
            seeds: list[int | None] = [int(seed) + i for i in range(self.num_envs)]
        elif seed is None:
            seeds = [None] * self.num_envs
        else:
            seeds = list(seed)
            if len(seeds) != self.num_envs:
                raise ValueError(f"seed: one seed per env ({self.num_envs}) expected, got {len(seeds)}")
        options = dict(options or {})
        mask = options.pop("reset_mask", None)
        if mask is None:
            mask = np.ones(self.num_envs, dtype=np.bool_)
        elif not (isinstance(mask, np.ndarray) and mask.dtype == np.bool_ and mask.shape == (self.num_envs,)
                  and mask.any()):
            raise ValueError(f"options['reset_mask'] must be a bool numpy array of shape ({self.num_envs},) "
                             f"with at least one True, got {mask!r}")
        if seeds[0] is not None:
            super().reset(seed=seeds[0])  # the vector env's own generator; an episode draws nothing
        first = self._first_step()
        infos: dict[str, Any] = {}
        for i in np.flatnonzero(mask):
            self._last_obs[i] = first[0]
            infos = self._add_info(infos, first[1], i)
        self._running[mask] = True
        self._autoreset[mask] = False
        return self._batch(self._last_obs), infos

    def step(self, actions) -> tuple[Any, np.ndarray, np.ndarray, np.ndarray, dict[str, Any]]:
        """Place every env's graph (``actions``: one row of ``n_nodes`` device indices per env); the
        placements are evaluated in one batched call. In ``NEXT_STEP`` mode an env whose episode ended
        at the last step is reset instead (its action ignored, reward 0, not terminated)."""
        rows = self._check_actions(actions)
        resetting = self._autoreset.copy() if self.autoreset_mode == AutoresetMode.NEXT_STEP else (
            np.zeros(self.num_envs, dtype=np.bool_))
        stepped = np.flatnonzero(~resetting)
        idle = stepped[~self._running[stepped]]
        if len(idle):
            env = int(idle[0])
            raise RuntimeError(
                f"DevicePlacementVectorEnv.step: env {env} has no episode running (step before reset(), or "
                "after its episode ended with autoreset DISABLED); reset it first"
            )
        placements = [self._node_placement(rows[i], i) for i in stepped]
        rewards = np.zeros(self.num_envs)
        terminated = np.zeros(self.num_envs, dtype=np.bool_)
        truncated = np.zeros(self.num_envs, dtype=np.bool_)
        step_results: dict[int, tuple[Any, dict[str, Any]]] = {}
        if len(stepped):
            ops = np.stack([self.env.op_placement(p) for p in placements])
            runtimes, feasible, peaks = self.env.evaluator.simulate_batch(ops)
            self.env.evaluations += len(stepped)
            for k, i in enumerate(stepped):
                result = SimulationResult(runtime=float(runtimes[k]), feasible=bool(feasible[k]),
                                          peak_memory=np.asarray(peaks[k], dtype=np.float64))
                obs, rewards[i], info = self.env.outcome(placements[k], result)
                step_results[int(i)] = obs, info
                terminated[i] = True
        first = self._first_step()
        infos: dict[str, Any] = {}
        for i in range(self.num_envs):
            if resetting[i]:
                self._last_obs[i], info = first
            else:
                self._last_obs[i], info = step_results[i]
                if self.autoreset_mode == AutoresetMode.SAME_STEP:
                    infos = self._add_info(infos, {"final_obs": self._last_obs[i], "final_info": info}, i)
                    self._last_obs[i], info = first
            infos = self._add_info(infos, info, i)
        ended = terminated | truncated
        self._autoreset = ended.copy()
        if self.autoreset_mode == AutoresetMode.NEXT_STEP:
            self._running |= resetting  # ended envs stay "running": the next step resets them
        elif self.autoreset_mode == AutoresetMode.DISABLED:
            self._running &= ~ended  # the caller resets them (reset_mask)
        return self._batch(self._last_obs), rewards, terminated, truncated, infos

    # --- pieces -----------------------------------------------------------------------------------

    def _check_actions(self, actions) -> np.ndarray:
        """``actions`` as an array of one row per env, or a clear ValueError (the device indices of each
        row are checked by `_node_placement`)."""
        array = np.asarray(actions)
        shape = (self.num_envs, self.env.n_nodes)
        if array.shape != shape:
            raise ValueError(
                f"actions must have shape {shape}: one row of {self.env.n_nodes} device indices (one per "
                f"node) for each of the {self.num_envs} envs; got shape {array.shape}"
            )
        return array

    def _node_placement(self, row: np.ndarray, env: int) -> np.ndarray:
        """One env's action as int64 node devices, or a ValueError naming the env and the node."""
        try:
            return self.env.check_node_placement(row)
        except ValueError as error:
            raise ValueError(f"action of env {env}: {error}") from None

    def _first_step(self) -> tuple[Any, dict[str, Any]]:
        """An episode's first observation and info (the same for every env: nothing is placed yet)."""
        if self._first is None:
            self._first = self.env.reset()
        return self._first

    def _batch(self, observations: list[Any]) -> Any:
        """The per-env observations as one batched observation (a fresh copy)."""
        out = create_empty_array(self.single_observation_space, self.num_envs)
        batch = concatenate(self.single_observation_space, observations, out)
        # Box and Dict observations are copied into the new arrays; a Graph batch is a tuple of the
        # envs' own objects, some shared, so it is copied (as SyncVectorEnv does by default).
        return copy.deepcopy(batch) if isinstance(batch, tuple) else batch
