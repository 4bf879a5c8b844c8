"""`DevicePlacement-v0`: API conformance, reward shapes, OOM penalty, errors, observation, rendering."""

from __future__ import annotations

import dataclasses
import math
import os
import subprocess
import sys

import gymnasium as gym
import numpy as np
import pytest
from conftest import MS, hand_cluster, hand_graph
from gymnasium.utils.env_checker import check_env
from paths import ROOT

import placement_gym
from placement_gym.cluster import PRESETS
from placement_gym.envs.observation import DEVICE_FEATURES, EDGE_FEATURES, NODE_FEATURES
from placement_gym.envs.rewards import (
    REWARDS,
    OomPenalty,
    improvement_reward,
    penalty_runtime,
    shape_reward,
)
from placement_gym.envs.single_shot import DevicePlacementEnv
from placement_gym.graph.opgraph import CATEGORIES

GRAPH, CLUSTER = "cifar10_cnn", "k80x2"
OVERHEAD = 1e-6  # hand_cluster's per-op overhead


def _definition(name: str, runtime: float, best: float) -> float:
    """The reward shapes as the docs define them, written independently of rewards.py."""
    return {
        "log_speedup": math.log(best / runtime),
        "neg_runtime": -runtime,
        "neg_sqrt_runtime": -math.sqrt(runtime),
        "inverse": best / runtime,
    }[name]


def _run(env: DevicePlacementEnv, placement) -> tuple[float, dict]:
    env.reset()
    _, reward, terminated, truncated, info = env.step(np.asarray(placement))
    assert terminated and not truncated
    return reward, info


def _random_placements(env: DevicePlacementEnv, count: int, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return rng.integers(0, env.task.n_devices, size=(count, env.task.n_forward))


# --- API conformance -------------------------------------------------------------------------------

@pytest.mark.filterwarnings("error")  # the checker reports most problems as warnings
@pytest.mark.parametrize("objective", ["train_step", "inference"])
def test_gymnasium_env_checker_passes(objective):
    env = DevicePlacementEnv(graph=GRAPH, cluster=CLUSTER, objective=objective)
    check_env(env, skip_render_check=True)


@pytest.mark.filterwarnings("error")
def test_gymnasium_env_checker_passes_with_render_modes():
    pytest.importorskip("matplotlib")
    for mode in ("ansi", "rgb_array"):
        # Made through gym.make, so that the checker has a spec and tries the other render mode too.
        env = gym.make("DevicePlacement-v0", graph=GRAPH, cluster=CLUSTER, objective="inference",
                       render_mode=mode)
        check_env(env.unwrapped)


# Dict observations of 2-D boxes are what MultiInputPolicy flattens; SB3 only recommends 1-D ones.
@pytest.mark.filterwarnings("ignore:Your observation .* has an unconventional shape")
@pytest.mark.filterwarnings("error")
@pytest.mark.parametrize("objective", ["train_step", "inference"])
def test_stable_baselines3_env_checker_passes(objective):
    sb3_checker = pytest.importorskip("stable_baselines3.common.env_checker")
    sb3_checker.check_env(DevicePlacementEnv(graph=GRAPH, cluster=CLUSTER, objective=objective), warn=True)


def test_gym_make_after_import():
    env = gym.make("DevicePlacement-v0", graph=GRAPH, cluster=CLUSTER, objective="inference")
    obs, info = env.reset(seed=3)
    assert env.unwrapped.task.id == f"{GRAPH}/{CLUSTER}/inference" and "task_id" not in info
    assert env.observation_space.contains(obs)
    _, reward, terminated, _, info = env.step(env.action_space.sample())
    assert terminated and math.isfinite(reward) and info["runtime"] > 0
    with pytest.raises(RuntimeError, match="reset"):  # the episode has ended
        env.step(env.action_space.sample())
    masks = env.unwrapped.action_masks()
    assert masks.shape == (env.unwrapped.task.n_forward, 3) and masks.dtype == bool


def test_gym_make_namespaced_id_without_importing_the_package():
    code = (
        "import sys, gymnasium as gym\n"
        "assert 'placement_gym' not in sys.modules\n"
        f"env = gym.make('placement_gym:DevicePlacement-v0', graph={GRAPH!r}, cluster={CLUSTER!r})\n"
        "env.reset(seed=0)\n"
        "_, reward, terminated, _, info = env.step(env.action_space.sample())\n"
        "assert terminated and info['runtime'] > 0\n"
        "assert 'torch' not in sys.modules, 'the env must not import torch'\n"
        "print('ok', env.unwrapped.task.id)\n"
    )
    environment = dict(os.environ, PYTHONPATH=str(ROOT))
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT,
                          env=environment, timeout=120)
    assert done.returncode == 0, done.stderr
    assert f"ok {GRAPH}/{CLUSTER}/train" in done.stdout


