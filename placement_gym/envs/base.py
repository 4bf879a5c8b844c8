"""What the three placement envs share: the task source they draw from at every reset, the evaluator
that scores their placements, and per task the grouping, observation, reference runtimes, OOM penalty
and memory masks. Each env subclasses `PlacementEnvBase` and adds its MDP; rendering is
`placement_gym.envs.render`'s."""

from __future__ import annotations

from collections import OrderedDict
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces
from gymnasium.utils import seeding

from placement_gym.common.untrusted import shown
from placement_gym.cost_model import SimulationResult, lower_bound, simulate, single_device
from placement_gym.envs.config import RENDER_MODES, EnvConfig
from placement_gym.envs.flat import FlatLayout
from placement_gym.envs.observation import NodeObservation
from placement_gym.envs.render import References, text_table, timeline_image
from placement_gym.envs.rewards import penalty_runtime
from placement_gym.envs.sources import task_source_of
from placement_gym.evaluation.evaluator import (
    EvaluatorBackend,
    best_single_runtime,
    evaluator_for,
    evaluator_info,
)
from placement_gym.task.compiled import Task
from placement_gym.task.device_indices import check_device_indices
from placement_gym.task.groups import make_grouping, quotient_edges

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
# Tasks whose set-up (grouping, observation, evaluator, reference runtimes) an env keeps: those drawn last.
CACHED_TASKS = 32
# The seed of the draw that gives an env its first task, which sets its spaces before any reset.
FIRST_DRAW_SEED = 0


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
    nodes are numbered in topological order of their first op. Attributes every env has, of its
    current task: ``task``, ``grouping``, ``n_nodes``, ``node_of_op`` (int64 per forward op),
    ``node_static_bytes`` (parameters, gradients and optimizer state per node), ``best_single_runtime``
    and ``best_single_device``, ``lower_bound`` (the simple lower bound, `pg.lower_bound`),
    ``penalty_runtime`` (the runtime an out-of-memory placement is rewarded with), ``device_features``
    (also in the dict observation), ``action_device_names`` (the names of the action's device
    indices), ``evaluator`` and ``reward_mode`` (its ``name``); and of every task: ``max_ops``,
    ``max_edges`` and ``max_devices`` (the padded sizes of the observation, `max_devices` below),
    ``max_nodes`` (the nodes an action of the single-shot env holds), ``obs_mode``, ``mask_in_obs``,
    for ``obs_mode="flat"`` ``flat_layout`` (a `placement_gym.envs.flat.FlatLayout`: ``unflatten``
    turns vectors back into dicts) and ``flat_slices`` (key -> slice of the vector; both None in the
    other modes), ``task_source`` and ``evaluations`` (the evaluations made for steps and resets).

    What the env places: a task source (`placement_gym.envs.sources`), drawn at every `reset` from the
    env's seeded generator, as Jumanji's generator is. ``graph`` and ``cluster`` with the step give one
    task (`placement_gym.envs.sources.FixedTask`); ``dataset="<name>:<split>"`` and/or ``clusters=``
    draw a graph of the split and/or a cluster of the family or list at every reset
    (`placement_gym.envs.sources.DatasetTasks`; ``reset(options={"graph": id, "cluster": name})`` picks
    either; ``graph_id`` and ``cluster_name`` are the last draw's, None where there is one); and
    ``task_source=`` takes a source of your own. The spaces fit every task the source draws (its
    ``limits``); the set-ups of the `CACHED_TASKS` tasks drawn last are kept. Over a source that draws,
    each episode has a generator of its own (``episode_random``, seeded by a draw after the task's),
    which the refine env's random start draws from; else the episode draws from ``np_random``.

    ``graph`` may also be a compiled `Task`: the env then places that very task, so its
    evaluations add to that task's counter (`Task.evaluations`, what the leaderboard records of an
    agent handed a task); ``cluster`` and the step (``objective``, ``optimizer``, ``precision``, ...) are
    the task's, and a value other than the env's default given for one of them must agree with the task.

    What scores a placement: ``evaluator=`` (`placement_gym.evaluation.evaluator.evaluator_for`), a
    backend's name with ``evaluator_options=`` (the backends of the entry-point group
    ``placement_gym.evaluators``, this package's and other packages' alike), an ``EvaluatorBackend``, or
    an evaluator object, which the env scores its steps and resets with as given (it scores one task:
    over a source that draws, give a name or an ``EvaluatorBackend``, which builds one per task). The
    package's backends:

    - ``"cost_model"`` (default): the analytical cost model.
    - ``"profiled"``: the cost model with measured op times and links (option ``profile``: a profile
      dict or file; default the cached profile of the task's graph on option ``devices`` or on the
      cluster's device names). ``task`` *is* the profiled task, so the reference runtimes, the lower
      bound, the renderings and anything built on ``env.task`` use the measured times.
    - ``"real"``: the torch executor runs every placement (option ``devices``: device name -> torch
      device; may be left out for a ``cpu<N>`` or ``local`` cluster, which maps itself to this
      machine's devices; ``seed``, ``batch``, ``model``, ``lr``). A ``graph`` given as an ONNX file is
      the model the executor runs. ``best_single_device`` is picked by the cost model and its runtime
      ``best_single_runtime`` measured once per task (not counted in ``evaluations``); ``lower_bound``
      stays the cost model's; timelines (``render_mode="rgb_array"``) are the cost model's schedule.

    An evaluator adds the ``info`` keys its backend declares (``info_keys``; the values are its
    ``env_info``, `placement_gym.evaluation.evaluator.evaluator_info`): ``"real"`` adds the executor's
    summary of the last measured run (`placement_gym.real.evaluators.REAL_INFO_KEYS`: ``real_runtime``,
    ``real_spread``, ``real_repeats``, ``real_loss``; zeros where no run was measured); its error
    text, if any, is on ``env.evaluator.last_info["error"]``. ``reward_mode``, ``profile`` and
    ``devices`` (the backend's name and two of its options) still work, with a DeprecationWarning.

    Padded devices. ``max_devices`` (default: the cluster's ``n_devices``, or the most devices of a
    cluster the source draws) pads every per-device axis, so that envs of clusters with different
    device counts share one observation and action space: the observation's ``device_features`` (zero
    rows) and ``placement`` (zero columns), the action space (device indices ``0 .. max_devices - 1``),
    `action_masks()` (padded devices always masked out) and ``info["peak_memory"]`` (0 for padding).
    An action that names a padded device ``d >= n_devices`` places on the real device ``d %
    n_devices``, deterministically, rather than being refused: a library without action masks
    (stable-baselines3's plain PPO, tianshou's and RLlib's default policies) samples every index of
    the padded space, and refusing would end its training at the first such sample; the modulo
    spreads the padded indices over the real devices instead of piling them on one, and the next
    observation shows the device actually used. Masked sampling (sb3-contrib's MaskablePPO) never
    names a padded device. Padded device names read ``padding:<d>`` in ``action_device_names`` and in
    error messages.

    ``mask_in_obs`` (default False) adds the action mask to the observation (see
    `placement_gym.envs.single_shot.DevicePlacementEnv`, Observation Space): key ``"action_mask"``
    in the dict mode, the last entries of the flat vector in the flat mode; the graph mode rejects
    it (a `Graph` has no room for it: read `action_masks()`).

    ``info`` has one key set at `reset` and at every step, every value a numpy number (float64,
    int64) or a numpy array, so that vector envs and libraries that batch infos (torchrl,
    tianshou) stack them: `INFO_KEYS` plus each env's own keys and the evaluator's. The booleans
    (``simulated``, ``feasible``) are 0-d bool arrays, not ``np.bool_``: numpy's bool scalar is no
    ``np.number``, and gymnasium's vector envs batch such values into object arrays. Where nothing was
    simulated (at reset, at a staged stage without a simulation) ``simulated`` is False, ``feasible``
    is False and the other result keys are 0 (``peak_memory`` a 0 per device), as gymnasium's vector
    envs fill an absent info value: read them where ``simulated`` is True. Not NaN: gymnasium's
    ``check_env`` compares infos with ``==`` and tianshou's trainer rejects a buffer holding a NaN.
    The task id is ``env.unwrapped.task.id`` (it is not in ``info``)."""

    metadata = {"render_modes": list(RENDER_MODES), "render_fps": 4}
    # The keys `reset` reads from ``options`` beside the task source's (none); any other is refused
    # (`check_reset_options`).
    RESET_OPTIONS: tuple[str, ...] = ()

    def __init__(self, config: EnvConfig) -> None:
        """Set up from the shared settings (`placement_gym.envs.config.EnvConfig`, checked when made)
        and the first task of the task source."""
        self.config = config
        self.render_mode = config.render_mode
        self.obs_mode = config.obs_mode
        self.oom_runtime = config.oom_runtime
        self.oom_runtime_factor = float(config.oom_runtime_factor)
        self.mask_in_obs = bool(config.mask_in_obs)
        self.task_source = task_source_of(config, type(self).__name__)
        self._scoring = config.scoring()
        chosen = self._scoring[0]
        if self.task_source.draws and not isinstance(chosen, (str, EvaluatorBackend)):
            raise ValueError(
                f"{type(self).__name__} draws its tasks: evaluator= must build an evaluator per task, a "
                f"backend's name or an EvaluatorBackend, not an evaluator object ({type(chosen).__name__}), "
                "which scores one task"
            )
        limits = self.task_source.limits
        given, largest = config.max_devices, limits.max_devices
        if given is not None and largest is not None and not (
                isinstance(given, (int, np.integer)) and not isinstance(given, bool) and given >= largest):
            raise ValueError(f"max_devices must be an integer >= {largest} (the most devices of a cluster "
                             f"this env draws), got {given!r}")
        self._varied_graphs = limits.max_ops is not None
        self._padding = tuple(mine if mine is not None else theirs for mine, theirs in (
            (config.max_ops, limits.max_ops), (config.max_edges, limits.max_edges), (given, largest)))
        self._task_states: OrderedDict[int, dict[str, Any]] = OrderedDict()
        self._drawn: Task | None = None
        self._episode_random: np.random.Generator | None = None
        self.evaluations = 0
        self._bind(self.task_source.sample(np.random.default_rng(FIRST_DRAW_SEED), {}))
        # Every later task's observation is padded as the first one's, so that it fits the spaces.
        self._padding = (self.max_ops, self.max_edges, self.max_devices)
        self.observation_space, self.flat_layout = self._observation_space(self._observation.space)
        # key -> slice of the flat vector (None unless obs_mode="flat"); see `placement_gym.envs.flat`.
        self.flat_slices: dict[str, slice] | None = (
            None if self.flat_layout is None else dict(self.flat_layout.slices)
        )

    # --- the task and its set-up ------------------------------------------------------------------

    def _bind(self, drawn: Task) -> None:
        """Make ``drawn`` the env's task: its set-up (`_task_state`) as kept, or built and kept."""
        if drawn is self._drawn:
            return
        state = self._task_states.pop(id(drawn), None)
        if state is None:
            state = self._task_state(drawn)
        else:
            vars(self).update(state)
        self._task_states[id(drawn)] = state
        while len(self._task_states) > CACHED_TASKS:
            self._task_states.popitem(last=False)

    def _set(self, **attributes: Any) -> dict[str, Any]:
        """Set ``attributes`` on the env and return them (for `_task_state`)."""
        vars(self).update(attributes)
        return attributes

    def _task_state(self, drawn: Task) -> dict[str, Any]:
        """Set up the attributes of task ``drawn`` on the env and return them (name -> value), which
        `_bind` keeps and sets again when the task is drawn again. Each env adds its own (an override
        calls this first, then sets and returns its own with `_set`)."""
        scorer = evaluator_for(drawn, *self._scoring, source=getattr(self.task_source, "origin", None))
        task = scorer.task  # for "profiled", the profiled task
        grouping = make_grouping(task.graph, self.config.groups)
        n_nodes = grouping.n_groups
        # Groups are numbered by first op, so n_groups == n_ops means one group per op, in op order.
        identity = n_nodes == task.n_forward
        max_ops, max_edges, max_devices = self._padding
        if identity:
            observation = NodeObservation(task, obs_mode=self.obs_mode, max_ops=max_ops, max_edges=max_edges,
                                          max_devices=max_devices)
        else:
            edges = quotient_edges(task.graph, grouping)
            observation = NodeObservation(task, grouping.group_of_op, n_nodes, edges, obs_mode=self.obs_mode,
                                          max_ops=max_ops, max_edges=max_edges, max_devices=max_devices)
        padded_devices = observation.max_devices
        # Rewards compare the evaluator's runtimes, so the reference they are normalised by is its too
        # (measured once per task in "real" mode).
        best_single = best_single_runtime(scorer, task)
        return self._set(
            _drawn=drawn, task=task, reward_mode=scorer.name, grouping=grouping, n_nodes=n_nodes,
            _identity=identity, node_of_op=grouping.group_of_op,
            node_static_bytes=np.bincount(grouping.group_of_op, weights=task.static_bytes, minlength=n_nodes),
            _observation=observation, max_ops=observation.max_nodes, max_edges=observation.max_edges,
            max_devices=padded_devices,
            max_nodes=observation.max_nodes if self._varied_graphs else n_nodes,
            _padded=padded_devices > task.n_devices,
            action_device_names=tuple(task.cluster.device_names) + tuple(
                f"padding:{d}" for d in range(task.n_devices, padded_devices)),
            # Bytes of one observation, for code that holds many (the vector env checks its batch by it).
            observation_bytes=observation.nbytes, device_features=observation.device_features,
            best_single_device=single_device(task).best, best_single_runtime=best_single,
            lower_bound=lower_bound(task),
            penalty_runtime=penalty_runtime(best_single, self.oom_runtime, self.oom_runtime_factor),
            _capacity=task.cluster.memory_capacity,
            # Who evaluates the steps' placements: the evaluator built here (``_scorer``); any other
            # object with ``simulate(placement, schedule=False) -> SimulationResult`` (such as a learning
            # agent's budgeted evaluator, or a Ray pool) may replace it.
            evaluator=scorer, _scorer=scorer,
        )

    @property
    def graph_id(self) -> str | None:
        """The id in its dataset of the graph drawn last (the task source's ``graph_id``; None where
        the env has one graph)."""
        return getattr(self.task_source, "graph_id", None)

    @property
    def cluster_name(self) -> str | None:
        """The name of the cluster drawn last (the task source's ``cluster_name``; None where the env has
        one cluster)."""
        return getattr(self.task_source, "cluster_name", None)

    @property
    def episode_random(self) -> np.random.Generator:
        """The generator the episode draws from: its own over a task source that draws (seeded at
        `reset` by a draw after the task's), else ``np_random``."""
        return self.np_random if self._episode_random is None else self._episode_random

    def episode_state(self) -> dict[str, Any]:
        """What every env keeps for a checkpoint: its count of evaluations and its generators (each env
        adds its episode in progress; `restore_episode`)."""
        state = {"evaluations": self.evaluations, "np_random": self.np_random.bit_generator.state}
        if self._episode_random is not None:
            state["episode_random"] = self._episode_random.bit_generator.state
        return state

    def restore_episode(self, state: dict[str, Any]) -> None:
        """Restore what `episode_state` kept (each env restores its episode in progress too)."""
        self.evaluations = int(state["evaluations"])
        self.np_random.bit_generator.state = state["np_random"]
        if "episode_random" in state:
            self._episode_random, _ = seeding.np_random(0)
            self._episode_random.bit_generator.state = state["episode_random"]

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        """Seed the env's generator (`gymnasium.Env.reset`) once ``options`` is checked (a dict or None,
        with no key but `RESET_OPTIONS` and the task source's ``reset_options``), then draw the
        episode's task from the task source."""
        source = self.task_source
        options = check_reset_options(options, self.RESET_OPTIONS + tuple(source.reset_options),
                                      type(self).__name__)
        super().reset(seed=seed, options=options)
        picked = {key: options[key] for key in source.reset_options if key in options}
        self._bind(source.sample(self.np_random, picked))
        if source.draws:
            self._episode_random, _ = seeding.np_random(int(self.np_random.integers(2**32)))

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

    def _check_started(self, why: str = "") -> None:
        """A RuntimeError unless an episode is under way: `reset` was called and the episode has not
        ended (each env keeps ``_needs_reset``); ``why`` (ending in ": ") leads the advice to reset."""
        if self._needs_reset:
            raise RuntimeError(
                f"{type(self).__name__}.step called before reset() or after the episode ended; "
                f"{why}call reset() first"
            )

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
        ``self.evaluations``. An uncounted one goes to the evaluator the env built (so in ``"real"``
        mode every runtime the env reports is measured), except that a schedule (a timeline) is always
        the cost model's."""
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
            result = self._scorer.simulate(placement)
        self.evaluations += counted
        return result, (result.runtime if result.feasible else self.penalty_runtime)

    def _reference_info(self) -> dict[str, Any]:
        return {
            "lower_bound": np.float64(self.lower_bound),
            "best_single_runtime": np.float64(self.best_single_runtime),
        }

    def _result_info(self, result: SimulationResult, reward_runtime: float) -> dict[str, Any]:
        """The result keys of `INFO_KEYS` for a simulated placement, and the evaluator's keys of its last
        evaluation (`placement_gym.evaluation.evaluator.evaluator_info`)."""
        return {
            "simulated": np.array(True),
            "runtime": np.float64(result.runtime),
            "feasible": np.array(bool(result.feasible)),
            "peak_memory": self._padded_peaks(result.peak_memory),
            "speedup": np.float64(self.best_single_runtime / result.runtime),
            "reward_runtime": np.float64(reward_runtime),
        } | evaluator_info(self._scorer, scored=True)

    def _padded_peaks(self, peaks) -> np.ndarray:
        """Peak bytes per real device as float64 ``(max_devices,)``, 0 for the padded devices."""
        padded = np.zeros(self.max_devices)
        padded[: self.task.n_devices] = peaks
        return padded

    def _no_result_info(self) -> dict[str, Any]:
        """The result keys where nothing was simulated (the evaluator's included): the same keys and
        dtypes, zero values."""
        return {
            "simulated": np.array(False),
            "runtime": np.float64(0.0),
            "feasible": np.array(False),
            "peak_memory": np.zeros(self.max_devices),
            "speedup": np.float64(0.0),
            "reward_runtime": np.float64(0.0),
        } | evaluator_info(self._scorer, scored=False)

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
        """Text table or timeline image of ``node_devices`` (`placement_gym.envs.render`), scored here
        without counting; ``placed``: how many nodes (in order) the agent has placed, the others holding
        the completion device."""
        if self.render_mode == "rgb_array":
            result, _ = self._evaluate(node_devices, schedule=True, counted=False)
            return timeline_image(self.task, result, label)
        if result is None:
            result, _ = self._evaluate(node_devices, counted=False)
        references = References(self.best_single_device, self.best_single_runtime, self.lower_bound)
        return text_table(self.task, None if self._identity else self.grouping, node_devices, result, label,
                          references, placed)
