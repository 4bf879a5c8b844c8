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
(``learn(n_steps, reset_num_timesteps=False)``). A callback stops the rollout before a step the
remaining budget cannot pay for (for refine: the step plus the reset that follows when it ends the
episode), so SB3 never meets `BudgetExhausted`; a rollout cut short is not trained on. When exactly
one evaluation is left and the next refine step would end its episode, that step is taken outside
SB3's vectorised env (no reset), so the budget is spent exactly: ``evaluations == budget``.

Checkpoints (`state_dict`): the policy's and its Adam optimiser's state dicts, SB3's counters
(timesteps, updates), the agent's numpy generator and the numpy global-generator state SB3 shuffles
minibatches with (the agent keeps its own copy and swaps it in around each update, so other code
using ``np.random`` neither disturbs it nor is disturbed). What resumes exactly and what does not:

* ``sb3-ppo`` resumes exactly when the checkpoint was taken after a complete rollout (every
  checkpoint `train` writes, except the last one of a run whose budget is not a multiple of
  ``n_steps``): its env keeps no state between its one-step episodes.
* SB3's rollout buffer is not saved: the steps of a rollout cut short by the budget were evaluated
  (and count towards the best placement) but are not trained on, after a resume either.
* ``sb3-maskable-ppo``'s env (the episode in progress: its placement, position and the env's
  generator) is not saved: a resumed run starts a new episode (one evaluation for its reset), its
  starting placement drawn from a generator seeded with (seed, timesteps so far). Such a run
  continues training from the saved weights but does not repeat the uninterrupted run's numbers.
