"""Measured profiles: per-op times and link figures of real devices, and the Task built from them.

A *profile* is a JSON-able dict (``PROFILE_FORMAT`` in ``"format"``)::

    {
      "format": "placement-gym-profile/1",
      "key": "<16 hex digits, see profile_key>",
      "graph": {"name": "cifar10_cnn", "sha256": "<graph_digest>", "n_ops": 42},
      "batch": null,                     # null: the graph's own batch
      "optimizer": "adam",               # the optimizer of the update ops and train steps measured
      "devices": [{"name": "cpu:0", "torch_device": "cpu", "kind": "cpu",
                   "host": "Linux x86_64 ...", "torch_version": "2.13.0"}, ...],
      "forward_s":  {"<op name>": {"<device name>": seconds, ...}, ...},   # every forward op
      "backward_s": {"<op name>": {"<device name>": seconds, ...}, ...},   # optional per op
      "update_s":   {"<op name>": {"<device name>": seconds, ...}, ...},   # optional per op (optimizer's)
      "link_bandwidth": {"<src>": {"<dst>": bytes per second, ...}, ...},  # every ordered pair
      "link_latency":   {"<src>": {"<dst>": seconds, ...}, ...},  # copy + thread hand-over
      "launch_overhead_s": {"inference": {"<device>": s}, "train_step": {"<device>": s}},  # optional
      "transfer_latency_s": {"inference": s, "train_step": s},  # optional, 2+ devices
      "settings": {"repeats": 5, "warmup": 1, "link_sizes": [...], ...},
      "created": "2026-11-29T20:30:00+00:00"
    }

``launch_overhead_s`` is the executor's dispatch cost per job (its worker's queue, locks, argument
lookup and, in a train step, autograd bookkeeping), which the per-op times, timed in a bare loop,
leave out: measured by running the whole graph on each device alone through `Executor` and
dividing what the step took beyond the sum of the op times by its number of jobs (see
`placement_gym.real.measure.measure_dispatch`). `profiled_task` adds it to every op of a task of
that objective. A profile without it (an older one) gets no overhead added.
``transfer_latency_s``, where present, replaces every link's latency for tasks of that objective:
the latency with which the model best reproduces the executor on placements from few to nearly all
tensors crossing devices (`placement_gym.real.measure.measure_transfer_latency`).

Forward and backward times are objective-independent, so one profile serves ``train_step`` and
``inference`` tasks. What a train step adds depends on the optimizer: ``update_s`` times the
update op of ``"optimizer"`` (`placement_gym.real.optimizers`, as the executor runs it), and the
``train_step`` dispatch overhead and transfer latency are fitted on train steps that run it. So a
profile serves ``train_step`` tasks of its own optimizer only (`profiled_task` refuses another);
a profile without ``"optimizer"`` predates the field and measured SGD, which the executor then ran.
Profiles are cached as JSON files in ``~/.cache/placement_gym/profiles`` (or
``$PLACEMENT_GYM_CACHE/profiles``), named ``<graph name>-<key>.json``; the key is a hash of the
graph digest, the sorted device descriptions, the batch and the optimizer, so a profile measured on
other hardware, another torch version or for another optimizer is not reused.

This module holds the format, its identity (digest, device descriptions, key), its checks and the
cache (save, load, find); `placement_gym.real.measure` measures profiles and
`placement_gym.real.profiled` builds the profiled task. torch is imported only by
`describe_devices` (and by the measurement).
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from placement_gym.common.untrusted import UntrustedFileError, read_json
from placement_gym.graph.opgraph import OpGraph
from placement_gym.real.optimizers import check_optimizer
from placement_gym.task.compiled import OPTIMIZERS

PROFILE_FORMAT = "placement-gym-profile/1"
# Bumped whenever what is measured changes (2: per-job dispatch overhead, update ops, transfer latency;
# 3: op times in interleaved passes, transfer latency fitted on several placements; 4: update ops and
# train steps run the task's optimizer, recorded in the profile, instead of always SGD).
MEASUREMENT_VERSION = 4
# The optimizer of a profile that does not name one: every profile before measurement version 4.
_UNRECORDED_OPTIMIZER = "sgd"
# Floor for fitted link figures and overheads: the Cluster needs positive numbers, and a fit on noisy
# timings of a fast local copy can give a latency of 0 or below.
MIN_LATENCY_S = 1e-9


class ProfileError(ValueError):
    """A profile that is malformed or does not belong to the task it is used with."""


# --- identity: graph digest, device descriptions, key ------------------------------------------------


def graph_digest(graph: OpGraph) -> str:
    """The graph's identity for profiles: the sha256 of its ONNX file, or for a graph built in
    memory (``sha256 == ""``) ``mem-`` and its content sha256 (`OpGraph.content_sha256`: every
    array, so two graphs of the same ops and edges but other tensor sizes are two graphs)."""
    if graph.sha256:
        return graph.sha256
    return "mem-" + graph.content_sha256


def _host_description() -> str:
    cpu = platform.processor() or platform.machine()
    return f"{platform.system()} {platform.machine()} {cpu}".strip()


def describe_devices(devices: Mapping[str, str]) -> list[dict[str, str]]:
    """Descriptions of the torch devices behind the device names, sorted by name: ``name``,
    ``torch_device``, ``kind`` (``"cpu"``/``"gpu"``), ``host`` (the OS, machine and CPU, or the GPU
    model) and ``torch_version``. Imports torch."""
    check_device_map(devices)
    import torch

    described = []
    for name in sorted(devices):
        spec = str(devices[name])
        try:
            device = torch.device(spec)
        except (RuntimeError, ValueError) as error:
            raise ValueError(f"device {name!r}: {spec!r} is not a torch device ({error})") from None
        host = _host_description()
        if device.type == "cuda":
            if not torch.cuda.is_available():
                raise ValueError(f"device {name!r} is {spec!r} but torch sees no CUDA device on this machine")
            host = torch.cuda.get_device_name(device)
        described.append(
            {
                "name": name,
                "torch_device": spec,
                "kind": "cpu" if device.type == "cpu" else "gpu",
                "host": host,
                "torch_version": torch.__version__,
            }
        )
    return described


def profile_key(
    graph_sha256: str, device_descriptions: Sequence[Mapping[str, str]], batch: int | None,
    optimizer: str = "adam",
) -> str:
    """16 hex digits identifying what a profile measured: graph, devices (in any order), batch, the
    optimizer of its update ops and train steps, and the measurement version (`MEASUREMENT_VERSION`),
    so that a cached profile measured by an older procedure or for another optimizer is measured
    again rather than silently reused."""
    devices = sorted((dict(d) for d in device_descriptions), key=lambda d: d["name"])
    text = json.dumps(
        {"graph": graph_sha256, "devices": devices, "batch": batch, "optimizer": check_optimizer(optimizer),
         "measurement": MEASUREMENT_VERSION},
        sort_keys=True,
    )
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def check_device_map(devices: Mapping[str, str]) -> None:
    """Raise ValueError unless ``devices`` is a non-empty mapping of device names to torch devices."""
    if not isinstance(devices, Mapping) or not devices:
        raise ValueError(
            "devices must be a non-empty mapping from device name to torch device, "
            f"such as {{'cpu:0': 'cpu', 'gpu:0': 'cuda:0'}}; got {devices!r}"
        )


# --- cache -----------------------------------------------------------------------------------------


def cache_dir() -> Path:
    """Where profiles are cached: ``$PLACEMENT_GYM_CACHE/profiles`` or ``~/.cache/placement_gym/profiles``."""
    root = os.environ.get("PLACEMENT_GYM_CACHE")
    base = Path(root) if root else Path.home() / ".cache" / "placement_gym"
    return base / "profiles"


def save_profile(profile: Mapping[str, Any], path: str | Path | None = None) -> Path:
    """Write ``profile`` as JSON to ``path`` (default: its file in `cache_dir`); returns the path."""
    check_profile(profile)
    if path is None:
        path = cache_dir() / f"{profile['graph']['name']}-{profile['key']}.json"
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(path.name + ".tmp")
    temporary.write_text(json.dumps(profile, indent=1, sort_keys=True))
    temporary.replace(path)  # atomic: a reader never sees half a profile
    return path


# About 100 bytes per op and device: room for graphs of 10,000s of ops on a dozen devices.
MAX_PROFILE_BYTES = 64 * 2**20
# A profile nests 3 levels (profile > forward_s > op > device).
MAX_PROFILE_NESTING = 8


def load_profile(path: str | Path) -> dict[str, Any]:
    """Read and check a profile file, as untrusted input (`placement_gym.common.untrusted.read_json`): a
    regular file of at most `MAX_PROFILE_BYTES` bytes of strict JSON nested at most
    `MAX_PROFILE_NESTING` levels."""
    path = Path(path)
    if not path.is_file():
        raise ProfileError(f"profile file {str(path)!r} does not exist")
    try:
        profile = read_json(path, MAX_PROFILE_BYTES, "profile file", max_depth=MAX_PROFILE_NESTING)
    except UntrustedFileError as error:
        raise ProfileError(str(error)) from None
    check_profile(profile, source=str(path))
    return profile


def find_profile(
    graph: OpGraph,
    devices: Mapping[str, str] | Sequence[str],
    batch: int | None = None,
    optimizer: str | None = "adam",
) -> dict[str, Any] | None:
    """The cached profile of ``graph`` on ``devices`` for ``optimizer``, or None.

    ``devices`` as a mapping (name -> torch device) looks up the exact key (same hardware and torch
    version; imports torch). As a sequence of device names it takes, without torch, the newest
    cached profile of the graph whose device names are exactly these (any hardware).
    ``optimizer``: the one the profile's update ops and train steps ran (`profile_optimizer`);
    None takes a profile of any optimizer (enough for ``inference`` tasks, which have no update)."""
    directory = cache_dir()
    digest = graph_digest(graph)
    wanted = tuple(OPTIMIZERS) if optimizer is None else (check_optimizer(optimizer),)
    if isinstance(devices, Mapping):
        described = describe_devices(devices)
        for candidate in wanted:
            path = directory / f"{graph.name}-{profile_key(digest, described, batch, candidate)}.json"
            if path.is_file():
                return load_profile(path)
        return None
    names = sorted(devices)
    best = None
    for path in sorted(directory.glob(f"{graph.name}-*.json")) if directory.is_dir() else ():
        try:
            profile = load_profile(path)
        except ProfileError:
            continue  # a broken cache file is skipped, not fatal
        if (
            profile["graph"]["sha256"] == digest
            and sorted(d["name"] for d in profile["devices"]) == names
            and profile.get("batch") == batch
            and profile_optimizer(profile) in wanted
            and (best is None or profile.get("created", "") > best.get("created", ""))
        ):
            best = profile
    return best


# --- checks --------------------------------------------------------------------------------------


def check_profile(profile: Any, source: str = "profile") -> None:
    """Raise `ProfileError` naming what is missing or malformed."""
    if not isinstance(profile, Mapping):
        raise ProfileError(f"{source} must be a dict (a loaded profile), got {type(profile).__name__}")
    if profile.get("format") != PROFILE_FORMAT:
        raise ProfileError(f"{source}: format is {profile.get('format')!r}, expected {PROFILE_FORMAT!r}")
    missing = [k for k in ("key", "graph", "devices", "forward_s", "link_bandwidth", "link_latency")
               if k not in profile]
    if missing:
        raise ProfileError(f"{source} lacks {', '.join(missing)}")
    graph = profile["graph"]
    if not isinstance(graph, Mapping) or not {"name", "sha256"} <= set(graph):
        raise ProfileError(f"{source}: 'graph' must have 'name' and 'sha256'")
    if not isinstance(profile["devices"], list) or not all(
        isinstance(d, Mapping) and "name" in d for d in profile["devices"]
    ):
        raise ProfileError(f"{source}: 'devices' must be a list of device descriptions with a 'name'")
    if "optimizer" in profile and profile["optimizer"] not in OPTIMIZERS:
        raise ProfileError(
            f"{source}: optimizer is {profile['optimizer']!r}; allowed: {', '.join(OPTIMIZERS)}"
        )


def profile_optimizer(profile: Mapping[str, Any]) -> str:
    """The optimizer whose update ops and train steps ``profile`` measured: its ``"optimizer"``, or
    for a profile made before that was recorded, ``"sgd"`` (the only update the executor then ran)."""
    return str(profile.get("optimizer", _UNRECORDED_OPTIMIZER))
