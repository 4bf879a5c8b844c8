"""Load a `Cluster` from a preset name or a JSON file, and write one back to a dict.

A preset is a file of this format in the package (`PRESET_DIRECTORY`, ``<name>.json``), read by the
same code as a user's file: adding a file there adds the preset of its name (`preset_names`).

JSON format (all figures in SI units: FLOP/s, bytes/s, bytes, seconds; every figure within its
plausible range, `placement_gym.cluster.cluster.FIGURE_RANGES`, tabled in that module's docstring:
positive, except ``dispatch_time`` and ``transfer_sync``, which may be 0; names and the description
printable text)::

    {"name": "my-cluster",
     "description": "what it models and where the figures come from",
     "sources": {"gpu:0": "datasheet: 4.37 TFLOP/s FP32, 12 GB, 240 GB/s"},
     "devices": [
        {"name": "cpu:0", "kind": "cpu", "peak_flops": 1.0e12, "memory_bandwidth": 6.8e10,
         "memory": 2.56e11, "launch_overhead": 5e-6, "efficiency": {"matmul": 0.5},
         "dispatch_time": 5.7e-6},
        {"name": "gpu:0", "kind": "gpu", "peak_flops": 4.37e12, "memory_bandwidth": 2.4e11,
         "memory": 1.2e10, "launch_overhead": 5.7e-6, "dispatch_time": 5.7e-6,
         "transfer_sync": 5e-5, "host": "host:0", "architecture": "kepler"}],
     "hosts": {"host:0": {"dispatch_threads": 8}},
     "links": [
        {"src": "cpu:0", "dst": "gpu:0", "bandwidth": 1.2e10, "latency": 2.5e-5,
         "segments": ["gpu:0 in"]},
        {"src": "gpu:0", "dst": "cpu:0", "bandwidth": 1.2e10, "latency": 2.5e-5,
         "segments": ["gpu:0 out"]}],
     "default_link": {"bandwidth": 1.2e10, "latency": 2.5e-5}}

- ``name`` (optional; default: the file's stem) and ``description`` (optional).
- ``sources`` (optional): an object mapping what a note is about (a device, ``links``, ...) to where
  its figures come from and how they were derived, both printable text. The presets give one for
  every figure; the cluster does not keep them (they change no figure, and no content hash).
- ``devices`` (required, at least one): ``name`` (unique), ``kind`` (``"cpu"`` or ``"gpu"``),
  ``peak_flops`` (FP32 peak), ``memory_bandwidth``, ``memory`` (capacity in bytes),
  ``launch_overhead`` (seconds added to every op), and optionally ``efficiency``: the fraction of
  peak FLOP/s reached per op category (``matmul``, ``conv``, ``elementwise``, ``normalization``,
  ``reduction``, ``data_movement``, ``other``), each from 0.0001 to 1; categories left out take the
  defaults of the device's kind (`DEFAULT_EFFICIENCY`), or of its ``architecture`` (optional): the
  name of a calibrated device generation (`placement_gym.cluster.hardware.ARCHITECTURES`, such as
  ``"kepler"`` or ``"hopper"``), whose efficiencies then stand in for the kind's where it has some.
  ``memory_bandwidth`` is what memory-bound ops reach, whatever the architecture (for a datasheet
  figure, times the architecture's ``bandwidth_fraction``).
  Half precision (bf16/fp16 tasks), each optional: ``tensor_peak_flops``, the dense half-precision
  tensor-core peak (default: ``peak_flops``, no tensor cores), and ``tensor_efficiency``, the fraction
  of it a ``matmul`` and a ``conv`` reach (each from 0.0001 to 1; default: the ``architecture``'s
  tensor efficiency for a device with a ``tensor_peak_flops`` and an ``architecture``, otherwise the
  device's ``efficiency`` of that category).
  What the executor pays beyond op times (`Cluster`'s fields of the same names; each optional, and
  its default means no such cost):
  ``dispatch_time`` (default 0): seconds of a host dispatch thread to issue one op on the device;
  ``transfer_sync`` (default 0): seconds the device's stream spends per copy it issues and per
  received input an op waits for; ``host`` (default ``"host:0"``): the name of the host whose
  dispatch threads issue the device's ops.
- ``hosts`` (optional): an object mapping a host name to ``{"dispatch_threads": N}``, N an integer
  >= 1. A host that devices name but ``hosts`` leaves out gets 1 dispatch thread; a host listed
  here that no device names is an error. Hosts are numbered in the order devices first name them.
- ``links``: directed links ``src -> dst`` with ``bandwidth`` (bytes/s) and ``latency`` (seconds
  per transfer); ``both_ways: true`` (default false) also sets ``dst -> src``. Every ordered pair of
  distinct devices needs a link, unless ``default_link`` is given: it is used for every ordered pair
  that no link lists. Optionally ``segments``: the names (non-empty strings, each at most once) of
  the shared path segments a transfer on the link occupies (a PCIe switch's uplink, a GPU's port in
  one direction): a segment carries one transfer at a time, so transfers on links that share one
  contend; at most `MAX_LINK_SEGMENTS` (64) per link. Default: none. With ``both_ways: true`` the
  reverse link gets the same segments; for segments that differ by direction, list the two links
  separately. Segments need no declaration: they are numbered in the order links first name them (a
  ``both_ways`` link names its own direction first).
- ``default_link`` (optional): ``bandwidth`` and ``latency`` only; it cannot have ``segments`` (a
  link that occupies shared segments is listed in ``links``).

Limits are checked before what they bound is read (`cluster_from_dict`): the number of devices
against the allocation limit of the link matrices (`check_cluster_size`), at most one link per
ordered pair of devices, at most `MAX_LINK_SEGMENTS` segments per link; every check is a set or dict
lookup, so reading takes time linear in the file.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import os
import re
from pathlib import Path
from typing import Any

import numpy as np

from placement_gym.cluster.cluster import (
    DEVICE_KINDS,
    FIGURE_RANGES,
    TENSOR_CATEGORIES,
    TENSOR_CATEGORY_COLUMNS,
    Cluster,
    check_cluster_size,
    check_text,
)
from placement_gym.cluster.hardware import ARCHITECTURES, DEFAULT_EFFICIENCY, DEFAULT_TENSOR_EFFICIENCY
from placement_gym.cluster.machine import get_real_cluster
from placement_gym.common.names import unknown_name
from placement_gym.common.paths import is_file
from placement_gym.common.untrusted import UntrustedFileError, read_json, shown
from placement_gym.graph.opgraph import CATEGORIES

REAL_CLUSTER_NAME = re.compile(r"local|cpu[1-9][0-9]*")


class ClusterError(ValueError):
    """A cluster description (name, file or dict) that cannot be turned into a `Cluster`."""


_TOP_FIELDS = ("name", "description", "sources", "devices", "hosts", "links", "default_link")
_DEVICE_REQUIRED = ("name", "kind", "peak_flops", "memory_bandwidth", "memory", "launch_overhead")
_DEVICE_FIELDS = (*_DEVICE_REQUIRED, "architecture", "efficiency", "dispatch_time", "transfer_sync", "host",
                  "tensor_peak_flops", "tensor_efficiency")
_DEVICE_FIGURES = ("peak_flops", "memory_bandwidth", "memory", "launch_overhead")
_LINK_REQUIRED = ("src", "dst", "bandwidth", "latency")
_LINK_FIELDS = (*_LINK_REQUIRED, "both_ways", "segments")
_DEFAULT_LINK_FIELDS = ("bandwidth", "latency")
_EXECUTOR_FIGURES = ("dispatch_time", "transfer_sync")  # per device, optional, >= 0 (default 0)
# The `FIGURE_RANGES` entry of each figure of the JSON format, by its JSON field name.
_RANGE_OF = {
    "peak_flops": "peak_flops", "memory_bandwidth": "memory_bandwidth", "memory": "memory_capacity",
    "launch_overhead": "launch_overhead", "dispatch_time": "dispatch_time", "transfer_sync": "transfer_sync",
    "bandwidth": "link_bandwidth", "latency": "link_latency", "tensor_peak_flops": "tensor_peak_flops",
}
_HOST_FIELDS = ("dispatch_threads",)
# A transfer's path crosses a handful of shared segments (the presets: at most 4; a GPU's port, a
# board's uplink, a PCIe switch, a NIC); the segment table has this many columns per ordered pair.
MAX_LINK_SEGMENTS = 64
DEFAULT_HOST = "host:0"


def _check_fields(where: str, data: Any, required: tuple[str, ...], allowed: tuple[str, ...]) -> None:
    if not isinstance(data, dict):
        raise ClusterError(f"{where} must be a JSON object, got {type(data).__name__}")
    for key in data:
        if key not in allowed:
            raise ClusterError(f"{where}: unknown field {key!r} (allowed fields: {', '.join(allowed)})")
    for key in required:
        if key not in data:
            raise ClusterError(f"{where}: missing field {key!r} (required fields: {', '.join(required)})")


def _figure(where: str, field: str, value: Any, key: str) -> float:
    """``value`` as a float in ``FIGURE_RANGES[key]``, or a `ClusterError` saying which figure is wrong
    and what is allowed."""
    limits = FIGURE_RANGES[key]
    # bool is an int subclass in Python; `true` is never a figure.
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ClusterError(f"{where}: {field} must be {limits.describe()}, got {shown(value)} "
                           f"({type(value).__name__})")
    try:
        number = float(value)
    except OverflowError:  # an integer beyond float range
        number = math.inf
    if math.isnan(number) or math.isinf(number):
        raise ClusterError(f"{where}: {field} must be {limits.describe()}, got {number} (not finite)")
    # Plain comparisons (what `FigureRange.admits` does on arrays): a file has a figure per link.
    above = number > limits.low if limits.low_open else number >= limits.low
    if not (above and number <= limits.high):
        raise ClusterError(f"{where}: {field} must be {limits.describe()}, got {value!r}")
    return number


def _name(where: str, field: str, value: Any, allow_empty: bool = False) -> str:
    try:
        return check_text(where, field, value, allow_empty)
    except ValueError as error:
        raise ClusterError(str(error)) from None


def _shown(name: Any) -> str:
    """A device name as messages show it: as it is when printable and short, else `shown`."""
    return name if isinstance(name, str) and name.isprintable() and len(name) <= 40 else shown(name)


def _listed(names: list[str], most: int = 8) -> str:
    """The first ``most`` of ``names`` for a message, and how many more there are."""
    listed = ", ".join(_shown(name) for name in names[:most])
    return listed + (f" and {len(names) - most} more" if len(names) > most else "")


def _efficiency_row(
    where: str, table: dict[str, float], value: Any, field: str = "efficiency"
) -> np.ndarray:
    """``table`` (category -> default) with the categories ``value`` (the JSON object of ``field``)
    gives, in ``table``'s order."""
    table = dict(table)
    if value is not None:
        if not isinstance(value, dict):
            raise ClusterError(
                f"{where}: {field} must be an object mapping categories to numbers, got {value!r}"
            )
        for category, figure in value.items():
            if category not in table:
                raise ClusterError(
                    f"{where}: unknown {field} category {category!r} "
                    f"(allowed categories: {', '.join(table)})"
                )
            table[category] = _figure(where, f"{field}[{category!r}]", figure, field)
    return np.array(list(table.values()), dtype=np.float64)


