"""`DevicePlacement-v0`: place every op (or group) in one step (Mirhoseini et al. 2017, HSDAG)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
from gymnasium import spaces

from placement_gym.cluster.cluster import Cluster
from placement_gym.cost_model.result import SimulationResult
from placement_gym.envs.base import PlacementEnvBase
from placement_gym.envs.config import FROM_CONFIG, RENDER_MODES, EnvConfig
from placement_gym.envs.entry_point import gym_entry_point
from placement_gym.envs.rewards import RewardFunction, check_reward, shape_reward
from placement_gym.graph.opgraph import OpGraph
from placement_gym.task.compiled import Task

__all__ = ["RENDER_MODES", "DevicePlacementEnv", "make_env"]


class DevicePlacementEnv(PlacementEnvBase):
    """Single-shot device placement: one action assigns a device to every op (or group of ops) of a
    neural network.

    ## Description
    The problem of Mirhoseini et al. (ICML 2017) and HSDAG (Duan et al., NeurIPS 2024): a policy
    sees the computation graph of a model and a cluster of devices, emits one device per op (or per
    group of ops, ``groups=``), and is rewarded by how fast the placement runs. The runtime comes
    from placement-gym's cost model (`placement_gym.simulate`): one training step
    (``objective="train_step"``: forward, backward and optimizer ops, the backward and update ops on
    their forward op's device) or one inference pass. Each episode is a single step.

    ## Action Space
    `MultiDiscrete([n_devices] * n_nodes)`: the device index of every node in topological order. A
    node is a forward op (``n_nodes = n_forward``, the order of ``task.graph.op_names``) or, with
    ``groups=``, a group (`placement_gym.task.groups`: numbered by first op; all ops of a group go to its
    device). `action_masks()` returns the ``(n_nodes, n_devices)`` bool array of allowed choices
    (for sb3-contrib's MaskablePPO): a device is masked out for a node whose static memory alone
    (parameters, and for training their gradients and optimizer state) exceeds the device's
    capacity; a node that fits on no device keeps every device allowed. With ``max_devices=``
    (padding, for envs whose cluster changes at reset) the space is ``MultiDiscrete([max_devices] *
    n_nodes)``, padded devices are masked out, and an unmasked padded device ``d`` places on device
    ``d % n_devices`` (`placement_gym.envs.base.PlacementEnvBase`, Padded devices). Over a task source
    whose graphs vary (``dataset=``, or a ``task_source=`` whose ``limits`` give ``max_ops``) the action
    holds ``max_nodes`` (the padded ``max_ops``) nodes, ``MultiDiscrete([max_devices] * max_nodes)``: a
    task reads its first ``n_nodes`` entries and ignores the rest, and `action_masks()` has
    ``max_nodes`` rows, those past ``n_nodes`` allowing every real device.

    ## Observation Space
    ``obs_mode="dict"`` (default): a `Dict` of fixed-size `Box` spaces (stable-baselines3's
    ``MultiInputPolicy``), padded to ``max_ops`` nodes and ``max_edges`` edges: ``node_features``,
    ``node_mask``, ``edge_index``, ``edge_features``, ``edge_mask``, ``device_features``,
    ``placement`` (one-hot device per node: zeros after `reset`, the chosen placement in the final
    observation) and ``current`` (always zero here). ``obs_mode="flat"``: the same arrays, padded
    the same way, in one 1-D float32 `Box` (stable-baselines3's ``MlpPolicy``, tianshou's and
    RLlib's default networks); ``env.unwrapped.flat_slices`` maps each key to its slice of the
    vector and ``env.unwrapped.flat_layout.unflatten(vector)`` gives the dict back (order and
    encodings: `placement_gym.envs.flat`). ``obs_mode="graph"``: a Gymnasium `Graph` (node features
    with the placement and current columns appended). Every column is documented in
    `placement_gym.envs.observation`.

    ``mask_in_obs=True`` (default False) adds `action_masks()` to the observation: in the dict mode
    the key ``"action_mask"``, a bool `Box` of shape ``(n_nodes, n_devices)`` (True: allowed); in
    the flat mode the same array as 0.0/1.0, last in the vector. That is the layout torchrl's
    ``ActionMask`` transform reads: torchrl's ``GymWrapper`` turns this ``MultiDiscrete`` (one
    cardinality for every node) into one categorical per node, whose mask is ``(n_nodes,
    n_devices)`` bool. (One exception in torchrl: with exactly 2 nodes and 2 devices the mask's
    shape equals the action space's ``nvec``, and torchrl then reads it as a mask over the 4 joint
    choices.) RLlib's action-masking module (its example ``ActionMaskingTorchRLModule``) handles
    ``Discrete`` actions only; its ``MultiDiscrete`` logits are the per-node logits concatenated,
    which ``action_mask.reshape(-1)`` lines up with. The graph mode rejects ``mask_in_obs``.

    ## Rewards
    A strictly decreasing function of the simulated runtime, chosen with ``reward``:

    - ``"log_speedup"`` (default): ``log(best_single_runtime / runtime)``; 0 for the best
      single-device placement, positive when faster.
    - ``"neg_runtime"``: ``-runtime`` (seconds).
    - ``"neg_sqrt_runtime"``: ``-sqrt(runtime)`` (seconds), the reward of Mirhoseini et al. 2017.
    - ``"inverse"``: ``best_single_runtime / runtime``, the speedup. HSDAG rewards with the execution
      time; dividing the best single-device time by it keeps the reward scale-free.
    - a function ``reward(runtime, best_single_runtime) -> float`` of your own
      (`placement_gym.envs.rewards.RewardFunction`), injected as Jumanji injects its ``reward_fn``; it
      should decrease strictly with the runtime.

    A placement that runs out of memory on some device is not an error: it is rewarded as if it ran
    for ``oom_runtime`` seconds when that is given (Mirhoseini et al. 2017 used 100 s), else for
    ``oom_runtime_factor`` (default 10) times the best single-device runtime. That is below the
    reward of every feasible placement that is less than ``oom_runtime_factor`` times slower than
    the best single device.

    ## Episode End
    Every episode ends after its one step (``terminated=True``, ``truncated=False``). Call `reset`
    before the first step and after each step; stepping otherwise raises a RuntimeError. Gymnasium's
    vector envs reset it in every autoreset mode (``NEXT_STEP``, the default: the step after the
    end resets and ignores its action, reward 0; ``SAME_STEP``: the ending step returns the next
    episode's first observation, with ``final_obs`` and ``final_info`` in ``info``; ``DISABLED``:
    call ``reset(options={"reset_mask": ...})`` yourself).

    ## Arguments
    - ``reward``: one of `placement_gym.envs.rewards.REWARDS`, or a reward function (see Rewards).
    - The shared settings of every placement env, documented once in
      `placement_gym.envs.config.EnvConfig`: ``graph`` and ``cluster`` (also the first two positional
      arguments; defaults ``"inception_v3"`` and ``"k80x4"``), ``step`` (or its fields ``objective``,
      ``optimizer``, ``precision``, ``microbatches``, ``recompute`` as keywords), ``groups``,
      ``obs_mode`` (see Observation Space), ``mask_in_obs``, ``max_ops``, ``max_edges``,
      ``render_mode``, ``oom_runtime`` and ``oom_runtime_factor`` (see Rewards), ``evaluator`` and
      ``evaluator_options`` (what scores a placement), ``dataset``, ``clusters`` and ``task_source``
      (what each reset draws; `placement_gym.envs.base.PlacementEnvBase`). Give them as keywords, or as
      one ``config=EnvConfig(...)`` (keywords beside it replace its fields); ``env.config`` holds them.

    ## Info
    The same keys at `reset` and after the step, each value a numpy number (float64, int64) or a
    numpy array (0-d bool arrays for ``simulated`` and ``feasible``), so that vector envs, torchrl
    and tianshou can stack them:
    ``lower_bound`` (the simple lower bound `pg.lower_bound`, seconds no placement can beat; the
    leaderboard shows the tighter `proven_bound`), ``best_single_runtime`` (seconds, the fastest
    device that holds the whole task), ``simulated`` (False at `reset`, True after the step),
    ``runtime`` (simulated seconds, also for an infeasible placement), ``feasible``,
    ``peak_memory`` (bytes per device, float64 ``(n_devices,)``), ``speedup``
    (``best_single_runtime / runtime``) and ``reward_runtime`` (the runtime the reward was computed
    from: the penalty runtime for an out-of-memory placement). At `reset` nothing was simulated:
    ``simulated`` and ``feasible`` are False and the other result keys 0. With ``evaluator="real"`` also
    ``real_runtime``, ``real_spread``, ``real_repeats`` and ``real_loss`` (the executor's summary; any
    evaluator adds the keys its backend declares, `placement_gym.envs.base.PlacementEnvBase`). The task
    id is ``env.unwrapped.task.id``.

    ## Version History
    - v0: the single-shot MDP (every node's device in one step); the shared settings' history is
      `placement_gym.envs.config.EnvConfig`'s.
    """

    def __init__(
        self,
        graph: str | Path | OpGraph | Task = FROM_CONFIG,
        cluster: str | Path | Cluster = FROM_CONFIG,
        *,
        reward: str | RewardFunction = "log_speedup",
        config: EnvConfig | None = None,
        **settings: Any,
    ) -> None:
        check_reward(reward)
        super().__init__(EnvConfig.of(config, settings, type(self).__name__, graph=graph, cluster=cluster))
        self.reward = reward
        self.action_space = spaces.MultiDiscrete(np.full(self.max_nodes, self.max_devices, dtype=np.int64))
        self._needs_reset = True
        self._placement: np.ndarray | None = None
        self._result = None

    def _task_state(self, drawn: Task) -> dict[str, Any]:
        state = super()._task_state(drawn)
        # Rows past the task's nodes (a padded action) allow every real device: those entries are ignored.
        masks = np.zeros((self.max_nodes, self.max_devices), dtype=bool)
        masks[:, : self.task.n_devices] = True
        masks[: self.n_nodes] = self._padded_mask(self._static_masks())
        masks.setflags(write=False)
        return state | self._set(_masks=masks)

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        """Draw the episode's task and start the episode; returns ``(observation, info)``. ``options``:
        None or a dict of the task source's reset options (none for one task; a key it does not read is
        refused)."""
        super().reset(seed=seed, options=options)
        self._needs_reset = False
        self._placement = None
        self._result = None
        self._observation.clear_placement()
        return self._obs(), self._reference_info() | self._no_result_info()

    def step(self, action):
        """Evaluate the placement ``action`` (one device index per node); the episode ends."""
        self._check_started("each episode is one step: ")
        placement = self.check_node_placement(self._task_part(action))  # clear ValueError for a bad action
        result, _ = self._evaluate(placement)
        self._needs_reset = True
        self._placement = placement
        self._result = result
        obs, reward, info = self.outcome(placement, result)
        return obs, reward, True, False, info

    def _task_part(self, action):
        """The task's nodes of ``action``: its first ``n_nodes`` entries where the action is padded to
        ``max_nodes`` (`max_nodes` > `n_nodes`: a task source whose graphs vary), else ``action``."""
        if self.max_nodes == self.n_nodes:
            return action
        action = np.asarray(action)
        if action.shape != (self.max_nodes,):
            raise ValueError(f"action must have shape ({self.max_nodes},): one device per node, padded to "
                             f"max_ops; got shape {action.shape}")
        return action[: self.n_nodes]

    def episode_state(self) -> dict[str, Any]:
        """The env's state, for a checkpoint: whether an episode is open, the last placement and its
        result, the count of evaluations and the env's generator (`restore_episode`)."""
        return super().episode_state() | {"needs_reset": self._needs_reset, "placement": self._placement,
                                          "result": self._result}

    def restore_episode(self, state: dict[str, Any]) -> None:
        """Continue from ``state`` (`episode_state` of an env of the same task and settings): the next
        step or reset behaves as the saved env's would have. Evaluates nothing."""
        placement = state["placement"]
        self._placement = None if placement is None else self.check_node_placement(np.asarray(placement))
        self._needs_reset, self._result = bool(state["needs_reset"]), state["result"]
        super().restore_episode(state)
        if self._placement is None:
            self._observation.clear_placement()
        else:
            self._observation.set_placement(self._placement)

    def outcome(self, placement: np.ndarray, result) -> tuple[Any, float, dict[str, Any]]:
        """The observation, reward and info that `step` returns for ``placement`` (one device per node,
        as `check_node_placement` returns it) scored as ``result`` (a `SimulationResult` of
        ``op_placement(placement)``), without evaluating anything or changing the episode: the env's
        observation state is left as it was. For code that scores many placements in one batch and
        then needs each one's step output (`placement_gym.envs.vector.DevicePlacementVectorEnv`)."""
        reward, result_info = self._score(result)
        self._observation.set_placement(placement)
        obs = self._obs()
        if self._placement is not placement:  # restore the episode's observation state
            if self._placement is None:
                self._observation.clear_placement()
            else:
                self._observation.set_placement(self._placement)
        return obs, reward, self._reference_info() | result_info

    def _score(self, result) -> tuple[float, dict[str, Any]]:
        """The reward of ``result`` and the result keys of its info."""
        reward = shape_reward(self.reward, result.runtime, result.feasible, self.best_single_runtime,
                              self.oom_runtime, self.oom_runtime_factor)
        reward_runtime = result.runtime if result.feasible else self.penalty_runtime
        return float(reward), self._result_info(result, reward_runtime)

    def outcomes(self, placements: np.ndarray, runtimes: np.ndarray, feasible: np.ndarray,
                 peaks: np.ndarray) -> tuple[Any, np.ndarray, dict[str, np.ndarray]]:
        """`outcome` for a batch, in ``obs_mode`` "dict" or "flat": ``placements`` ``(k, n_nodes)`` (rows
        as `check_node_placement` returns them) scored as ``runtimes``, ``feasible`` and ``peaks`` (what
        `Evaluator.simulate_batch` returns for them). Returns the observations
        (`placed_observations`), the rewards (float64 ``(k,)``) and one dict of the info keys, each value
        the ``k`` rows' values stacked. Row ``i`` equals `outcome` of row ``i``; the episode is unchanged."""
        k = len(placements)
        rewards = np.empty(k)
        rows = []
        for i in range(k):
            rewards[i], info = self._score(SimulationResult(
                runtime=float(runtimes[i]), feasible=bool(feasible[i]),
                peak_memory=np.asarray(peaks[i], dtype=np.float64)))
            rows.append(info)
        # The reference keys are the same for every row; the result keys are stacked row by row.
        infos = {key: np.repeat(np.asarray(value)[None], k, axis=0)
                 for key, value in self._reference_info().items()}
        if rows:
            infos |= {key: np.stack([np.asarray(row[key]) for row in rows]) for key in rows[0]}
        return self.placed_observations(placements), rewards, infos

    def placed_observations(self, placements: np.ndarray) -> Any:
        """The observations `outcome` returns for ``placements`` ``(k, n_nodes)``, stacked as
        ``gymnasium.vector.utils.batch_space`` stacks the observation space: a dict of arrays with ``k``
        rows (``obs_mode="dict"``) or a ``(k, size)`` array (``"flat"``); not for ``"graph"``."""
        if self.obs_mode == "graph":
            raise ValueError('DevicePlacementEnv.placed_observations needs obs_mode "dict" or "flat"; call '
                             'outcome per placement for "graph"')
        k = len(placements)
        template = self._obs()  # every part but the placement is the same for every row
        one_hot = self._observation.placement_batch(placements)
        if self.flat_layout is None:
            return {key: one_hot if key == "placement" else np.repeat(value[None], k, axis=0)
                    for key, value in template.items()}
        obs = np.repeat(template[None], k, axis=0)
        obs[:, self.flat_layout.slices["placement"]] = one_hot.reshape(k, -1)
        return obs

    def _action_mask_shape(self) -> tuple[int, ...]:
        return (self.max_nodes, self.max_devices)

    def action_masks(self) -> np.ndarray:
        """Allowed devices per node, bool ``(max_nodes, max_devices)`` (see Action Space)."""
        return self._masks.copy()

    def render(self):
        """The last placement as text (``"ansi"``) or as a timeline image (``"rgb_array"``); before
        the first step, the best single-device placement, labelled as such. None without a mode."""
        if self.render_mode is None:
            return None
        if self._placement is None:
            placement = np.full(self.n_nodes, self.best_single_device, dtype=np.int64)
            label = f"no placement yet; reference: every op on {self.task.cluster.device_names[placement[0]]}"
            return self._render_placement(placement, label)
        return self._render_placement(self._placement, "last placement", result=self._result)


make_env = gym_entry_point(DevicePlacementEnv)
