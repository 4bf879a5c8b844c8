"""placement_gym.envs.pyg: graph and dict observations as PyTorch Geometric Data and Batch.

The numpy core (`graph_arrays`) and the missing-extra error are tested without torch_geometric; every
test that builds a ``Data`` asks for it through the ``pyg`` fixture and is skipped, with the install
line as the reason, when it is missing."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import gymnasium as gym
import numpy as np
import pytest
from conftest import hand_cluster, hand_graph
from gymnasium.spaces import GraphInstance

import placement_gym  # noqa: F401  (registers the env ids)
from placement_gym.common.extras import install_command
from placement_gym.envs import pyg as pyg_module
from placement_gym.envs.observation import NODE_FEATURES
from placement_gym.envs.pyg import graph_arrays, to_pyg, to_pyg_batch
from placement_gym.envs.staged import DevicePlacementStagedEnv

ENV_IDS = ("DevicePlacement-v0", "DevicePlacementStaged-v0", "DevicePlacementRefine-v0")
SMALL = dict(graph="cifar10_cnn", cluster="k80x2", objective="inference")


@pytest.fixture
def pyg():
    """torch_geometric, or a skip naming the extra that installs it."""
    return pytest.importorskip(
        "torch_geometric", reason="torch_geometric is not installed: pip install 'placement-gym[pyg]'"
    )


def _make(env_id: str, **kwargs):
    return gym.make(env_id, disable_env_checker=True, **(SMALL | kwargs))


def _actions(env) -> list:
    """A few actions that change the placement (and the current node of the staged and refine envs)."""
    n_devices = env.unwrapped.task.n_devices
    if isinstance(env.action_space, gym.spaces.MultiDiscrete):
        return [np.arange(env.unwrapped.n_nodes) % n_devices]
    return [2 % n_devices, 0, 1]


def _states(env_id: str, seed: int = 3, **kwargs) -> tuple:
    """The env, and its observations after reset and after each of `_actions`."""
    env = _make(env_id, **kwargs)
    observations = [env.reset(seed=seed)[0]]
    for action in _actions(env):
        observations.append(env.step(action)[0])
    return env, observations


def _assert_same_data(a, b) -> None:
    assert sorted(a.keys()) == sorted(b.keys())
    assert a.num_nodes == b.num_nodes
    for key in a.keys():
        if not hasattr(a[key], "dtype"):  # num_nodes
            assert a[key] == b[key], key
            continue
        assert a[key].dtype == b[key].dtype, key
        assert a[key].shape == b[key].shape, key
        assert bool((a[key] == b[key]).all()), key


# -- the numpy core ---------------------------------------------------------------------------------


@pytest.mark.parametrize("graph", ["cifar10_cnn", "inception_v3"])
@pytest.mark.parametrize("groups", [None, "chains", 4])
def test_graph_arrays_are_the_observation_arrays(graph, groups):
    env, observations = _states("DevicePlacementStaged-v0", graph=graph, groups=groups, obs_mode="graph")
    n_nodes = env.unwrapped.n_nodes
    for obs in observations:
        x, edge_index, edge_attr = graph_arrays(obs)
        assert x.dtype == np.float32 and edge_index.dtype == np.int64 and edge_attr.dtype == np.float32
        assert x.shape == (n_nodes, len(NODE_FEATURES) + env.unwrapped.task.n_devices + 1)
        assert edge_index.shape == (2, len(obs.edge_links)) and edge_attr.shape == (len(obs.edge_links), 1)
        np.testing.assert_array_equal(x, obs.nodes)
        np.testing.assert_array_equal(edge_index, obs.edge_links.T)
        np.testing.assert_array_equal(edge_attr, obs.edges)
        assert not np.shares_memory(x, obs.nodes)  # the arrays are the caller's to change
    assert observations[-1].nodes[:, len(NODE_FEATURES):-1].sum() == 3  # three nodes placed
    if groups is None:
        assert n_nodes == env.unwrapped.task.n_forward
    else:
        assert n_nodes < env.unwrapped.task.n_forward


@pytest.mark.parametrize("env_id", ENV_IDS)
@pytest.mark.parametrize("groups", [None, "chains"])
def test_dict_mode_gives_the_graph_mode_arrays(env_id, groups):
    # max_ops/max_edges above the graph's sizes: the dict arrays carry padding to drop
    _, as_graph = _states(env_id, groups=groups, obs_mode="graph")
    _, as_dict = _states(env_id, groups=groups, max_ops=40, max_edges=50, mask_in_obs=True)
    assert "action_mask" in as_dict[0]  # an extra key, ignored
    assert as_dict[0]["node_mask"].sum() < 40 and as_dict[0]["edge_mask"].sum() < 50
    for graph_obs, dict_obs in zip(as_graph, as_dict):
        for from_graph, from_dict in zip(graph_arrays(graph_obs), graph_arrays(dict_obs)):
            assert from_graph.dtype == from_dict.dtype
            np.testing.assert_array_equal(from_graph, from_dict)


def test_dict_padding_anywhere_is_dropped_and_nodes_renumbered():
    _, (obs, *_) = _states("DevicePlacementStaged-v0", max_ops=40, max_edges=50)
    n_real = int(obs["node_mask"].sum())
    # Move the padding rows to the front: real node i now sits at row i + 40 - n_real.
    order = np.r_[n_real:40, 0:n_real]
    moved = {key: obs[key][order] for key in ("node_features", "node_mask", "placement", "current")}
    shift = np.where(obs["edge_mask"] == 1, 40 - n_real, 0)
    moved |= {key: obs[key] for key in ("edge_features", "edge_mask", "device_features")}
    moved["edge_index"] = obs["edge_index"] + shift[None, :]
    for original, shuffled in zip(graph_arrays(obs), graph_arrays(moved)):
        np.testing.assert_array_equal(original, shuffled)


def test_a_graph_without_edges():
    graph = hand_graph([("a", 1e9, 1e3, 0), ("b", 1e9, 1e3, 0)], edges=[])
    as_graph = DevicePlacementStagedEnv(graph=graph, cluster=hand_cluster(2), objective="inference",
                                        obs_mode="graph").reset()[0]
    as_dict = DevicePlacementStagedEnv(graph=graph, cluster=hand_cluster(2), objective="inference").reset()[0]
    assert as_dict["edge_mask"].shape == (1,)  # one padding edge 0 -> 0, masked out
    for arrays in (graph_arrays(as_graph), graph_arrays(as_dict)):
        x, edge_index, edge_attr = arrays
        assert x.shape[0] == 2 and edge_index.shape == (2, 0) and edge_attr.shape == (0, 1)


def test_the_gnn_agents_read_the_env_graph_observation():
    pytest.importorskip("torch", reason="the GNN agents need torch: pip install 'placement-gym[baselines]'")
    from baselines.learning.gnn import graph_inputs

    n_features = len(NODE_FEATURES)
    for graph in ("cifar10_cnn", "inception_v3"):
        for groups in (None, "chains", 4):
            env = _make("DevicePlacement-v0", graph=graph, groups=groups, obs_mode="graph")
            obs = env.reset(seed=0)[0]
            inputs = graph_inputs(env.unwrapped.task, groups)
            np.testing.assert_array_equal(inputs.features.numpy(), obs.nodes[:, :n_features])
            np.testing.assert_array_equal(np.stack([inputs.src, inputs.dst]), obs.edge_links.T)
            np.testing.assert_array_equal(inputs.edge_features.numpy(), obs.edges)
            np.testing.assert_array_equal(inputs.device_features.numpy(), env.unwrapped.device_features)


# -- bad input --------------------------------------------------------------------------------------


def _graph_obs() -> GraphInstance:
    return GraphInstance(
        nodes=np.zeros((3, 4), dtype=np.float32),
        edges=np.ones((2, 1), dtype=np.float32),
        edge_links=np.array([[0, 1], [1, 2]]),
    )


def _dict_obs() -> dict:
    return _states("DevicePlacementStaged-v0", max_ops=40, max_edges=50)[1][0]


def _bad_inputs() -> list:
    graph, bad = _graph_obs(), []

    def replaced(**fields):
        return GraphInstance(**{"nodes": graph.nodes, "edges": graph.edges, "edge_links": graph.edge_links}
                             | fields)

    bad += [
        (None, "obs must be a gymnasium GraphInstance"),
        ("cifar10_cnn", "obs must be a gymnasium GraphInstance .* got str"),
        (np.zeros((3, 4)), "obs must be .* got ndarray of shape"),
        (replaced(nodes=np.zeros(3)), r"obs.nodes must be an \(n_nodes, n_node_features\) array"),
        (replaced(edges=None), "obs.edges and obs.edge_links must be arrays"),
        (replaced(edge_links=np.array([[0, 1, 2]])), r"obs.edge_links must have shape \(n_edges, 2\)"),
        (replaced(edges=np.ones((3, 1))), r"obs.edges must have shape .* n_edges=2"),
        (replaced(edge_links=np.array([[0, 1], [1, 3]])), r"node index 3; allowed: 0..2"),
        (replaced(edge_links=np.array([[0, 1], [-1, 2]])), r"node index -1; allowed: 0..2"),
        (replaced(edge_links=np.array([[0, 1], [0.5, 2]])), "must hold integer node indices"),
    ]
    obs = _dict_obs()
    bad += [
        ({k: v for k, v in obs.items() if k != "edge_mask"}, "dict observation lacks edge_mask"),
        (obs | {"node_features": obs["node_features"][0]}, r"node_features has shape \(15,\)"),
        (obs | {"placement": obs["placement"][:30]}, r"placement has shape \(30, 3\); expected \(max_nodes, "
                                                     r"n_devices\) with max_nodes=40"),
        (obs | {"edge_index": obs["edge_index"][:1]}, r"edge_index has shape \(1, 50\)"),
        (obs | {"node_mask": obs["node_mask"] * 0.5}, "node_mask must hold only 0 .* and 1"),
        (obs | {"edge_index": np.where(obs["edge_mask"] == 1, 39, 0)[None].repeat(2, 0)},
         r"edge_index holds node index 39; allowed: 0..39 \(real nodes only\)"),
        ({k: v[None].repeat(2, 0) for k, v in obs.items()}, "batch of 2 dict observations; .* to_pyg_batch"),
    ]
    return bad


def test_bad_input_is_one_clear_line():
    for value, message in _bad_inputs():
        with pytest.raises(ValueError, match=message) as caught:
            graph_arrays(value)
        assert "\n" not in str(caught.value)


def test_importing_the_module_loads_neither_torch_nor_torch_geometric():
    code = ("import sys, placement_gym.envs.pyg; "
            "print(sorted({'torch', 'torch_geometric'} & set(sys.modules)))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_a_missing_torch_geometric_names_the_extra(monkeypatch):
    # None in sys.modules makes the import fail as if the package were not installed
    monkeypatch.setitem(sys.modules, "torch_geometric", None)
    monkeypatch.setitem(sys.modules, "torch_geometric.data", None)
    for convert in (to_pyg, to_pyg_batch):
        with pytest.raises(ImportError, match="torch_geometric") as error:
            convert(_graph_obs())
        assert str(error.value).endswith(install_command("pyg"))  # where this checkout says to install it


def test_bad_input_to_the_converters(pyg):
    for value, message in _bad_inputs():
        with pytest.raises(ValueError, match=message):
            to_pyg(value)
    graph, obs = _graph_obs(), _dict_obs()
    cases = [
        (lambda: to_pyg(graph, np.zeros(4)), r"device_features must be a \(n_devices, n_device_features\)"),
        (lambda: to_pyg(obs, np.zeros((2, 4))), r"device_features must be a \(n_devices=3 \(the observation"),
        (lambda: to_pyg(obs | {"device_features": np.zeros((2, 4))}), r"device_features has shape \(2, 4\)"),
        (lambda: to_pyg_batch([]), "observations is empty"),
        (lambda: to_pyg_batch(iter([graph])), "observations must be a list or tuple .* got list_iterator"),
        (lambda: to_pyg_batch([graph, 7]), "observation 1: obs must be a gymnasium GraphInstance"),
        (lambda: to_pyg_batch([graph, graph], [np.zeros((3, 4))]), "device_features has 1 entries for 2"),
        (lambda: to_pyg_batch([graph, obs]), r"observations have \[4, 19\] node features"),
    ]
    for call, message in cases:
        with pytest.raises(ValueError, match=message) as caught:
            call()
        assert "\n" not in str(caught.value)


# -- Data and Batch ---------------------------------------------------------------------------------


@pytest.mark.parametrize("graph", ["cifar10_cnn", "inception_v3"])
@pytest.mark.parametrize("groups", [None, "chains", 4])
def test_to_pyg_holds_the_observation(pyg, graph, groups):
    env, observations = _states("DevicePlacementStaged-v0", graph=graph, groups=groups, obs_mode="graph")
    devices = env.unwrapped.device_features
    for obs in observations:
        data = to_pyg(obs, devices)
        assert isinstance(data, pyg.data.Data)
        assert data.num_nodes == env.unwrapped.n_nodes and data.num_edges == len(obs.edge_links)
        np.testing.assert_array_equal(data.x.numpy(), obs.nodes)
        np.testing.assert_array_equal(data.edge_index.numpy(), obs.edge_links.T)
        np.testing.assert_array_equal(data.edge_attr.numpy(), obs.edges)
        np.testing.assert_array_equal(data.device_features.numpy(), devices[None])
        assert str(data.edge_index.dtype) == "torch.int64" and data.validate()
    assert "device_features" not in to_pyg(observations[0])  # a graph observation does not carry them


@pytest.mark.parametrize("env_id", ENV_IDS)
def test_dict_mode_gives_the_same_data_as_graph_mode(pyg, env_id):
    graph_env, as_graph = _states(env_id, groups="chains", obs_mode="graph")
    _, as_dict = _states(env_id, groups="chains", max_ops=40, max_edges=50)
    for graph_obs, dict_obs in zip(as_graph, as_dict):
        _assert_same_data(to_pyg(dict_obs), to_pyg(graph_obs, graph_env.unwrapped.device_features))


def _assert_batch_of(batch, singles) -> None:
    assert batch.num_graphs == len(singles)
    offset, edge_offset = 0, 0
    for i, single in enumerate(singles):
        _assert_same_data(batch.get_example(i), single)
        # the batch's own arrays: node rows in order, edge indices shifted by the nodes before
        n, e = single.num_nodes, single.num_edges
        assert bool((batch.x[offset: offset + n] == single.x).all())
        assert bool((batch.edge_index[:, edge_offset: edge_offset + e] - offset == single.edge_index).all())
        assert bool((batch.batch[offset: offset + n] == i).all())
        offset, edge_offset = offset + n, edge_offset + e
    assert offset == batch.num_nodes


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["sync", "async"])
def test_a_vector_env_observation_becomes_a_batch(pyg, mode):
    vector_kwargs = {"shared_memory": False} if mode == "async" else {}
    envs = gym.make_vec("DevicePlacementStaged-v0", num_envs=3, vectorization_mode=mode,
                        vector_kwargs=vector_kwargs, obs_mode="graph", **SMALL)
    try:
        observations = [envs.reset(seed=1)[0]]
        for action in ([0, 1, 2], [2, 2, 0]):
            observations.append(envs.step(np.array(action))[0])
        devices = envs.get_attr("device_features")
    finally:
        envs.close()
    for obs in observations:
        assert isinstance(obs, tuple) and all(isinstance(o, GraphInstance) for o in obs)
        batch = to_pyg_batch(obs, devices)
        assert isinstance(batch, pyg.data.Batch)
        assert batch.device_features.shape == (3, 3, 4)
        _assert_batch_of(batch, [to_pyg(o, d) for o, d in zip(obs, devices)])
    # the envs placed different devices: the graphs of one batch differ
    last = to_pyg_batch(observations[-1])
    assert not bool((last.get_example(0).x == last.get_example(1).x).all())


def test_a_batched_dict_observation_becomes_the_graph_mode_batch(pyg):
    def states(**kwargs):
        envs = gym.make_vec("DevicePlacementStaged-v0", num_envs=2, vectorization_mode="sync",
                            **SMALL, **kwargs)
        observations = [envs.reset(seed=4)[0], envs.step(np.array([1, 2]))[0]]
        return observations, envs.get_attr("device_features")

    as_graph, devices = states(obs_mode="graph")
    as_dict, _ = states(max_ops=40, max_edges=50)
    for graph_obs, dict_obs in zip(as_graph, as_dict):
        assert dict_obs["node_features"].shape == (2, 40, len(NODE_FEATURES))
        batch = to_pyg_batch(dict_obs)
        _assert_batch_of(batch, [to_pyg(o, d) for o, d in zip(graph_obs, devices)])
        _assert_same_data(batch, to_pyg_batch(graph_obs, np.stack(devices)))


def test_flat_mode_unflattened_gives_the_graph_mode_data(pyg):
    graph_env, as_graph = _states("DevicePlacementRefine-v0", groups="chains", obs_mode="graph")
    flat_env, as_flat = _states("DevicePlacementRefine-v0", groups="chains", obs_mode="flat", max_ops=40,
                                max_edges=50, mask_in_obs=True)
    layout, devices = flat_env.unwrapped.flat_layout, graph_env.unwrapped.device_features
    singles = [to_pyg(obs, devices) for obs in as_graph]
    for flat, single in zip(as_flat, singles):
        _assert_same_data(to_pyg(layout.unflatten(flat)), single)
    _assert_batch_of(to_pyg_batch(layout.unflatten(np.stack(as_flat))), singles)


def test_a_batch_of_different_graphs(pyg):
    observations = [_make("DevicePlacement-v0", graph=g, obs_mode="graph").reset(seed=0)[0]
                    for g in ("cifar10_cnn", "inception_v3")]
    batch = to_pyg_batch(observations)
    _assert_batch_of(batch, [to_pyg(o) for o in observations])
    assert batch.num_nodes == sum(len(o.nodes) for o in observations)
    assert "device_features" not in batch
    _assert_same_data(to_pyg_batch(observations[1]).get_example(0), to_pyg(observations[1]))
    # one device-feature array per graph, as a list or stacked, each kept with its own graph
    rng = np.random.default_rng(0)
    per_graph = [rng.random((3, 4)).astype(np.float32) for _ in observations]
    singles = [to_pyg(o, d) for o, d in zip(observations, per_graph)]
    _assert_batch_of(to_pyg_batch(observations, per_graph), singles)
    _assert_batch_of(to_pyg_batch(tuple(observations), np.stack(per_graph)), singles)


def test_pyg_layers_run_forward_and_backward_on_a_batch(pyg):
    import torch
    from torch_geometric.nn import GATConv, GCNConv, global_mean_pool

    envs = gym.make_vec("DevicePlacementStaged-v0", num_envs=2, vectorization_mode="sync",
                        obs_mode="graph", **SMALL)
    envs.reset(seed=0)
    batch = to_pyg_batch(envs.step(np.array([1, 2]))[0])
    envs.close()
    torch.manual_seed(0)
    gat = GATConv(batch.x.shape[1], 16, heads=2, edge_dim=batch.edge_attr.shape[1])
    gcn = GCNConv(32, 8)
    h = gat(batch.x, batch.edge_index, batch.edge_attr).relu()
    h = gcn(h, batch.edge_index, batch.edge_attr[:, 0])
    pooled = global_mean_pool(h, batch.batch)
    assert pooled.shape == (2, 8)
    pooled.square().sum().backward()
    grads = [p.grad for p in (*gat.parameters(), *gcn.parameters())]
    assert all(g is not None and bool(torch.isfinite(g).all()) for g in grads)
    assert sum(float(g.abs().sum()) for g in grads) > 0


def _train_tiny_policy(episodes: int = 4) -> tuple[list[float], float]:
    """REINFORCE with a GAT policy on the staged env in graph mode; the losses and how far the
    weights moved."""
    import torch
    from torch_geometric.nn import GATConv

    torch.manual_seed(0)
    env = _make("DevicePlacementStaged-v0", obs_mode="graph")
    n_devices = env.unwrapped.task.n_devices
    devices = env.unwrapped.device_features
    obs, _ = env.reset(seed=0)
    conv = GATConv(obs.nodes.shape[1], 16, edge_dim=1)
    head = torch.nn.Linear(16 + devices.size, n_devices)
    parameters = [*conv.parameters(), *head.parameters()]
    before = torch.cat([p.detach().flatten().clone() for p in parameters])
    optimizer = torch.optim.Adam(parameters, lr=1e-2)
    losses, baseline = [], None
    for episode in range(episodes):
        obs, _ = env.reset(seed=episode)
        log_probs, entropies, done, total = [], [], False, 0.0
        while not done:
            data = to_pyg(obs, devices)
            h = conv(data.x, data.edge_index, data.edge_attr).relu()
            current = int(data.x[:, -1].argmax())
            logits = head(torch.cat([h[current], data.device_features.flatten()]))
            dist = torch.distributions.Categorical(logits=logits)
            action = dist.sample()
            log_probs.append(dist.log_prob(action))
            entropies.append(dist.entropy())
            obs, reward, terminated, truncated, _ = env.step(int(action))
            total += float(reward)
            done = terminated or truncated
        advantage = total - (baseline if baseline is not None else total)
        baseline = total if baseline is None else 0.5 * baseline + 0.5 * total
        # REINFORCE against a running-mean baseline, with an entropy bonus (the first episode has
        # no advantage yet, so the bonus alone moves the weights then)
        loss = -advantage * torch.stack(log_probs).sum() - 1e-2 * torch.stack(entropies).sum()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(float(loss.detach()))
    after = torch.cat([p.detach().flatten() for p in parameters])
    return losses, float((after - before).abs().sum())


def test_a_tiny_gnn_policy_trains_on_the_staged_env(pyg):
    losses, moved = _train_tiny_policy()
    assert len(losses) == 4 and all(np.isfinite(losses))
    assert moved > 0  # the optimiser changed the weights
    assert _train_tiny_policy() == (losses, moved)  # same seed, same result


def test_the_module_docstring_example_runs(pyg):
    code = pyg_module.__doc__.split("::\n", 1)[1].split("\nFor a vector env", 1)[0]
    namespace: dict = {}
    exec(compile(textwrap.dedent(code), "placement_gym.envs.pyg docstring", "exec"), namespace)
    assert namespace["done"] and isinstance(namespace["data"], pyg.data.Data)
    assert namespace["info"]["runtime"] > 0  # the episode ended with a simulated placement
