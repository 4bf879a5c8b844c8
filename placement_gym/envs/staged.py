"""`DevicePlacementStaged-v0`: Spotlight's multi-stage MDP, one op (or group) per step."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
from gymnasium import spaces

from placement_gym.cluster.cluster import Cluster
from placement_gym.envs.base import PlacementEnvBase
from placement_gym.envs.config import FROM_CONFIG, EnvConfig
from placement_gym.envs.entry_point import gym_entry_point
from placement_gym.envs.rewards import (
    RewardFunction,
    check_reward,
    improvement_reward,
    shape_reward,
)
from placement_gym.graph.opgraph import OpGraph
from placement_gym.task.compiled import Task


class DevicePlacementStagedEnv(PlacementEnvBase):
    """Multi-stage device placement: one stage per op (or group), in topological order.

    ## Description
    Spotlight's MDP (Gao, Chen and Li, ICML 2018): an episode has one stage per node (a forward op,
    or with ``groups=`` a group of ops, `placement_gym.task.groups`), visited in topological order (node
    ``t`` at stage ``t``; groups are numbered by their first op). At each stage the agent picks the
    device of the current node, seeing the graph, the placement so far and which node is next. The
    full placement is evaluated by the cost model (`placement_gym.simulate`) after the last stage.

    ## Action Space
    `Discrete(n_devices)`: the device of the current node. `action_masks()` returns the
    ``(n_devices,)`` bool array of allowed devices (sb3-contrib's MaskablePPO): a device is masked
    out when the static memory (parameters, and for training their gradients and optimizer state) of
    the nodes already placed on it plus the current node's exceeds its capacity. Activation memory
    depends on the schedule and is not known before the end, so an unmasked placement can still run
    out of memory. When every device would overflow, every device is allowed. With ``max_devices=``
    the space is ``Discrete(max_devices)``, padded devices are masked out, and an unmasked padded
    device ``d`` places on device ``d % n_devices`` (`placement_gym.envs.base.PlacementEnvBase`).

    ## Observation Space
    ``obs_mode="dict"`` (default): a `Dict` of fixed-size `Box` spaces (``MultiInputPolicy``) padded to
    ``max_ops`` nodes and ``max_edges`` edges: ``node_features``, ``node_mask``, ``edge_index``,
    ``edge_features``, ``edge_mask``, ``device_features``, ``placement`` (one-hot device of each
    node placed so far, zero rows for the others) and ``current`` (one-hot of the node this stage
    places; all zero after the last stage). ``obs_mode="flat"``: those arrays in one 1-D float32
    `Box` (``MlpPolicy``; layout in ``env.unwrapped.flat_slices``, `placement_gym.envs.flat`).
    ``obs_mode="graph"``: a Gymnasium `Graph` whose node rows are the node features followed by the
    placement one-hot and the current flag. Columns: `placement_gym.envs.observation`.

    ``mask_in_obs=True`` (default False) adds `action_masks()` of the current stage: in the dict
    mode the key ``"action_mask"``, a bool `Box` of shape ``(n_devices,)`` (True: allowed; all True
    after the last stage), the layout of RLlib's action-masking example (a ``Box(0, 1, (n,))``
    whose log it adds to the logits; torch takes the log of a bool tensor too) and of torchrl's
    ``ActionMask`` transform (a bool mask over the ``Discrete`` action, which it requires to be
    bool); in the flat mode the same mask as 0.0/1.0, last in the vector. The graph mode rejects it.

    ## Rewards
    ``dense=False`` (default, Spotlight's): 0 at every stage but the last, which gets the reward of
    `DevicePlacement-v0` for the full placement (``reward`` picks the shape: ``"log_speedup"``,
    ``"neg_runtime"``, ``"neg_sqrt_runtime"``, ``"inverse"``; an out-of-memory placement is rewarded
    with the penalty runtime, ``oom_runtime`` or ``oom_runtime_factor`` x the best single-device
    runtime).

    ``dense=True``: the nodes not placed yet are counted on the *completion device*, the best single
    device (the fastest device that holds the whole task), so every partial placement has a runtime
    ``R_t`` (the penalty runtime when it runs out of memory; ``R_0`` is the best single-device
    runtime when that device holds the task). Stage ``t`` is rewarded with
    ``(R_{t-1} - R_t) / best_single_runtime``: positive when the choice made the completed
    placement faster. The rewards telescope: an episode's sum is
    ``(best_single_runtime - R_final) / best_single_runtime``, where ``R_final`` is the final
    placement's runtime (or its penalty runtime). ``reward`` is not used in this mode. Each dense
    stage costs one simulation.

    ## Episode End
    After ``n_nodes`` steps (``terminated=True``); never truncated. Stepping before `reset` or after
    the end raises a RuntimeError. Gymnasium's vector envs reset it in every autoreset mode
    (``NEXT_STEP``, ``SAME_STEP``, ``DISABLED``; see `DevicePlacement-v0`).

    ## Arguments
    ``reward`` as in `DevicePlacement-v0`, ``dense`` (bool, default False; see Rewards), and the
    shared settings of `placement_gym.envs.config.EnvConfig` (keywords, or ``config=``).
    ``render_mode="ansi"`` shows the placement so far (unplaced nodes counted on the completion
    device), ``"rgb_array"`` the timeline of that completed placement.

    ## Info
    The same keys at `reset` and at every step, each value a numpy number or array (so vector envs,
    torchrl and tianshou stack them): ``lower_bound``, ``best_single_runtime``, ``stage`` (int64,
    nodes placed so far), ``simulated`` and the result keys of `DevicePlacement-v0` (``runtime``,
    ``feasible``, ``peak_memory``, ``speedup``, ``reward_runtime``; with ``evaluator="real"``
    also ``real_runtime``, ``real_spread``, ``real_repeats``, ``real_loss``) of the completed
    placement where a simulation ran (every stage with ``dense=True``, else the last). Elsewhere
    (at `reset`, and at the stages before the last with ``dense=False``) ``simulated`` and
    ``feasible`` are False and the other result keys 0.
    ## Version History
    - v0: Spotlight's staged MDP, one node per step, with ``reward=`` and ``dense=``; for the shared
      settings see the history in `placement_gym.envs.config.EnvConfig`.
    """

    def __init__(
        self,
        graph: str | Path | OpGraph | Task = FROM_CONFIG,
        cluster: str | Path | Cluster = FROM_CONFIG,
        *,
        reward: str | RewardFunction = "log_speedup",
        dense: bool = False,
        config: EnvConfig | None = None,
        **settings: Any,
    ) -> None:
        check_reward(reward)
        if not isinstance(dense, (bool, np.bool_)):
            raise ValueError(f"dense must be True or False, got {dense!r}")
        self.reward = reward
        self.dense = bool(dense)
        super().__init__(EnvConfig.of(config, settings, type(self).__name__, graph=graph, cluster=cluster))
        self.action_space = spaces.Discrete(self.max_devices)
        self._stage = 0
        self._needs_reset = True
        self._last_result = None
        self._previous_runtime = self._initial_reward_runtime

    def _task_state(self, drawn: Task) -> dict[str, Any]:
        state = super()._task_state(drawn)
        # Unplaced nodes hold the completion device, so the array is always a full placement.
        nodes = np.full(self.n_nodes, self.best_single_device, dtype=np.int64)
        _, initial = self._evaluate(nodes, counted=False)
        return state | self._set(completion_device=self.best_single_device, _nodes=nodes,
                                 _initial_reward_runtime=initial)

    @property
    def stage(self) -> int:
        """Number of nodes placed in this episode (the index of the node the next action places)."""
        return self._stage

    def placement(self) -> np.ndarray:
        """A copy of the node placement so far, -1 for the nodes not placed yet."""
        nodes = self._nodes.copy()
        nodes[self._stage:] = -1
        return nodes

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        """Draw the episode's task and start the episode at stage 0; returns ``(observation, info)``.
        ``options``: None or a dict of the task source's reset options (none for one task; a key it
        does not read is refused)."""
        super().reset(seed=seed, options=options)
        self._nodes[:] = self.completion_device
        self._stage = 0
        self._needs_reset = False
        self._last_result = None
        self._previous_runtime = self._initial_reward_runtime
        self._observation.clear_placement()
        self._observation.set_current(0)
        info = self._reference_info() | {"stage": np.int64(0)} | self._no_result_info()
        return self._obs(), info

    def step(self, action):
        """Place the current node on device ``action``; moves to the next stage."""
        self._check_started()
        device = self._check_device(action)
        node = self._stage
        self._nodes[node] = device
        self._observation.place(node, device)
        self._stage = node + 1
        terminated = self._stage == self.n_nodes
        self._observation.set_current(None if terminated else self._stage)
        info = self._reference_info() | {"stage": np.int64(self._stage)}
        reward = 0.0
        self._last_result = None
        if self.dense or terminated:
            result, reward_runtime = self._evaluate(self._nodes)
            info.update(self._result_info(result, reward_runtime))
            self._last_result = result
            if self.dense:
                reward = improvement_reward(self._previous_runtime, reward_runtime, self.best_single_runtime)
                self._previous_runtime = reward_runtime
            else:
                reward = shape_reward(self.reward, result.runtime, result.feasible,
                                      self.best_single_runtime, self.oom_runtime, self.oom_runtime_factor)
        else:
            info.update(self._no_result_info())
        if terminated:
            self._needs_reset = True
        return self._obs(), float(reward), terminated, False, info

    def episode_state(self) -> dict[str, Any]:
        """The episode in progress, for a checkpoint: the nodes placed so far, the stage, the last result,
        the runtime the next dense reward starts from, the count of evaluations and the env's generator
        (`restore_episode`)."""
        return {"placed": self._nodes[:self._stage].copy(), "needs_reset": self._needs_reset,
                "last_result": self._last_result, "previous_runtime": self._previous_runtime,
                **super().episode_state()}

    def restore_episode(self, state: dict[str, Any]) -> None:
        """Continue the episode ``state`` (`episode_state` of an env of the same task and settings)
        holds: the next step, its reward, observation and action mask are those the saved env would
        have given. Evaluates nothing."""
        placed = np.asarray(state["placed"])
        if placed.ndim != 1 or len(placed) > self.n_nodes:
            raise ValueError(f"episode state with placed nodes of shape {placed.shape}; this env has "
                             f"{self.n_nodes} nodes")
        nodes = np.full(self.n_nodes, self.completion_device, dtype=np.int64)
        nodes[:len(placed)] = placed
        self._nodes[:] = self.check_node_placement(nodes)
        self._stage, self._needs_reset = len(placed), bool(state["needs_reset"])
        self._last_result, self._previous_runtime = state["last_result"], float(state["previous_runtime"])
        super().restore_episode(state)
        self._observation.clear_placement()
        for node in range(self._stage):
            self._observation.place(node, int(self._nodes[node]))
        self._observation.set_current(None if self._stage == self.n_nodes else self._stage)

    def action_masks(self) -> np.ndarray:
        """Allowed devices for the current node, bool ``(n_devices,)`` (see Action Space); every
        device once the episode has ended."""
        if self._stage >= self.n_nodes:
            return self._padded_mask(np.ones(self.task.n_devices, dtype=bool))
        used = self._used_static(self._nodes, slice(0, self._stage))
        return self._padded_mask(self._fit_mask(self._stage, used))

    def render(self):
        """The placement so far (unplaced nodes on the completion device) as text (``"ansi"``) or as
        a timeline image (``"rgb_array"``). None without a render mode."""
        if self.render_mode is None:
            return None
        label = f"stage {self._stage} of {self.n_nodes}"
        return self._render_placement(self._nodes, label, placed=self._stage, result=self._last_result)


make_env = gym_entry_point(DevicePlacementStagedEnv)
