"""stable-baselines3 agents on the placement envs, trained on an evaluation budget.

* ``sb3-ppo``: SB3's PPO with `baselines.policies.FactorizedPlacementPolicy` on `DevicePlacement-v0`
  (single shot: an episode is one step that places every op or group; reward ``log_speedup``).
* ``sb3-maskable-ppo``: sb3-contrib's MaskablePPO with ``MultiInputPolicy`` on
  `DevicePlacementRefine-v0` (Placeto's MDP: start from a random placement, move one node per step,
  rewarded by the runtime saved; ``action_masks()`` forbids memory-overflowing moves). Registered
  only when sb3-contrib is installed.

Budget accounting. The env evaluates through the `Budget` handed to `iteration`
(``env.evaluator``), so every evaluation is counted: for ``sb3-ppo`` every step is one evaluation and
a reset none; for ``sb3-maskable-ppo`` every step is one evaluation (the new placement) and so is
every reset (the episode's random starting placement, whose runtime the first step's reward needs).
An episode of ``n`` nodes therefore costs ``n + 1`` evaluations, and a step that ends an episode
costs two (SB3's vectorised env resets at once).

One iteration is one rollout of ``n_steps`` steps followed by PPO's update
(``learn(n_steps, reset_num_timesteps=False)``), taken only when the remaining budget pays for the
whole rollout (for refine: its steps, the resets of the episodes it ends, and the first reset when no
episode is open), so SB3 never meets `BudgetExhausted`. Otherwise the steps the budget still pays for
are taken outside SB3's ``learn``, each action sampled from the policy with SB3's public ``predict``
as a rollout samples it, and are not trained on (there is no complete rollout left to train on). When
exactly one evaluation is left and the next refine step would end its episode, that step is taken
without the reset that follows, so the budget is spent exactly: ``evaluations == budget``. SB3 is
driven through its public API only (``learn``, ``predict``, ``num_timesteps``, ``logger``).

Checkpoints (`state_dict`): the policy's and its Adam optimiser's state dicts (tensors, written as
they are: sb3-maskable-ppo's policy on v3's 103k-op task has a flattened observation of 2,858,570
values, so some 366 million weights, 1.5 GB, and twice that in Adam's moments), SB3's count of
timesteps, the env's state (`episode_state` of `DevicePlacementEnv` and `DevicePlacementRefineEnv`:
the episode in progress, its last result, the env's generator) and the observation SB3 acts on next,
the agent's numpy generator and the numpy global-generator state SB3 shuffles minibatches with (the
agent keeps its own copy and swaps it in around each update, so other code using ``np.random``
neither disturbs it nor is disturbed). A model built anew starts its first rollout with a reset; on
a resumed run that reset returns the restored episode's observation and leaves the env as it is
(`_LastObservation`), so the rollout continues the episode. (SB3 also marks that first step as an
episode start, which no computation of PPO reads: a rollout's returns read the start flags of its
later steps.) `train` writes checkpoints between rollouts, when SB3's rollout buffer is spent, so a
run resumed from one repeats the run never stopped, bit for bit, for both agents, mid-episode
included (tests/baselines/test_learned_sb3.py). The steps of a rollout cut short by the budget are evaluated
(and count towards the best placement) but not trained on.
"""

from __future__ import annotations

from typing import Any, ClassVar

import gymnasium as gym
import numpy as np
from stable_baselines3 import PPO
from stable_baselines3.common.base_class import BaseAlgorithm
from stable_baselines3.common.logger import Logger
from stable_baselines3.common.vec_env import DummyVecEnv

from baselines.learning.agent import LearnedAgent
from baselines.learning.options import check_number
from baselines.learning.trainer import register_learned
from baselines.policies import FactorizedPlacementPolicy
from placement_gym.envs.base import PlacementEnvBase
from placement_gym.envs.refine import DevicePlacementRefineEnv
from placement_gym.envs.single_shot import DevicePlacementEnv
from placement_gym.evaluation.budget import Budget
from placement_gym.task.compiled import Task
from placement_gym.task.groups import make_grouping

try:  # sb3-contrib is optional: without it `sb3-maskable-ppo` is not registered
    from sb3_contrib import MaskablePPO
except ImportError:  # pragma: no cover - depends on the installed extras
    MaskablePPO = None

# Seeds handed to SB3 and numpy's legacy global generator must fit 32 bits.
SEED_MODULUS = 2**32