"""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np
import torch
from stable_baselines3 import PPO
from stable_baselines3.common.base_class import BaseAlgorithm
from stable_baselines3.common.callbacks import BaseCallback
from stable_baselines3.common.logger import Logger
from stable_baselines3.common.vec_env import DummyVecEnv

from baselines.learning.options import check_number
from baselines.learning.trainer import LearnedAgent, register_learned
from baselines.policies import FactorizedPlacementPolicy
from placement_gym.budget import Budget
from placement_gym.envs.base import PlacementEnvBase
from placement_gym.envs.refine import DevicePlacementRefineEnv
from placement_gym.envs.single_shot import DevicePlacementEnv
from placement_gym.groups import make_grouping
from placement_gym.task import Task

try:  # sb3-contrib is optional: without it `sb3-maskable-ppo` is not registered
    from sb3_contrib import MaskablePPO
except ImportError:  # pragma: no cover - depends on the installed extras
    MaskablePPO = None

# Seeds handed to SB3 and numpy's legacy global generator must fit 32 bits.
SEED_MODULUS = 2**32


class _BudgetStop(BaseCallback):
    """Stops a rollout before a step that the evaluator's remaining budget cannot pay for.

    SB3 calls `_on_step` after each env step; it answers whether the rollout may take the next one.
    The last step of a complete rollout always passes (nothing follows it before the update). SB3
    moves its current observation to the new one only after a step the callback accepts, so when
    stopping, the callback does it itself: the model stays in step with the env it drives."""

    def __init__(self, agent: _SB3Agent) -> None:
        super().__init__()
        self.agent = agent

    def _on_step(self) -> bool:
        if self.locals["n_steps"] + 1 >= self.locals["n_rollout_steps"]:
            return True
        if self.agent.affordable():
            return True
        self.model._last_obs = self.locals["new_obs"]
        self.model._last_episode_starts = self.locals["dones"]
        return False


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
        ent_coef: float = 0.0,
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
        check_number("ent_coef", ent_coef, 0.0)
        check_number("hidden", hidden, 1, integer=True)
        make_grouping(task.graph, groups)  # a clear error for a bad grouping now, not at the first iteration
        self.learning_rate = float(learning_rate)
        self.n_steps, self.batch_size, self.n_epochs = int(n_steps), int(batch_size), int(n_epochs)
        self.ent_coef, self.hidden, self.groups = float(ent_coef), int(hidden), groups
        self.model: BaseAlgorithm | None = None
        self.env: PlacementEnvBase | None = None
        self.vec_env: DummyVecEnv | None = None
        self._evaluator: Budget | None = None
        # numpy's legacy global generator state SB3 shuffles minibatches with (see `_own_numpy_rng`).
        self._numpy_state = np.random.RandomState(seed % SEED_MODULUS).get_state()

    # --- what subclasses provide --------------------------------------------------------------

    def _make_env(self) -> PlacementEnvBase:
        raise NotImplementedError

    def _make_model(self, vec_env: DummyVecEnv) -> BaseAlgorithm:
        raise NotImplementedError

    def _episode_ends_next_step(self) -> bool:
        """Whether the env's next step ends its episode (then, when resets evaluate, it costs two)."""
        return False

    # --- the training loop --------------------------------------------------------------------

    def _env_kwargs(self) -> dict[str, Any]:
        task = self.task
        return {"graph": task.graph, "cluster": task.cluster, "objective": task.objective,
                "optimizer": task.optimizer, "groups": self.groups}

    def _ensure_model(self) -> BaseAlgorithm:
        if self.model is None:
            self.env = self._make_env()
            self.vec_env = DummyVecEnv([lambda: self.env])
            # The env's first reset draws from this seed (refine: the random starting placement).
            self.vec_env.seed(self.seed % SEED_MODULUS)
            # No seed= for SB3: it would reseed torch's, numpy's and Python's global generators; the
            # policy's initial weights come from torch's generator, which `train` seeds.
            self.model = self._make_model(self.vec_env)
            # A logger with no output: without one, every `learn` call (one per rollout here) makes
            # SB3 create a new empty log folder in the temporary directory.
            self.model.set_logger(Logger(folder=None, output_formats=[]))
        return self.model

    def next_step_cost(self) -> int:
        """Evaluations the env's next step costs: one, two when it ends an episode whose reset
        evaluates (SB3's vectorised env resets at once)."""
        return 1 + int(self.reset_evaluates and self._episode_ends_next_step())

    def affordable(self) -> bool:
        """Whether the current evaluator can pay for the env's next step."""
        return self._evaluator is not None and self._evaluator.remaining >= self.next_step_cost()

    def _start_episode(self) -> None:
        """Reset the env (one evaluation when resets evaluate) and hand SB3 the first observation."""
        self.model._last_obs = self.vec_env.reset()
        self.model._last_episode_starts = np.ones((1,), dtype=bool)

    def _learn(self, **kwargs: Any) -> None:
        """``model.learn`` with this agent's numpy global-generator state swapped in and back out."""
        outside = np.random.get_state()
        np.random.set_state(self._numpy_state)
        try:
            self.model.learn(
                total_timesteps=self.n_steps, reset_num_timesteps=False, callback=_BudgetStop(self),
                log_interval=None, **kwargs,
            )
        finally:
            self._numpy_state = np.random.get_state()
            np.random.set_state(outside)

    def _last_step_without_reset(self) -> None:
        """Spend the one evaluation left on a step that ends the episode, outside SB3's vectorised
        env (which would reset and evaluate once more); the next iteration, if any, starts a new
        episode. Not trained on: there is no update left to make with the budget spent."""
        raise NotImplementedError

    def iteration(self, evaluator: Budget) -> dict[str, float]:
        """One rollout of ``n_steps`` env steps and PPO's update; fewer steps (and no update) when
        the budget runs out first. Every evaluation goes through ``evaluator``."""
        model = self._ensure_model()
        self.env.evaluator = evaluator
        self._evaluator = evaluator
        before_steps = model.num_timesteps
        if model._last_obs is None:
            self._start_episode()
        if evaluator.remaining >= 1:
            if self.affordable():
                self._learn()
            else:
                self._last_step_without_reset()
        # SB3 records the last update's loss in its logger (there only once `learn` has run).
        logger = getattr(model, "_logger", None)
        loss = logger.name_to_value.get("train/loss", float("nan")) if logger is not None else float("nan")
        return {"timesteps": float(model.num_timesteps - before_steps), "loss": float(loss)}

    # --- checkpoints --------------------------------------------------------------------------

    def state_dict(self) -> dict[str, Any]:
        state = super().state_dict() | {"numpy_global": self._numpy_state, "model": None}
        if self.model is not None:
            state["model"] = {
                "policy": self.model.policy.state_dict(),
                "optimizer": self.model.policy.optimizer.state_dict(),
                "num_timesteps": self.model.num_timesteps,
                "n_updates": self.model._n_updates,
                "episode_num": self.model._episode_num,
            }
        return state

    def load_state_dict(self, state: dict[str, Any]) -> None:
        super().load_state_dict(state)
        self._numpy_state = state["numpy_global"]
        saved = state["model"]
        if saved is None:
            return
        model = self._ensure_model()
        model.policy.load_state_dict(saved["policy"])
        model.policy.optimizer.load_state_dict(saved["optimizer"])
        model.num_timesteps = saved["num_timesteps"]
        model._n_updates = saved["n_updates"]
        model._episode_num = saved["episode_num"]
        # The env's episode is not saved: a new one starts, drawn from a seed of its own.
        self.vec_env.seed((self.seed + saved["num_timesteps"]) % SEED_MODULUS)
        model._last_obs = None


