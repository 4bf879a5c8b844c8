"""Graph observations as PyTorch Geometric ``Data`` and ``Batch`` (the optional extra ``pyg``).

The envs' ``obs_mode="graph"`` observation is a gymnasium ``GraphInstance`` (see
`placement_gym.envs.observation`); no GNN library takes it as it is. `to_pyg` turns one observation
into a ``torch_geometric.data.Data`` and `to_pyg_batch` turns several (a list, or what a gymnasium
vector env returns) into a ``Batch``:

* ``x``: float32 ``(n_nodes, n_node_features)``, the node rows of the graph observation (the node
  features, then the one-hot of the node's device, then the flag of the node the next action
  places).
* ``edge_index``: int64 ``(2, n_edges)``, (producer node, consumer node) per column.
* ``edge_attr``: float32 ``(n_edges, n_edge_features)``.
* ``device_features`` (only when known): float32 ``(1, n_devices, n_device_features)``, a
  graph-level attribute; its leading axis of one makes a ``Batch`` stack it to
  ``(n_graphs, n_devices, n_device_features)``. A graph observation does not carry it (read it from
  ``env.unwrapped.device_features``, or ``envs.get_attr("device_features")`` on a vector env); a dict
  observation does.

Every observation mode is accepted: a dict-mode observation (padded arrays) becomes the very same
``Data`` as the graph-mode observation of the same env state, the padding dropped by ``node_mask``
and ``edge_mask``; its ``x`` is ``node_features``, ``placement`` and ``current`` side by side, the
graph mode's column order (extra keys such as ``action_mask`` are ignored). A flat-mode vector, or a
batch of them, is converted after ``env.unwrapped.flat_layout.unflatten(obs)`` turns it back into
the dict.

`graph_arrays` is the numpy core (no torch, no torch_geometric): ``(x, edge_index, edge_attr)`` of
one observation. The project's own GNN agents read their inputs through it.

There is no observation wrapper: a ``Data`` is not a gymnasium space, so a wrapper returning one
would break every check and vector env that reads ``observation_space``. Convert inside the policy
instead. A random GCN policy playing one episode of the staged env (the ``pyg`` extra, as
``placement-gym agents`` or an ImportError says to install it)::

    import gymnasium as gym
    import torch
    from torch_geometric.nn import GCNConv

    from placement_gym.envs.pyg import to_pyg

    env = gym.make("placement_gym:DevicePlacementStaged-v0", graph="cifar10_cnn", cluster="k80x2",
                   obs_mode="graph")
    obs, info = env.reset(seed=0)
    conv = GCNConv(obs.nodes.shape[1], 32)
    head = torch.nn.Linear(32, env.unwrapped.task.n_devices)
    done = False
    while not done:
        data = to_pyg(obs, env.unwrapped.device_features)
        h = conv(data.x, data.edge_index, data.edge_attr[:, 0]).relu()  # edge weight: the bytes
        current = int(data.x[:, -1].argmax())  # the last column flags the node this step places
        action = torch.distributions.Categorical(logits=head(h[current])).sample().item()
        obs, reward, terminated, truncated, info = env.step(action)
        done = terminated or truncated

For a vector env, ``to_pyg_batch(obs, envs.get_attr("device_features"))`` gives one ``Batch`` of the
``num_envs`` graphs (``batch.batch`` maps every node to its env). An async vector env in graph mode
needs ``vector_kwargs={"shared_memory": False}`` (gymnasium cannot share a ``Graph``); a sync one
takes no such option.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import numpy as np
from gymnasium.spaces import GraphInstance

from placement_gym.common.extras import install_command

if TYPE_CHECKING:
    from torch_geometric.data import Batch, Data


# The dict-mode keys a conversion reads and their shapes (a batched observation adds a leading axis).
# A name stands for a size that must agree across keys; the extra keys of a dict observation are ignored.
_DICT_SHAPES: dict[str, tuple[Any, ...]] = {
    "node_features": ("max_nodes", "n_node_features"),
    "node_mask": ("max_nodes",),
    "placement": ("max_nodes", "n_devices"),
    "current": ("max_nodes",),
    "edge_index": (2, "max_edges"),
    "edge_features": ("max_edges", "n_edge_features"),
    "edge_mask": ("max_edges",),
}
_DEVICE_SHAPE: tuple[Any, ...] = ("n_devices", "n_device_features")
_KINDS = (
    "a gymnasium GraphInstance (obs_mode='graph') or a dict observation (obs_mode='dict'; a flat one "
    "after env.unwrapped.flat_layout.unflatten)"
)


def _torch_geometric():
    """torch and the two torch_geometric classes, or an ImportError naming the extra to install."""
    try:
        import torch
        from torch_geometric.data import Batch, Data
    except ImportError as error:
        raise ImportError(
            f"placement_gym.envs.pyg needs torch and torch_geometric ({error.name} is missing): "
            f"{install_command('pyg')}"
        ) from error
    return torch, Data, Batch


def _shape_text(template: tuple[Any, ...], batched: bool) -> str:
    return "(" + ", ".join((["batch"] if batched else []) + [str(d) for d in template]) + ")"


def _check_shape(name: str, array: np.ndarray, template: tuple[Any, ...], lead: tuple[int, ...],
                 sizes: dict[str, int]) -> None:
    """A ValueError unless ``array`` has shape ``lead + template``, binding the template's named sizes
    in ``sizes`` (the first key to use a name fixes it for the others)."""
    shape = array.shape
    ok = len(shape) == len(lead) + len(template) and shape[: len(lead)] == lead
    if ok:
        for dim, size in zip(template, shape[len(lead):]):
            expected = sizes.setdefault(dim, size) if isinstance(dim, str) else dim
            ok = ok and size == expected
    if not ok:
        known = ", ".join(f"{k}={v}" for k, v in sizes.items())
        raise ValueError(
            f"{name} has shape {shape}; expected {_shape_text(template, bool(lead))}"
            + (f" with {known}" if known else "")
        )


def _dict_arrays(obs: Mapping[str, Any]) -> tuple[dict[str, np.ndarray], bool]:
    """The arrays of a dict-mode observation, shapes checked, and whether it is batched."""
    missing = [key for key in _DICT_SHAPES if key not in obs]
    if missing:
        raise ValueError(
            f"dict observation lacks {', '.join(missing)}; a dict-mode observation has "
            f"{', '.join(_DICT_SHAPES)} (and device_features)"
        )
    arrays = {key: np.asarray(obs[key]) for key in _DICT_SHAPES}
    if "device_features" in obs:
        arrays["device_features"] = np.asarray(obs["device_features"])
    features = arrays["node_features"]
    if features.ndim not in (2, 3):
        raise ValueError(
            f"node_features has shape {features.shape}; expected (max_nodes, n_node_features) or, "
            "batched, (batch, max_nodes, n_node_features)"
        )
    lead = features.shape[:-2]
    sizes: dict[str, int] = {}
    for key, template in _DICT_SHAPES.items():
        _check_shape(key, arrays[key], template, lead, sizes)
    if "device_features" in arrays:
        _check_shape("device_features", arrays["device_features"], _DEVICE_SHAPE, lead, sizes)
    return arrays, bool(lead)


def _mask(values: np.ndarray, name: str) -> np.ndarray:
    if not np.isin(values, (0, 1)).all():
        raise ValueError(f"{name} must hold only 0 (padding) and 1 (real), got {np.unique(values)[:8]}")
    return values == 1


def _edge_index(links: np.ndarray, n_nodes: int, name: str, real: np.ndarray | None = None) -> np.ndarray:
    """``links`` (any shape) as int64 node indices, or a ValueError: integers (floats holding whole
    numbers pass, as some libraries cast observations to float) in [0, n_nodes), and when ``real``
    (the real-node mask) is given, real nodes only."""
    if links.dtype.kind in "iu":
        index = links.astype(np.int64)
    elif links.dtype.kind == "f" and np.array_equal(links, np.round(links)) and np.isfinite(links).all():
        index = links.astype(np.int64)
    else:
        raise ValueError(f"{name} must hold integer node indices, got dtype {links.dtype}")
    bad = (index < 0) | (index >= n_nodes)
    if real is not None:
        bad |= ~real[np.clip(index, 0, n_nodes - 1)]
    if bad.any():
        allowed = f"0..{n_nodes - 1}" + (" (real nodes only)" if real is not None else "")
        raise ValueError(f"{name} holds node index {index[bad].flat[0]}; allowed: {allowed}")
    return index


def _instance_arrays(obs: GraphInstance) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    if obs.nodes is None or np.ndim(obs.nodes) != 2:
        raise ValueError(
            f"obs.nodes must be an (n_nodes, n_node_features) array, got {_described(obs.nodes)}"
        )
    if obs.edges is None or obs.edge_links is None:
        raise ValueError(
            "obs.edges and obs.edge_links must be arrays (the envs' graph mode always has both), got "
            f"edges={_described(obs.edges)}, edge_links={_described(obs.edge_links)}"
        )
    nodes, edges, links = np.asarray(obs.nodes), np.asarray(obs.edges), np.asarray(obs.edge_links)
    if links.ndim != 2 or links.shape[1] != 2:
        raise ValueError(f"obs.edge_links must have shape (n_edges, 2), got {links.shape}")
    if edges.ndim != 2 or len(edges) != len(links):
        raise ValueError(
            f"obs.edges must have shape (n_edges, n_edge_features) with n_edges={len(links)} "
            f"(the rows of edge_links), got {edges.shape}"
        )
    index = _edge_index(links, len(nodes), "obs.edge_links")
    return (
        np.array(nodes, dtype=np.float32),
        np.ascontiguousarray(index.T),
        np.array(edges, dtype=np.float32),
    )


def _unpadded_arrays(arrays: dict[str, np.ndarray]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(x, edge_index, edge_attr)`` of one (not batched) checked dict observation."""
    node_real = _mask(arrays["node_mask"], "node_mask")
    edge_real = _mask(arrays["edge_mask"], "edge_mask")
    rows = np.concatenate(
        [arrays["node_features"], arrays["placement"], arrays["current"][:, None]], axis=1, dtype=np.float32
    )
    links = _edge_index(arrays["edge_index"][:, edge_real], len(rows), "edge_index", node_real)
    # Real nodes need not come first: renumber them in order, as the graph mode numbers its nodes.
    new_index = np.cumsum(node_real) - 1
    return (
        rows[node_real],
        np.ascontiguousarray(new_index[links]),
        np.array(arrays["edge_features"][edge_real], dtype=np.float32),
    )