class _LastObservation(gym.Wrapper):
    """Keeps the observation its env last returned (from a reset or a step, SB3's automatic resets
    included), for the steps the agent takes outside SB3's rollouts; and continues a restored episode
    (`resume`)."""

    def __init__(self, env: gym.Env) -> None:
        super().__init__(env)
        self.observation: Any = None
        self._resumed: Any = None

    def resume(self, observation: Any) -> None:
        """The env was restored to an episode in progress whose observation is ``observation``: the
        next reset, unless a step comes first, returns it and leaves the env as it is. A model built
        anew starts its first rollout with a reset (it holds no observation yet), so that rollout
        continues the episode."""
        self._resumed = observation

    def reset(self, **kwargs: Any):
        if self._resumed is not None:
            self.observation, self._resumed = self._resumed, None
            return self.observation, {}
        self.observation, info = self.env.reset(**kwargs)
        return self.observation, info

    def step(self, action: Any):
        self._resumed = None
        result = self.env.step(action)
        self.observation = result[0]
        return result


def _batched(observation: Any) -> Any:
    """One env's observation as a batch of one (what a vectorised env hands the policy)."""
    if isinstance(observation, dict):
        return {key: np.asarray(value)[None] for key, value in observation.items()}
    return np.asarray(observation)[None]