@register_learned
class SB3PPOAgent(_SB3Agent):
    """stable-baselines3 PPO with `FactorizedPlacementPolicy` on `DevicePlacement-v0` (single shot).

    Every step places all nodes and is one evaluation; reward ``log(best single runtime / runtime)``
    (out of memory: 10x the best single runtime). Options (defaults): ``learning_rate`` (1e-2),
    ``n_steps`` (64 placements per rollout and update), ``batch_size`` (32), ``n_epochs`` (10),
    ``ent_coef`` (0.0),
    ``hidden`` (64, width of the graph network), ``rounds`` (2 rounds of message passing), ``groups``
    ("chains"; None for one node per op; any ``groups=`` value of the envs). Checkpoints resume
    exactly at a rollout boundary (module docstring).

    The defaults were chosen on budgets of 1,000 (cifar10_cnn/k80x2 seeds 0-2, inception_v3/k80x4,
    bert_large/k80x4, gnmt4/k80x4) among learning rates 3e-3/1e-2/3e-2 and rollouts of 32/64/128:
    short rollouts (more updates per budget) and a learning rate above the example's 3e-3 got
    furthest; 1e-2 with 64 matched 3e-2 with 32 on the larger graphs at half the update cost.
    ``ent_coef`` 0.01 was far worse on inception_v3. Chains beat one node per op on cifar10_cnn
    (15.2 against 15.2-20.6 ms), inception_v3 (388 against 491 ms) and gnmt4 (560 against 646 ms),
    not on bert_large (20.2 against 14.1 s)."""

    name = "sb3-ppo"
    description = "stable-baselines3 PPO, factorised graph policy, single-shot env (every step 1 evaluation)"

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
        # minibatch costs one graph encoding (PlacementGraphNet) and 10 epochs per rollout are cheap.
        return PPO(
            FactorizedPlacementPolicy, vec_env, learning_rate=self.learning_rate, n_steps=self.n_steps,
            batch_size=self.batch_size, n_epochs=self.n_epochs, ent_coef=self.ent_coef, verbose=0,
            policy_kwargs={"hidden_dim": self.hidden, "message_passing_rounds": self.rounds},
            device="cpu",
        )

    def _last_step_without_reset(self) -> None:  # pragma: no cover - resets are free here
        raise AssertionError("a single-shot step always costs one evaluation")


class SB3MaskablePPOAgent(_SB3Agent):
    """sb3-contrib MaskablePPO with ``MultiInputPolicy`` on `DevicePlacementRefine-v0`
    (``initial="random"``, one sweep).

    Every step and every reset is one evaluation (module docstring); an episode visits every node
    once. Reward: the runtime saved by the move over the best single runtime; ``gamma=1`` so that an
    episode's return is its whole improvement (as the refine example). Options (defaults):
    ``learning_rate`` (1e-3), ``n_steps`` (128), ``batch_size`` (64), ``n_epochs`` (10),
    ``ent_coef`` (0.0), ``hidden`` (64: two layers of this width for the actor and for the critic),
    ``groups`` ("chains": chains of ops merged, HSDAG's coarsening and this project's Placeto
    default, which shortens episodes and the flattened observation; None for one node per op).
    Resumed runs do not repeat the uninterrupted run exactly (module docstring)."""

    name = "sb3-maskable-ppo"
    description = "sb3-contrib MaskablePPO on the refine env (every step and every reset 1 evaluation)"
    reset_evaluates = True

    def __init__(self, task: Task, seed: int = 0, groups: Any = "chains", **config: Any) -> None:
        super().__init__(task, seed, groups=groups, **config)

    def _make_env(self) -> PlacementEnvBase:
        return DevicePlacementRefineEnv(**self._env_kwargs(), initial="random")

    def _make_model(self, vec_env: DummyVecEnv) -> BaseAlgorithm:
        width = [self.hidden, self.hidden]
        return MaskablePPO(
            "MultiInputPolicy", vec_env, learning_rate=self.learning_rate, n_steps=self.n_steps,
            batch_size=self.batch_size, n_epochs=self.n_epochs, ent_coef=self.ent_coef, gamma=1.0,
            verbose=0, policy_kwargs={"net_arch": {"pi": width, "vf": width}}, device="cpu",
        )

    def _episode_ends_next_step(self) -> bool:
        # One sweep (the env's default): the episode ends after its last node is placed.
        return self.env.current_node == self.env.n_nodes - 1

    def _last_step_without_reset(self) -> None:
        with torch.no_grad():
            action, _ = self.model.predict(self.model._last_obs, action_masks=self.env.action_masks())
        self.env.step(int(np.asarray(action).reshape(-1)[0]))
        self.model.num_timesteps += 1
        self.model._last_obs = None  # the episode has ended: a later iteration resets first


if MaskablePPO is not None:
    register_learned(SB3MaskablePPOAgent)