def _sources(source: str, value: Any) -> None:
    """Check the top-level ``sources`` object: printable text mapped to printable text."""
    if not isinstance(value, dict):
        raise ClusterError(
            f"{source}: sources must be an object mapping what a note is about to where its figures come "
            f"from (both text), got {shown(value)}"
        )
    for about, note in value.items():
        _name(f"{source}: sources", "a key", about)
        _name(f"{source}: sources[{shown(about)}]", "the note", note)


def _architecture(where: str, value: Any) -> str | None:
    """A device's ``architecture``: None or a name of `ARCHITECTURES`."""
    if value is None or (isinstance(value, str) and value in ARCHITECTURES):
        return value
    raise ClusterError(
        f"{where}: architecture must be one of {', '.join(ARCHITECTURES)}, got {shown(value)}"
    )


def _dispatch_threads(source: str, hosts: Any, host_names: list[str]) -> tuple[int, ...]:
    """Dispatch threads per host of ``host_names`` (the hosts devices name, in first-use order), from
    the top-level ``hosts`` object; hosts it leaves out get 1."""
    if hosts is None:
        return (1,) * len(host_names)
    if not isinstance(hosts, dict):
        raise ClusterError(
            f"{source}: hosts must be an object mapping host names to "
            f'{{"dispatch_threads": N}}, got {hosts!r}'
        )
    threads = dict.fromkeys(host_names, 1)
    for host, entry in hosts.items():
        where = f"{source}: host {shown(host)}"
        _name(f"{source}: hosts", "a host name", host)
        if host not in threads:
            raise ClusterError(
                f"{where} is listed in hosts but no device names it "
                f"(hosts named by devices: {_listed(host_names)}; a device names its host in its "
                "'host' field, default 'host:0')"
            )
        _check_fields(where, entry, _HOST_FIELDS, _HOST_FIELDS)
        value = entry["dispatch_threads"]
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ClusterError(f"{where}: dispatch_threads must be an integer >= 1, got {value!r}")
        threads[host] = value
    return tuple(threads[host] for host in host_names)


