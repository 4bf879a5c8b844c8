"""A natively vectorised `DevicePlacement-v0`: N single-shot envs whose step scores every action in one
batched call of the cost model.

``gym.make_vec("DevicePlacement-v0", num_envs=N, vectorization_mode="vector_entry_point", graph=...,
...)`` builds `DevicePlacementVectorEnv`. It behaves as ``gym.vector.SyncVectorEnv`` over N
``gym.make("DevicePlacement-v0", ...)`` envs (the same observations, rewards, terminations, infos and
autoreset, tests/envs/test_env_vector.py), but a step hands all placements to the env's evaluator at once
(`Evaluator.simulate_batch`: one parallel `simulate_batch` call of the cost model) instead of
simulating them one env at a time, and in the dict and flat modes builds the observations and infos as
whole batches (`DevicePlacementEnv.outcomes`).

All N envs share one task, so they share one `DevicePlacementEnv` (``self.env``) for everything but
their episode state: its spaces, reward settings, observation builder, evaluator and counter of
evaluations. An evaluator that adds keys to ``info`` (``evaluator="real"``: each measured run has its
own executor summary) is refused (use ``vectorization_mode="sync"``), as are rendering and a task
source that draws (``dataset=``, ``clusters=``: the N envs would hold different tasks).
"""

from __future__ import annotations

import copy
from typing import Any

import numpy as np
from gymnasium.vector import AutoresetMode, VectorEnv
from gymnasium.vector.utils import batch_space, concatenate, create_empty_array

from placement_gym.common.limits import check_allocation
from placement_gym.cost_model.result import SimulationResult
from placement_gym.envs.base import check_reset_options
from placement_gym.envs.config import EnvConfig
from placement_gym.envs.rewards import RewardFunction
from placement_gym.envs.single_shot import DevicePlacementEnv
from placement_gym.evaluation.evaluator import declared_info_keys

# Batches of ``num_envs`` observations alive at once: the batched space's low and high bounds, the
# last observations, and a step's observations with their placement one-hots.
_BATCH_COPIES = 5


