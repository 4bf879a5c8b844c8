"""The three env ids over a dataset split: each reset draws a graph from the env's seeded generator (or
the one named), the step is the env of that graph's, spaces fit every graph, and vector envs hold
different graphs."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env

import placement_gym  # noqa: F401  (registers the env ids)
from placement_gym.datasets import get_dataset
from placement_gym.envs.refine import DevicePlacementRefineEnv
from placement_gym.envs.single_shot import DevicePlacementEnv
from placement_gym.envs.staged import DevicePlacementStagedEnv

SPLIT = "synthetic-mini-v1:train"
IDS = {"DevicePlacement-v0": DevicePlacementEnv, "DevicePlacementStaged-v0": DevicePlacementStagedEnv,
       "DevicePlacementRefine-v0": DevicePlacementRefineEnv}


def _episode(env, rng: np.random.Generator) -> list[float]:
    rewards, done = [], False
    while not done:
        masks = env.unwrapped.action_masks()
        if masks.ndim == 2:
            action = np.array([rng.choice(np.flatnonzero(row)) for row in masks])
        else:
            action = int(rng.choice(np.flatnonzero(masks)))
        _, reward, terminated, truncated, _ = env.step(action)
        rewards.append(float(reward))
        done = terminated or truncated
    return rewards


@pytest.mark.parametrize("env_id", list(IDS))
def test_each_reset_draws_a_graph_of_the_split_and_seeds_replay(env_id):
    env = gym.make(env_id, dataset=SPLIT, cluster="k80x2")
    check_env(env.unwrapped, skip_render_check=True)
    runs = []
    for _ in range(2):
        env.reset(seed=11)
        rng = np.random.default_rng(0)
        drawn, rewards = [], []
        for _ in range(5):
            env.reset()
            drawn.append(env.unwrapped.graph_id)
            assert env.unwrapped.task.graph.name == f"synthetic-mini-v1:{drawn[-1]}"
            rewards.append(_episode(env, rng))
        runs.append((drawn, rewards))
    assert runs[0] == runs[1]  # same seed, same graphs and rewards
    assert set(runs[0][0]) <= set(get_dataset("synthetic-mini-v1").ids("train")) and len(set(runs[0][0])) > 1


def test_a_step_is_the_step_of_that_graph_s_env():
    env = gym.make("DevicePlacement-v0", dataset=SPLIT, cluster="k80x2")
    env.reset(seed=0, options={"graph": "enas-conv-6"})
    padding = {key: env.unwrapped.settings[key] for key in ("max_ops", "max_edges")}
    inner = DevicePlacementEnv(graph="synthetic-mini-v1:enas-conv-6", cluster="k80x2", **padding)
    assert padding["max_ops"] == max(row.ops for row in get_dataset("synthetic-mini-v1").manifest()
                                     if row.split == "train")
    inner.reset(seed=0)
    action = np.random.default_rng(1).integers(0, 2, size=env.action_space.shape)
    padded = env.step(action)
    alone = inner.step(action[: inner.n_nodes])
    assert padded[1] == alone[1] and padded[4]["runtime"] == alone[4]["runtime"]
    np.testing.assert_array_equal(padded[0]["node_features"], alone[0]["node_features"])
    # the graph's observation, in the one space every graph's fits; the padded mask rows allow every device
    assert env.observation_space == inner.observation_space
    masks = env.unwrapped.action_masks()
    assert masks.shape == (env.action_space.shape[0], inner.task.n_devices) and masks[inner.n_nodes:].all()


def test_vector_envs_hold_different_graphs():
    vector = gym.make_vec("DevicePlacementRefine-v0", num_envs=3, vectorization_mode="sync", dataset=SPLIT,
                          cluster="k80x2")
    vector.reset(seed=5)
    names = {env.unwrapped.task.id for env in vector.envs}
    assert len(names) > 1
    _, rewards, *_ = vector.step(np.zeros(3, dtype=np.int64))
    assert rewards.shape == (3,)
    with pytest.raises(ValueError, match='holds one task: over a dataset, use .*vectorization_mode="sync"'):
        gym.make_vec("DevicePlacement-v0", num_envs=2, dataset=SPLIT, cluster="k80x2")


def test_bad_dataset_arguments_are_clear_errors():
    with pytest.raises(ValueError, match="draws its graphs: graph= is not taken with dataset="):
        gym.make("DevicePlacement-v0", dataset=SPLIT, graph="cifar10_cnn", cluster="k80x2")
    with pytest.raises(ValueError, match="unknown dataset 'synthetic-v9'"):
        gym.make("DevicePlacement-v0", dataset="synthetic-v9:train", cluster="k80x2")
    with pytest.raises(ValueError, match="unknown split 'tests'"):
        gym.make("DevicePlacement-v0", dataset="synthetic-mini-v1:tests", cluster="k80x2")
    with pytest.raises(ValueError, match="does not take mask_in_obs=True"):
        gym.make("DevicePlacement-v0", dataset=SPLIT, cluster="k80x2", mask_in_obs=True)
    env = gym.make("DevicePlacementStaged-v0", dataset=SPLIT, cluster="k80x2")
    with pytest.raises(ValueError, match="graph 'enas-rnn-3' is not in this env's split"):
        env.reset(options={"graph": "enas-rnn-3"})
    with pytest.raises(ValueError, match="has no graph 'regal-999'"):
        env.reset(options={"graph": "regal-999"})