def _segments(where: str, value: Any) -> tuple[str, ...]:
    """A link's ``segments``: at most `MAX_LINK_SEGMENTS` distinct non-empty strings."""
    if not isinstance(value, list):
        raise ClusterError(
            f"{where}: segments must be a list of segment names (non-empty strings), got {shown(value)}"
        )
    if len(value) > MAX_LINK_SEGMENTS:
        raise ClusterError(
            f"{where}: {len(value)} segments; a link occupies at most {MAX_LINK_SEGMENTS} shared segments"
        )
    seen: set[str] = set()
    for position, segment in enumerate(value):
        _name(where, f"segments[{position}]", segment)
        if segment in seen:
            raise ClusterError(
                f"{where}: segment {shown(segment)} is listed twice in segments "
                "(a link occupies a segment once)"
            )
        seen.add(segment)
    return tuple(value)


def cluster_from_dict(data: dict, name: str) -> Cluster:
    """A `Cluster` from the JSON format of this module's docstring, validated field by field.

    ``name`` names the source in error messages and is the cluster's name when ``data`` has none.
    Raises `ClusterError` naming the device, link or field that is wrong and what is allowed.
    """
    source = f"cluster {name!r}"
    _check_fields(source, data, ("devices",), _TOP_FIELDS)
    cluster_name = _name(source, "name", data.get("name", name))
    description = _name(source, "description", data.get("description", ""), allow_empty=True)
    if "sources" in data:
        _sources(source, data["sources"])

    devices = data["devices"]
    if not isinstance(devices, list) or not devices:
        raise ClusterError(f"{source}: devices must be a non-empty list of device objects")
    check_cluster_size(cluster_name, len(devices))  # its link matrices, before any device is read
    names: list[str] = []
    taken: set[str] = set()
    kinds: list[str] = []
    figures: dict[str, list[float]] = {field: [] for field in _DEVICE_FIGURES}
    efficiency: list[np.ndarray] = []
    tensor_peak: list[float] = []
    tensor_efficiency: list[np.ndarray] = []
    executor: dict[str, list[float]] = {field: [] for field in _EXECUTOR_FIGURES}
    host_index: dict[str, int] = {}  # host -> its number, in the order devices first name them
    device_host: list[int] = []
    for position, device in enumerate(devices):
        where = f"{source}: device #{position}"
        if isinstance(device, dict) and isinstance(device.get("name"), str):
            where = f"{source}: device {device['name']!r}"
        _check_fields(where, device, _DEVICE_REQUIRED, _DEVICE_FIELDS)
        device_name = _name(where, "name", device["name"])
        if device_name in taken:
            raise ClusterError(
                f"{source}: duplicate device name {shown(device_name)} (device names must be unique)"
            )
        kind = device["kind"]
        if kind not in DEVICE_KINDS:
            raise ClusterError(f"{where}: kind must be one of {', '.join(DEVICE_KINDS)}, got {kind!r}")
        names.append(device_name)
        taken.add(device_name)
        kinds.append(kind)
        for field in _DEVICE_FIGURES:
            figures[field].append(_figure(where, field, device[field], _RANGE_OF[field]))
        architecture = _architecture(where, device.get("architecture"))
        calibrated = ARCHITECTURES[architecture] if architecture is not None else None
        efficiency.append(_efficiency_row(
            where, {**DEFAULT_EFFICIENCY[kind], **(calibrated.efficiency if calibrated else {})},
            device.get("efficiency")))
        tensor_peak.append(figures["peak_flops"][-1] if device.get("tensor_peak_flops") is None else _figure(
            where, "tensor_peak_flops", device["tensor_peak_flops"], _RANGE_OF["tensor_peak_flops"]))
        if calibrated is not None and device.get("tensor_peak_flops") is not None:
            tensor_default = {**DEFAULT_TENSOR_EFFICIENCY, **calibrated.tensor_efficiency}
        else:  # no architecture, or no tensor peak: the FP32 efficiency of each category
            fp32 = dict(zip(CATEGORIES, efficiency[-1].tolist(), strict=True))
            tensor_default = {category: fp32[category] for category in TENSOR_CATEGORIES}
        tensor_efficiency.append(_efficiency_row(
            where, tensor_default, device.get("tensor_efficiency"), "tensor_efficiency"))
        for field in _EXECUTOR_FIGURES:
            executor[field].append(_figure(where, field, device.get(field, 0.0), _RANGE_OF[field]))
        host = _name(where, "host", device.get("host", DEFAULT_HOST))
        device_host.append(host_index.setdefault(host, len(host_index)))
    host_names = list(host_index)
    host_dispatch_threads = _dispatch_threads(source, data.get("hosts"), host_names)

    n = len(names)
    index = {device_name: i for i, device_name in enumerate(names)}
    bandwidth = np.zeros((n, n))
    latency = np.zeros((n, n))
    given = np.eye(n, dtype=bool)  # the diagonal never needs a link
    routes: dict[tuple[int, int], tuple[str, ...]] = {}

    links = data.get("links", [])
    if not isinstance(links, list):
        raise ClusterError(f"{source}: links must be a list of link objects")
    if len(links) > n * (n - 1):  # before any link is read: more would list some pair twice
        raise ClusterError(f"{source}: {len(links)} links; {n} devices have {n * (n - 1)} ordered pairs, "
                           "each listed at most once")
    for position, link in enumerate(links):
        where = f"{source}: link #{position}"
        if isinstance(link, dict) and isinstance(link.get("src"), str) and isinstance(link.get("dst"), str):
            where = f"{source}: link {_shown(link['src'])} -> {_shown(link['dst'])}"
        _check_fields(where, link, _LINK_REQUIRED, _LINK_FIELDS)
        ends = []
        for end in ("src", "dst"):
            device_name = link[end]
            if device_name not in index:
                raise ClusterError(
                    f"{where}: {end} {shown(device_name)} is not a device of this cluster "
                    f"(devices: {_listed(names)})"
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
        link_bandwidth = _figure(where, "bandwidth", link["bandwidth"], _RANGE_OF["bandwidth"])
        link_latency = _figure(where, "latency", link["latency"], _RANGE_OF["latency"])
        route = _segments(where, link.get("segments", []))
        for i, j in [(src, dst), (dst, src)] if both_ways else [(src, dst)]:
            if given[i, j]:
                raise ClusterError(
                    f"{source}: link {_shown(names[i])} -> {_shown(names[j])} is given more than once")
            bandwidth[i, j], latency[i, j] = link_bandwidth, link_latency
            routes[i, j] = route
            given[i, j] = True

    default_link = data.get("default_link")
    if default_link is not None:
        where = f"{source}: default_link"
        if isinstance(default_link, dict) and "segments" in default_link:
            raise ClusterError(
                f"{where} cannot have segments (it has only bandwidth and latency); "
                "list a link that occupies shared segments in links"
            )
        _check_fields(where, default_link, _DEFAULT_LINK_FIELDS, _DEFAULT_LINK_FIELDS)
        missing = ~given
        bandwidth[missing] = _figure(where, "bandwidth", default_link["bandwidth"], _RANGE_OF["bandwidth"])
        latency[missing] = _figure(where, "latency", default_link["latency"], _RANGE_OF["latency"])
    elif not given.all():
        i, j = (int(k) for k in np.argwhere(~given)[0])
        raise ClusterError(
            f"{source}: missing link {_shown(names[i])} -> {_shown(names[j])} "
            "(every ordered pair of devices needs a link, or give default_link)"
        )

    # Segments are numbered in the order links first name them, padded with -1 to the longest route.
    numbers: dict[str, int] = {}
    for route in routes.values():
        for segment in route:
            numbers.setdefault(segment, len(numbers))
    width = max((len(route) for route in routes.values()), default=0)
    check_cluster_size(cluster_name, n, width)  # before the segment table is made
    link_segments = np.full((n, n, width), -1, dtype=np.int64)
    for (i, j), route in routes.items():
        link_segments[i, j, : len(route)] = [numbers[segment] for segment in route]

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
        dispatch_time=np.array(executor["dispatch_time"]),
        device_host=np.array(device_host, dtype=np.int64),
        host_names=tuple(host_names),
        host_dispatch_threads=host_dispatch_threads,
        transfer_sync=np.array(executor["transfer_sync"]),
        segment_names=tuple(numbers),
        link_segments=link_segments,
        tensor_peak_flops=np.array(tensor_peak),  # stored as None where it is the default
        tensor_efficiency=np.stack(tensor_efficiency),
    )


