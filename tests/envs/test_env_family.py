"""What all three envs share: checkers over ids x observation modes x groupings, grouped observations,
masks' shapes, vector envs, rendering, seeding, errors, and training with stable-baselines3."""

from __future__ import annotations

import os
import subprocess
import sys
import warnings

import gymnasium as gym
import numpy as np
import pytest
from conftest import hand_cluster, hand_graph
from gymnasium.utils.env_checker import check_env
from paths import ROOT

import placement_gym  # noqa: F401  (registers the ids)
from placement_gym.envs import ENV_IDS
from placement_gym.envs.observation import BYTE_SCALE, FLOP_SCALE, NODE_FEATURES
from placement_gym.envs.refine import DevicePlacementRefineEnv
from placement_gym.envs.single_shot import DevicePlacementEnv
from placement_gym.envs.staged import DevicePlacementStagedEnv
from placement_gym.task.groups import make_grouping, quotient_edges
from placement_gym.task.named import get_task

IDS = tuple(ENV_IDS)
CLASSES = {
    "DevicePlacement-v0": DevicePlacementEnv,
    "DevicePlacementStaged-v0": DevicePlacementStagedEnv,
    "DevicePlacementRefine-v0": DevicePlacementRefineEnv,
}
GRAPHS = [("cifar10_cnn", "k80x2", "train_step"), ("cifar10_resnet56", "k80x2", "inference")]
GROUPS = [None, "colocate", "chains", 4, "explicit"]
SMALL = dict(graph="cifar10_cnn", cluster="k80x2", objective="inference")


def _groups(name, graph: str, objective: str):
    """The ``groups=`` value; ``"explicit"`` stands for an array: runs of three ops."""
    if name != "explicit":
        return name
    return np.arange(get_task(graph, "k80x2", objective).n_forward) // 3


def _column(name: str) -> int:
    return NODE_FEATURES.index(name)


# --- checkers --------------------------------------------------------------------------------------

@pytest.mark.filterwarnings("error")  # the checker reports most problems as warnings
@pytest.mark.parametrize("groups", GROUPS, ids=str)
@pytest.mark.parametrize("obs_mode", ["dict", "graph"])
@pytest.mark.parametrize("env_id", IDS)
@pytest.mark.parametrize(("graph", "cluster", "objective"), GRAPHS, ids=[g[0] for g in GRAPHS])
def test_gymnasium_checker_passes(graph, cluster, objective, env_id, obs_mode, groups):
    env = gym.make(env_id, graph=graph, cluster=cluster, objective=objective, obs_mode=obs_mode,
                   groups=_groups(groups, graph, objective))
    check_env(env.unwrapped, skip_render_check=True)
    if groups == 4:
        assert env.unwrapped.n_nodes == 4


# SB3 only takes the dict mode: its checker rejects `Graph` observation spaces outright ("Graph
# observation space is not supported by Stable-Baselines3"), so the graph mode is not checked here.
@pytest.mark.filterwarnings("ignore:Your observation .* has an unconventional shape")
@pytest.mark.filterwarnings("error")
@pytest.mark.parametrize("groups", GROUPS, ids=str)
@pytest.mark.parametrize("env_id", IDS)
@pytest.mark.parametrize(("graph", "cluster", "objective"), GRAPHS, ids=[g[0] for g in GRAPHS])
def test_stable_baselines3_checker_passes_in_dict_mode(graph, cluster, objective, env_id, groups):
    sb3_checker = pytest.importorskip("stable_baselines3.common.env_checker")
    env = CLASSES[env_id](graph=graph, cluster=cluster, objective=objective,
                          groups=_groups(groups, graph, objective))
    sb3_checker.check_env(env, warn=True)


@pytest.mark.filterwarnings("error")
@pytest.mark.parametrize("env_id", IDS[1:])
def test_gymnasium_checker_passes_with_render_modes(env_id):
    pytest.importorskip("matplotlib")
    env = gym.make(env_id, **SMALL, groups="chains", render_mode="ansi")
    check_env(env.unwrapped)  # with a spec: it tries rgb_array too


def test_every_id_is_registered_once():
    for env_id in IDS:
        assert env_id in gym.registry
    before = dict(gym.registry)
    placement_gym.envs.register_envs()  # idempotent
    assert dict(gym.registry) == before


