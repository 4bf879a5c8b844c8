"""The three env ids over a dataset split and/or a set of clusters: each reset draws a graph and a
cluster from the env's seeded generator (or the ones named), the step is the env of that task's,
spaces fit every task (padded devices masked out, an unmasked one folded onto a real device), and
vector envs hold different tasks."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env

import placement_gym  # noqa: F401  (registers the env ids)
from placement_gym import get_task, simulate
from placement_gym.datasets import get_dataset
from placement_gym.datasets.clusters import cluster_ids
from placement_gym.envs.refine import DevicePlacementRefineEnv
from placement_gym.envs.single_shot import DevicePlacementEnv
from placement_gym.envs.staged import DevicePlacementStagedEnv
from placement_gym.task.named import named_cluster

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
    padding = {key: getattr(env.unwrapped, key) for key in ("max_ops", "max_edges")}
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
    # the single-shot env pads its mask to the action's rows, so the mask goes in the observation too
    masked = gym.make("DevicePlacement-v0", dataset=SPLIT, cluster="k80x2", mask_in_obs=True)
    obs, _ = masked.reset(seed=0)
    np.testing.assert_array_equal(obs["action_mask"], masked.unwrapped.action_masks())
    assert obs["action_mask"].shape == masked.action_space.nvec.shape + (masked.unwrapped.max_devices,)
    env = gym.make("DevicePlacementStaged-v0", dataset=SPLIT, cluster="k80x2")
    with pytest.raises(ValueError, match="graph 'enas-rnn-3' is not in this env's split"):
        env.reset(options={"graph": "enas-rnn-3"})
    with pytest.raises(ValueError, match="has no graph 'regal-999'"):
        env.reset(options={"graph": "regal-999"})


# --- clusters=: a cluster drawn at each reset ---------------------------------------------------------

LISTED = ["k80x2", "random-v1:5", "p100x4", "random-v1:8"]
CLUSTER_POOLS = {"family": dict(dataset=SPLIT, clusters="random-v1:train"),
                 "list, one graph": dict(graph="synthetic-mini-v1:regal-3", clusters=LISTED)}


def _draws(env, seed: int, resets: int) -> list[tuple]:
    """(graph, cluster, rewards, final runtime) of ``resets`` episodes after ``reset(seed=seed)``,
    actions drawn from the masks by a generator of its own."""
    env.reset(seed=seed)
    rng = np.random.default_rng(3)
    out = []
    for _ in range(resets):
        env.reset()
        rewards = _episode(env, rng)
        out.append((env.unwrapped.task.graph.name, env.unwrapped.task.cluster.name, rewards))
    return out


@pytest.mark.parametrize("pool", list(CLUSTER_POOLS))
@pytest.mark.parametrize("env_id", list(IDS))
def test_each_reset_draws_a_cluster_and_seeds_replay(env_id, pool):
    env = gym.make(env_id, **CLUSTER_POOLS[pool])
    check_env(env.unwrapped, skip_render_check=True)
    first, again = _draws(env, 7, 6), _draws(env, 7, 6)
    assert first == again  # same seed: the same (graph, cluster) draws and rewards, bit for bit
    clusters = {cluster for _, cluster, _ in first}
    allowed = set(cluster_ids("train")) if pool == "family" else set(CLUSTER_POOLS[pool]["clusters"])
    assert clusters <= allowed and len(clusters) > 1
    if pool == "family":
        assert len({graph for graph, _, _ in first}) > 1
    other = _draws(env, 8, 6)
    assert [pair[:2] for pair in other] != [pair[:2] for pair in first]


def _one_episode_unmasked(env, rng: np.random.Generator) -> tuple[list, dict]:
    """Actions sampled from the whole padded space (padded devices included, as a policy without masks
    does), and the last info."""
    actions, done = [], False
    while not done:
        action = rng.integers(0, env.unwrapped.max_devices, size=env.action_space.shape)
        action = action if action.ndim else int(action)
        actions.append(action)
        _, _, terminated, truncated, info = env.step(action)
        done = terminated or truncated
    return actions, info


@pytest.mark.parametrize("env_id", list(IDS))
def test_an_episode_s_runtime_is_the_simulated_runtime_of_the_drawn_task(env_id):
    env = gym.make(env_id, **CLUSTER_POOLS["family"])
    env.reset(seed=2)
    rng = np.random.default_rng(4)
    folded = 0
    for _ in range(4):
        env.reset()
        task = get_task(env.unwrapped.task.graph.name, env.unwrapped.task.cluster.name)
        assert env.unwrapped.task.id == task.id
        n, n_ops = task.n_devices, task.n_forward
        actions, info = _one_episode_unmasked(env, rng)
        # the documented semantics: device d of the padded space is device d % n of the cluster; the
        # staged env places node t at step t, the refine env moves node t at step t (one sweep)
        chosen = np.asarray(actions[0][:n_ops] if env_id == "DevicePlacement-v0" else actions, dtype=np.int64)
        folded += int((chosen >= n).sum())
        expected = simulate(task, chosen % n)
        assert info["runtime"] == expected.runtime and bool(info["feasible"]) == expected.feasible
        peaks = np.zeros(env.unwrapped.max_devices)
        peaks[:n] = expected.peak_memory
        np.testing.assert_array_equal(info["peak_memory"], peaks)
    assert folded > 0  # padded devices were named and folded


@pytest.mark.parametrize("obs_mode", ["dict", "flat", "graph"])
@pytest.mark.parametrize("env_id", list(IDS))
def test_padded_spaces_hold_every_observation_and_masks_stay_on_the_cluster(env_id, obs_mode):
    env = gym.make(env_id, **CLUSTER_POOLS["family"], obs_mode=obs_mode)
    space, max_devices = env.observation_space, env.unwrapped.max_devices
    assert max_devices == 16 and env.action_space == (
        gym.spaces.Discrete(16) if env_id != "DevicePlacement-v0" else env.action_space)
    obs, _ = env.reset(seed=0)
    rng = np.random.default_rng(5)
    sizes = set()
    for episode in range(12):
        obs, info = env.reset()
        n = env.unwrapped.task.n_devices
        sizes.add(n)
        done = False
        while not done:
            assert space.contains(obs)
            masks = env.unwrapped.action_masks()
            assert masks.shape[-1] == max_devices and not masks[..., n:].any()
            assert masks[..., :n].any(axis=-1).all()
            if obs_mode == "dict":
                assert not obs["device_features"][n:].any() and obs["device_features"][:n, 0].all()
                assert not obs["placement"][:, n:].any()
            if obs_mode == "graph":
                assert obs.nodes.shape[1] == space.node_space.shape[0]
            if masks.ndim == 2:
                action = np.array([rng.choice(np.flatnonzero(row)) for row in masks])
            else:
                action = int(rng.choice(np.flatnonzero(masks)))
            obs, _, terminated, truncated, info = env.step(action)
            done = terminated or truncated
            if episode > 2 and env_id == "DevicePlacementRefine-v0":
                break  # a few refine episodes to the end are enough; the rest check the first steps
        assert space.contains(obs) and info["peak_memory"].shape == (max_devices,)
        assert not info["peak_memory"][n:].any()
    assert len(sizes) > 1


def test_the_padding_is_the_pool_s_largest_cluster():
    # the family split's padding, known without building it, is the largest test cluster's size
    largest = max(named_cluster(name).n_devices for name in cluster_ids("test"))
    env = gym.make("DevicePlacementStaged-v0", graph="cifar10_cnn", clusters="random-v1:test")
    assert env.unwrapped.max_devices == largest == 16
    listed = ["k80x2", "random-v1:5", "p100x4"]
    env = gym.make("DevicePlacement-v0", graph="cifar10_cnn", clusters=listed)
    assert env.unwrapped.max_devices == max(named_cluster(name).n_devices for name in listed)
    env.reset(seed=0, options={"cluster": "k80x2"})
    assert env.unwrapped.task.cluster.name == "k80x2" and env.unwrapped.cluster_name == "k80x2"
    # a plain env padded the same way folds the same action onto the same devices
    plain = DevicePlacementEnv(graph="cifar10_cnn", cluster="k80x2", max_devices=env.unwrapped.max_devices)
    plain.reset(seed=0)
    action = np.arange(plain.n_nodes) % env.unwrapped.max_devices
    assert env.step(action)[4]["runtime"] == plain.step(action)[4]["runtime"] == simulate(
        get_task("cifar10_cnn", "k80x2"), action % 3).runtime


def test_sync_vector_envs_hold_different_clusters_and_the_native_one_refuses():
    vector = gym.make_vec("DevicePlacementStaged-v0", num_envs=3, vectorization_mode="sync",
                          graph="synthetic-mini-v1:enas-conv-2", clusters="random-v1:train")
    vector.reset(seed=5)
    assert len({env.unwrapped.task.cluster.name for env in vector.envs}) > 1
    _, rewards, _, _, infos = vector.step(np.zeros(3, dtype=np.int64))
    assert rewards.shape == (3,) and infos["peak_memory"].shape == (3, 16)
    with pytest.raises(ValueError, match='holds one task: over clusters=, use .*vectorization_mode="sync"'):
        gym.make_vec("DevicePlacement-v0", num_envs=2, graph="cifar10_cnn", clusters="random-v1:train")


def test_the_native_vector_env_pads_and_folds_as_the_single_env():
    vector = gym.make_vec("DevicePlacement-v0", num_envs=2, vectorization_mode="vector_entry_point",
                          graph="cifar10_cnn", cluster="k80x2", max_devices=5)
    single = DevicePlacementEnv(graph="cifar10_cnn", cluster="k80x2", max_devices=5)
    vector.reset(seed=0)
    actions = np.random.default_rng(0).integers(0, 5, size=(2, single.n_nodes))
    obs, rewards, *_ = vector.step(actions)
    for i in range(2):
        single.reset()
        alone = single.step(actions[i])
        assert rewards[i] == alone[1]
        np.testing.assert_array_equal(obs["placement"][i], alone[0]["placement"])
    assert not obs["placement"][:, :, 3:].any()  # k80x2 has 3 devices: columns 3 and 4 are padding


def test_bad_clusters_arguments_are_clear_errors():
    with pytest.raises(ValueError, match="give cluster= .* or clusters= .*, not both"):
        gym.make("DevicePlacement-v0", dataset=SPLIT, cluster="k80x2", clusters="random-v1:train")
    with pytest.raises(ValueError, match="clusters must be a cluster family .*for one cluster give cluster="):
        gym.make("DevicePlacement-v0", graph="cifar10_cnn", clusters="k80x4")
    with pytest.raises(ValueError, match=r"clusters='random-v1:3' names one cluster \(give cluster="):
        gym.make("DevicePlacement-v0", graph="cifar10_cnn", clusters="random-v1:3")
    with pytest.raises(ValueError, match="unknown split 'tests' of random-v1; allowed: train, test, all"):
        gym.make("DevicePlacement-v0", graph="cifar10_cnn", clusters="random-v1:tests")
    with pytest.raises(ValueError, match=r"clusters\[1\]: .*k80x5"):
        gym.make("DevicePlacement-v0", graph="cifar10_cnn", clusters=["k80x4", "k80x5"])
    with pytest.raises(ValueError, match="clusters lists 'k80x4' twice"):
        gym.make("DevicePlacement-v0", graph="cifar10_cnn", clusters=["k80x4", "k80x4"])
    with pytest.raises(ValueError, match="clusters must be a cluster family"):
        gym.make("DevicePlacement-v0", graph="cifar10_cnn", clusters=[])
    with pytest.raises(ValueError, match=r"clusters\[0\] must be a cluster name, a JSON path or a Cluster"):
        gym.make("DevicePlacement-v0", graph="cifar10_cnn", clusters=[4])
    with pytest.raises(ValueError, match="max_devices must be an integer >= 16"):
        gym.make("DevicePlacement-v0", graph="cifar10_cnn", clusters="random-v1", max_devices=8)
    with pytest.raises(ValueError, match="graph= is a compiled Task"):
        gym.make("DevicePlacement-v0", graph=get_task("cifar10_cnn", "k80x2"), clusters=["k80x4"])
    with pytest.raises(ValueError, match=r"max_devices must be an integer >= 3 \(the number of devices"):
        DevicePlacementEnv(graph="cifar10_cnn", cluster="k80x2", max_devices=2)
    env = gym.make("DevicePlacementRefine-v0", graph="cifar10_cnn", clusters="random-v1:test")
    with pytest.raises(ValueError, match=r"cluster 'random-v1:3' is not among this env's 100 clusters "
                                         r"\(random-v1:1000 \.\. random-v1:1099\)"):
        env.reset(options={"cluster": "random-v1:3"})
    with pytest.raises(ValueError, match="options\\['graph'\\] picks a graph of dataset=; this env has one"):
        env.reset(options={"graph": "regal-1"})
    with pytest.raises(ValueError, match=r"action must be one device index in 0\.\.15 .*padding:15"):
        env.reset(options={"cluster": "random-v1:1000"})
        env.step(16)


def test_graph_observations_of_different_clusters_make_one_pyg_batch():
    pytest.importorskip("torch_geometric", reason="pip install 'placement-gym[pyg]' installs torch_geometric")
    from placement_gym.envs.pyg import graph_arrays, to_pyg_batch

    size = max(named_cluster(name).n_devices for name in LISTED)
    vector = gym.make_vec("DevicePlacementRefine-v0", num_envs=3, vectorization_mode="sync", obs_mode="graph",
                          graph="synthetic-mini-v1:regal-3", clusters=LISTED)
    obs, _ = vector.reset(seed=1)
    assert len({env.unwrapped.task.n_devices for env in vector.envs}) > 1
    batch = to_pyg_batch(obs, vector.get_attr("device_features"))
    assert batch.device_features.shape == (3, size, 4)
    for i, env in enumerate(vector.envs):
        n = env.unwrapped.task.n_devices
        x, _, _ = graph_arrays(obs[i])
        placement = x[:, -size - 1:-1]  # the placement columns, padded to the pool's largest cluster
        assert placement[:, :n].sum(axis=1).tolist() == [1.0] * len(x) and not placement[:, n:].any()