class _SB3Agent(LearnedAgent):
    """What the SB3 agents share: a lazily built one-env `DummyVecEnv` and model, the budget-aware
    iteration, checkpoints (see the module docstring). Subclasses build the env and the model."""

    reset_evaluates: ClassVar[bool] = False

    def __init__(
        self,
        task: Task,
        seed: int = 0,
        learning_rate: float = 1e-3,
        n_steps: int = 128,
        batch_size: int = 64,
        n_epochs: int = 10,
        entropy_coef: float = 0.0,
        hidden: int = 64,
        groups: Any = None,
        **config: Any,
    ) -> None:
        super().__init__(task, seed, **config)
        check_number("learning_rate", learning_rate, 0.0, open_low=True)
        # SB3 needs at least two samples to form a minibatch advantage normalisation.
        check_number("n_steps", n_steps, 2, integer=True)
        check_number("batch_size", batch_size, 2, integer=True)
        if batch_size > n_steps:
            raise ValueError(f"batch_size ({batch_size}) must be at most n_steps ({n_steps})")
        check_number("n_epochs", n_epochs, 1, integer=True)
        check_number("entropy_coef", entropy_coef, 0.0)
        check_number("hidden", hidden, 1, integer=True)
        make_grouping(task.graph, groups)  # a clear error for a bad grouping now, not at the first iteration
        self.learning_rate = float(learning_rate)
        self.n_steps, self.batch_size, self.n_epochs = int(n_steps), int(batch_size), int(n_epochs)
        self.entropy_coef, self.hidden, self.groups = float(entropy_coef), int(hidden), groups
        self.model: BaseAlgorithm | None = None
        self.env: PlacementEnvBase | None = None
        self.watched: _LastObservation | None = None
        self.vec_env: DummyVecEnv | None = None
        self.budget: Budget | None = None
        # Whether the env is inside an episode (else SB3's `learn`, or the agent, resets it first).
        self.episode_open = False
        # numpy's legacy global generator state SB3 shuffles minibatches with (see `_own_numpy_rng`).
        self._numpy_state = np.random.RandomState(seed % SEED_MODULUS).get_state()

    # --- what subclasses provide --------------------------------------------------------------

    def _make_env(self) -> PlacementEnvBase:
        raise NotImplementedError

    def _make_model(self, vec_env: DummyVecEnv) -> BaseAlgorithm:
        raise NotImplementedError

    def _episode_ends_within(self, steps: int) -> int:
        """How many episodes the env's next ``steps`` steps end (when resets evaluate, each costs one
        more evaluation)."""
        return 0

    def _sample(self, observation: Any) -> np.ndarray:
        """An action for a batch of one observation, sampled as SB3's rollouts sample it."""
        return self.model.predict(observation, deterministic=False)[0]

    # --- the training loop --------------------------------------------------------------------

    def _env_kwargs(self) -> dict[str, Any]:
        task = self.task
        # The whole step (precision, micro-batches, recomputation with the objective and optimizer): the
        # env's task is the agent's task, so its rewards are the runtimes the agent is scored on.
        return {"graph": task.source_graph, "cluster": task.source_cluster, "step": task.step,
                "groups": self.groups}

    def _ensure_model(self) -> BaseAlgorithm:
        if self.model is None:
            self._make_vec_env()
            # The env's first reset draws from this seed (refine: the random starting placement).
            self.vec_env.seed(self.seed % SEED_MODULUS)
            # No seed= for SB3: it would reseed torch's, numpy's and Python's global generators; the
            # policy's initial weights come from torch's generator, which `train` seeds.
            self._use_model(self._make_model(self.vec_env))
            self.episode_open = False
        return self.model

    def _make_vec_env(self) -> None:
        self.env = self._make_env()
        self.watched = _LastObservation(self.env)
        self.vec_env = DummyVecEnv([lambda: self.watched])

    def _use_model(self, model: BaseAlgorithm) -> None:
        # A logger with no output: without one, every `learn` call (one per rollout here) makes SB3
        # create a new empty log folder in the temporary directory.
        model.set_logger(Logger(folder=None, output_formats=[]))
        self.model = model

    def steps_cost(self, steps: int) -> int:
        """Evaluations the env's next ``steps`` steps cost: one each, plus (when resets evaluate) the
        resets of the episodes they end (SB3's vectorised env resets at once) and the first reset
        when no episode is open."""
        if not self.reset_evaluates:
            return steps
        return steps + self._episode_ends_within(steps) + int(not self.episode_open)

    def affordable(self) -> bool:
        """Whether the budget can pay for the env's next step."""
        return self.budget is not None and self.budget.remaining >= self.steps_cost(1)

    def _learn(self) -> None:
        """``model.learn`` of one rollout, with this agent's numpy global-generator state swapped in
        and back out. SB3 resets the env first when it holds no observation (a new model)."""
        outside = np.random.get_state()
        np.random.set_state(self._numpy_state)
        try:
            self.model.learn(total_timesteps=self.n_steps, reset_num_timesteps=False, log_interval=None)
        finally:
            self._numpy_state = np.random.get_state()
            np.random.set_state(outside)
        self.episode_open = True

    def _steps_outside_learn(self) -> None:
        """The steps the budget pays for, short of a rollout, through the vectorised env (which resets
        at an episode's end), each action sampled from the policy; not trained on."""
        while self.affordable():
            self.vec_env.step(self._sample(_batched(self.watched.observation)))
            self.model.num_timesteps += 1

    def _last_step_without_reset(self) -> None:
        """Spend the one evaluation left on a step that ends the episode, outside the vectorised env
        (which would reset and evaluate once more); the next iteration, if any, starts a new
        episode. Not trained on: there is no update left to make with the budget spent."""
        action = self._sample(_batched(self.watched.observation))
        self.watched.step(np.asarray(action).reshape(-1)[0])
        self.model.num_timesteps += 1
        self.episode_open = False

    def iteration(self, evaluator: Budget) -> dict[str, float]:
        """One rollout of ``n_steps`` env steps and PPO's update; fewer steps (and no update) when
        the budget cannot pay for a whole rollout. Every evaluation goes through ``evaluator``."""
        model = self._ensure_model()
        self.env.evaluator = evaluator
        self.budget = evaluator
        before_steps = model.num_timesteps
        if self.steps_cost(self.n_steps) <= evaluator.remaining:
            self._learn()
        else:
            if not self.episode_open:
                self.vec_env.reset()
                self.episode_open = True
            if self.affordable():
                self._steps_outside_learn()
            elif evaluator.remaining >= 1:
                self._last_step_without_reset()
        # SB3 records the last update's loss in its logger (there only once `learn` has trained).
        loss = model.logger.name_to_value.get("train/loss", float("nan"))
        return {"timesteps": float(model.num_timesteps - before_steps), "loss": float(loss)}

    # --- checkpoints --------------------------------------------------------------------------

    def state_dict(self) -> dict[str, Any]:
        state = super().state_dict() | {"numpy_global": self._numpy_state, "model": None}
        if self.model is not None:
            state["model"] = {
                "policy": self.model.policy.state_dict(),
                "optimizer": self.model.policy.optimizer.state_dict(),
                "num_timesteps": self.model.num_timesteps,
                "episode": self.env.episode_state(),
                "observation": self.watched.observation,
                "episode_open": self.episode_open,
            }
        return state

    def load_state_dict(self, state: dict[str, Any]) -> None:
        super().load_state_dict(state)
        self._numpy_state = state["numpy_global"]
        saved = state["model"]
        if saved is None:
            return
        if "episode" not in saved:
            raise ValueError(f"this {self.name} checkpoint was written by an older placement-gym, which "
                             "did not keep the episode in progress: start a new run")
        self._make_vec_env()  # not seeded: the saved generator state goes to the env below
        # `train` restores torch's generator after this (building the policy draws from it).
        self._use_model(self._make_model(self.vec_env))
        self.model.policy.load_state_dict(saved["policy"])
        self.model.policy.optimizer.load_state_dict(saved["optimizer"])
        self.model.num_timesteps = saved["num_timesteps"]
        self.env.restore_episode(saved["episode"])
        self.episode_open = saved["episode_open"]
        if self.episode_open:  # SB3's next rollout starts with a reset: it gets the episode restored
            self.watched.resume(saved["observation"])
        self.watched.observation = saved["observation"]