def _described(value: Any) -> str:
    shape = getattr(value, "shape", None)
    return f"{type(value).__name__} of shape {tuple(shape)}" if shape is not None else type(value).__name__


def graph_arrays(obs: GraphInstance | Mapping[str, Any]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(x, edge_index, edge_attr)`` of one observation, as new numpy arrays (numpy only).

    ``obs``: a graph-mode ``GraphInstance`` or a dict-mode observation without a batch axis (its
    padding dropped by ``node_mask`` and ``edge_mask``; array-likes such as CPU torch tensors are
    taken too). ``x``: float32 ``(n_nodes, n_node_features)``; ``edge_index``: int64
    ``(2, n_edges)``; ``edge_attr``: float32 ``(n_edges, n_edge_features)``. Both modes give the same
    arrays for the same env state. A ValueError (one line) names a wrong type or shape."""
    if isinstance(obs, GraphInstance):
        return _instance_arrays(obs)
    if isinstance(obs, Mapping):
        arrays, batched = _dict_arrays(obs)
        if batched:
            raise ValueError(
                f"obs is a batch of {len(arrays['node_features'])} dict observations; graph_arrays and "
                "to_pyg take one: use to_pyg_batch"
            )
        return _unpadded_arrays(arrays)
    raise ValueError(f"obs must be {_KINDS}, got {_described(obs)}")


def _checked_devices(value: Any, n_devices: int | None, name: str) -> np.ndarray:
    array = np.asarray(value)
    wrong_rows = n_devices is not None and len(array) != n_devices
    if array.ndim != 2 or array.dtype.kind not in "fiu" or wrong_rows:
        rows = "n_devices" if n_devices is None else f"n_devices={n_devices} (the observation's)"
        raise ValueError(
            f"{name} must be a ({rows}, n_device_features) number array, got {_described(value)}"
        )
    return np.array(array, dtype=np.float32)


def to_pyg(obs: GraphInstance | Mapping[str, Any], device_features: Any = None) -> Data:
    """One observation as a ``torch_geometric.data.Data`` (see the module docstring).

    ``obs``: a graph-mode ``GraphInstance`` or one dict-mode observation (no batch axis).
    ``device_features``: the env's ``device_features`` ``(n_devices, n_device_features)``, stored as
    the graph-level attribute ``device_features`` ``(1, n_devices, n_device_features)``. None: a
    dict observation's own ``device_features``, and no such attribute for a graph observation.
    Raises ImportError naming the extra when torch_geometric is missing, ValueError on bad input."""
    torch, data_class, _ = _torch_geometric()
    x, edge_index, edge_attr = graph_arrays(obs)
    devices = _devices_of(obs, device_features)
    data = data_class(
        x=torch.from_numpy(x),
        edge_index=torch.from_numpy(edge_index),
        edge_attr=torch.from_numpy(edge_attr),
        num_nodes=len(x),
    )
    if devices is not None:
        data.device_features = torch.from_numpy(devices)[None]
    return data


def _devices_of(obs: Any, device_features: Any) -> np.ndarray | None:
    """The device features of one observation: the given ones, else a dict observation's own."""
    n_devices = np.shape(obs["placement"])[-1] if isinstance(obs, Mapping) else None
    if device_features is not None:
        return _checked_devices(device_features, n_devices, "device_features")
    if isinstance(obs, Mapping) and "device_features" in obs:
        return _checked_devices(obs["device_features"], n_devices, "obs['device_features']")
    return None


def _single_observations(observations: Any) -> list[Any]:
    """``observations`` as a list of single observations (a batched dict split along its first axis)."""
    if isinstance(observations, GraphInstance):
        return [observations]
    if isinstance(observations, Mapping):
        arrays, batched = _dict_arrays(observations)
        if not batched:
            return [observations]
        keys = [key for key in observations if key in arrays]
        return [{key: arrays[key][i] for key in keys} for i in range(len(arrays["node_features"]))]
    if isinstance(observations, (list, tuple)):
        if not observations:
            raise ValueError("observations is empty; give at least one observation")
        return list(observations)
    raise ValueError(
        f"observations must be a list or tuple of observations ({_KINDS}) or a batched dict "
        f"observation, got {_described(observations)}"
    )


def _per_graph_devices(device_features: Any, count: int) -> list[Any]:
    """One device-feature entry per graph: None, one array shared by all, or one per graph."""
    if device_features is None:
        return [None] * count
    if isinstance(device_features, (list, tuple)) or np.ndim(device_features) == 3:
        if len(device_features) != count:
            raise ValueError(
                f"device_features has {len(device_features)} entries for {count} observations; give one "
                "(n_devices, n_device_features) array for all or one per observation"
            )
        return list(device_features)
    return [device_features] * count


def to_pyg_batch(observations: Any, device_features: Any = None) -> Batch:
    """Several observations as one ``torch_geometric.data.Batch`` whose graph ``i`` equals
    ``to_pyg(observation i, its device features)``.

    ``observations``: a list or tuple of graph-mode ``GraphInstance``s or of single dict-mode
    observations (a gymnasium vector env in graph mode returns such a tuple), or a dict-mode
    observation with a leading batch axis (a vector env in dict mode); a single observation gives a
    batch of one. ``device_features``: None (dict observations bring their own), one
    ``(n_devices, n_device_features)`` array shared by every graph, or one per graph (a list, such
    as ``envs.get_attr("device_features")``, or an array ``(n_graphs, n_devices, n_device_features)``).
    The graphs of one batch need the same number of node features (the same device count).
    Raises ImportError naming the extra when torch_geometric is missing, ValueError on bad input."""
    _, _, batch_class = _torch_geometric()
    singles = _single_observations(observations)
    devices = _per_graph_devices(device_features, len(singles))
    data = []
    for i, (obs, device) in enumerate(zip(singles, devices)):
        try:
            data.append(to_pyg(obs, device))
        except ValueError as error:
            raise ValueError(f"observation {i}: {error}") from None
    widths = {d.x.shape[1] for d in data}
    if len(widths) > 1:
        raise ValueError(
            f"observations have {sorted(widths)} node features; one batch needs one width (envs of the "
            "same device count)"
        )
    return batch_class.from_data_list(data)
