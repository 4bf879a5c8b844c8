"""`move-bandit` (baselines/learning/move_bandit.py): it learns the move kind that pays, its ablation is
anneal draw for draw, it never offers a kind the task cannot use, and bad input is named."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import hand_cluster, hand_graph

from baselines.learning.move_bandit import ARMS, move_bandit
from baselines.registry import get_agent
from baselines.search import anneal
from placement_gym.task.compiled import make_task
from placement_gym.task.named import get_task


def _chains(n_chains: int, length: int) -> object:
    """``n_chains`` independent chains of ``length`` ops of 1 ms each, whose tensors take 10 ms to cross
    a link: moving one op off its chain costs two transfers, moving a whole chain costs none."""
    ops = [(f"c{c}_{i}", 1e9, 1e7, 0.0) for c in range(n_chains) for i in range(length)]
    edges = [(f"c{c}_{i - 1}" if i else "x", f"c{c}_{i}") for c in range(n_chains) for i in range(length)]
    return hand_graph(ops, edges, inputs=[("x", 1e3)])


def test_registered():
    assert get_agent("move-bandit") is move_bandit


def test_on_independent_chains_it_learns_to_move_whole_chains():
    """Four chains on one device of four: only whole-chain moves pay, so the group arm's probability
    rises far above anneal's fixed share (0.27) while the search runs (once the chains run in parallel,
    single moves that undo a worse step Metropolis accepted pay too), and the placement runs the chains
    in parallel; with learning off (``pursuit_rate=0``) the mix stays anneal's."""
    task = make_task(_chains(4, 12), hand_cluster(4), "inference")
    serial = 48 * 1e-3
    group = ARMS.index("group")
    for seed in (0, 1, 2):
        learned = move_bandit(task.independent_copy(), seed=seed, budget=300, start="best-single")
        shares = [row[group] for row in learned.info["move_mix"]["trajectory"]]
        assert max(shares) > 0.8 and np.mean(shares) > 0.6
        assert learned.info["runtime"] < 0.3 * serial
        frozen = move_bandit(task.independent_copy(), seed=seed, budget=300, start="best-single",
                             pursuit_rate=0.0)
        assert frozen.info["move_mix"]["final"][group] == pytest.approx(0.27)


def test_without_learning_it_is_anneal_draw_for_draw():
    task = get_task("inception_v3", "k80x4")
    plain = anneal(task.independent_copy(), seed=4, budget=400)
    ablation = move_bandit(task.independent_copy(), seed=4, budget=400, pursuit_rate=0.0)
    np.testing.assert_array_equal(plain.placement, ablation.placement)
    assert plain.info["runtime"] == ablation.info["runtime"]
    assert plain.evaluations == ablation.evaluations


def test_a_task_without_groups_never_gets_group_moves():
    ops = [(f"op{i}", 1e9 * (1 + i), 1e3, 0.0) for i in range(6)]
    task = make_task(hand_graph(ops, [("x", f"op{i}") for i in range(6)], inputs=[("x", 1e3)]),
                     hand_cluster(3), "inference")
    result = move_bandit(task, seed=0, budget=200, start="best-single")
    assert all(row[ARMS.index("group")] == 0.0 for row in result.info["move_mix"]["trajectory"])
    assert result.info["runtime"] < 21e-3 * 0.5  # the six ops spread over three devices


def test_bad_input_names_what_is_wrong():
    """(Same seed, same result: CI re-runs the committed 1,000-evaluation entry bit for bit.)"""
    task = get_task("cifar10_cnn", "k80x2")
    for bad, match in (({"floor": 0.5}, "floor"), ({"pursuit_rate": 2.0}, "pursuit_rate"),
                       ({"learning_rate": 0.0}, "learning_rate"), ({"group_move_prob": 0.5}, "not options")):
        with pytest.raises(ValueError, match=match):
            move_bandit(task.independent_copy(), budget=100, **bad)