@register_learned
class SB3PPOAgent(_SB3Agent):
    """stable-baselines3 PPO with `FactorizedPlacementPolicy` on `DevicePlacement-v0` (single shot).

    Every step places all nodes and is one evaluation; reward ``log(best single runtime / runtime)``
    (out of memory: 10x the best single runtime). Options (defaults): ``learning_rate`` (1e-2),
    ``n_steps`` (64 placements per rollout and update), ``batch_size`` (32), ``n_epochs`` (10),
    ``entropy_coef`` (0.0),
    ``hidden`` (64, width of the graph network), ``rounds`` (2 rounds of message passing), ``groups``
    ("chains"; None for one node per op; any ``groups=`` value of the envs). A resumed run repeats
    the run never stopped (module docstring).

    The defaults were chosen on budgets of 1,000 (cifar10_cnn/k80x2 seeds 0-2, inception_v3/k80x4,
    bert_large/k80x4, gnmt4/k80x4) among learning rates 3e-3/1e-2/3e-2 and rollouts of 32/64/128:
    short rollouts (more updates per budget) and a learning rate above the example's 3e-3 got
    furthest; 1e-2 with 64 matched 3e-2 with 32 on the larger graphs at half the update cost.
    ``entropy_coef`` 0.01 was far worse on inception_v3. Chains beat one node per op on cifar10_cnn
    (15.2 against 15.2-20.6 ms), inception_v3 (388 against 491 ms) and gnmt4 (560 against 646 ms),
    not on bert_large (20.2 against 14.1 s)."""

    name = "sb3-ppo"

    def __init__(self, task: Task, seed: int = 0, learning_rate: float = 1e-2, n_steps: int = 64,
                 batch_size: int = 32, rounds: int = 2, groups: Any = "chains", **config: Any) -> None:
        super().__init__(task, seed, learning_rate=learning_rate, n_steps=n_steps, batch_size=batch_size,
                         groups=groups, **config)
        check_number("rounds", rounds, 0, integer=True)
        self.rounds = int(rounds)

    def _make_env(self) -> PlacementEnvBase:
        return DevicePlacementEnv(**self._env_kwargs())

    def _make_model(self, vec_env: DummyVecEnv) -> BaseAlgorithm:
        # One-step episodes: gamma and GAE do not matter; the observation never changes, so a
        # minibatch costs one graph encoding (PlacementGraphNet) and 10 epochs per rollout are cheap,
        # and a rollout's steps share one encoding (the network keeps its last no-gradient call).
        return PPO(
            FactorizedPlacementPolicy, vec_env, learning_rate=self.learning_rate, n_steps=self.n_steps,
            batch_size=self.batch_size, n_epochs=self.n_epochs, ent_coef=self.entropy_coef, verbose=0,
            policy_kwargs={"hidden_dim": self.hidden, "message_passing_rounds": self.rounds},
            device="cpu",
        )



class SB3MaskablePPOAgent(_SB3Agent):
    """sb3-contrib MaskablePPO with ``MultiInputPolicy`` on `DevicePlacementRefine-v0`
    (``initial="random"``, one sweep).

    Every step and every reset is one evaluation (module docstring); an episode visits every node
    once. Reward: the runtime saved by the move over the best single runtime; ``gamma=1`` so that an
    episode's return is its whole improvement (as the refine example). Options (defaults):
    ``learning_rate`` (1e-3), ``n_steps`` (128), ``batch_size`` (64), ``n_epochs`` (10),
    ``entropy_coef`` (0.0), ``hidden`` (64: two layers of this width for the actor and for the critic),
    ``groups`` ("chains": chains of ops merged, HSDAG's coarsening and this project's Placeto
    default, which shortens episodes and the flattened observation; None for one node per op).
    A resumed run repeats the run never stopped, mid-episode included (module docstring)."""

    name = "sb3-maskable-ppo"
    reset_evaluates = True

    def __init__(self, task: Task, seed: int = 0, groups: Any = "chains", **config: Any) -> None:
        super().__init__(task, seed, groups=groups, **config)

    def _make_env(self) -> PlacementEnvBase:
        return DevicePlacementRefineEnv(**self._env_kwargs(), initial="random")

    def _make_model(self, vec_env: DummyVecEnv) -> BaseAlgorithm:
        width = [self.hidden, self.hidden]
        return MaskablePPO(
            "MultiInputPolicy", vec_env, learning_rate=self.learning_rate, n_steps=self.n_steps,
            batch_size=self.batch_size, n_epochs=self.n_epochs, ent_coef=self.entropy_coef, gamma=1.0,
            verbose=0, policy_kwargs={"net_arch": {"pi": width, "vf": width}}, device="cpu",
        )

    def _episode_ends_within(self, steps: int) -> int:
        # One sweep (the env's default): an episode ends after its last node is placed; a new episode
        # (the first reset) starts at node 0.
        position = self.env.current_node if self.episode_open else 0
        return (position + steps) // self.env.n_nodes

    def _sample(self, observation: Any) -> np.ndarray:
        return self.model.predict(observation, deterministic=False, action_masks=self.env.action_masks())[0]


if MaskablePPO is not None:
    register_learned(SB3MaskablePPOAgent)
