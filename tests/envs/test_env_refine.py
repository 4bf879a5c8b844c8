"""`DevicePlacementRefine-v0` (Placeto): rewards by hand (and Park's two bugs), the initial
placement, sweeps, masks, seeding, errors; the observation and masks kept up to date move by move
equal the ones built afresh for the same placement."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from conftest import ONE_OP, hand_cluster, hand_graph, play_episode, two_independent_ops

from placement_gym.cluster import load_cluster
from placement_gym.cost_model import simulate
from placement_gym.envs.refine import DevicePlacementRefineEnv, refine_visit
from placement_gym.evaluation.placements import save_placement

SMALL = dict(graph="cifar10_cnn", cluster="k80x2", objective="inference")


def test_an_improving_move_gets_a_positive_reward():
    """From both ops on gpu:0 (2 ONE_OP), moving a to gpu:1 runs them in parallel (ONE_OP):
    reward (2 ONE_OP - ONE_OP) / (2 ONE_OP) = +0.5. Park's env returns new - previous: negative."""
    env = two_independent_ops(DevicePlacementRefineEnv, initial="gpu:0")
    rewards, ends, infos, _ = play_episode(env, [1, 1])
    assert infos[0]["runtime"] == pytest.approx(2 * ONE_OP, rel=1e-12)
    assert infos[1]["runtime"] == pytest.approx(ONE_OP, rel=1e-12)
    assert rewards[0] == pytest.approx(0.5, rel=1e-12) and rewards[0] > 0
    assert rewards[1] == pytest.approx(-0.5, rel=1e-12)  # b joins a: slower again
    assert [info["node"] for info in infos[1:]] == [0, 1]


def test_the_last_node_is_placed_and_its_reward_counted():
    """Only the last move improves anything; an env that ends one step early (Park's) loses it."""
    env = two_independent_ops(DevicePlacementRefineEnv, initial="gpu:0")
    rewards, ends, infos, observations = play_episode(env, [0, 1])
    assert ends == [False, True]  # two steps for two nodes
    assert rewards[0] == pytest.approx(0.0, abs=1e-12)
    assert rewards[1] == pytest.approx(0.5, rel=1e-12)
    np.testing.assert_array_equal(env.placement(), [0, 1])
    np.testing.assert_array_equal(observations[-1]["placement"], [[1, 0], [0, 1]])
    np.testing.assert_array_equal(observations[-1]["current"], [0, 0])  # no node left
    assert infos[-1]["runtime"] == pytest.approx(ONE_OP, rel=1e-12)
    with pytest.raises(RuntimeError, match="reset"):
        env.step(0)