def test_namespaced_ids_work_without_importing_the_package():
    code = (
        "import sys, gymnasium as gym\n"
        "for env_id in ('DevicePlacementStaged-v0', 'DevicePlacementRefine-v0'):\n"
        "    env = gym.make('placement_gym:' + env_id, graph='cifar10_cnn', cluster='k80x2')\n"
        "    env.reset(seed=0)\n"
        "    env.step(env.action_space.sample())\n"
        "assert 'torch' not in sys.modules, 'the envs must not import torch'\n"
        "print('ok')\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT,
                          env=dict(os.environ, PYTHONPATH=str(ROOT)), timeout=120)
    assert done.returncode == 0, done.stderr
    assert "ok" in done.stdout


# --- grouped observations and actions --------------------------------------------------------------

def _three_op_graph():
    """a -> b -> c, with a data input into a; a and b grouped, c alone."""
    return hand_graph([("a", 1e9, 1e6, 4e3), ("b", 1e9, 2e6, 0), ("c", 1e6, 1e3, 0)],
                      edges=[("x", "a"), ("a", "b"), ("b", "c"), ("a", "c")], inputs=[("x", 1e5)])


@pytest.mark.parametrize("env_class", list(CLASSES.values()))
def test_a_group_is_described_by_its_summed_raw_quantities(env_class):
    env = env_class(graph=_three_op_graph(), cluster=hand_cluster(2), objective="inference",
                    groups=[7, 7, 3])
    assert env.n_nodes == 2
    obs, _ = env.reset(seed=0)
    features = obs["node_features"]
    assert features.shape == (2, len(NODE_FEATURES))
    # Sum first, then the log: log1p(1e9 + 1e9), not log1p(1e9) + log1p(1e9).
    assert features[0, _column("log_flops")] == pytest.approx(np.log1p(2e9) / np.log1p(FLOP_SCALE), rel=1e-6)
    assert features[1, _column("log_flops")] == pytest.approx(np.log1p(1e6) / np.log1p(FLOP_SCALE), rel=1e-6)
    assert features[0, _column("log_output_bytes")] == pytest.approx(
        np.log1p(3e6) / np.log1p(BYTE_SCALE), rel=1e-6)
    assert features[0, _column("category_matmul")] == 1.0  # every op of the group is a matmul
    assert features[0, _column("depth")] == 0.0 and features[1, _column("depth")] == 1.0
    assert features[:, _column("fastest_time_share")].sum() == pytest.approx(1.0, rel=1e-6)
    # One edge group 0 -> group 1 carrying b's and a's tensors into c (the a -> b edge is inside).
    np.testing.assert_array_equal(obs["edge_index"], [[0], [1]])
    assert obs["edge_features"][0, 0] == pytest.approx(np.log1p(3e6) / np.log1p(BYTE_SCALE), rel=1e-6)


def test_group_features_of_single_op_groups_are_the_op_features():
    ungrouped = DevicePlacementEnv(**SMALL)
    n = ungrouped.task.n_forward
    permuted = DevicePlacementEnv(**SMALL, groups=np.arange(n)[::-1])  # renumbered by first op
    for first, second in zip(ungrouped.reset()[0].values(), permuted.reset()[0].values(), strict=True):
        np.testing.assert_allclose(first, second, rtol=1e-6)


@pytest.mark.parametrize("groups", ["colocate", "chains", 4])
def test_graph_edges_are_the_quotient_edges(groups):
    env = DevicePlacementStagedEnv(**SMALL, groups=groups, obs_mode="graph")
    obs, _ = env.reset()
    src, dst, _ = quotient_edges(env.task.graph, make_grouping(env.task.graph, groups))
    np.testing.assert_array_equal(obs.edge_links, np.stack([src, dst], axis=1))
    assert obs.nodes.shape == (env.n_nodes, len(NODE_FEATURES) + env.task.n_devices + 1)


