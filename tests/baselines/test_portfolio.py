"""The best-known portfolio (baselines/portfolio.py): budget, determinism, never worse than its phases."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import hand_cluster

from baselines.learning.move_bandit import move_bandit
from baselines.portfolio import EXPLORE_SHARE, MIN_BUDGET, best_known
from placement_gym.cost_model import simulate
from placement_gym.graph.synthetic import random_graph
from placement_gym.leaderboard import evaluate, get_suite
from placement_gym.task.compiled import make_task


def _task(seed: int = 5):
    return make_task(random_graph(30, seed=seed), hand_cluster(3, memory=1e12), "train_step")


def test_budget_counted_on_the_task_is_the_budget():
    task = _task()
    result = best_known(task, seed=0, budget=900)
    assert task.evaluations == 900 == result.evaluations


def test_deterministic_for_a_seed():
    first, second = best_known(_task(), seed=1, budget=600), best_known(_task(), seed=1, budget=600)
    assert np.array_equal(first.placement, second.placement)


def test_never_worse_than_its_exploration_phase_alone():
    # Phase 3 is move-bandit from the constructive starts, with its share of the budget and the seed
    # + 2: the portfolio returns the best of its phases, so it can only match or beat it.
    budget = 1_000
    result = best_known(_task(), seed=2, budget=budget)
    portfolio = simulate(_task(), result.placement).runtime
    explore = move_bandit(_task(), seed=4, budget=int(budget * EXPLORE_SHARE))
    alone = simulate(_task(), explore.placement).runtime
    assert portfolio <= alone
    assert result.info["phase_runtimes"]["explore"] == alone
    assert set(result.info["phase_runtimes"]) == {"hsdag", "from-hsdag", "explore", "cem", "intensify"}


def test_scored_through_the_harness_within_its_budget():
    suite = get_suite().subset(["cifar10_cnn/k80x2/train"])
    submission = evaluate(best_known, suite, 500, algorithm="best-known")
    result = submission["results"]["cifar10_cnn/k80x2/train"]
    assert result["evaluations"] <= 500 and result["feasible"]


def test_a_budget_below_the_minimum_is_refused():
    with pytest.raises(ValueError, match=f"at least {MIN_BUDGET}"):
        best_known(_task(), budget=MIN_BUDGET - 1)


def test_the_long_portfolio_is_left_out_of_agent_all():
    """``--agent all`` runs every baseline at its default budget; the portfolio's 10^6 evaluations take
    minutes even on the smallest graph, so it runs only by name."""
    from baselines.registry import get_agent, names_for_all
    from placement_gym.task.named import get_task

    names = names_for_all(get_task("cifar10_cnn", "k80x2"))
    assert "best-known" not in names and "anneal" in names
    assert get_agent("best-known") is not None
