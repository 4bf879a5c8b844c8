"""What the three placement envs share: task, grouping, observation, reference runtimes, OOM penalty,
memory masks and rendering. Each env subclasses `PlacementEnvBase` and adds its MDP."""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from placement_gym.common.untrusted import shown
from placement_gym.cost_model import SimulationResult, lower_bound, simulate, single_device
from placement_gym.envs.config import RENDER_MODES, EnvConfig
from placement_gym.envs.flat import FlatLayout
from placement_gym.envs.observation import NodeObservation
from placement_gym.envs.rewards import penalty_runtime
from placement_gym.evaluation.evaluator import Evaluator, as_evaluator, best_single_runtime, make_evaluator
from placement_gym.task.compiled import OBJECTIVES, Task
from placement_gym.task.device_indices import check_device_indices
from placement_gym.task.groups import make_grouping, quotient_edges
from placement_gym.task.named import get_task

INFO_KEYS: tuple[str, ...] = (
    "lower_bound",  # float64 seconds no placement can beat: the simple bound, `pg.lower_bound`
    "best_single_runtime",  # float64 seconds on the fastest device that holds the whole task
    "simulated",  # 0-d bool array: whether the result keys below describe a simulated placement
    "runtime",  # float64 simulated seconds (also for an out-of-memory placement); 0 if not simulated
    "feasible",  # 0-d bool array: the placement fits in memory; False if not simulated
    "peak_memory",  # float64 (max_devices,) peak bytes per device (0 for padding); 0 if not simulated
    "speedup",  # float64 best_single_runtime / runtime; 0 if not simulated
    "reward_runtime",  # float64 runtime the reward uses (the penalty one when out of memory); 0 if not
)
REAL_INFO_KEYS: tuple[str, ...] = ("real_runtime", "real_spread", "real_repeats", "real_loss")
def check_reset_options(options: Any, allowed: tuple[str, ...] = (),
                        env: str = "the env") -> dict[str, Any]:
    """``options`` of a `reset` as a dict ({} for None), or a one-line ValueError saying what is allowed:
    options must be a dict or None, with no key but those in ``allowed`` (a key no env reads would
    otherwise be ignored without a word, a misspelt ``"grpah"`` among them). ``env`` names the env."""
    if options is None:
        return {}
    if not isinstance(options, dict):
        raise ValueError(f"options must be a dict or None, got {shown(options)} ({type(options).__name__})")
    unknown = next((key for key in options if key not in allowed), None)
    if unknown is not None:
        takes = f"allowed: {', '.join(allowed)}" if allowed else "it takes no options (None or {})"
        raise ValueError(f"unknown reset option {shown(unknown)} of {env}; {takes}")
    return options