class DevicePlacementVectorEnv(VectorEnv):
    """``num_envs`` copies of `DevicePlacementEnv` stepped together: ``reward`` and the shared settings
    (`placement_gym.envs.config.EnvConfig`, as keywords or ``config=``) are the single-shot env's.

    ``autoreset_mode``: Gymnasium's `AutoresetMode` (or its name), as for ``SyncVectorEnv``:
    ``NEXT_STEP`` (default; the step after an episode's end resets that env, ignores its action and
    returns reward 0), ``SAME_STEP`` (the ending step returns the next episode's first observation,
    with ``final_obs`` and ``final_info`` in ``info``) or ``DISABLED`` (reset ended envs yourself with
    ``reset(options={"reset_mask": mask})``). Every episode is one step long.

    ``evaluations``: the evaluations made for steps (all envs together); each also counts on
    ``self.env.task.evaluations``."""

    def __init__(
        self,
        num_envs: int = 1,
        autoreset_mode: str | AutoresetMode = AutoresetMode.NEXT_STEP,
        *,
        reward: str | RewardFunction = "log_speedup",
        config: EnvConfig | None = None,
        **settings: Any,
    ) -> None:
        if isinstance(num_envs, bool) or not isinstance(num_envs, (int, np.integer)) or num_envs < 1:
            raise ValueError(f"num_envs must be a positive int, got {num_envs!r}")
        try:
            mode = AutoresetMode(autoreset_mode)
        except ValueError:
            allowed = ", ".join(m.value for m in AutoresetMode)
            raise ValueError(f"unknown autoreset_mode {autoreset_mode!r}; allowed: {allowed}") from None
        config = EnvConfig.of(config, settings, type(self).__name__)
        if config.dataset is not None:
            raise ValueError('DevicePlacementVectorEnv holds one task: over a dataset, use '
                             'gym.make_vec(..., vectorization_mode="sync"), whose envs draw their own graphs')
        if config.clusters is not None:
            raise ValueError('DevicePlacementVectorEnv holds one task: over clusters=, use gym.make_vec(..., '
                             'vectorization_mode="sync"), whose envs draw their own clusters')
        chosen = config.scoring()[0]
        if declared_info_keys(chosen):
            raise ValueError(
                f"DevicePlacementVectorEnv does not take evaluator {chosen!r}, which adds "
                f"{', '.join(declared_info_keys(chosen))} to each step's info (each measured run has its "
                'own); use gym.make_vec(..., vectorization_mode="sync") for it'
            )
        if config.render_mode is not None:
            raise ValueError('DevicePlacementVectorEnv does not render; use vectorization_mode="sync"')
        self.env = DevicePlacementEnv(reward=reward, config=config)
        if self.env.task_source.draws:
            raise ValueError('DevicePlacementVectorEnv holds one task: over a task source that draws, use '
                             'gym.make_vec(..., vectorization_mode="sync"), whose envs draw their own tasks')
        check_allocation(f"DevicePlacementVectorEnv of num_envs={int(num_envs)} on task {self.env.task.id}",
                         _BATCH_COPIES * int(num_envs) * self.env.observation_bytes)
        self.num_envs = int(num_envs)
        self.autoreset_mode = mode
        self.metadata = dict(self.env.metadata) | {"autoreset_mode": mode}
        self.render_mode = None
        self.single_observation_space = self.env.observation_space
        self.single_action_space = self.env.action_space
        self.observation_space = batch_space(self.single_observation_space, self.num_envs)
        self.action_space = batch_space(self.single_action_space, self.num_envs)
        # Per env: an episode is running (a step may place); its episode ended at the last step (in
        # NEXT_STEP mode the next step resets it).
        self._running = np.zeros(self.num_envs, dtype=np.bool_)
        self._autoreset = np.zeros(self.num_envs, dtype=np.bool_)
        # In the dict and flat modes, what is needed to rebuild each env's last observation: the
        # placement it shows, if any (an env that reset shows none); in the graph mode, the observations.
        self._stacked = self.env.obs_mode != "graph"
        self._shows_placement = np.zeros(self.num_envs, dtype=np.bool_)
        self._last_placements = np.zeros((self.num_envs, self.env.n_nodes), dtype=np.int64)
        self._last_obs: list[Any] = [None] * self.num_envs
        self._first: tuple[Any, dict[str, Any]] | None = None  # an episode's first (obs, info)

    @property
    def evaluations(self) -> int:
        """Evaluations made for steps, all envs together."""
        return self.env.evaluations

    def reset(self, *, seed: int | list[int | None] | None = None,
              options: dict[str, Any] | None = None) -> tuple[Any, dict[str, Any]]:
        """Start an episode in every env, or in those of ``options["reset_mask"]`` (a bool array of
        ``num_envs``; any other option is refused); returns the batched observations and infos.
        ``seed``: None, an int (env i gets ``seed + i``) or one seed (or None) per env."""
        if isinstance(seed, (int, np.integer)):
            seeds: list[int | None] = [int(seed) + i for i in range(self.num_envs)]
        elif seed is None:
            seeds = [None] * self.num_envs
        else:
            seeds = list(seed)
            if len(seeds) != self.num_envs:
                raise ValueError(f"seed: one seed per env ({self.num_envs}) expected, got {len(seeds)}")
        options = dict(check_reset_options(options, ("reset_mask",), type(self).__name__))
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
        if not self._stacked:
            return self._batch(self._last_obs), infos
        self._shows_placement[mask] = False
        obs = _repeated(first[0], self.num_envs)
        placed = np.flatnonzero(self._shows_placement)
        if len(placed):
            _write_rows(obs, placed, self.env.placed_observations(self._last_placements[placed]))
        return obs, infos

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
        placements = self._node_placements(rows[stepped], stepped)
        rewards = np.zeros(self.num_envs)
        terminated = np.zeros(self.num_envs, dtype=np.bool_)
        truncated = np.zeros(self.num_envs, dtype=np.bool_)
        terminated[stepped] = True
        scores = None
        if len(stepped):
            scores = self.env.evaluator.simulate_batch(self.env.op_placement(placements))
            self.env.evaluations += len(stepped)
        if self._stacked:
            obs, infos = self._stacked_step(stepped, placements, scores, rewards)
        else:
            obs, infos = self._listed_step(resetting, stepped, placements, scores, rewards)
        ended = terminated | truncated
        self._autoreset = ended.copy()
        if self.autoreset_mode == AutoresetMode.NEXT_STEP:
            self._running |= resetting  # ended envs stay "running": the next step resets them
        elif self.autoreset_mode == AutoresetMode.DISABLED:
            self._running &= ~ended  # the caller resets them (reset_mask)
        return obs, rewards, terminated, truncated, infos

    def _stacked_step(self, stepped: np.ndarray, placements: np.ndarray, scores, rewards: np.ndarray
                      ) -> tuple[Any, dict[str, Any]]:
        """A step's observations and infos in the dict and flat modes, built as whole batches (fills
        ``rewards``): the envs that placed get their step's rows (in ``SAME_STEP`` mode in
        ``final_obs`` and ``final_info``), the others an episode's first observation and info."""
        first_obs, first_info = self._first_step()
        same_step = self.autoreset_mode == AutoresetMode.SAME_STEP
        placed = np.zeros(self.num_envs, dtype=np.bool_)
        placed[stepped] = True
        infos: dict[str, Any] = {}
        if len(stepped):
            step_obs, rewards[stepped], step_infos = self.env.outcomes(placements, *scores)
        if len(stepped) == self.num_envs and not same_step:
            obs, values = step_obs, step_infos
        else:
            obs = _repeated(first_obs, self.num_envs)
            values = {key: _repeated(np.asarray(value), self.num_envs) for key, value in first_info.items()}
        if len(stepped) and same_step:
            final_obs = np.full(self.num_envs, None, dtype=object)
            for k, i in enumerate(stepped):
                final_obs[i] = _row(step_obs, k)
            final_info = {}
            for key, value in step_infos.items():
                final_info[key] = np.zeros((self.num_envs, *value.shape[1:]), dtype=value.dtype)
                final_info[key][stepped] = value
            infos = {"final_obs": final_obs, "_final_obs": placed,
                     "final_info": _with_masks(final_info, placed), "_final_info": placed.copy()}
        elif 0 < len(stepped) < self.num_envs:
            _write_rows(obs, stepped, step_obs)
            for key, value in step_infos.items():
                values[key][stepped] = value
        self._shows_placement = placed & (not same_step)
        self._last_placements[stepped] = placements
        return obs, infos | _with_masks(values, np.ones(self.num_envs, dtype=np.bool_))

    def _listed_step(self, resetting: np.ndarray, stepped: np.ndarray, placements: np.ndarray, scores,
                     rewards: np.ndarray) -> tuple[Any, dict[str, Any]]:
        """A step's observations and infos in the graph mode, env by env (fills ``rewards``)."""
        step_results: dict[int, tuple[Any, dict[str, Any]]] = {}
        runtimes, feasible, peaks = scores if scores is not None else (None, None, None)
        for k, i in enumerate(stepped):
            result = SimulationResult(runtime=float(runtimes[k]), feasible=bool(feasible[k]),
                                      peak_memory=np.asarray(peaks[k], dtype=np.float64))
            obs, rewards[i], info = self.env.outcome(placements[k], result)
            step_results[int(i)] = obs, info
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
        return self._batch(self._last_obs), infos

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

    def _node_placements(self, rows: np.ndarray, envs: np.ndarray) -> np.ndarray:
        """The actions of ``envs`` as int64 node devices ``(len(envs), n_nodes)``, checked at once, or
        the ValueError of the first wrong one, naming its env and node."""
        try:
            return self.env.check_node_placement(rows, batch=True)
        except ValueError as error:
            for k, env in enumerate(envs):  # the batch check names no env: find the row that fails
                try:
                    self.env.check_node_placement(rows[k])
                except ValueError as row_error:
                    raise ValueError(f"action of env {env}: {row_error}") from None
            raise error

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