def _links_in_segment_order(cluster: Cluster) -> list[tuple[int, int]]:
    """Every ordered pair of distinct devices, row by row except where a link must come earlier so
    that the links name the segments first in the cluster's numbering (which `cluster_from_dict`
    follows): each next link is the first one left whose segments not yet named are the next
    numbers, in order. Such a link is always left when the cluster numbers its segments in the
    order some list of its links first names them; otherwise the rest follow row by row."""
    n = cluster.n_devices
    pending = [(i, j) for i in range(n) for j in range(n) if i != j]
    order: list[tuple[int, int]] = []
    named = 0  # segments 0 .. named - 1 are named by the links in order

    def new_segments(pair: tuple[int, int]) -> list[int]:
        return [int(k) for k in cluster.link_segments[pair] if k >= named]

    while pending:
        position = next(
            (
                position
                for position, pair in enumerate(pending)
                if new_segments(pair) == list(range(named, named + len(new_segments(pair))))
            ),
            None,
        )
        if position is None:
            return order + pending
        pair = pending.pop(position)
        named += len(new_segments(pair))
        order.append(pair)
    return order


def cluster_to_dict(cluster: Cluster) -> dict:
    """The JSON form of ``cluster`` (every efficiency, executor figure, host and ordered link spelled
    out; a link's ``segments`` only where it has some); `cluster_from_dict` of it gives back the same
    figures. The half-precision figures (``tensor_peak_flops``, ``tensor_efficiency``) are written
    only for a cluster that gives them.

    Links come row by row (``src`` then ``dst`` in device order), except that a link comes earlier
    where that makes the links name the segments first in the cluster's numbering. The round trip
    keeps `Cluster.content_sha256` when the cluster numbers its hosts and segments as
    `cluster_from_dict` can (hosts in the order devices first name them, segments in the order some
    list of its links first names them, ``link_segments`` as wide as the longest route): every
    cluster `cluster_from_dict` makes (the presets among them) and every one
    `placement_gym.cluster.hardware.build_cluster` makes. A host that no device
    uses, or a segment no link uses, cannot be written: `cluster_from_dict` refuses the former and
    never sees the latter.
    """
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
            "dispatch_time": float(cluster.dispatch_time[i]),
            "transfer_sync": float(cluster.transfer_sync[i]),
            "host": cluster.host_names[int(cluster.device_host[i])],
        }
        for i in range(n)
    ]
    if cluster.tensor_peak_flops is not None or cluster.tensor_efficiency is not None:
        peak = cluster.peak_flops if cluster.tensor_peak_flops is None else cluster.tensor_peak_flops
        efficiency = (
            cluster.efficiency[:, TENSOR_CATEGORY_COLUMNS] if cluster.tensor_efficiency is None
            else cluster.tensor_efficiency
        )
        for i, device in enumerate(devices):
            device["tensor_peak_flops"] = float(peak[i])
            device["tensor_efficiency"] = {
                category: float(efficiency[i, k]) for k, category in enumerate(TENSOR_CATEGORIES)
            }
    hosts = {
        host: {"dispatch_threads": int(threads)}
        for host, threads in zip(cluster.host_names, cluster.host_dispatch_threads, strict=True)
    }
    links = []
    for i, j in _links_in_segment_order(cluster):
        link: dict[str, Any] = {
            "src": cluster.device_names[i],
            "dst": cluster.device_names[j],
            "bandwidth": float(cluster.link_bandwidth[i, j]),
            "latency": float(cluster.link_latency[i, j]),
        }
        route = cluster.link_route(i, j)
        if route:
            link["segments"] = list(route)
        links.append(link)
    data: dict[str, Any] = {"name": cluster.name}
    if cluster.description:
        data["description"] = cluster.description
    data["devices"] = devices
    data["hosts"] = hosts
    data["links"] = links
    return data