# --- rewards ---------------------------------------------------------------------------------------

def test_rewards_on_a_hand_computed_task():
    """Two independent ops of 1e9 FLOPs on two 1 TFLOP/s devices: 1 ms + overhead each. On one device
    they run one after the other; split, in parallel: a speedup of exactly 2."""
    graph = hand_graph([("a", 1e9, 1e3, 0), ("b", 1e9, 1e3, 0)], edges=[])
    one_op = 1 * MS + OVERHEAD
    for name in REWARDS:
        env = DevicePlacementEnv(graph=graph, cluster=hand_cluster(2), objective="inference", reward=name)
        assert env.best_single_runtime == pytest.approx(2 * one_op, rel=1e-12)
        reward, info = _run(env, [0, 1])
        assert info["runtime"] == pytest.approx(one_op, rel=1e-12)
        assert info["speedup"] == pytest.approx(2.0, rel=1e-12)
        assert reward == pytest.approx(_definition(name, one_op, 2 * one_op), rel=1e-12)
        single, _ = _run(env, [1, 1])
        assert reward > single


def test_a_transfer_that_costs_more_than_it_saves_gets_a_lower_reward():
    """a -> b with 1 MB between them: split, b waits for latency 0.1 ms + 1e6 B / 1e9 B/s = 1 ms."""
    graph = hand_graph([("a", 1e9, 1e6, 0), ("b", 1e9, 1e3, 0)], edges=[("a", "b")])
    env = DevicePlacementEnv(graph=graph, cluster=hand_cluster(2), objective="inference")
    split, info = _run(env, [0, 1])
    one_op = 1 * MS + OVERHEAD
    assert info["runtime"] == pytest.approx(2 * one_op + 0.1 * MS + 1 * MS, rel=1e-9)
    assert split == pytest.approx(math.log(2 * one_op / info["runtime"]), rel=1e-12) and split < 0
    together, _ = _run(env, [1, 1])
    assert together == pytest.approx(0.0, abs=1e-12)


@pytest.mark.parametrize("name", REWARDS)
def test_reward_shapes_follow_their_definitions_and_order_placements_by_runtime(name):
    env = DevicePlacementEnv(graph=GRAPH, cluster=CLUSTER, objective="train_step", reward=name)
    best = env.best_single_runtime
    best_reward, info = _run(env, np.full(env.task.n_forward, env.best_single_device))
    assert info["runtime"] == best and info["feasible"]
    assert best_reward == pytest.approx(_definition(name, best, best), rel=1e-12)
    if name == "log_speedup":
        assert best_reward == 0.0
    runs = [_run(env, p) for p in _random_placements(env, 8)]
    assert all(info["feasible"] for _, info in runs)  # k80x2 holds the whole CNN on any device
    for reward, info in runs:
        assert reward == pytest.approx(_definition(name, info["runtime"], best), rel=1e-12)
        assert info["speedup"] == pytest.approx(best / info["runtime"], rel=1e-12)
    runs.sort(key=lambda run: run[1]["runtime"])
    runtimes = [info["runtime"] for _, info in runs]
    rewards = [reward for reward, _ in runs]
    assert len(set(runtimes)) == len(runtimes)
    assert rewards == sorted(rewards, reverse=True)  # faster placement, larger reward


def test_shape_reward_by_hand():
    assert shape_reward("log_speedup", 1.0, True, 2.0) == pytest.approx(math.log(2))
    assert shape_reward("neg_runtime", 0.25, True, 1.0) == -0.25
    assert shape_reward("neg_sqrt_runtime", 0.25, True, 1.0) == -0.5
    assert shape_reward("inverse", 0.5, True, 2.0) == 4.0
    # Out of memory: the runtime is replaced by the penalty, whatever the simulated one was.
    assert shape_reward("neg_runtime", 0.1, False, 2.0) == -20.0
    assert shape_reward("neg_runtime", 0.1, False, 2.0, oom_runtime=100.0) == -100.0
    assert shape_reward("neg_sqrt_runtime", 0.1, False, 2.0, oom_runtime=100.0) == -10.0
    assert penalty_runtime(2.0, oom_runtime_factor=3.0) == 6.0
    with pytest.raises(ValueError, match="unknown reward 'speed'.*log_speedup.*inverse"):
        shape_reward("speed", 1.0, True, 1.0)



