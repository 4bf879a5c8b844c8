"""Load a `Cluster` from a preset name or a JSON file, and write one back to a dict.

JSON format (all figures in SI units: FLOP/s, bytes/s, bytes, seconds; every figure a positive,
finite number)::

    {"name": "my-cluster",
     "description": "what it models and where the figures come from",
     "devices": [
        {"name": "cpu:0", "kind": "cpu", "peak_flops": 1.0e12, "memory_bandwidth": 6.8e10,
         "memory": 2.56e11, "launch_overhead": 5e-6, "efficiency": {"matmul": 0.5}},
        {"name": "gpu:0", "kind": "gpu", "peak_flops": 4.37e12, "memory_bandwidth": 2.4e11,
         "memory": 1.2e10, "launch_overhead": 5.7e-6}],
     "links": [
        {"src": "cpu:0", "dst": "gpu:0", "bandwidth": 1.2e10, "latency": 2.5e-5, "both_ways": true}],
     "default_link": {"bandwidth": 1.2e10, "latency": 2.5e-5}}

- ``name`` (optional; default: the file's stem) and ``description`` (optional).
- ``devices`` (required, at least one): ``name`` (unique), ``kind`` (``"cpu"`` or ``"gpu"``),
  ``peak_flops`` (FP32 peak), ``memory_bandwidth``, ``memory`` (capacity in bytes),
  ``launch_overhead`` (seconds added to every op), and optionally ``efficiency``: the fraction of
  peak FLOP/s reached per op category (``matmul``, ``conv``, ``elementwise``, ``normalization``,
  ``reduction``, ``data_movement``, ``other``), each in (0, 1]; categories left out take the
  defaults of the device's kind (`DEFAULT_EFFICIENCY`).
- ``links``: directed links ``src -> dst`` with ``bandwidth`` (bytes/s) and ``latency`` (seconds
  per transfer); ``both_ways: true`` (default false) also sets ``dst -> src``. Every ordered pair of
  distinct devices needs a link, unless ``default_link`` is given: it is used for every ordered pair
  that no link lists.
"""

from __future__ import annotations

import functools
import json
import math
import re
from pathlib import Path
from typing import Any

import numpy as np

from placement_gym.cluster.cluster import DEVICE_KINDS, Cluster
from placement_gym.cluster.machine import get_real_cluster
from placement_gym.cluster.presets import DEFAULT_EFFICIENCY, PRESETS
from placement_gym.graph.opgraph import CATEGORIES

REAL_CLUSTER_NAME = re.compile(r"local|cpu[1-9][0-9]*")


class ClusterError(ValueError):
    """A cluster description (name, file or dict) that cannot be turned into a `Cluster`."""


_TOP_FIELDS = ("name", "description", "devices", "links", "default_link")
_DEVICE_REQUIRED = ("name", "kind", "peak_flops", "memory_bandwidth", "memory", "launch_overhead")
_DEVICE_FIELDS = (*_DEVICE_REQUIRED, "efficiency")
_DEVICE_FIGURES = ("peak_flops", "memory_bandwidth", "memory", "launch_overhead")
_LINK_REQUIRED = ("src", "dst", "bandwidth", "latency")
_LINK_FIELDS = (*_LINK_REQUIRED, "both_ways")
_DEFAULT_LINK_FIELDS = ("bandwidth", "latency")


def _check_fields(where: str, data: Any, required: tuple[str, ...], allowed: tuple[str, ...]) -> None:
    if not isinstance(data, dict):
        raise ClusterError(f"{where} must be a JSON object, got {type(data).__name__}")
    for key in data:
        if key not in allowed:
            raise ClusterError(f"{where}: unknown field {key!r} (allowed fields: {', '.join(allowed)})")
    for key in required:
        if key not in data:
            raise ClusterError(f"{where}: missing field {key!r} (required fields: {', '.join(required)})")


def _positive_number(where: str, field: str, value: Any, upper: float | None = None) -> float:
    """``value`` as a float, or a `ClusterError` saying which figure is wrong and what is allowed."""
    allowed = f"a number in (0, {upper:g}]" if upper is not None else "a positive finite number"
    # bool is an int subclass in Python; `true` is never a figure.
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ClusterError(f"{where}: {field} must be {allowed}, got {value!r} ({type(value).__name__})")
    number = float(value)
    if math.isnan(number) or math.isinf(number):
        raise ClusterError(f"{where}: {field} must be {allowed}, got {number} (not finite)")
    if number <= 0 or (upper is not None and number > upper):
        raise ClusterError(f"{where}: {field} must be {allowed}, got {value!r}")
    return number