# The presets: one file of the format above per preset, named after it, shipped in the package.
PRESET_DIRECTORY = Path(__file__).resolve().parent / "presets"
PRESET_SUFFIX = ".json"


def _natural_key(name: str) -> list:
    """Sort key that orders the numbers inside names by value: ``dgx-h100x8`` before ``dgx-h100x16``."""
    return [int(part) if part.isdigit() else part for part in re.split(r"(\d+)", name)]


@functools.cache  # the package's files do not change while it runs
def _names_in(directory: Path) -> tuple[str, ...]:
    names = (entry.name[: -len(PRESET_SUFFIX)] for entry in os.scandir(directory)
             if entry.name.endswith(PRESET_SUFFIX) and entry.is_file())
    return tuple(sorted(names, key=_natural_key))


def preset_names() -> tuple[str, ...]:
    """The names of the presets: the stems of the ``.json`` files of `PRESET_DIRECTORY`, in natural
    order (the numbers in names by value)."""
    return _names_in(PRESET_DIRECTORY)


@functools.cache  # each file is read once
def _read_preset(path: Path) -> Cluster:
    cluster = read_cluster_file(path)
    if cluster.name != path.stem:
        raise ClusterError(f"{path}: the preset's name is its file's stem, {path.stem!r}; the file names "
                           f"it {cluster.name!r}")
    return cluster