def test_single_shot_with_groups_places_every_op_of_a_group_on_its_device():
    graph = hand_graph([("a", 1e9, 1e3, 0), ("b", 1e9, 1e3, 0), ("c", 1e9, 1e3, 0)], edges=[])
    grouped = DevicePlacementEnv(graph=graph, cluster=hand_cluster(2), objective="inference",
                                 groups=[0, 1, 0])
    plain = DevicePlacementEnv(graph=graph, cluster=hand_cluster(2), objective="inference")
    assert grouped.action_space.nvec.tolist() == [2, 2]
    assert grouped.action_masks().shape == (2, 2)
    grouped.reset()
    plain.reset()
    obs, reward, _, _, info = grouped.step(np.array([1, 0]))
    _, expected, _, _, expected_info = plain.step(np.array([1, 0, 1]))
    assert reward == expected and info["runtime"] == expected_info["runtime"]
    np.testing.assert_array_equal(obs["placement"], [[0, 1], [1, 0]])
    grouped.reset()
    with pytest.raises(ValueError, match=r"shape \(2,\): one device index per group; got shape \(3,\)"):
        grouped.step(np.array([1, 0, 1]))
    with pytest.raises(ValueError, match=r"device index 5 at group 1 \(first op 'b'\) is out of range"):
        grouped.step(np.array([0, 5]))


@pytest.mark.parametrize("env_class", list(CLASSES.values()))
def test_dict_and_graph_modes_hold_the_same_numbers(env_class):
    dict_env = env_class(**SMALL, groups="chains")
    graph_env = env_class(**SMALL, groups="chains", obs_mode="graph")
    n, f, d = dict_env.n_nodes, len(NODE_FEATURES), dict_env.task.n_devices
    pairs = [(dict_env.reset(seed=5)[0], graph_env.reset(seed=5)[0])]
    actions = [np.arange(n) % d] if env_class is DevicePlacementEnv else [2, 0, 1]
    for action in actions:
        pairs.append((dict_env.step(action)[0], graph_env.step(action)[0]))
    for as_dict, as_graph in pairs:
        np.testing.assert_array_equal(as_graph.nodes[:, :f], as_dict["node_features"][:n])
        np.testing.assert_array_equal(as_graph.nodes[:, f: f + d], as_dict["placement"][:n])
        np.testing.assert_array_equal(as_graph.nodes[:, f + d], as_dict["current"][:n])
        np.testing.assert_array_equal(as_graph.edges, as_dict["edge_features"][: len(as_graph.edges)])
    assert pairs[-1][0]["placement"].sum() > 0


def test_graph_mode_of_a_graph_without_edges():
    graph = hand_graph([("a", 1e9, 1e3, 0), ("b", 1e9, 1e3, 0)], edges=[])
    env = DevicePlacementStagedEnv(graph=graph, cluster=hand_cluster(2), objective="inference",
                                   obs_mode="graph")
    obs, _ = env.reset()
    assert obs.edges.shape == (0, 1) and obs.edge_links.shape == (0, 2)
    assert env.observation_space.contains(obs)


# --- masks -----------------------------------------------------------------------------------------

@pytest.mark.parametrize("groups", [None, "chains"])
def test_mask_shapes(groups):
    single = DevicePlacementEnv(**SMALL, groups=groups)
    staged = DevicePlacementStagedEnv(**SMALL, groups=groups)
    refine = DevicePlacementRefineEnv(**SMALL, groups=groups)
    assert single.action_masks().shape == (single.n_nodes, 3)
    for env in (staged, refine):
        env.reset(seed=0)
        masks = env.action_masks()
        assert masks.shape == (3,) and masks.dtype == bool and masks.all()


# --- vector envs -----------------------------------------------------------------------------------

@pytest.mark.parametrize("obs_mode", ["dict", "graph"])
@pytest.mark.parametrize("mode", ["sync", "async"])
@pytest.mark.parametrize("env_id", IDS)
def test_vector_envs(env_id, mode, obs_mode):
    vector_kwargs = {"shared_memory": False} if (mode, obs_mode) == ("async", "graph") else {}
    envs = gym.make_vec(env_id, num_envs=2, vectorization_mode=mode, vector_kwargs=vector_kwargs,
                        obs_mode=obs_mode, **SMALL)
    try:
        obs, _ = envs.reset(seed=3)
        envs.action_space.seed(3)
        for _ in range(3):
            obs, reward, terminated, truncated, _ = envs.step(envs.action_space.sample())
            assert reward.shape == (2,) and np.all(np.isfinite(reward))
        single = envs.single_observation_space
        if obs_mode == "dict":
            assert obs["placement"].shape == (2, *single["placement"].shape)
        else:
            assert len(obs) == 2 and all(single.contains(graph) for graph in obs)
    finally:
        envs.close()