class PlacementEnvBase(gym.Env):
    """Shared set-up of the placement envs (not registered itself).

    A *node* is a forward op, or with ``groups=`` a group of forward ops (`placement_gym.task.groups`);
    nodes are numbered in topological order of their first op. Attributes every env has:
    ``task``, ``grouping``, ``n_nodes``, ``node_of_op`` (int64 per forward op), ``node_static_bytes``
    (parameters, gradients and optimizer state per node), ``best_single_runtime`` and
    ``best_single_device``, ``lower_bound`` (the simple lower bound, `pg.lower_bound`),
    ``penalty_runtime`` (the runtime an out-of-memory placement is rewarded with),
    ``device_features`` (also in the dict observation), ``max_devices`` (the padded device count,
    `max_devices` below), ``action_device_names`` (the names of the action's device indices),
    ``reward_mode``,
    ``obs_mode``, ``mask_in_obs``, and for ``obs_mode="flat"`` ``flat_layout`` (a
    `placement_gym.envs.flat.FlatLayout`: ``unflatten`` turns vectors back into dicts) and
    ``flat_slices`` (key -> slice of the vector; both None in the other modes).

    ``graph`` may also be a compiled `Task`: the env then places that very task, so its
    evaluations add to that task's counter (`Task.evaluations`, what the leaderboard records of an
    agent handed a task); ``cluster``, ``objective``, ``optimizer`` and ``microbatches`` are the task's,
    and a value other than the env's default given for one of them must agree with the task.

    ``evaluator`` says what scores a placement: a backend's name
    (`placement_gym.evaluation.evaluator.make_evaluator`: the built-in ones below, or one a package
    registered), or an evaluator object (the `placement_gym.evaluation.evaluator.Evaluator` protocol, or
    anything with ``simulate``), which the env scores its steps and resets with as given; None (default)
    takes the name of ``reward_mode``, which ``evaluator`` replaces (give one of the two). ``reward_mode``
    says what a runtime is:

    - ``"cost_model"`` (default): the analytical cost model.
    - ``"profiled"``: the cost model with measured op times and links (``profile=``: a profile dict
      or file; default the cached profile of the task's graph on ``devices=`` or on the cluster's
      device names). ``task`` *is* the profiled task, so the reference runtimes, the lower bound,
      the renderings and anything built on ``env.task`` use the measured times.
    - ``"real"``: the torch executor runs every placement on ``devices=`` (device name -> torch
      device; may be left out for a ``cpu<N>`` or ``local`` cluster, which maps itself to this
      machine's devices). A ``graph`` given as an ONNX file is the model the executor runs.
      ``best_single_device`` is picked by the cost model and its runtime ``best_single_runtime``
      measured once at construction (not counted in ``evaluations``);
      ``lower_bound`` stays the cost model's; timelines (``render_mode="rgb_array"``) are the cost
      model's schedule. Every ``info`` adds the executor's summary of the last measured run as
      numbers (`REAL_INFO_KEYS`; zeros, 0 repeats, where no run was measured): ``real_runtime``
      (the median timed step, seconds; equals ``runtime``), ``real_spread`` ((max - min) / median of
      the timed steps), ``real_repeats`` (int64, the number of timed steps) and ``real_loss`` (the
      last train step's loss; 0 for inference). The run's error text, if any, is on
      ``env.evaluator.last_info["error"]``.

    Padded devices. ``max_devices`` (default: the cluster's ``n_devices``) pads every per-device
    axis, so that envs of clusters with different device counts share one observation and action
    space (`placement_gym.envs.dataset`: envs that draw a cluster at each reset): the observation's
    ``device_features`` (zero rows) and ``placement`` (zero columns), the action space (device
    indices ``0 .. max_devices - 1``), `action_masks()` (padded devices always masked out) and
    ``info["peak_memory"]`` (0 for padding). An action that names a padded device ``d >=
    n_devices`` places on the real device ``d % n_devices``, deterministically, rather than being
    refused: a library without action masks (stable-baselines3's plain PPO, tianshou's and RLlib's
    default policies) samples every index of the padded space, and refusing would end its training
    at the first such sample; the modulo spreads the padded indices over the real devices instead
    of piling them on one, and the next observation shows the device actually used. Masked
    sampling (sb3-contrib's MaskablePPO) never names a padded device. Padded device names read
    ``padding:<d>`` in ``action_device_names`` and in error messages.

    ``mask_in_obs`` (default False) adds the action mask to the observation (see
    `placement_gym.envs.single_shot.DevicePlacementEnv`, Observation Space): key ``"action_mask"``
    in the dict mode, the last entries of the flat vector in the flat mode; the graph mode rejects
    it (a `Graph` has no room for it: read `action_masks()`).

    ``info`` has one key set at `reset` and at every step, every value a numpy number (float64,
    int64) or a numpy array, so that vector envs and libraries that batch infos (torchrl,
    tianshou) stack them: `INFO_KEYS` plus each env's own keys. The booleans (``simulated``,
    ``feasible``) are 0-d bool arrays, not ``np.bool_``: numpy's bool scalar is no ``np.number``,
    and gymnasium's vector envs batch such values into object arrays. Where nothing was simulated (at
    reset, at a staged stage without a simulation) ``simulated`` is False, ``feasible`` is False and
    the other result keys are 0 (``peak_memory`` a 0 per device), as gymnasium's vector envs fill
    an absent info value: read them where ``simulated`` is True. Not NaN: gymnasium's ``check_env``
    compares infos with ``==`` and tianshou's trainer rejects a buffer holding a NaN. The task id is
    ``env.unwrapped.task.id`` (it is not in ``info``)."""

    metadata = {"render_modes": list(RENDER_MODES), "render_fps": 4}
    # The keys `reset` reads from ``options`` (none); any other is refused (`check_reset_options`).
    RESET_OPTIONS: tuple[str, ...] = ()

    def __init__(self, config: EnvConfig) -> None:
        """Set up from the shared settings (`placement_gym.envs.config.EnvConfig`, checked when made)."""
        self.config = config
        render_mode, obs_mode = config.render_mode, config.obs_mode
        oom_runtime, oom_runtime_factor = config.oom_runtime, config.oom_runtime_factor
        max_ops, max_edges, mask_in_obs = config.max_ops, config.max_edges, config.mask_in_obs
        max_devices = config.max_devices
        groups = config.groups
        task = self._task_of(config)
        mode_evaluator = self._evaluator_of(task, config)
        task = mode_evaluator.task  # for "profiled", the profiled task
        self.reward_mode = mode_evaluator.name
        self._mode_evaluator = mode_evaluator
        self.task = task
        self.render_mode = render_mode
        self.obs_mode = obs_mode
        self.oom_runtime = oom_runtime
        self.oom_runtime_factor = float(oom_runtime_factor)
        self.grouping = make_grouping(task.graph, groups)
        self.n_nodes = self.grouping.n_groups
        # Groups are numbered by first op, so n_groups == n_ops means one group per op, in op order.
        self._identity = self.n_nodes == task.n_forward
        self.node_of_op = self.grouping.group_of_op
        self.node_static_bytes = np.bincount(
            self.node_of_op, weights=task.static_bytes, minlength=self.n_nodes
        )
        if self._identity:
            self._observation = NodeObservation(task, obs_mode=obs_mode, max_ops=max_ops, max_edges=max_edges,
                                                max_devices=max_devices)
        else:
            self._observation = NodeObservation(
                task,
                self.node_of_op,
                self.n_nodes,
                quotient_edges(task.graph, self.grouping),
                obs_mode=obs_mode,
                max_ops=max_ops,
                max_edges=max_edges,
                max_devices=max_devices,
            )
        self.max_devices = self._observation.max_devices
        self._padded = self.max_devices > task.n_devices
        self.action_device_names: tuple[str, ...] = tuple(task.cluster.device_names) + tuple(
            f"padding:{d}" for d in range(task.n_devices, self.max_devices))
        self.mask_in_obs = bool(mask_in_obs)
        # Bytes of one observation, for code that holds many (the vector env checks its batch by it).
        self.observation_bytes = self._observation.nbytes
        self.observation_space, self.flat_layout = self._observation_space(self._observation.space)
        # key -> slice of the flat vector (None unless obs_mode="flat"); see `placement_gym.envs.flat`.
        self.flat_slices: dict[str, slice] | None = (
            None if self.flat_layout is None else dict(self.flat_layout.slices)
        )
        self.device_features = self._observation.device_features
        self.best_single_device = single_device(task).best
        # Rewards compare the evaluator's runtimes, so the reference they are normalised by is its too
        # (measured once in "real" mode).
        self.best_single_runtime = best_single_runtime(mode_evaluator, task)
        self.lower_bound = lower_bound(task)
        self.penalty_runtime = penalty_runtime(self.best_single_runtime, oom_runtime, self.oom_runtime_factor)
        self._capacity = task.cluster.memory_capacity
        # Who evaluates the steps' placements: the `Evaluator` of ``reward_mode``; any other object with
        # ``simulate(placement, schedule=False) -> SimulationResult`` (such as a learning agent's
        # budgeted evaluator, or a Ray pool) may replace it. ``evaluations`` counts the evaluations
        # made for steps and resets (not for rendering).
        self.evaluator = mode_evaluator
        self.evaluations = 0

    @staticmethod
    def _evaluator_of(task: Task, config: EnvConfig) -> Evaluator:
        """The `Evaluator` the env scores with: ``config.evaluator`` (a backend name or an object), else
        the backend named by ``config.reward_mode``; ``profile`` and ``devices`` go to a named backend."""
        name = config.reward_mode if config.evaluator is None else config.evaluator
        if isinstance(name, str):
            # The graph argument itself: for an ONNX file, the model the real executor runs.
            return make_evaluator(task, name, profile=config.profile, devices=config.devices,
                                  source=config.graph)
        if config.profile is not None or config.devices is not None:
            raise ValueError("profile= and devices= are options of a named evaluator; an evaluator "
                             "object comes built")
        return as_evaluator(task, config.evaluator)

    @staticmethod
    def _task_of(config: EnvConfig) -> Task:
        """``config.graph`` when it is a `Task` (after checking the other settings against it), else the
        task `get_task` builds."""
        graph, cluster = config.graph, config.cluster
        objective, optimizer = config.objective, config.optimizer
        precision, microbatches, recompute = config.precision, config.microbatches, config.recompute
        if not isinstance(graph, Task):
            return get_task(graph, cluster, objective, optimizer, precision, microbatches, recompute)
        agrees = {
            "cluster": cluster is graph.cluster or cluster == graph.cluster.name,
            "objective": objective in (graph.objective, OBJECTIVES[graph.objective]),
            "optimizer": optimizer == graph.optimizer,
            "precision": precision == graph.precision,
            "microbatches": microbatches == graph.microbatches,
            "recompute": recompute == graph.recompute,
        }
        for name, value in (("cluster", cluster), ("objective", objective), ("optimizer", optimizer),
                            ("precision", precision), ("microbatches", microbatches),
                            ("recompute", recompute)):
            if not agrees[name] and not config.is_default(name):
                raise ValueError(
                    f"graph is the compiled task {graph.id}; {name}={value!r} is not the task's "
                    f"(leave {name} out or give the task's)"
                )
        return graph

    def episode_state(self) -> dict[str, Any]:
        """What every env keeps for a checkpoint: its count of evaluations and its generator (each env
        adds its episode in progress; `restore_episode`)."""
        return {"evaluations": self.evaluations, "np_random": self.np_random.bit_generator.state}

    def restore_episode(self, state: dict[str, Any]) -> None:
        """Restore what `episode_state` kept (each env restores its episode in progress too)."""
        self.evaluations = int(state["evaluations"])
        self.np_random.bit_generator.state = state["np_random"]

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        """Seed the env's generator (`gymnasium.Env.reset`) once ``options`` is checked: a dict or
        None, with no key but `RESET_OPTIONS` (none: the envs read no option)."""
        check_reset_options(options, self.RESET_OPTIONS, type(self).__name__)
        return super().reset(seed=seed, options=options)

    # --- observations -------------------------------------------------------------------------------

    def _action_mask_shape(self) -> tuple[int, ...]:
        """The shape of `action_masks()` (one row of devices; the single-shot env has one per node)."""
        return (self.max_devices,)

    def _padded_mask(self, mask: np.ndarray) -> np.ndarray:
        """``mask`` (last axis: the real devices) with the padded devices appended, masked out."""
        if not self._padded:
            return mask
        padding = np.zeros((*mask.shape[:-1], self.max_devices - self.task.n_devices), dtype=bool)
        return np.concatenate([mask, padding], axis=-1)

    def _observation_space(self, node_space: gym.Space) -> tuple[gym.Space, FlatLayout | None]:
        """The env's observation space from the graph observation's, and the flat layout (flat mode)."""
        if self.obs_mode == "graph":
            return node_space, None
        if self.mask_in_obs:
            # Bool, as torchrl's ActionMask transform requires (it refuses other dtypes); RLlib's
            # action-masking module takes log(mask), which torch computes for bool tensors too.
            mask = spaces.Box(0, 1, shape=self._action_mask_shape(), dtype=np.bool_)
            node_space = spaces.Dict({**node_space.spaces, "action_mask": mask})
        if self.obs_mode == "dict":
            return node_space, None
        layout = FlatLayout(node_space)
        return layout.space, layout

    def _obs(self):
        """The observation of the current state in ``obs_mode`` (a fresh copy every call)."""
        if self.obs_mode == "flat":
            # The action mask is the layout's last key (`placement_gym.envs.flat.FLAT_KEYS`).
            return self._observation.flat_observation(self.action_masks() if self.mask_in_obs else None)
        obs = self._observation.observation()
        if self.obs_mode == "graph":
            return obs
        if self.mask_in_obs:
            obs["action_mask"] = np.array(self.action_masks(), dtype=np.bool_)
        return obs

    # --- placements and evaluation ----------------------------------------------------------------

    def op_placement(self, node_devices: np.ndarray) -> np.ndarray:
        """The per-forward-op placement (int64) of one device per node (or of a batch of such rows)."""
        return node_devices if self._identity else node_devices[..., self.node_of_op]

    def check_node_placement(self, action, batch: bool = False) -> np.ndarray:
        """``action`` (one device per node; with ``batch``, rows of them) as an int64 array of real
        devices, or a clear ValueError naming the op (or group) and the device. A padded device ``d``
        becomes ``d % n_devices`` (see Padded devices). Public for code that scores actions outside
        `step` (the vector env)."""
        if self._identity and not self._padded:
            return self.task.check_placement(action, batch=batch)  # its messages name the op
        if self._identity:
            names = self.task.graph.op_names
            subject, unit = f"action for task {self.task.id}", "forward op"

            def locate(i: int) -> str:
                return f"op {i} ({names[i]!r})"
        else:
            subject = f"action for task {self.task.id} with {self.n_nodes} groups ({self.grouping.name})"
            unit = "group"

            def locate(g: int) -> str:
                return f"group {g} (first op {self.node_name(g)!r})"
        array = check_device_indices(action, self.action_device_names, self.n_nodes, subject, unit, locate,
                                     batch)
        return array % self.task.n_devices if self._padded else array

    _check_node_placement = check_node_placement  # the name the envs' own code uses

    def _check_device(self, action) -> int:
        """A `Discrete` action as an int (real) device index, or a clear ValueError. What passes for a
        device index is what `check_device_indices` passes in a full placement (integers, and floats
        of integral value), so that the three envs take the same actions; a padded device ``d``
        becomes ``d % n_devices`` (see Padded devices)."""
        names = self.action_device_names
        try:
            single = isinstance(action, np.ndarray) and action.size == 1
            one = action.reshape(1) if single else np.asarray([action])
            device = int(check_device_indices(one, names, 1, "action", "step", lambda _: "this step")[0])
        except ValueError:  # a ragged list, a wrong shape or dtype, an index out of range
            raise ValueError(
                f"action must be one device index in 0..{len(names) - 1} ({', '.join(names)}), got {action!r}"
            ) from None
        return device % self.task.n_devices

    def node_name(self, node: int) -> str:
        """The name of a node: its op's, or for a group its first op's."""
        return self.task.graph.op_names[int(self.grouping.first_op[node])]

    def _evaluate(
        self, node_devices: np.ndarray, schedule: bool = False, counted: bool = True
    ) -> tuple[SimulationResult, float]:
        """The result for a full node placement, and the runtime the reward uses (the penalty
        runtime for an out-of-memory placement). A ``counted`` evaluation (one an agent pays for:
        not rendering) goes through ``self.evaluator`` and adds to
        ``self.evaluations``. An uncounted one goes to the evaluator of ``reward_mode`` (so in
        ``"real"`` mode every runtime the env reports is measured), except that a schedule (a
        timeline) is always the cost model's."""
        return self._evaluate_placement(self.op_placement(node_devices), schedule, counted)

    def _evaluate_placement(
        self, placement: np.ndarray, schedule: bool = False, counted: bool = True
    ) -> tuple[SimulationResult, float]:
        """`_evaluate` of a per-forward-op placement (for an env that keeps one up to date itself)."""
        if counted:
            result = self.evaluator.simulate(placement, schedule=schedule)
        elif schedule:
            result = simulate(self.task, placement, schedule=True)
        else:
            result = self._mode_evaluator.simulate(placement)
        self.evaluations += counted
        return result, (result.runtime if result.feasible else self.penalty_runtime)

    def _reference_info(self) -> dict[str, Any]:
        return {
            "lower_bound": np.float64(self.lower_bound),
            "best_single_runtime": np.float64(self.best_single_runtime),
        }

    def _result_info(self, result: SimulationResult, reward_runtime: float) -> dict[str, Any]:
        """The result keys of `INFO_KEYS` for a simulated placement (plus `REAL_INFO_KEYS` in
        ``"real"`` mode)."""
        return {
            "simulated": np.array(True),
            "runtime": np.float64(result.runtime),
            "feasible": np.array(bool(result.feasible)),
            "peak_memory": self._padded_peaks(result.peak_memory),
            "speedup": np.float64(self.best_single_runtime / result.runtime),
            "reward_runtime": np.float64(reward_runtime),
        } | self._real_info(measured=True)

    def _padded_peaks(self, peaks) -> np.ndarray:
        """Peak bytes per real device as float64 ``(max_devices,)``, 0 for the padded devices."""
        padded = np.zeros(self.max_devices)
        padded[: self.task.n_devices] = peaks
        return padded

    def _no_result_info(self) -> dict[str, Any]:
        """The result keys where nothing was simulated: the same keys and dtypes, zero values."""
        return {
            "simulated": np.array(False),
            "runtime": np.float64(0.0),
            "feasible": np.array(False),
            "peak_memory": np.zeros(self.max_devices),
            "speedup": np.float64(0.0),
            "reward_runtime": np.float64(0.0),
        } | self._real_info(measured=False)

    def _real_info(self, measured: bool) -> dict[str, Any]:
        """`REAL_INFO_KEYS` in ``"real"`` mode (none otherwise): the summary of the last measured run
        when ``measured`` and the evaluator kept one, else zeros (0 repeats)."""
        if self.reward_mode != "real":
            return {}
        summary = getattr(self.evaluator, "last_info", None) if measured else None
        summary = summary or {}
        loss = summary.get("loss")
        return {
            "real_runtime": np.float64(summary.get("runtime", 0.0)),
            "real_spread": np.float64(summary.get("spread", 0.0)),
            "real_repeats": np.int64(len(summary.get("runtimes", ()))),
            "real_loss": np.float64(0.0 if loss is None else loss),
        }

    # --- masks ------------------------------------------------------------------------------------

    def _static_masks(self) -> np.ndarray:
        """``(n_nodes, n_devices)``: devices whose memory holds a node's static bytes alone; a node
        that fits nowhere keeps every device (every choice is as bad)."""
        fits = self.node_static_bytes[:, None] <= self._capacity[None, :]
        fits[~fits.any(axis=1)] = True
        return fits

    def _used_static(self, node_devices: np.ndarray, nodes: np.ndarray | slice) -> np.ndarray:
        """Static bytes per device of the nodes ``nodes`` (indices or a slice) of ``node_devices``."""
        return np.bincount(
            node_devices[nodes], weights=self.node_static_bytes[nodes], minlength=self.task.n_devices
        )

    def _fit_mask(self, node: int, used: np.ndarray) -> np.ndarray:
        """``(n_devices,)``: devices where ``used`` static bytes plus ``node``'s fit the capacity;
        every device if none does (the mask never masks every device)."""
        fits = used + self.node_static_bytes[node] <= self._capacity
        if not fits.any():
            fits[:] = True
        return fits

    # --- rendering --------------------------------------------------------------------------------

    def _render_placement(
        self,
        node_devices: np.ndarray,
        label: str,
        placed: int | None = None,
        result: SimulationResult | None = None,
    ):
        """Text table or timeline image of ``node_devices``; ``placed``: how many nodes (in order)
        the agent has placed, the others holding the completion device."""
        if self.render_mode == "rgb_array":
            from placement_gym.cost_model.timeline import draw_timeline

            result, _ = self._evaluate(node_devices, schedule=True, counted=False)
            return draw_timeline(self.task, result.schedule, title=f"{self.task.id} ({label})")
        if result is None:
            result, _ = self._evaluate(node_devices, counted=False)
        return self._text_table(node_devices, result, label, placed)

    def _text_table(
        self, node_devices: np.ndarray, result: SimulationResult, label: str, placed: int | None
    ) -> str:
        task, cluster = self.task, self.task.cluster
        placement = self.op_placement(node_devices)
        devices = task.expand(placement)
        busy = np.bincount(
            devices, weights=task.duration[np.arange(task.n_ops), devices], minlength=task.n_devices
        )
        ops = np.bincount(placement, minlength=task.n_devices)
        status = "feasible" if result.feasible else "OUT OF MEMORY"
        node_word = "ops" if self._identity else f"groups ({self.grouping.name})"
        lines = [f"{task.id} ({label})"]
        if placed is not None and placed < self.n_nodes:
            lines.append(
                f"{placed} of {self.n_nodes} {node_word} placed; the others counted on "
                f"{cluster.device_names[self.best_single_device]}"
            )
        lines += [
            f"runtime {result.runtime * 1e3:.3f} ms, {status}, speedup "
            f"{self.best_single_runtime / result.runtime:.3f}x over the best single device "
            f"({cluster.device_names[self.best_single_device]}, {self.best_single_runtime * 1e3:.3f} ms); "
            f"simple lower bound {self.lower_bound * 1e3:.3f} ms",
        ]
        header = f"{'device':<12}{'kind':<6}"
        if not self._identity:
            header += f"{'groups':>8}"
        lines.append(header + f"{'ops':>7}{'busy ms':>12}{'peak GB':>10}{'capacity GB':>13}")
        groups = np.bincount(node_devices, minlength=task.n_devices)
        for d in range(task.n_devices):
            over = " OOM" if result.peak_memory[d] > cluster.memory_capacity[d] else ""
            row = f"{cluster.device_names[d]:<12}{cluster.device_kinds[d]:<6}"
            if not self._identity:
                row += f"{groups[d]:>8}"
            lines.append(
                row + f"{ops[d]:>7}{busy[d] * 1e3:>12.3f}"
                f"{result.peak_memory[d] / 1e9:>10.3f}{cluster.memory_capacity[d] / 1e9:>13.3f}{over}"
            )
        return "\n".join(lines) + "\n"