def _name(where: str, field: str, value: Any) -> str:
    if not isinstance(value, str) or not value:
        raise ClusterError(f"{where}: {field} must be a non-empty string, got {value!r}")
    return value


def _efficiency_row(where: str, kind: str, value: Any) -> np.ndarray:
    table = dict(DEFAULT_EFFICIENCY[kind])
    if value is not None:
        if not isinstance(value, dict):
            raise ClusterError(
                f"{where}: efficiency must be an object mapping categories to numbers, got {value!r}"
            )
        for category, figure in value.items():
            if category not in table:
                raise ClusterError(
                    f"{where}: unknown efficiency category {category!r} "
                    f"(allowed categories: {', '.join(CATEGORIES)})"
                )
            table[category] = _positive_number(where, f"efficiency[{category!r}]", figure, upper=1.0)
    return np.array([table[category] for category in CATEGORIES], dtype=np.float64)


def cluster_from_dict(data: dict, name: str) -> Cluster:
    """A `Cluster` from the JSON format of this module's docstring, validated field by field.

    ``name`` names the source in error messages and is the cluster's name when ``data`` has none.
    Raises `ClusterError` naming the device, link or field that is wrong and what is allowed.
    """
    source = f"cluster {name!r}"
    _check_fields(source, data, ("devices",), _TOP_FIELDS)
    cluster_name = _name(source, "name", data.get("name", name))
    description = data.get("description", "")
    if not isinstance(description, str):
        raise ClusterError(f"{source}: description must be a string, got {description!r}")

    devices = data["devices"]
    if not isinstance(devices, list) or not devices:
        raise ClusterError(f"{source}: devices must be a non-empty list of device objects")
    names: list[str] = []
    kinds: list[str] = []
    figures: dict[str, list[float]] = {field: [] for field in _DEVICE_FIGURES}
    efficiency: list[np.ndarray] = []
    for position, device in enumerate(devices):
        where = f"{source}: device #{position}"
        if isinstance(device, dict) and isinstance(device.get("name"), str):
            where = f"{source}: device {device['name']!r}"
        _check_fields(where, device, _DEVICE_REQUIRED, _DEVICE_FIELDS)
        device_name = _name(where, "name", device["name"])
        if device_name in names:
            raise ClusterError(
                f"{source}: duplicate device name {device_name!r} (device names must be unique)"
            )
        kind = device["kind"]
        if kind not in DEVICE_KINDS:
            raise ClusterError(f"{where}: kind must be one of {', '.join(DEVICE_KINDS)}, got {kind!r}")
        names.append(device_name)
        kinds.append(kind)
        for field in _DEVICE_FIGURES:
            figures[field].append(_positive_number(where, field, device[field]))
        efficiency.append(_efficiency_row(where, kind, device.get("efficiency")))

    n = len(names)
    index = {device_name: i for i, device_name in enumerate(names)}
    bandwidth = np.zeros((n, n))
    latency = np.zeros((n, n))
    given = np.eye(n, dtype=bool)  # the diagonal never needs a link

    links = data.get("links", [])
    if not isinstance(links, list):
        raise ClusterError(f"{source}: links must be a list of link objects")
    for position, link in enumerate(links):
        where = f"{source}: link #{position}"
        if isinstance(link, dict) and isinstance(link.get("src"), str) and isinstance(link.get("dst"), str):
            where = f"{source}: link {link['src']} -> {link['dst']}"
        _check_fields(where, link, _LINK_REQUIRED, _LINK_FIELDS)
        ends = []
        for end in ("src", "dst"):
            device_name = link[end]
            if device_name not in index:
                raise ClusterError(
                    f"{where}: {end} {device_name!r} is not a device of this cluster "
                    f"(devices: {', '.join(names)})"
                )
            ends.append(index[device_name])
        src, dst = ends
        if src == dst:
            raise ClusterError(
                f"{where}: a link from a device to itself is not allowed (src must differ from dst)"
            )
        both_ways = link.get("both_ways", False)
        if not isinstance(both_ways, bool):
            raise ClusterError(f"{where}: both_ways must be true or false, got {both_ways!r}")
        link_bandwidth = _positive_number(where, "bandwidth", link["bandwidth"])
        link_latency = _positive_number(where, "latency", link["latency"])
        for i, j in [(src, dst), (dst, src)] if both_ways else [(src, dst)]:
            if given[i, j]:
                raise ClusterError(f"{source}: link {names[i]} -> {names[j]} is given more than once")
            bandwidth[i, j], latency[i, j] = link_bandwidth, link_latency
            given[i, j] = True

    default_link = data.get("default_link")
    if default_link is not None:
        where = f"{source}: default_link"
        _check_fields(where, default_link, _DEFAULT_LINK_FIELDS, _DEFAULT_LINK_FIELDS)
        missing = ~given
        bandwidth[missing] = _positive_number(where, "bandwidth", default_link["bandwidth"])
        latency[missing] = _positive_number(where, "latency", default_link["latency"])
    elif not given.all():
        i, j = (int(k) for k in np.argwhere(~given)[0])
        raise ClusterError(
            f"{source}: missing link {names[i]} -> {names[j]} "
            "(every ordered pair of devices needs a link, or give default_link)"
        )

    return Cluster(
        name=cluster_name,
        device_names=tuple(names),
        device_kinds=tuple(kinds),
        peak_flops=np.array(figures["peak_flops"]),
        memory_bandwidth=np.array(figures["memory_bandwidth"]),
        memory_capacity=np.array(figures["memory"]),
        launch_overhead=np.array(figures["launch_overhead"]),
        efficiency=np.stack(efficiency),
        link_bandwidth=bandwidth,
        link_latency=latency,
        description=description,
    )


