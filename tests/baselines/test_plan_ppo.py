"""MaskablePPO on the parallel-plan environments (`baselines.learning.plan_ppo`): on one problem against
random search at equal evaluations, and trained on the train split of ``plans-v1`` against the Megatron
rules on held-out problems, zero-shot (issue 66)."""

from __future__ import annotations

import itertools
import math
import os
import subprocess
import sys

import numpy as np
import pytest
from paths import ROOT

from baselines.learning.plan_ppo import StagedMasks, plan_env
from baselines.plans import plan_random
from placement_gym.plans.space import plan_task

# The problem of the comparison with random search: Llama 3.2 1B on 16 DGX H100 (128 GPUs) at 32
# sequences a step. The batch leaves at most 32 data-parallel ranks, so most choices of the value masks
# do not divide or fit (9.4% are feasible), and 4 of the 120,960 choices are the optimum
# (`test_random_search_rarely_reaches_the_optimum_of_the_ppo_problem`).
PROBLEM = ("llama3-1b", "dgx-h100x16", 32)
BUDGET = 2048
SEEDS = (0, 1, 2)


def problem():
    return plan_task(*PROBLEM)


def beats_random_search(bests: list[float], random_bests: list[float]) -> bool:
    """The tests' strict control: the best plan of every run (each seed) is faster than the best plan
    of every random-search run at the same evaluations, i.e. than the best of them all."""
    return max(bests) < min(random_bests)


@pytest.mark.slow
def test_ppo_on_the_single_shot_env_beats_random_search_at_equal_evaluations(one_torch_thread):
    """For each seed of 0, 1, 2, MaskablePPO on `ParallelPlan-v0` (`DEFAULT_CONFIG`: 16 rollouts of 128
    plans, minibatches of 64, 10 epochs, learning rate 1e-3, MFU reward) finds within 2,048 evaluations a
    plan faster than the best that random search (`plan-random`, uniform over the values each dimension
    allows) finds with 2,048 evaluations on any of the same seeds. Random search with other seeds does
    not pass the same comparison."""
    from baselines.learning.plan_ppo import ppo_on_task

    random_bests = [plan_random(problem(), seed, BUDGET).info["step_s"] for seed in SEEDS]
    bests = []
    for seed in SEEDS:
        task = problem()
        result = ppo_on_task(task, seed, BUDGET)
        assert result.evaluations == task.evaluations == len(result.info["steps"]) == BUDGET
        assert result.info["step_s"] == min(result.info["steps"])
        assert task.evaluate(result.placement).step_s == result.info["step_s"]
        bests.append(result.info["step_s"])
    assert beats_random_search(bests, random_bests), (bests, random_bests)
    others = [plan_random(problem(), seed, BUDGET).info["step_s"] for seed in (3, 4, 5)]
    assert not beats_random_search(others, random_bests), (others, random_bests)


@pytest.mark.slow
def test_random_search_rarely_reaches_the_optimum_of_the_ppo_problem():
    """Every choice random search can draw on the problem (the product of the value masks), priced: the
    chance that 2,048 uniform draws include an optimal one is under 10%, and one within 1% of it under
    30%, so the comparison above is not won by a problem random search already solves."""
    task = problem()
    allowed = [np.flatnonzero(mask) for mask in task.value_masks]
    results = (task.evaluate(np.array(choice, dtype=np.int64)) for choice in itertools.product(*allowed))
    steps = np.array([result.step_s if result.feasible else math.inf for result in results])
    best = steps.min()

    def reach(ratio: float) -> float:
        return 1.0 - (1.0 - np.mean(steps <= best * ratio)) ** BUDGET

    assert len(steps) == 120_960 and reach(1.0) < 0.1 and reach(1.01) < 0.3, (reach(1.0), reach(1.01))


@pytest.mark.parametrize("problem_args", [
    ("gpt-1t", "dgx-a100x64", 128), ("mixtral-8x7b", "dgx-h100x4", 32), ("llama3-1b", "dgx-h100x16", 32),
    ("llama2-70b", "dgx-h100x8", 128)])
def test_the_fast_staged_masks_are_the_staged_envs_masks(problem_args):
    """`StagedMasks` (on arrays, kept per prefix) gives the staged env's own `action_masks()` at every
    stage of random episodes, choices outside the masks included."""
    rng = np.random.default_rng(0)
    env = plan_env(plan_task(*problem_args), staged=True).unwrapped
    fast = StagedMasks(env.task)
    for _ in range(40):
        env.reset()
        done = False
        while not done:
            mask = env.action_masks()
            np.testing.assert_array_equal(fast(env.stage, env.choice), mask)
            allowed = np.flatnonzero(mask)
            action = rng.choice(allowed) if allowed.size and rng.random() < 0.9 else rng.integers(len(mask))
            _, _, done, _, _ = env.step(action)
        np.testing.assert_array_equal(fast(env.stage, env.choice), env.action_masks())