# --- rendering -------------------------------------------------------------------------------------

@pytest.mark.parametrize("env_id", IDS)
def test_render_ansi_and_rgb_array(env_id):
    pytest.importorskip("matplotlib")
    for mode in ("ansi", "rgb_array"):
        env = gym.make(env_id, **SMALL, groups="chains", render_mode=mode)
        env.reset(seed=0)
        env.step(env.action_space.sample())
        out = env.render()
        if mode == "ansi":
            assert "runtime" in out and " ms" in out
            for device in ("cpu:0", "gpu:0", "gpu:1"):
                assert device in out
            assert "groups" in out  # the grouped table counts groups per device
        else:
            assert out.dtype == np.uint8 and out.ndim == 3 and out.shape[2] == 3
            assert out.shape[0] > 10 and out.shape[1] > 10
        env.close()


# --- seeding ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("env_id", IDS)
def test_same_seed_same_episode(env_id):
    def episode(seed):
        env = gym.make(env_id, **SMALL, groups="chains")
        obs, _ = env.reset(seed=seed)
        env.action_space.seed(seed)
        rewards, observations = [], [obs]
        done = False
        while not done:
            obs, reward, terminated, truncated, _ = env.step(env.action_space.sample())
            rewards.append(reward)
            observations.append(obs)
            done = terminated or truncated
        return rewards, observations

    first, again = episode(11), episode(11)
    assert first[0] == again[0]
    for a, b in zip(first[1], again[1], strict=True):
        for key in a:
            np.testing.assert_array_equal(a[key], b[key])


# --- errors ----------------------------------------------------------------------------------------

@pytest.mark.parametrize("env_class", list(CLASSES.values()))
@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"obs_mode": "pixels"}, r"unknown obs_mode 'pixels'; allowed: dict, graph"),
        ({"groups": "metis"}, r"unknown groups 'metis'; allowed: None .*'colocate', 'chains', an int k"),
        ({"groups": 0}, r"k=0 out of range; allowed 1\.\.30"),
        ({"groups": [0, 1]}, r"1-D array of 30 integer labels"),
        ({"render_mode": "human"}, r"unknown render_mode 'human'; allowed: None, ansi, rgb_array"),
        ({"groups": "chains", "max_ops": 2}, r"max_ops must be an integer >= 5 \(the number of groups"),
        ({"oom_runtime_factor": 0.5}, r"oom_runtime_factor must be a finite number >= 1"),
    ],
)
def test_bad_shared_arguments_raise_clear_errors(env_class, kwargs, message):
    with pytest.raises(ValueError, match=message):
        env_class(**SMALL, **kwargs)


# --- training with stable-baselines3 and sb3-contrib -----------------------------------------------

# What this shows is that SB3's `learn` runs on the envs as they are (no wrapper, no glue), not that
# it learns anything in 64 steps: random placements would pass it. That PPO learns on the staged env
# is test_rl_smoke.py's claim, and that MaskablePPO learns on the refine env is test_learned_sb3.py's
# (sb3-maskable-ppo); both compare against random search at the same budget.
@pytest.mark.parametrize("algorithm", ["PPO", "MaskablePPO"])
@pytest.mark.parametrize("env_id", IDS[1:])
def test_ppo_and_maskable_ppo_train_on_the_envs_without_glue(env_id, algorithm):
    if algorithm == "PPO":
        algorithm_class = pytest.importorskip("stable_baselines3").PPO
    else:
        algorithm_class = pytest.importorskip("sb3_contrib").MaskablePPO
    env = gym.make(env_id, **SMALL, groups="chains")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        model = algorithm_class("MultiInputPolicy", env, n_steps=32, batch_size=16, n_epochs=1, seed=0,
                                device="cpu")
        model.learn(64)
    assert model.num_timesteps >= 64