def test_batch_rewards_of_the_learned_agents_by_hand():
    """The batch forms the agents in baselines/learning/ use follow the same OOM rule as the envs."""
    runtimes, feasible = np.array([1.0, 0.5, 0.1]), np.array([True, True, False])
    default, fixed = OomPenalty(), OomPenalty(oom_runtime=100.0)
    assert default.reward_runtimes(runtimes, feasible, 2.0).tolist() == [1.0, 0.5, 20.0]
    assert fixed.reward_runtimes(runtimes, feasible, 2.0).tolist() == [1.0, 0.5, 100.0]
    penalty = penalty_runtime(2.0, None, 3.0)
    assert OomPenalty(oom_runtime_factor=3.0).reward_runtimes(runtimes, feasible, 2.0)[2] == penalty
    speedups = default.log_speedups(runtimes, feasible, 2.0)
    expected = [shape_reward("log_speedup", r, ok, 2.0) for r, ok in zip(runtimes, feasible)]
    assert speedups == pytest.approx(expected, rel=1e-15)
    assert speedups[2] == pytest.approx(math.log(2.0 / 20.0))
    # In best-single units the default penalty is the factor itself, exactly.
    best = 0.1 + 0.2  # a value for which factor x best / best need not round back to the factor
    assert default.relative_runtimes(np.array([0.6, 0.1]), np.array([True, False]), best)[1] == 10.0
    assert fixed.relative_runtimes(runtimes, feasible, 2.0).tolist() == [0.5, 0.25, 50.0]
    neg_sqrt = OomPenalty(oom_runtime_factor=4.0).neg_sqrt_relative_runtimes(runtimes, feasible, 4.0)
    assert neg_sqrt.tolist() == [-0.5, -math.sqrt(0.125), -2.0]
    assert improvement_reward(3.0, 1.0, 4.0) == 0.5
    assert improvement_reward(np.array([3.0, 1.0]), np.array([1.0, 3.0]), 4.0).tolist() == [0.5, -0.5]


# --- out of memory ---------------------------------------------------------------------------------

def _small_gpu_cluster():
    """k80x2 with GPUs of 95% of the memory the inference of the whole CNN needs on one GPU: the
    whole graph fits only on the CPU, a graph split between the GPUs fits."""
    k80x2 = PRESETS["k80x2"]()
    env = DevicePlacementEnv(graph=GRAPH, cluster=k80x2, objective="inference")
    _, info = _run(env, np.full(env.task.n_forward, 1))
    capacity = k80x2.memory_capacity.copy()
    capacity[1:] = 0.95 * info["peak_memory"][1]
    return dataclasses.replace(k80x2, name="k80x2_small_gpu", memory_capacity=capacity)


@pytest.mark.parametrize("name", REWARDS)
def test_out_of_memory_placement_scores_below_every_feasible_one(name):
    env = DevicePlacementEnv(graph=GRAPH, cluster=_small_gpu_cluster(), objective="inference", reward=name)
    assert env.best_single_device == 0  # only the CPU holds the whole graph
    oom_reward, oom = _run(env, np.full(env.task.n_forward, 1))
    assert not oom["feasible"] and oom["feasible"].dtype == bool
    assert oom["peak_memory"][1] > env.task.cluster.memory_capacity[1]
    assert oom["reward_runtime"] == pytest.approx(10 * env.best_single_runtime)
    best = env.best_single_runtime
    assert oom_reward == pytest.approx(_definition(name, 10 * best, best))
    n = env.task.n_forward
    # The first k ops on gpu:0 (device 1), the others on the CPU or on gpu:1.
    splits = [np.where(np.arange(n) < k, 1, rest) for k in range(1, n) for rest in (0, 2)]
    feasible = [reward for reward, info in (_run(env, p) for p in splits) if info["feasible"]]
    cpu_reward, _ = _run(env, np.zeros(n, dtype=int))
    feasible.append(cpu_reward)
    assert len(feasible) >= 10
    assert oom_reward < min(feasible)


def test_fixed_oom_runtime_of_mirhoseini():
    env = DevicePlacementEnv(graph=GRAPH, cluster=_small_gpu_cluster(), objective="inference",
                             reward="neg_sqrt_runtime", oom_runtime=100.0)
    reward, info = _run(env, np.full(env.task.n_forward, 2))
    assert not info["feasible"] and info["reward_runtime"] == 100.0
    assert reward == -10.0
    assert info["runtime"] < 1.0  # the simulated runtime is still reported


# --- errors ----------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def cnn_env():
    return DevicePlacementEnv(graph=GRAPH, cluster=CLUSTER, objective="inference")


