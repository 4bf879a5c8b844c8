"""`spotlight`: Gao, Chen and Li (ICML 2018), "Spotlight: Optimizing Device Placement for Training
Deep Neural Networks": PPO (clipped objective) on the multi-stage placement MDP.

The MDP is `DevicePlacementStaged-v0` (default, sparse reward): one stage per node (op group) in
topological order, the action is the node's device, the reward is 0 at every stage but the last,
which gets `placement_gym.envs.rewards.shape_reward` of the full placement with the env's default
shape (``reward="log_speedup"``: log(best single-device runtime / runtime)) and the env's default
out-of-memory penalty (10 x the best single-device runtime), so the returns are exactly the env's.

The agent does not step an env object: with a policy whose state is the graph and the devices
chosen so far, an episode of the staged MDP *is* one autoregressive decoding of the seq2seq placer
(stage ``t`` = decoder step ``t``; the decoder's state at step ``t`` has seen the devices of nodes
``0..t-1``), and the final reward needs only the final placement, which goes through the
`Budget` (one evaluation per episode, as the env's one `simulate` per episode). The
policy network is `pg`'s (`baselines.learning.seq2seq.Seq2SeqPlacer`, same grouping, same input
rows), plus a value head on the decoder's per-step features, so `pg` and `spotlight` differ in the
algorithm, not the network. The env's static-memory action masks are not used (nor by `pg`).

PPO (choices, where Spotlight does not give a figure): each iteration samples ``batch`` (32) episodes,
then runs ``epochs`` (4) full-batch epochs of the clipped objective (``clip`` 0.2) on every
(episode, stage) pair, plus ``value_coef`` (0.5) x the squared value error, minus ``entropy_coef``
(0.01) x the mean entropy. Advantages: generalised advantage estimation with gamma 1 and
``gae_lambda`` (1.0: the Monte-Carlo return minus the value, i.e. the value is a pure baseline),
normalised over the batch. The log-probabilities of the sampling policy are recomputed by the same
teacher-forced pass the epochs use, so the first epoch's ratios are exactly 1. Adam, ``learning_rate`` 3e-3
(tuned on one seed of inception_v3/k80x4 among 1e-3 and 3e-3).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from baselines.learning.options import check_number
from baselines.learning.seq2seq import Seq2SeqAgent
from baselines.learning.trainer import register_learned
from placement_gym.envs.rewards import check_reward, shape_reward
from placement_gym.evaluation.budget import Budget
from placement_gym.task.compiled import Task

# The staged env's default reward shape (DevicePlacementStagedEnv(reward=...)).
ENV_DEFAULT_REWARD = "log_speedup"


def sparse_advantages(values: np.ndarray, rewards: np.ndarray, gae_lambda: float) -> np.ndarray:
    """GAE (gamma 1) for episodes whose only reward is the last stage's.

    ``values`` ``(batch, stages)``: V(s_t); ``rewards`` ``(batch,)``: the final reward. The TD
    errors are ``V(s_{t+1}) - V(s_t)`` before the last stage and ``reward - V(s_last)`` at it;
    the advantage of stage t is ``sum_k lambda^k delta_{t+k}``. With lambda 1 it is
    ``reward - V(s_t)``."""
    deltas = np.empty_like(values)
    deltas[:, :-1] = values[:, 1:] - values[:, :-1]
    deltas[:, -1] = rewards - values[:, -1]
    advantages = np.empty_like(values)
    running = np.zeros(len(values), dtype=values.dtype)
    for t in range(values.shape[1] - 1, -1, -1):
        running = deltas[:, t] + gae_lambda * running
        advantages[:, t] = running
    return advantages


@register_learned
class SpotlightPlacer(Seq2SeqAgent):
    """PPO on the staged MDP with `pg`'s network and a value head (see the module docstring).

    Options: ``hidden`` (64); ``batch`` (32) episodes per iteration; ``learning_rate`` (3e-3); ``epochs`` (4);
    ``clip`` (0.2); ``value_coef`` (0.5); ``entropy_coef`` (0.01); ``gae_lambda`` (1.0); ``reward``
    ("log_speedup", any `placement_gym.envs.rewards.REWARDS` shape); ``groups`` ("colocate");
    ``max_groups`` (None: min(256, 20 x devices)); ``oom_runtime_factor`` (10.0, the env's default)."""

    name = "spotlight"

    def __init__(
        self, task: Task, seed: int = 0, epochs: int = 4, clip: float = 0.2, value_coef: float = 0.5,
        gae_lambda: float = 1.0, reward: str = ENV_DEFAULT_REWARD, **options: Any,
    ) -> None:
        super().__init__(task, seed, value_head=True, **options)
        self.epochs = check_number("epochs", epochs, 1, integer=True)
        self.clip = check_number("clip", clip, 0, open_low=True)
        self.value_coef = check_number("value_coef", value_coef, 0)
        self.gae_lambda = check_number("gae_lambda", gae_lambda, 0, 1)
        self.reward = check_reward(reward)

    def episode_rewards(self, runtimes: np.ndarray, feasible: np.ndarray) -> np.ndarray:
        """The staged env's final-stage reward of each episode."""
        return np.array([
            shape_reward(self.reward, runtime, ok, self.best_single, None, self.oom_runtime_factor)
            for runtime, ok in zip(runtimes.tolist(), feasible.tolist())
        ])

    def iteration(self, evaluator: Budget) -> dict[str, float]:
        size = min(self.batch, evaluator.remaining)
        actions = self.sample_groups(size)
        runtimes, feasible = evaluator.evaluate(self.grouping.expand(actions))
        rewards = self.episode_rewards(runtimes, feasible)
        with torch.no_grad():
            old_log_probs, _, values = self.evaluate_groups(actions)
        advantages = sparse_advantages(values.numpy().astype(np.float64), rewards, self.gae_lambda)
        returns = torch.from_numpy((advantages + values.numpy()).astype(np.float32))
        if advantages.size > 1:
            advantages = (advantages - advantages.mean()) / (advantages.std() + 1e-8)
        advantages = torch.from_numpy(advantages.astype(np.float32))
        for _ in range(self.epochs):
            log_probs, entropy, values = self.evaluate_groups(actions)
            ratio = torch.exp(log_probs - old_log_probs)
            clipped = torch.clamp(ratio, 1 - self.clip, 1 + self.clip)
            policy_loss = -torch.minimum(ratio * advantages, clipped * advantages).mean()
            value_loss = (values - returns).pow(2).mean()
            loss = policy_loss + self.value_coef * value_loss - self.entropy_coef * entropy.mean()
            self.step_optimizer(loss)
        return {
            "policy_loss": float(policy_loss.detach()),
            "value_loss": float(value_loss.detach()),
            "mean_reward": float(rewards.mean()),
        }
