"""`DevicePlacementStaged-v0` (Spotlight): stages, final and dense rewards by hand, masks, errors."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest
from conftest import ONE_OP, hand_cluster, hand_graph, play_episode, two_independent_ops

from placement_gym.cost_model import simulate
from placement_gym.envs.rewards import REWARDS
from placement_gym.envs.single_shot import DevicePlacementEnv
from placement_gym.envs.staged import DevicePlacementStagedEnv

SMALL = dict(graph="cifar10_cnn", cluster="k80x2", objective="inference")


def test_sparse_episode_by_hand():
    env = two_independent_ops(DevicePlacementStagedEnv)
    assert env.best_single_device == 0  # a tie between identical devices goes to the first
    assert env.best_single_runtime == pytest.approx(2 * ONE_OP, rel=1e-12)
    rewards, ends, infos, observations = play_episode(env, [0, 1])
    assert ends == [False, True]
    assert rewards[0] == 0.0
    assert rewards[1] == pytest.approx(math.log(2.0), rel=1e-12)  # log(2 ONE_OP / ONE_OP)
    assert infos[2]["runtime"] == pytest.approx(ONE_OP, rel=1e-12)
    # Sparse: no simulation before the last stage, so the result keys say so (0, not simulated).
    assert not infos[1]["simulated"] and infos[1]["runtime"] == 0.0 and infos[2]["simulated"]
    assert [info["stage"] for info in infos] == [0, 1, 2]
    # The observation shows the placement so far and the node placed next.
    np.testing.assert_array_equal(observations[0]["placement"], [[0, 0], [0, 0]])
    np.testing.assert_array_equal(observations[0]["current"], [1, 0])
    np.testing.assert_array_equal(observations[1]["placement"], [[1, 0], [0, 0]])
    np.testing.assert_array_equal(observations[1]["current"], [0, 1])
    np.testing.assert_array_equal(observations[2]["placement"], [[1, 0], [0, 1]])
    np.testing.assert_array_equal(observations[2]["current"], [0, 0])


@pytest.mark.parametrize("name", REWARDS)
def test_final_reward_equals_the_single_shot_reward_of_the_same_placement(name):
    staged = DevicePlacementStagedEnv(**SMALL, reward=name)
    single = DevicePlacementEnv(**SMALL, reward=name)
    placement = np.random.default_rng(4).integers(0, 3, size=staged.n_nodes)
    rewards, ends, infos, _ = play_episode(staged, placement)
    assert ends[-1] and not any(ends[:-1]) and all(r == 0.0 for r in rewards[:-1])
    single.reset()
    _, expected, _, _, expected_info = single.step(placement)
    assert rewards[-1] == expected
    for key in ("runtime", "feasible", "speedup", "reward_runtime"):
        assert infos[-1][key] == expected_info[key]
    assert infos[-1]["runtime"] == simulate(staged.task, placement).runtime


def test_final_reward_with_groups_equals_single_shot_of_the_expanded_placement():
    staged = DevicePlacementStagedEnv(**SMALL, groups="chains")
    single = DevicePlacementEnv(**SMALL)
    group_placement = np.arange(staged.n_nodes) % 3
    rewards, _, _, _ = play_episode(staged, group_placement)
    single.reset()
    _, expected, _, _, _ = single.step(group_placement[staged.grouping.group_of_op])
    assert staged.n_nodes < staged.task.n_forward
    assert rewards[-1] == expected


def test_dense_rewards_by_hand():
    """Completion device 0. Placing a on 0 keeps both on 0 (no change); b on 1 halves the runtime:
    (2 ONE_OP - ONE_OP) / (2 ONE_OP) = 0.5."""
    env = two_independent_ops(DevicePlacementStagedEnv, dense=True)
    rewards, _, infos, _ = play_episode(env, [0, 1])
    assert rewards[0] == pytest.approx(0.0, abs=1e-12)
    assert rewards[1] == pytest.approx(0.5, rel=1e-12)
    assert infos[1]["runtime"] == pytest.approx(2 * ONE_OP, rel=1e-12)  # [a on 0, b completed on 0]
    # a on 1 splits the completed placement (+0.5); b on 1 joins a (-0.5): back to one device.
    rewards, _, _, _ = play_episode(env, [1, 1])
    assert rewards == pytest.approx([0.5, -0.5], rel=1e-12)


def test_dense_rewards_telescope_to_the_normalised_improvement_over_the_best_single_device():
    env = DevicePlacementStagedEnv(**SMALL, dense=True)
    for seed in range(3):
        placement = np.random.default_rng(seed).integers(0, 3, size=env.n_nodes)
        rewards, _, infos, _ = play_episode(env, placement)
        final = infos[-1]["reward_runtime"]
        best = env.best_single_runtime
        assert sum(rewards) == pytest.approx((best - final) / best, rel=1e-9, abs=1e-12)
        assert final == simulate(env.task, placement).runtime


def test_dense_rewards_use_the_penalty_runtime_when_out_of_memory():
    """a and b own 6 kB of parameters each, a device holds 10 kB: both on one device overflow, so no
    single device holds the task and the completed placements start out of memory."""
    graph = hand_graph([("a", 1e9, 1e3, 6e3), ("b", 1e9, 1e3, 6e3)], edges=[])
    cluster = dataclasses.replace(hand_cluster(2), memory_capacity=np.array([1e4, 1e4]))
    env = DevicePlacementStagedEnv(graph=graph, cluster=cluster, objective="inference", dense=True)
    penalty = 10 * env.best_single_runtime
    rewards, _, infos, _ = play_episode(env, [1, 0])
    assert infos[1]["feasible"] and infos[1]["reward_runtime"] == pytest.approx(ONE_OP, rel=1e-12)
    assert rewards[0] == pytest.approx((penalty - ONE_OP) / env.best_single_runtime, rel=1e-12)
    assert rewards[1] == pytest.approx(0.0, abs=1e-12)  # b on 0 was already counted there
    rewards, _, infos, _ = play_episode(env, [0, 0])
    assert not infos[2]["feasible"] and infos[2]["reward_runtime"] == penalty
    assert rewards == pytest.approx([0.0, 0.0], abs=1e-12)


def test_masks_follow_the_static_memory_of_the_ops_already_placed():
    """6 kB of parameters per op, 10 kB per device: a second op does not fit beside a first."""
    graph = hand_graph([("a", 1e9, 1e3, 6e3), ("b", 1e9, 1e3, 6e3), ("c", 1e9, 1e3, 6e3)], edges=[])
    cluster = dataclasses.replace(hand_cluster(2), memory_capacity=np.array([1e4, 1e4]))
    env = DevicePlacementStagedEnv(graph=graph, cluster=cluster, objective="inference")
    env.reset()
    np.testing.assert_array_equal(env.action_masks(), [True, True])
    env.step(0)
    np.testing.assert_array_equal(env.action_masks(), [False, True])
    env.step(1)
    np.testing.assert_array_equal(env.action_masks(), [True, True])  # both overflow: never all masked
    masks = env.action_masks()
    masks[:] = False
    assert env.action_masks().all()  # a copy
    env.step(0)
    assert env.action_masks().all()  # after the end


def test_masks_with_groups_count_the_whole_group():
    graph = hand_graph([("a", 1e9, 1e3, 6e3), ("b", 1e9, 1e3, 0), ("c", 1e9, 1e3, 6e3)], edges=[])
    cluster = dataclasses.replace(hand_cluster(2), memory_capacity=np.array([1e4, 2e4]))
    env = DevicePlacementStagedEnv(graph=graph, cluster=cluster, objective="inference", groups=[0, 0, 0])
    env.reset()
    np.testing.assert_array_equal(env.action_masks(), [False, True])  # 12 kB together


def test_render_shows_the_partial_placement():
    env = two_independent_ops(DevicePlacementStagedEnv, render_mode="ansi")
    env.reset()
    env.step(1)
    text = env.render()
    assert "1 of 2 ops placed" in text and "stage 1 of 2" in text
    assert f"{ONE_OP * 1e3:.3f} ms" in text  # a on gpu:1, b counted on gpu:0


def test_bad_actions_and_order_of_calls():
    env = two_independent_ops(DevicePlacementStagedEnv)
    with pytest.raises(RuntimeError, match="reset"):
        env.step(0)
    env.reset()
    for bad in (2, -1, 0.5, True, np.array([0, 1])):
        with pytest.raises(ValueError, match=r"one device index in 0\.\.1 \(gpu:0, gpu:1\)"):
            env.step(bad)
    assert env.stage == 0  # a bad action changes nothing
    env.step(np.int64(1))
    env.step(np.array(0))
    np.testing.assert_array_equal(env.placement(), [1, 0])
    with pytest.raises(RuntimeError, match="reset"):
        env.step(0)


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"dense": "yes"}, r"dense must be True or False, got 'yes'"),
    ({"reward": "fast"}, r"unknown reward 'fast'; allowed: log_speedup, neg_runtime"),
])
def test_bad_arguments(kwargs, message):
    with pytest.raises(ValueError, match=message):
        DevicePlacementStagedEnv(**SMALL, **kwargs)


@pytest.mark.parametrize("dense", [False, True])
def test_a_restored_episode_continues_as_the_saved_env_would(dense):
    """An env stopped mid-episode and a new env given its `episode_state` take the same next steps
    (observations, rewards, masks, ends) and start the next episode alike."""
    settings = SMALL | {"dense": dense, "obs_mode": "flat", "mask_in_obs": True}
    saved = DevicePlacementStagedEnv(**settings)
    saved.reset(seed=2)
    for device in (1, 0, 1):
        saved.step(device)
    restored = DevicePlacementStagedEnv(**settings)
    restored.restore_episode(saved.episode_state())
    assert restored.stage == 3 and restored.evaluations == saved.evaluations
    moves = np.random.default_rng(0).integers(0, 2, size=saved.n_nodes)
    outputs = {}
    for env in (saved, restored):
        steps = [env.step(int(device))[:3] + (env.action_masks(),) for device in moves[3:]]
        outputs[id(env)] = [*steps, (env.reset()[0],), env.step(1)[:3]]
    assert restored.evaluations == saved.evaluations
    for mine, theirs in zip(outputs[id(restored)], outputs[id(saved)], strict=True):
        for a, b in zip(mine, theirs, strict=True):
            np.testing.assert_array_equal(a, b)
