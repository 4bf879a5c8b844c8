"""Measured profiles made up for the tests: seeded random times in the profile file's format."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from placement_gym.graph.opgraph import OpGraph
from placement_gym.real.profile import PROFILE_FORMAT, graph_digest, profile_key


def synthetic_profile(graph: OpGraph, device_names: Sequence[str], seed: int = 0, update: bool = False,
                      batch: int | None = None, descriptions: list[dict] | None = None,
                      optimizer: str | None = "adam") -> dict[str, Any]:
    """A profile of ``graph`` on ``device_names`` in the file format (a dict, as `load_profile` gives),
    with times of 0.01-1 ms and links drawn from ``seed``, update times with ``update``, measured at
    ``batch`` on the devices ``descriptions`` describe (default: one CPU each), as if measured with
    ``optimizer`` (None: a profile from before the optimizer was recorded)."""
    rng = np.random.default_rng(seed)
    devices = descriptions or [
        {"name": n, "torch_device": "cpu", "kind": "cpu", "host": "test", "torch_version": "0"}
        for n in device_names
    ]

    def table():
        return {op: {d: float(rng.uniform(1e-5, 1e-3)) for d in device_names} for op in graph.op_names}

    profile = {
        "format": PROFILE_FORMAT,
        "key": profile_key(graph_digest(graph), devices, batch, optimizer or "sgd"),
        "graph": {"name": graph.name, "sha256": graph_digest(graph), "n_ops": graph.n_ops},
        "batch": batch,
        "devices": devices,
        "forward_s": table(),
        "backward_s": table(),
        "link_bandwidth": {s: {d: float(rng.uniform(1e9, 1e10)) for d in device_names if d != s}
                           for s in device_names},
        "link_latency": {s: {d: float(rng.uniform(1e-6, 1e-4)) for d in device_names if d != s}
                         for s in device_names},
        "settings": {"repeats": 1},
        "created": f"2026-01-0{seed + 1}T00:00:00+00:00",
    }
    if update:
        profile["update_s"] = table()
    if optimizer is not None:
        profile["optimizer"] = optimizer
    return profile