def load_preset(name: str) -> Cluster:
    """The cluster of preset ``name`` (one of `preset_names`): its file, read as any cluster file is
    (`read_cluster_file`) the first time, then copied, so that each call gets arrays of its own (what a
    caller writes into one, past its read-only flag, reaches no other). A `ClusterError` names the
    presets when there is no such file, and the file when its ``name`` is not its stem."""
    if name not in preset_names():
        raise ClusterError(unknown_name("cluster preset", name, preset_names()))
    return dataclasses.replace(_read_preset(PRESET_DIRECTORY / f"{name}{PRESET_SUFFIX}"))


def is_named_cluster(cluster: Cluster) -> bool:
    """Whether ``load_cluster(cluster.name)`` gives this cluster's devices and figures: a preset with
    the preset's figures, or this machine's own devices (``local``, ``cpu<N>``, see
    `placement_gym.cluster.machine.get_real_cluster`; their figures are estimated or measured on this
    machine, so their name stands for the hardware). Task ids give such a cluster its plain name;
    any other cluster, even one named like a preset, carries its content hash."""
    if cluster.name in preset_names():
        preset = _read_preset(PRESET_DIRECTORY / f"{cluster.name}{PRESET_SUFFIX}")
        return cluster.content_sha256 == preset.content_sha256
    if REAL_CLUSTER_NAME.fullmatch(cluster.name):
        try:
            # Cached in the process: the machine's own cluster is not measured again.
            machine = get_real_cluster(cluster.name)
        except (ImportError, ValueError):  # no torch (nothing was measured), or cpu0
            return False
        return cluster is machine or cluster.content_sha256 == machine.content_sha256
    return False