def test_the_module_imports_without_torch_or_sb3():
    """sb3-contrib and torch are imported where they are used: the module (and its plain helpers)
    loads without them."""
    probe = ("import sys; sys.modules['torch'] = None; sys.modules['sb3_contrib'] = None; "
             "sys.modules['stable_baselines3'] = None; import baselines.learning.plan_ppo as m; "
             "from placement_gym.plans.space import plan_task; "
             "env = m.plan_env(plan_task('llama2-7b', 'dgx-h100', 64), staged=True); env.reset(); "
             "print(env.action_masks().sum())")
    path = str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")
    done = subprocess.run([sys.executable, "-c", probe], env={**os.environ, "PYTHONPATH": path},
                          capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert done.returncode == 0 and int(done.stdout) > 0, done.stderr


@pytest.mark.slow
@pytest.mark.parametrize("staged", [False, True])
def test_ppo_on_a_task_spends_exactly_its_budget_and_repeats_for_a_seed(one_torch_thread, staged):
    """A budget that is not a whole number of rollouts: the rollouts it pays for, then the plans left
    sampled; the count the task's own counter holds; the best the fastest feasible priced; the same run
    for the same seed."""
    from baselines.learning.plan_ppo import ppo_on_task

    runs = []
    for _ in range(2):
        task = plan_task("llama2-7b", "dgx-h100x2", 64)
        result = ppo_on_task(task, seed=3, budget=45, staged=staged, n_steps=16, batch_size=8)
        assert result.evaluations == task.evaluations == len(result.info["steps"]) == 45
        assert result.info["step_s"] == min(result.info["steps"]) < math.inf
        runs.append(result)
    np.testing.assert_array_equal(runs[0].placement, runs[1].placement)
    assert runs[0].info["steps"] == runs[1].info["steps"]


@pytest.mark.slow
def test_the_policy_trained_on_the_train_split_is_as_fast_as_the_rules_on_70_percent_of_held_out_problems():
    """The saved policy (`POLICY`: ``python -m baselines.learning.plan_ppo``, MaskablePPO on
    `ParallelPlan-v0` drawing from the train split for 250,000 plans), zero-shot on 60 problems evenly
    spaced over test-sizes and test-families: its best of 8 plans (the greedy one and 7 sampled; the
    rules price up to 8) is feasible and at most as slow as the ``megatron`` rules' plan on at least
    70% of them (42 of 60), its greedy plan alone (one evaluation) on at least 60% (37 of 60)."""
    pytest.importorskip("sb3_contrib")
    from baselines.learning.plan_ppo import compare_with_rules, held_out_ids, load_policy

    model = load_policy()
    ids = held_out_ids()
    assert len(ids) == 60 and len(set(ids)) == 60
    best_of_8 = compare_with_rules(model, ids, samples=8)
    greedy = compare_with_rules(model, ids, samples=1)
    assert best_of_8["fraction"] >= 0.7, best_of_8["fraction"]
    assert greedy["fraction"] >= 0.6, greedy["fraction"]


@pytest.mark.slow
@pytest.mark.xfail(strict=True, reason="the greedy plan alone is as fast as the rules on 62% of the sample "
                                       "(60% of all 410 held-out problems); the mixtures, a family the "
                                       "train split never shows, on 38% (41%)")
def test_the_greedy_plan_alone_is_as_fast_as_the_rules_on_70_percent_of_held_out_problems():
    pytest.importorskip("sb3_contrib")
    from baselines.learning.plan_ppo import compare_with_rules, held_out_ids, load_policy

    assert compare_with_rules(load_policy(), held_out_ids(), samples=1)["fraction"] >= 0.7


@pytest.mark.slow
def test_the_saved_policy_is_small_and_its_training_repeats_for_a_seed(one_torch_thread):
    """The saved policy is under 1 MB and has `TRAIN_CONFIG`'s network; a short training run on the
    train split gives the same weights twice (one torch thread, the same seed), and a zero-shot plan
    costs the task exactly its samples."""
    pytest.importorskip("sb3_contrib")
    import torch

    from baselines.learning.plan_ppo import POLICY, TRAIN_CONFIG, load_policy, policy_plan, train_plan_policy

    assert POLICY.stat().st_size < 1 << 20
    saved = load_policy()
    assert saved.policy.net_arch == [TRAIN_CONFIG["hidden"]] * 2
    short = {"timesteps": 2048, "n_envs": 4, "n_steps": 64, "batch_size": 64, "n_epochs": 2}
    runs = [train_plan_policy(**short).policy.state_dict() for _ in range(2)]
    assert all(torch.equal(runs[0][key], runs[1][key]) for key in runs[0])
    task = plan_task("llama2-13b", "dgx-h100x4", 32)
    result = policy_plan(saved, task, samples=3)
    assert result.evaluations == task.evaluations == 3
