"""Smoke test of learning: stock stable-baselines3 PPO on `DevicePlacementStaged-v0` beats random search.

The claim is about what was learnt, not about time: after a few thousand steps (about 130
episodes of 30 stages, one evaluation each) the policy's deterministic placement must be faster than
anything random search finds with as many evaluations on seeds 0-2, and the mean final reward of
its sampled placements must beat that of uniformly random devices (a policy that had learnt nothing
samples close to uniformly, so the sampled mean can fail where a lucky argmax would not).
"""

from __future__ import annotations

import numpy as np
import pytest

th = pytest.importorskip("torch")
pytest.importorskip("stable_baselines3")

from stable_baselines3 import PPO  # noqa: E402

from placement_gym.envs.staged import DevicePlacementStagedEnv  # noqa: E402
from tests.random_search import SEEDS, random_search_floor  # noqa: E402

GRAPH, CLUSTER = "cifar10_cnn", "k80x2"  # 30 ops: 30 stages per episode
TRAIN_STEPS = 4096
EPISODES = 20


def _final_step(env: DevicePlacementStagedEnv, choose) -> tuple[float, float]:
    """Play one episode with ``choose(obs)``; return its last reward (the sparse one) and the runtime
    of the placement it made."""
    obs, _ = env.reset()
    terminated = False
    while not terminated:
        obs, reward, terminated, truncated, info = env.step(choose(obs))
        assert not truncated
    return reward, float(info["runtime"])


@pytest.mark.slow
def test_ppo_beats_random_search_on_the_staged_env():
    env = DevicePlacementStagedEnv(graph=GRAPH, cluster=CLUSTER)  # train_step, sparse log_speedup
    rng = np.random.default_rng(0)
    uniform = DevicePlacementStagedEnv(graph=GRAPH, cluster=CLUSTER)
    random_mean = np.mean([_final_step(uniform, lambda _obs: int(rng.integers(env.action_space.n)))[0]
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

    deterministic, runtime = _final_step(env, learnt(True))
    budget = env.evaluations  # the training episodes' and the deterministic one's
    floor = random_search_floor(env.task, budget, SEEDS)  # a device per op, as the env's stages choose
    assert runtime < floor, (
        f"PPO's deterministic placement runs {runtime * 1e3:.2f} ms, not below the {floor * 1e3:.2f} ms "
        f"random search reaches with {budget} evaluations on seeds {SEEDS}"
    )
    assert deterministic > random_mean
    model.set_random_seed(1)
    sampled_mean = np.mean([_final_step(env, learnt(False))[0] for _ in range(10)])
    assert sampled_mean > random_mean