def test_bad_actions_raise_clear_errors_and_keep_the_episode_open(cnn_env):
    env = cnn_env
    n = env.task.n_forward
    env.reset()
    with pytest.raises(ValueError, match=rf"shape \({n},\).*got shape \({n - 1},\)"):
        env.step(np.zeros(n - 1, dtype=int))
    with pytest.raises(ValueError, match=r"shape"):
        env.step(np.zeros((1, n), dtype=int))
    with pytest.raises(ValueError, match=r"device index 3 at op 4 .* out of range; allowed 0\.\.2"):
        env.step(np.where(np.arange(n) == 4, 3, 0))
    with pytest.raises(ValueError, match="out of range"):
        env.step(np.full(n, -1))
    with pytest.raises(ValueError, match="integer device indices"):
        env.step(np.full(n, 0.5))
    _, _, terminated, _, _ = env.step(np.zeros(n, dtype=float))  # whole floats are fine
    assert terminated


def test_step_before_reset_and_after_the_end_raise(cnn_env):
    fresh = DevicePlacementEnv(graph=GRAPH, cluster=CLUSTER, objective="inference")
    action = np.zeros(fresh.task.n_forward, dtype=int)
    with pytest.raises(RuntimeError, match="reset"):
        fresh.step(action)
    fresh.reset()
    fresh.step(action)
    with pytest.raises(RuntimeError, match="reset"):
        fresh.step(action)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"reward": "fast"},
         r"unknown reward 'fast'; allowed: log_speedup, neg_runtime, neg_sqrt_runtime, inverse"),
        ({"render_mode": "human"}, r"unknown render_mode 'human'; allowed: None, ansi, rgb_array"),
        ({"objective": "training"}, r"unknown objective 'training'"),
        ({"oom_runtime_factor": 0.5}, r"oom_runtime_factor must be a finite number >= 1"),
        ({"oom_runtime": -1.0}, r"oom_runtime must be a positive"),
        ({"max_ops": 3}, r"max_ops must be an integer >= \d+"),
        ({"max_edges": 1}, r"max_edges must be an integer >= \d+"),
    ],
)
def test_bad_arguments_raise_clear_errors(kwargs, message):
    with pytest.raises(ValueError, match=message):
        DevicePlacementEnv(**{"graph": GRAPH, "cluster": CLUSTER, **kwargs})


def test_same_action_same_result():
    first = DevicePlacementEnv(graph=GRAPH, cluster=CLUSTER)
    second = DevicePlacementEnv(graph=GRAPH, cluster=CLUSTER)
    action = _random_placements(first, 1, seed=7)[0]
    reward, info = _run(first, action)
    again, info_again = _run(first, action)
    other, info_other = _run(second, action)
    assert reward == again == other
    assert info["runtime"] == info_again["runtime"] == info_other["runtime"]
    np.testing.assert_array_equal(info["peak_memory"], info_other["peak_memory"])


# --- observation and masks -------------------------------------------------------------------------

def test_observation_describes_the_graph():
    """a -> b, a -> c (two tensors: merged into one edge), b -> c; a data input feeds a."""
    graph = hand_graph(
        [("a", 1e9, 1e6, 4e3), ("b", 0.0, 1e3, 0), ("c", 1e6, 1e3, 0)],
        edges=[("x", "a"), ("a", "b"), ("a", "c"), ("b", "c")], inputs=[("x", 1e5)],
    )
    env = DevicePlacementEnv(graph=graph, cluster=hand_cluster(2), objective="inference",
                             max_ops=5, max_edges=4)
    obs, _ = env.reset()
    assert env.observation_space.contains(obs)
    assert obs["node_features"].shape == (5, len(NODE_FEATURES))
    np.testing.assert_array_equal(obs["node_mask"], [1, 1, 1, 0, 0])
    np.testing.assert_array_equal(obs["edge_mask"], [1, 1, 1, 0])
    np.testing.assert_array_equal(obs["edge_index"], [[0, 0, 1, 0], [1, 2, 2, 0]])  # padding 0 -> 0
    assert obs["edge_features"].shape == (4, len(EDGE_FEATURES))
    assert obs["edge_features"][0, 0] > obs["edge_features"][2, 0] > 0 == obs["edge_features"][3, 0]
    column = {name: i for i, name in enumerate(NODE_FEATURES)}
    features = obs["node_features"]
    matmul = column["category_matmul"]
    np.testing.assert_array_equal(features[:3, matmul], 1)
    np.testing.assert_array_equal(features[:3, : len(CATEGORIES)].sum(axis=1), 1)
    np.testing.assert_array_equal(features[3:], 0)
    np.testing.assert_allclose(features[:3, column["depth"]], [0, 0.5, 1])
    log_flops = features[:3, column["log_flops"]]
    assert log_flops[1] == 0 < log_flops[2] < log_flops[0]
    assert features[0, column["log_param_bytes"]] > 0 == features[1, column["log_param_bytes"]]
    assert features[:3, column["fastest_time_share"]].sum() == pytest.approx(1.0, rel=1e-6)
    assert obs["device_features"].shape == (2, len(DEVICE_FEATURES))
    np.testing.assert_array_equal(obs["device_features"][:, DEVICE_FEATURES.index("is_gpu")], 1)


