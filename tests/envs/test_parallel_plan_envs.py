"""`ParallelPlan-v0` and `ParallelPlanStaged-v0`: Gymnasium's checker, the rewards against the plan
model, the masks, the dataset draws and a stock stable-baselines3 recipe."""

from __future__ import annotations

import math
import warnings

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env

import placement_gym  # noqa: F401  (registers the ids)
from placement_gym.envs import PLAN_ENV_IDS
from placement_gym.envs.plan_base import INFO_KEYS
from placement_gym.plans import Plan, evaluate_plan
from placement_gym.plans.dataset import plan_dataset_ids
from placement_gym.plans.space import DIMENSION_NAMES, OPTION_COUNTS

IDS = tuple(PLAN_ENV_IDS)


@pytest.mark.parametrize("env_id", IDS)
@pytest.mark.parametrize("kwargs", [{}, {"dataset": "plans-v1:test-families", "reward": "neg_step"}])
def test_checker(env_id, kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the checker's warnings too
        check_env(gym.make(env_id, **kwargs).unwrapped)


def test_single_shot_reward_is_the_plans_mfu():
    env = gym.make("ParallelPlan-v0", model="llama2-70b", cluster="dgx-h100x8", global_batch=128)
    obs, info = env.reset(seed=0)
    assert set(info) == set(INFO_KEYS) and not info["simulated"] and (obs["plan"] == -1).all()
    task = env.unwrapped.task
    plan = Plan(tp=4, pp=4, vp=5, dp=4, global_batch=128, schedule="interleaved", sequence_parallel=True,
                zero=1)
    expected = evaluate_plan(task.model, plan, task.mesh)
    obs, reward, terminated, truncated, info = env.step(task.choice_of(plan))
    assert terminated and not truncated and reward == expected.mfu and info["step_s"] == expected.step_s
    assert set(info) == set(INFO_KEYS) and info["feasible"] and (obs["plan"] == task.choice_of(plan)).all()
    env.reset(seed=0)
    # a plan whose degrees do not divide the GPUs: the infeasible reward, a result not an error
    _, reward, _, _, info = env.step(np.zeros(len(DIMENSION_NAMES), dtype=np.int64))
    assert reward == -0.1 and not info["feasible"] and info["simulated"]
    env = gym.make("ParallelPlan-v0", reward="neg_step", infeasible_reward=-5.0)
    env.reset(seed=0)
    _, reward, *_ = env.step(env.unwrapped.task.choice_of(plan))
    assert reward == pytest.approx(-1.0 / expected.mfu)


def test_staged_masks_always_end_in_a_plan_that_divides():
    env = gym.make("ParallelPlanStaged-v0", dataset="plans-v1:train")
    rng = np.random.default_rng(0)
    for episode in range(25):
        env.reset(seed=episode)
        rewards = []
        for stage in range(len(DIMENSION_NAMES)):
            mask = env.unwrapped.action_masks()
            assert mask.any() and not mask[OPTION_COUNTS[stage]:].any()
            _, reward, terminated, _, info = env.step(int(rng.choice(np.flatnonzero(mask))))
            rewards.append(reward)
            assert terminated == (stage == len(DIMENSION_NAMES) - 1)
        task = env.unwrapped.task
        assert task.problems(env.unwrapped.choice) == []
        assert rewards[:-1] == [0.0] * (len(DIMENSION_NAMES) - 1)
        assert rewards[-1] == (info["mfu"] if info["feasible"] else -0.1)


def test_dataset_draws_are_seeded_and_reset_takes_a_problem():
    env = gym.make("ParallelPlan-v0", dataset="plans-v1:validation")
    drawn = [env.reset(seed=s)[0]["model"].tolist() for s in (3, 3, 4)]
    assert drawn[0] == drawn[1]
    wanted = plan_dataset_ids("validation")[5]
    env.reset(options={"task": wanted})
    assert env.unwrapped.task.id == wanted
    with pytest.raises(ValueError, match="not a problem of this env's dataset split"):
        env.reset(options={"task": plan_dataset_ids("test")[0]})
    with pytest.raises(ValueError, match="dataset must be 'plans-v1:<split>'"):
        gym.make("ParallelPlan-v0", dataset="plans-v1:nope")
    with pytest.raises(TypeError, match="unexpected keyword"):
        gym.make("ParallelPlan-v0", graph="bert_base")


def test_render_says_the_plan():
    env = gym.make("ParallelPlanStaged-v0", render_mode="ansi")
    env.reset(seed=0)
    assert "chosen:" in env.render()
    while True:
        _, _, terminated, _, _ = env.step(int(np.flatnonzero(env.unwrapped.action_masks())[-1]))
        if terminated:
            break
    text = env.render()
    assert "plan TP" in text and ("MFU" in text or "infeasible" in text)


@pytest.mark.slow
def test_maskable_ppo_stock_recipe_runs_on_both_envs():
    """sb3-contrib's MaskablePPO with MultiInputPolicy, as its docs write it, trains on both envs
    without a wrapper; its final plans are priced like any other."""
    sb3_contrib = pytest.importorskip("sb3_contrib")
    for env_id in IDS:
        env = gym.make(env_id, model="llama2-7b", cluster="dgx-h100x2", global_batch=64)
        model = sb3_contrib.MaskablePPO("MultiInputPolicy", env, n_steps=64, batch_size=32, seed=0, verbose=0)
        model.learn(256)
        obs, _ = env.reset(seed=0)
        done = False
        while not done:
            action, _ = model.predict(obs, action_masks=env.unwrapped.action_masks(), deterministic=True)
            obs, reward, done, _, info = env.step(action)
        assert math.isfinite(reward)