@pytest.mark.parametrize("sweeps", [1, 2])
@pytest.mark.parametrize("groups", [None, "chains"])
def test_rewards_sum_to_the_normalised_improvement(sweeps, groups):
    env = DevicePlacementRefineEnv(**SMALL, sweeps=sweeps, groups=groups)
    actions = np.random.default_rng(1).integers(0, 3, size=sweeps * env.n_nodes)
    rewards, ends, infos, _ = play_episode(env, actions, seed=2)
    assert len(rewards) == sweeps * env.n_nodes and ends[-1] and not any(ends[:-1])
    best = env.best_single_runtime
    initial, final = infos[0]["reward_runtime"], infos[-1]["reward_runtime"]
    assert infos[-1]["initial_runtime"] == infos[0]["runtime"]
    assert sum(rewards) == pytest.approx((initial - final) / best, rel=1e-9, abs=1e-12)
    # The episode visits node t % n at step t; the final placement is the last sweep's actions.
    assert [info["node"] for info in infos[1:]] == [t % env.n_nodes for t in range(len(actions))]
    assert [info["sweep"] for info in infos[1:]] == [t // env.n_nodes for t in range(len(actions))]
    np.testing.assert_array_equal(env.placement(), actions[-env.n_nodes:])
    assert final == simulate(env.task, env.op_placement(env.placement())).runtime


def test_refine_visit_is_the_order_the_env_visits():
    """The public visiting order (what Placeto's agent uses) is the env's own: node t % n in sweep t // n."""
    env = DevicePlacementRefineEnv(**SMALL, sweeps=2, initial="best-single")
    env.reset(seed=0)
    for t in range(env.episode_length):
        assert env.current_node == refine_visit(t, env.n_nodes)[0]
        _, _, _, _, info = env.step(0)
        assert (info["node"], info["sweep"]) == refine_visit(t, env.n_nodes)
    assert env.current_node is None


def test_out_of_memory_moves_are_rewarded_with_the_penalty_runtime():
    """6 kB of parameters per op, 10 kB per device: both ops on gpu:0 overflow (penalty runtime
    10 x best single = 20 ONE_OP); moving a to gpu:1 fits and runs in ONE_OP."""
    graph = hand_graph([("a", 1e9, 1e3, 6e3), ("b", 1e9, 1e3, 6e3)], edges=[])
    cluster = dataclasses.replace(hand_cluster(2), memory_capacity=np.array([1e4, 1e4]))
    env = DevicePlacementRefineEnv(graph=graph, cluster=cluster, objective="inference", initial="gpu:0")
    rewards, _, infos, _ = play_episode(env, [1, 1])
    best = env.best_single_runtime
    assert not infos[0]["feasible"] and infos[0]["reward_runtime"] == pytest.approx(10 * best)
    assert rewards[0] == pytest.approx((10 * best - ONE_OP) / best, rel=1e-12)
    assert not infos[2]["feasible"]
    assert rewards[1] == pytest.approx((ONE_OP - 10 * best) / best, rel=1e-12)


# Integral bytes (the env keeps per-device sums move by move) and fractional ones (it sums afresh).
@pytest.mark.parametrize("param_bytes", [6e3, 6e3 + 0.25])
def test_masks_count_the_other_nodes_static_memory(param_bytes):
    graph = hand_graph([(name, 1e9, 1e3, param_bytes) for name in "abc"], edges=[])
    cluster = dataclasses.replace(hand_cluster(2), memory_capacity=np.array([1e4, 1e4]))
    env = DevicePlacementRefineEnv(graph=graph, cluster=cluster, objective="inference",
                                   initial=np.array([0, 1, 1]))
    env.reset()
    # a: b and c fill gpu:1 (12 kB), gpu:0 has only a itself: it may stay.
    np.testing.assert_array_equal(env.action_masks(), [True, False])
    env.step(0)
    # b: gpu:0 holds a (6 kB), gpu:1 holds c (6 kB): both overflow, so both are allowed.
    np.testing.assert_array_equal(env.action_masks(), [True, True])
    env.step(0)
    # c: gpu:0 holds a and b.
    np.testing.assert_array_equal(env.action_masks(), [False, True])
    env.step(1)
    assert env.action_masks().all()  # after the end


def test_initial_placements(tmp_path):
    env = DevicePlacementRefineEnv(**SMALL, initial="gpu:1")
    env.reset()
    np.testing.assert_array_equal(env.placement(), 2)
    best = DevicePlacementRefineEnv(**SMALL, initial="best-single")
    _, info = best.reset()
    np.testing.assert_array_equal(best.placement(), best.best_single_device)
    assert info["runtime"] == best.best_single_runtime
    n = env.task.n_forward
    per_op = np.arange(n) % 3
    from_array = DevicePlacementRefineEnv(**SMALL, initial=per_op)
    from_array.reset()
    np.testing.assert_array_equal(from_array.placement(), per_op)
    path = tmp_path / "placement.json"
    save_placement(env.task, per_op, path)
    from_file = DevicePlacementRefineEnv(**SMALL, initial=str(path))
    from_file.reset()
    np.testing.assert_array_equal(from_file.placement(), per_op)
    # With groups, a per-op placement gives each group the device of its first op.
    grouped = DevicePlacementRefineEnv(**SMALL, initial=path, groups="chains")
    grouped.reset()
    np.testing.assert_array_equal(grouped.placement(), per_op[grouped.grouping.first_op])
    per_group = np.arange(grouped.n_nodes) % 2
    grouped = DevicePlacementRefineEnv(**SMALL, initial=per_group, groups="chains")
    grouped.reset()
    np.testing.assert_array_equal(grouped.placement(), per_group)


def test_random_initial_placement_is_seeded_by_reset():
    env = DevicePlacementRefineEnv(**SMALL)  # the default initial is "random"
    other = DevicePlacementRefineEnv(**SMALL)
    env.reset(seed=7)
    first = env.placement()
    other.reset(seed=7)
    np.testing.assert_array_equal(other.placement(), first)
    assert len(np.unique(first)) == 3  # 30 ops drawn over 3 devices
    env.reset()  # the next episode draws again from the same generator
    assert not np.array_equal(env.placement(), first)
    env.reset(seed=8)
    assert not np.array_equal(env.placement(), first)


def test_render_shows_the_current_placement():
    env = two_independent_ops(DevicePlacementRefineEnv, initial="gpu:0", render_mode="ansi")
    assert "no episode yet" in env.render()
    env.reset()
    env.step(1)
    text = env.render()
    assert "step 1 of 2" in text and f"{ONE_OP * 1e3:.3f} ms" in text


def test_bad_actions():
    env = two_independent_ops(DevicePlacementRefineEnv, initial="gpu:0")
    with pytest.raises(RuntimeError, match="reset"):
        env.step(0)
    env.reset()
    with pytest.raises(ValueError, match=r"one device index in 0\.\.1 \(gpu:0, gpu:1\), got 2"):
        env.step(2)
    assert env.current_node == 0


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"initial": "tpu:0"},
     r"unknown initial 'tpu:0'; allowed: 'random', 'best-single', a device name of cluster 'k80x2' "
     r"\(cpu:0, gpu:0, gpu:1\), a placement file, or an array of 30 device indices"),
    ({"initial": np.zeros(7, dtype=int)}, r"unknown initial .*allowed: 'random'"),
    ({"initial": np.full(30, 5)}, r"device index 5 at op 0 .* out of range; allowed 0\.\.2"),
    ({"initial": "missing.json"}, r"unknown initial 'missing.json'"),
    ({"sweeps": 0}, r"sweeps must be an integer >= 1 .*got 0"),
    ({"sweeps": 1.5}, r"sweeps must be an integer >= 1"),
])
def test_bad_arguments(kwargs, message):
    with pytest.raises(ValueError, match=message):
        DevicePlacementRefineEnv(**SMALL, **kwargs)