def cluster_to_dict(cluster: Cluster) -> dict:
    """The JSON form of ``cluster`` (every efficiency and every ordered link spelled out);
    `cluster_from_dict` of it gives back the same figures."""
    n = cluster.n_devices
    devices = [
        {
            "name": cluster.device_names[i],
            "kind": cluster.device_kinds[i],
            "peak_flops": float(cluster.peak_flops[i]),
            "memory_bandwidth": float(cluster.memory_bandwidth[i]),
            "memory": float(cluster.memory_capacity[i]),
            "launch_overhead": float(cluster.launch_overhead[i]),
            "efficiency": {c: float(cluster.efficiency[i, k]) for k, c in enumerate(CATEGORIES)},
        }
        for i in range(n)
    ]
    links = [
        {
            "src": cluster.device_names[i],
            "dst": cluster.device_names[j],
            "bandwidth": float(cluster.link_bandwidth[i, j]),
            "latency": float(cluster.link_latency[i, j]),
        }
        for i in range(n)
        for j in range(n)
        if i != j
    ]
    data: dict[str, Any] = {"name": cluster.name}
    if cluster.description:
        data["description"] = cluster.description
    data["devices"] = devices
    data["links"] = links
    return data


@functools.cache  # presets are fixed figures: one digest per preset and process
def _preset_sha256(name: str) -> str:
    return PRESETS[name]().content_sha256


def is_named_cluster(cluster: Cluster) -> bool:
    """Whether ``load_cluster(cluster.name)`` gives this cluster's devices and figures: a preset with
    the preset's figures, or this machine's own devices (``local``, ``cpu<N>``, see
    `placement_gym.cluster.machine.get_real_cluster`; their figures are estimated or measured on this
    machine, so their name stands for the hardware). Task ids give such a cluster its plain name;
    any other cluster, even one named like a preset, carries its content hash."""
    if cluster.name in PRESETS:
        return cluster.content_sha256 == _preset_sha256(cluster.name)
    if REAL_CLUSTER_NAME.fullmatch(cluster.name):
        try:
            # Cached in the process: the machine's own cluster is not measured again.
            machine = get_real_cluster(cluster.name)
        except (ImportError, ValueError):  # no torch (nothing was measured), or cpu0
            return False
        return cluster is machine or cluster.content_sha256 == machine.content_sha256
    return False


def load_cluster(name_or_path: str | Path) -> Cluster:
    """A preset by name (see `PRESETS`), or a cluster JSON file by path (format: module docstring)."""
    if isinstance(name_or_path, str) and name_or_path in PRESETS:
        return PRESETS[name_or_path]()
    if isinstance(name_or_path, str) and REAL_CLUSTER_NAME.fullmatch(name_or_path):
        # The machine's own devices, for the real-hardware mode: "local" or "cpu<N>" virtual CPUs.
        return get_real_cluster(name_or_path)
    path = Path(name_or_path)
    if not path.is_file():
        raise ClusterError(
            f"unknown cluster {str(name_or_path)!r}: not a preset ({', '.join(PRESETS)}), not 'local' or "
            "'cpu<N>' (this machine's devices) and not a file; "
            "give a preset name or a path to a cluster JSON file"
        )
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as error:
        raise ClusterError(
            f"{path}: not valid JSON ({error.msg} at line {error.lineno}, column {error.colno})"
        ) from None
    except UnicodeDecodeError:
        raise ClusterError(f"{path}: not valid JSON (the file is not UTF-8 text)") from None
    if not isinstance(data, dict):
        raise ClusterError(f"{path}: a cluster file must hold one JSON object, got {type(data).__name__}")
    return cluster_from_dict(data, name=path.stem)
