"""`DevicePlacementRefine-v0`: Placeto's MDP, revisiting every op (or group) of a full placement."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
from gymnasium import spaces

from placement_gym.cluster.cluster import Cluster
from placement_gym.envs.base import PlacementEnvBase
from placement_gym.envs.config import FROM_CONFIG, EnvConfig
from placement_gym.envs.entry_point import gym_entry_point
from placement_gym.envs.rewards import improvement_reward
from placement_gym.evaluation.placements import load_placement
from placement_gym.graph.opgraph import OpGraph
from placement_gym.task.compiled import Task


def refine_visit(step: int, n_nodes: int) -> tuple[int, int]:
    """The node the refine MDP moves at ``step`` (0-based, counted over the episode) and its sweep
    (0-based): every sweep visits the ``n_nodes`` nodes once, in index (topological) order. Placeto's
    agent (`baselines/learning/placeto.py`) visits in this order too."""
    return step % n_nodes, step // n_nodes


class DevicePlacementRefineEnv(PlacementEnvBase):
    """Placement refinement: start from a full placement and move one op (or group) per step.

    ## Description
    Placeto's MDP (Addanki et al., NeurIPS 2019): an episode starts from a full placement
    (``initial``) and visits every node (a forward op, or with ``groups=`` a group of ops,
    `placement_gym.task.groups`) once in topological order, ``sweeps`` times over. At each step the agent
    picks the new device of the current node (keeping it where it is is allowed) and is rewarded by
    how much faster the placement became, according to the cost model (`placement_gym.simulate`).

    Two pitfalls of Park's public version of this env (docs/references.md) are avoided: the last node of
    the episode is placed too (Park's ends one step early), and a faster placement gives a positive
    reward (Park's returns ``new - previous``, the wrong sign).

    ## Action Space
    `Discrete(n_devices)`: the new device of the current node. `action_masks()` returns the
    ``(n_devices,)`` bool array of allowed devices (sb3-contrib's MaskablePPO): a device is masked
    out when the static memory (parameters, and for training their gradients and optimizer state) of
    the other nodes on it plus the current node's exceeds its capacity. Activation memory depends on
    the schedule, so an unmasked move can still run out of memory. When every device would
    overflow, every device is allowed. With ``max_devices=`` the space is ``Discrete(max_devices)``,
    padded devices are masked out, and an unmasked padded device ``d`` moves the node to device ``d %
    n_devices`` (`placement_gym.envs.base.PlacementEnvBase`).

    ## Observation Space
    ``obs_mode="dict"`` (default): a `Dict` of fixed-size `Box` spaces (``MultiInputPolicy``) padded to
    ``max_ops`` nodes and ``max_edges`` edges: ``node_features``, ``node_mask``, ``edge_index``,
    ``edge_features``, ``edge_mask``, ``device_features``, ``placement`` (one-hot of every node's
    current device) and ``current`` (one-hot of the node the next action moves; all zero after the
    last step). ``obs_mode="flat"``: those arrays in one 1-D float32 `Box` (``MlpPolicy``; layout
    in ``env.unwrapped.flat_slices``, `placement_gym.envs.flat`). ``obs_mode="graph"``: a Gymnasium
    `Graph` whose node rows are the node features followed by the placement one-hot and the current
    flag. Columns: `placement_gym.envs.observation`.

    ``mask_in_obs=True`` (default False) adds `action_masks()` for the node the next action moves:
    in the dict mode the key ``"action_mask"``, a bool `Box` of shape ``(n_devices,)`` (True:
    allowed; all True after the last step), the layout RLlib's action-masking example and torchrl's
    ``ActionMask`` transform read for a ``Discrete`` action (see `DevicePlacementStaged-v0`); in the
    flat mode the same mask as 0.0/1.0, last in the vector. The graph mode rejects it.

    ## Rewards
    At every step, ``(R_before - R_after) / best_single_runtime``: the runtime saved by the move,
    normalised by the best single-device runtime (so it is scale-free). ``R`` is the simulated
    runtime, or for a placement that runs out of memory the penalty runtime of `DevicePlacement-v0`
    (``oom_runtime``, else ``oom_runtime_factor`` x the best single-device runtime), so the reward
    stays defined when a move overflows memory (and moving out of an overflow is rewarded). The
    rewards of an episode sum to ``(R_initial - R_final) / best_single_runtime``.

    ## Starting Placement
    ``initial``:

    - ``"random"`` (default, as Placeto): every node on a uniformly drawn device, from the env's
      generator (seeded by ``reset(seed=...)``; a new draw each episode).
    - ``"best-single"``: every node on the best single device.
    - a device name of the cluster (such as ``"gpu:0"``): every node there.
    - a placement file (`placement_gym.evaluation.placements.save_placement`'s JSON) or an array of one device
      index per op (``n_forward``) or per node (``n_nodes``). With groups, a per-op placement is
      reduced to one device per group: the device of the group's first op (`Grouping.reduce`).

    ## Episode End
    After ``sweeps x n_nodes`` steps (``terminated=True``), the last node placed by the last step;
    never truncated. Stepping before `reset` or after the end raises a RuntimeError. Gymnasium's
    vector envs reset it in every autoreset mode (``NEXT_STEP``, ``SAME_STEP``, ``DISABLED``; see
    `DevicePlacement-v0`); with ``initial="random"`` each reset draws a new starting placement.

    ## Cost of a Step
    A step simulates the whole placement (`placement_gym.simulate`), and that is nearly all of its
    time: on a 100,000-op layered graph (`placement_gym.graph.synthetic.layered_graph`, ``k80x4``,
    training step, 229,985 task ops, random placements) a step took 266-285 ms, the simulation
    98.4-99.1% of it, on a shared 2-core machine at load 4.5 to 5 (medians of 40 steps per
    observation mode, ``python experiments/refine_step/run.py --rounds 4 --steps 10``). The rest is
    O(1) per move except one copy: the placement and current entries of the observation (in the flat
    mode the flat vector itself), the masks' static bytes per device and, with groups, the moved
    group's ops in the per-op placement are updated in place for the moved node; the fresh
    observation each step returns is a copy of about 13 MB at 100,000 nodes and 200,000 edges,
    2.0-3.2 ms of each step in every mode, `action_masks()` 0.01-0.09 ms. A step of 10 ms on such a
    graph needs a simulation several tens of times faster.

    ## Arguments
    ``initial`` (see Starting Placement), ``sweeps`` (int >= 1, default 1: how often every node is
    visited), and the shared settings of `placement_gym.envs.config.EnvConfig` (keywords, or
    ``config=``); there is no ``reward`` shape: the reward is the normalised improvement.
    ``render_mode="ansi"`` shows the current placement per device, ``"rgb_array"`` its timeline.

    ## Info
    The same keys at `reset` and at every step, each value a numpy number or array (so vector envs,
    torchrl and tianshou stack them): ``lower_bound``, ``best_single_runtime``,
    ``initial_runtime`` (float64, the episode's starting placement), ``node`` (int64, the node just
    moved; -1 at `reset`), ``sweep`` (int64, 0-based; -1 at `reset`), ``simulated`` (always True:
    every reset and step simulates) and of the current placement ``runtime``, ``feasible``,
    ``peak_memory``, ``speedup``, ``reward_runtime`` (as in `DevicePlacement-v0`; with
    ``evaluator="real"`` also ``real_runtime``, ``real_spread``, ``real_repeats``,
    ``real_loss``).

    ## Version History
    - v0: Placeto's refine MDP, one move per step from ``initial=`` for ``sweeps=`` sweeps; what the shared
      settings gained and deprecated within v0 is listed in `placement_gym.envs.config.EnvConfig`.
    """

    def __init__(
        self,
        graph: str | Path | OpGraph | Task = FROM_CONFIG,
        cluster: str | Path | Cluster = FROM_CONFIG,
        *,
        initial: str | Path | np.ndarray = "random",
        sweeps: int = 1,
        config: EnvConfig | None = None,
        **settings: Any,
    ) -> None:
        if isinstance(sweeps, (bool, np.bool_)) or not isinstance(sweeps, (int, np.integer)) or sweeps < 1:
            raise ValueError(
                f"sweeps must be an integer >= 1 (visits of every node per episode), got {sweeps!r}"
            )
        self.sweeps = int(sweeps)
        self._initial = initial
        self.initial = initial if isinstance(initial, str) else "given"
        super().__init__(EnvConfig.of(config, settings, type(self).__name__, graph=graph, cluster=cluster))
        self.action_space = spaces.Discrete(self.max_devices)
        self._steps = 0
        self._needs_reset = True
        self._initial_runtime = float("nan")
        self._reward_runtime = float("nan")
        self._result = None

    def _task_state(self, drawn: Task) -> dict[str, Any]:
        state = super()._task_state(drawn)
        nodes = np.zeros(self.n_nodes, dtype=np.int64)
        # Static bytes per device of all nodes, kept up to date move by move, so that `action_masks`
        # costs O(n_devices) rather than a sum over every node. Only where that is exact: integral
        # bytes whose total is below 2**53, so that every partial sum is exact and any order of adding
        # gives the figure a sum over the other nodes gives; otherwise `action_masks` sums afresh.
        static = self.node_static_bytes
        exact = bool(np.all(static == np.round(static))) and float(np.abs(static).sum()) < 2.0**53
        return state | self._set(
            episode_length=self.sweeps * self.n_nodes,
            _fixed_initial=self._resolve_initial(self._initial),  # None: random
            _nodes=nodes,
            # The per-op placement, kept up to date move by move (a step rewrites the moved group's ops,
            # not every op); with one node per op it is ``_nodes`` itself.
            _ops=nodes if self._identity else np.zeros(self.task.n_forward, dtype=np.int64),
            _static_used=np.zeros(self.task.n_devices) if exact else None,
        )

    def _resolve_initial(self, initial) -> np.ndarray | None:
        task = self.task
        names = task.cluster.device_names
        allowed = (
            f"'random', 'best-single', a device name of cluster {task.cluster.name!r} ({', '.join(names)}), "
            f"a placement file, or an array of {task.n_forward} device indices (one per op)"
            + ("" if self._identity else f" or {self.n_nodes} (one per group)")
        )
        if isinstance(initial, str) and initial == "random":
            return None
        if isinstance(initial, str) and initial == "best-single":
            return np.full(self.n_nodes, self.best_single_device, dtype=np.int64)
        if isinstance(initial, str) and initial in names:
            return np.full(self.n_nodes, names.index(initial), dtype=np.int64)
        if isinstance(initial, (str, Path)):
            path = Path(initial)
            if not path.is_file():
                raise ValueError(f"unknown initial {str(initial)!r}; allowed: {allowed}")
            return self.grouping.reduce(load_placement(task, path))
        array = np.asarray(initial)
        if array.ndim == 1 and len(array) == self.n_nodes and array.dtype.kind in "iuf":
            return self._check_node_placement(array).copy()
        if array.ndim == 1 and len(array) == task.n_forward and array.dtype.kind in "iuf":
            return self.grouping.reduce(task.check_placement(array))
        raise ValueError(f"unknown initial {initial!r}; allowed: {allowed}")

    @property
    def current_node(self) -> int | None:
        """The node the next action moves (None after the episode's last step)."""
        return None if self._steps >= self.episode_length else refine_visit(self._steps, self.n_nodes)[0]

    def placement(self) -> np.ndarray:
        """A copy of the current node placement."""
        return self._nodes.copy()

    def _info(self, node: int = -1, sweep: int = -1) -> dict[str, Any]:
        return (
            self._reference_info()
            | {"initial_runtime": np.float64(self._initial_runtime), "node": np.int64(node),
               "sweep": np.int64(sweep)}
            | self._result_info(self._result, self._reward_runtime)
        )

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        """Draw the episode's task and start the episode from the initial placement (a random one drawn
        from ``episode_random``); returns ``(observation, info)``. ``options``: None or a dict of the task
        source's reset options (none for one task; a key it does not read is refused)."""
        super().reset(seed=seed, options=options)
        if self._fixed_initial is None:
            self._nodes[:] = self.episode_random.integers(0, self.task.n_devices, size=self.n_nodes)
        else:
            self._nodes[:] = self._fixed_initial
        if not self._identity:
            self._ops[:] = self.op_placement(self._nodes)
        if self._static_used is not None:
            self._static_used[:] = self._used_static(self._nodes, slice(None))
        self._steps = 0
        self._needs_reset = False
        self._result, self._reward_runtime = self._evaluate_placement(self._ops)
        self._initial_runtime = self._result.runtime
        self._observation.set_placement(self._nodes)
        self._observation.set_current(0)
        return self._obs(), self._info()

    def step(self, action):
        """Move the current node to device ``action``; rewarded by the runtime saved."""
        self._check_started()
        device = self._check_device(action)
        node, sweep = refine_visit(self._steps, self.n_nodes)
        if self._static_used is not None:
            self._static_used[self._nodes[node]] -= self.node_static_bytes[node]
            self._static_used[device] += self.node_static_bytes[node]
        self._nodes[node] = device
        if not self._identity:
            self._ops[self.grouping.members(node)] = device
        self._observation.place(node, device)
        self._steps += 1
        previous = self._reward_runtime
        self._result, self._reward_runtime = self._evaluate_placement(self._ops)
        reward = improvement_reward(previous, self._reward_runtime, self.best_single_runtime)
        terminated = self._steps == self.episode_length
        self._needs_reset = terminated
        self._observation.set_current(self.current_node)
        return self._obs(), float(reward), terminated, False, self._info(node, sweep)

    def episode_state(self) -> dict[str, Any]:
        """The episode in progress, for a checkpoint: the placement, the position in the visit order,
        the last result, the count of evaluations and the env's generator (`restore_episode`)."""
        return super().episode_state() | {
            "nodes": self._nodes.copy(), "steps": self._steps, "needs_reset": self._needs_reset,
            "initial_runtime": self._initial_runtime, "reward_runtime": self._reward_runtime,
            "result": self._result}

    def restore_episode(self, state: dict[str, Any]) -> None:
        """Continue the episode ``state`` (`episode_state` of an env of the same task and settings)
        holds: the next step, its reward, observation and action mask are those the saved env would
        have given. Evaluates nothing."""
        steps = int(state["steps"])
        if not 0 <= steps <= self.episode_length:
            raise ValueError(f"episode state at step {steps}; this env's episodes have {self.episode_length}")
        self._nodes[:] = self.check_node_placement(np.asarray(state["nodes"]))
        if not self._identity:
            self._ops[:] = self.op_placement(self._nodes)
        if self._static_used is not None:
            self._static_used[:] = self._used_static(self._nodes, slice(None))
        self._steps, self._needs_reset = steps, bool(state["needs_reset"])
        self._initial_runtime = float(state["initial_runtime"])
        self._reward_runtime = float(state["reward_runtime"])
        self._result = state["result"]
        super().restore_episode(state)
        self._observation.set_placement(self._nodes)
        self._observation.set_current(self.current_node)

    def action_masks(self) -> np.ndarray:
        """Allowed devices for the current node, bool ``(n_devices,)`` (see Action Space); every
        device once the episode has ended or before the first reset."""
        node = self.current_node
        if node is None or self._needs_reset:
            return self._padded_mask(np.ones(self.task.n_devices, dtype=bool))
        if self._static_used is None:
            used = self._used_static(self._nodes, np.arange(self.n_nodes) != node)
        else:
            used = self._static_used.copy()
            used[self._nodes[node]] -= self.node_static_bytes[node]
        return self._padded_mask(self._fit_mask(node, used))

    def render(self):
        """The current placement as text (``"ansi"``) or as a timeline image (``"rgb_array"``);
        before the first reset, the best single-device placement. None without a render mode."""
        if self.render_mode is None:
            return None
        if self._result is None:
            nodes = np.full(self.n_nodes, self.best_single_device, dtype=np.int64)
            return self._render_placement(nodes, "no episode yet; reference: best single device")
        label = f"step {self._steps} of {self.episode_length}"
        return self._render_placement(self._nodes, label, result=self._result)


make_env = gym_entry_point(DevicePlacementRefineEnv)