def _masks_afresh(env: DevicePlacementRefineEnv, node: int) -> np.ndarray:
    """The Action Space rule, summed here op by op: devices where the static bytes of the other nodes
    plus ``node``'s fit; every device when none does."""
    used = np.zeros(env.task.n_devices)
    nodes = env.placement()
    for other in range(env.n_nodes):
        if other != node:
            used[nodes[other]] += env.node_static_bytes[other]
    fits = used + env.node_static_bytes[node] <= env.task.cluster.memory_capacity
    return fits if fits.any() else np.ones(env.task.n_devices, dtype=bool)


@pytest.mark.parametrize("obs_mode, mask_in_obs", [("dict", False), ("dict", True), ("flat", False),
                                                   ("flat", True), ("graph", False)])
@pytest.mark.parametrize("groups", [None, "chains"], ids=str)
def test_observation_after_moves_is_the_one_built_afresh(obs_mode, mask_in_obs, groups):
    """After every move of two sweeps, the observation (updated in place for the moved node) is a
    fresh env's at the same placement, with the current node and its mask of the moved-to state; the
    masks (kept as per-device sums) are the rule summed afresh. Memory is tight (each device holds
    under half the static bytes), so the masks change along the way."""
    k80x2 = load_cluster("k80x2")
    probe = DevicePlacementRefineEnv(graph="cifar10_cnn", cluster=k80x2, objective="train_step",
                                     groups=groups)
    capacity = np.full(k80x2.n_devices, 0.45 * probe.node_static_bytes.sum())
    settings = dict(graph="cifar10_cnn", cluster=dataclasses.replace(k80x2, memory_capacity=capacity),
                    objective="train_step", groups=groups, obs_mode=obs_mode, mask_in_obs=mask_in_obs)
    env = DevicePlacementRefineEnv(**settings, sweeps=2)
    env.reset(seed=5)
    rng = np.random.default_rng(11)
    masks_seen = set()
    for _ in range(env.episode_length):
        obs, *_ = env.step(int(rng.integers(env.task.n_devices)))
        node = env.current_node
        current = np.zeros(env.n_nodes, dtype=np.float32)
        masks = np.ones(env.task.n_devices, dtype=bool)
        if node is not None:
            current[node] = 1.0
            masks = _masks_afresh(env, node)
        masks_seen.add(tuple(masks))
        np.testing.assert_array_equal(env.action_masks(), masks)
        expected, _ = DevicePlacementRefineEnv(**settings, initial=env.placement()).reset()
        if obs_mode == "graph":
            expected.nodes[:, -1] = current
            for got, want in zip(obs, expected, strict=True):
                np.testing.assert_array_equal(got, want)
            continue
        if obs_mode == "flat":
            expected[env.flat_slices["current"]] = current
            if mask_in_obs:
                expected[env.flat_slices["action_mask"]] = masks
        else:
            expected["current"] = current
            if mask_in_obs:
                expected["action_mask"] = masks
        np.testing.assert_equal(obs, expected)
    assert len(masks_seen) >= 2  # the memory limit bites


@pytest.mark.parametrize("groups", [None, "chains"])
def test_a_restored_episode_continues_as_the_saved_env_would(groups):
    """An env stopped mid-sweep and a new env given its `episode_state` take the same next steps:
    observations, rewards, masks and ends, into the next episode (drawn from the restored generator)."""
    settings = SMALL | {"groups": groups, "obs_mode": "flat", "mask_in_obs": True}
    saved = DevicePlacementRefineEnv(**settings)
    saved.reset(seed=3)
    for device in (1, 0, 1):
        saved.step(device)
    state = saved.episode_state()
    restored = DevicePlacementRefineEnv(**settings)
    restored.restore_episode(state)
    assert restored.evaluations == saved.evaluations == 4
    moves = np.random.default_rng(0).integers(0, 2, size=saved.n_nodes)
    outputs = {}
    for env in (saved, restored):
        steps = [env.step(int(device))[:3] + (env.action_masks(),) for device in moves[3:]]
        outputs[id(env)] = [*steps, (env.reset()[0],), env.step(1)[:3]]  # the next start, from the generator
    assert restored.evaluations == saved.evaluations  # the restore itself evaluated nothing more
    for mine, theirs in zip(outputs[id(restored)], outputs[id(saved)], strict=True):
        for a, b in zip(mine, theirs, strict=True):
            np.testing.assert_array_equal(a, b)
    with pytest.raises(ValueError, match="episode state at step 999"):
        restored.restore_episode(state | {"steps": 999})