def test_observation_is_a_fresh_copy_each_time(cnn_env):
    obs, _ = cnn_env.reset()
    obs["node_features"][:] = 7
    again, _ = cnn_env.reset()
    assert cnn_env.observation_space.contains(again)
    assert again["node_features"].max() <= 1


def test_cpu_and_gpu_device_features(cnn_env):
    obs, _ = cnn_env.reset()
    devices = obs["device_features"]
    np.testing.assert_array_equal(devices[:, DEVICE_FEATURES.index("is_gpu")], [0, 1, 1])
    flops = DEVICE_FEATURES.index("log_peak_flops")
    assert devices[0, flops] < devices[1, flops] == devices[2, flops]


def test_action_masks_drop_devices_an_op_parameters_alone_overflow():
    """b's 5 kB of parameters fit only on device 1 (10 kB); c's 50 kB fit nowhere: all allowed."""
    graph = hand_graph([("a", 1e6, 1e3, 0), ("b", 1e6, 1e3, 5e3), ("c", 1e6, 1e3, 5e4)],
                       edges=[("a", "b"), ("b", "c")])
    cluster = dataclasses.replace(hand_cluster(2), memory_capacity=np.array([1e3, 1e4]))
    env = DevicePlacementEnv(graph=graph, cluster=cluster, objective="inference")
    masks = env.action_masks()
    assert masks.dtype == bool
    np.testing.assert_array_equal(masks, [[True, True], [False, True], [True, True]])
    masks[:] = False  # a copy: the env's masks stay as they were
    assert env.action_masks()[0].all()


# --- rendering -------------------------------------------------------------------------------------

def test_render_ansi_shows_runtime_and_devices():
    env = DevicePlacementEnv(graph=GRAPH, cluster=CLUSTER, objective="inference", render_mode="ansi")
    env.reset()
    assert "no placement yet" in env.render()
    _, info = _run(env, _random_placements(env, 1)[0])
    text = env.render()
    assert f"{info['runtime'] * 1e3:.3f} ms" in text
    for device in ("cpu:0", "gpu:0", "gpu:1"):
        assert device in text


def test_render_rgb_array_is_an_image():
    pytest.importorskip("matplotlib")
    env = DevicePlacementEnv(graph=GRAPH, cluster=CLUSTER, objective="inference", render_mode="rgb_array")
    _run(env, _random_placements(env, 1)[0])
    image = env.render()
    assert image.ndim == 3 and image.shape[2] == 3 and image.dtype == np.uint8
    assert image.shape[0] > 10 and image.shape[1] > 10


def test_no_render_mode_renders_nothing(cnn_env):
    cnn_env.reset()
    assert cnn_env.render() is None


def test_package_registers_the_env():
    assert "DevicePlacement-v0" in gym.registry
    assert placement_gym.__version__


def test_a_restored_single_shot_env_continues_as_the_saved_one_would():
    """After a step the episode is over in both (a step before a reset is refused); after a reset
    both give the same observation and the same step."""
    saved = DevicePlacementEnv(graph="cifar10_cnn", cluster="k80x2", obs_mode="flat")
    saved.reset(seed=1)
    saved.step(np.ones(saved.n_nodes, dtype=np.int64))
    restored = DevicePlacementEnv(graph="cifar10_cnn", cluster="k80x2", obs_mode="flat")
    restored.restore_episode(saved.episode_state())
    assert restored.evaluations == saved.evaluations == 1
    for env in (saved, restored):
        with pytest.raises(RuntimeError, match="call reset"):
            env.step(np.zeros(env.n_nodes, dtype=np.int64))
    np.testing.assert_array_equal(restored.reset()[0], saved.reset()[0])
    mine, theirs = (env.step(np.zeros(env.n_nodes, dtype=np.int64))[:3] for env in (restored, saved))
    for a, b in zip(mine, theirs, strict=True):
        np.testing.assert_array_equal(a, b)