# A cluster of 256 devices with every ordered link listed is about 8 MB of JSON; one that gives
# default_link is a few kB.
MAX_FILE_BYTES = 16 * 2**20
# The format nests 4 levels (cluster > devices > device > efficiency).
MAX_NESTING = 8


def read_cluster_file(path: Path) -> Cluster:
    """The cluster of the JSON file at ``path`` (format: module docstring; its name defaults to the
    file's stem), read as untrusted input (`placement_gym.common.untrusted.read_json`): a regular file (a
    symbolic link is followed only to one) of at most `MAX_FILE_BYTES` bytes of UTF-8 JSON, nested at most
    `MAX_NESTING` levels, without duplicate keys, NaN or infinite numbers or integers of more than
    `placement_gym.common.untrusted.MAX_INT_DIGITS` digits; a `ClusterError` names the file and the field."""
    try:
        data = read_json(path, MAX_FILE_BYTES, "cluster file", max_depth=MAX_NESTING)
    except UntrustedFileError as error:
        raise ClusterError(str(error)) from None
    if not isinstance(data, dict):
        raise ClusterError(f"{path}: a cluster file must hold one JSON object, got {type(data).__name__}")
    return cluster_from_dict(data, name=path.stem)


def load_cluster(name_or_path: str | Path) -> Cluster:
    """A preset by name (`preset_names`), this machine's devices (``local``, ``cpu<N>``), or a cluster
    JSON file by path, read by `read_cluster_file` as a preset's file is; a `ClusterError` names the file
    and the field, or says which names exist."""
    if isinstance(name_or_path, str) and name_or_path in preset_names():
        return load_preset(name_or_path)
    if isinstance(name_or_path, str) and REAL_CLUSTER_NAME.fullmatch(name_or_path):
        # The machine's own devices, for the real-hardware mode: "local" or "cpu<N>" virtual CPUs.
        return get_real_cluster(name_or_path)
    path = Path(name_or_path)
    if not is_file(path):
        text = str(name_or_path)
        # A path-like argument is a missing file, not a misspelled name: no guess for it.
        looks_like_path = isinstance(name_or_path, Path) or "/" in text or text.endswith(".json")
        raise ClusterError(unknown_name(
            "cluster", text, [] if looks_like_path else [*preset_names(), "local", "cpu2"],
            f"a preset ({', '.join(preset_names())}), 'local' or 'cpu<N>' (this machine's devices), "
            "or the path to an existing cluster JSON file",
        ))
    return read_cluster_file(path)