# Batched observations: a dict of arrays (dict mode) or one array (flat mode), one row per env.

def _repeated(obs: Any, n: int) -> Any:
    """``n`` copies of one observation (or info value) as a batch."""
    if isinstance(obs, dict):
        return {key: np.repeat(value[None], n, axis=0) for key, value in obs.items()}
    return np.repeat(obs[None], n, axis=0)


def _write_rows(batch: Any, rows: np.ndarray, values: Any) -> None:
    """Write ``values`` (a batch with one row per entry of ``rows``, or one observation for all of
    them) into the rows ``rows`` (indices or a bool mask) of ``batch``."""
    if isinstance(batch, dict):
        for key, array in batch.items():
            array[rows] = values[key]
    else:
        batch[rows] = values


def _row(batch: Any, k: int) -> Any:
    """Row ``k`` of a batch as one env's observation (a copy)."""
    if isinstance(batch, dict):
        return {key: value[k].copy() for key, value in batch.items()}
    return batch[k].copy()


def _with_masks(values: dict[str, np.ndarray], mask: np.ndarray) -> dict[str, Any]:
    """Stacked info values in Gymnasium's vector layout: each key followed by ``_key``, the envs that
    have it."""
    out: dict[str, Any] = {}
    for key, value in values.items():
        out[key] = value
        out[f"_{key}"] = mask.copy()
    return out
