"""Smoke test of learning: stock stable-baselines3 PPO on `DevicePlacementStaged-v0` beats random.

The claim is about what was learnt, not about time: after a few thousand steps (about 130
episodes of 30 stages) the policy's final rewards must beat those of uniformly random devices,
both its deterministic placement and the mean of its sampled ones (a policy that had learnt nothing
samples close to uniformly, so the sampled mean can fail where a lucky argmax would not).
"""

from __future__ import annotations

import numpy as np
import pytest

th = pytest.importorskip("torch")
pytest.importorskip("stable_baselines3")

from stable_baselines3 import PPO  # noqa: E402

from placement_gym.envs.staged import DevicePlacementStagedEnv  # noqa: E402

GRAPH, CLUSTER = "cifar10_cnn", "k80x2"  # 30 ops: 30 stages per episode
TRAIN_STEPS = 4096
EPISODES = 20


def _final_reward(env: DevicePlacementStagedEnv, choose) -> float:
    """Play one episode with ``choose(obs)`` and return its last reward (the sparse one)."""
    obs, _ = env.reset()
    terminated = False
    while not terminated:
        obs, reward, terminated, truncated, _ = env.step(choose(obs))
        assert not truncated
    return reward


def test_ppo_beats_random_on_the_staged_env():
    env = DevicePlacementStagedEnv(graph=GRAPH, cluster=CLUSTER)  # train_step, sparse log_speedup
    rng = np.random.default_rng(0)
    random_mean = np.mean([_final_reward(env, lambda _obs: int(rng.integers(env.action_space.n)))
                           for _ in range(EPISODES)])

    threads = th.get_num_threads()
    th.set_num_threads(1)  # tiny networks: threads only add overhead on 2 shared cores
    try:
        # gamma=1: the only reward comes at the last of 30 stages; no reason to discount it.
        model = PPO("MultiInputPolicy", env, n_steps=256, batch_size=64, gamma=1.0, learning_rate=1e-3,
                    seed=0)
        model.learn(TRAIN_STEPS)
    finally:
        th.set_num_threads(threads)

    def learnt(deterministic: bool):
        return lambda obs: int(model.predict(obs, deterministic=deterministic)[0])

    deterministic = _final_reward(env, learnt(True))
    model.set_random_seed(1)
    sampled_mean = np.mean([_final_reward(env, learnt(False)) for _ in range(10)])
    assert deterministic > random_mean
    assert sampled_mean > random_mean
