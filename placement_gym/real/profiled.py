"""The profiled task: a task whose op times and links are a measured profile's
(`placement_gym.real.profile` describes the format, `placement_gym.real.measure` measures one).

`profiled_task` replaces every op's duration by the measured forward, backward and update times
(plus the executor's dispatch overhead per job, where measured), `profiled_cluster` the links.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from placement_gym.cluster.cluster import Cluster
from placement_gym.real.profile import (
    MIN_LATENCY_S,
    ProfileError,
    check_profile,
    graph_digest,
    load_profile,
    profile_optimizer,
)
from placement_gym.task.compiled import Task, make_task


def _device_names(profile: Mapping[str, Any]) -> list[str]:
    return [d["name"] for d in profile["devices"]]


def _check_matches(task: Task, profile: Mapping[str, Any]) -> None:
    digest = graph_digest(task.graph)
    if profile["graph"]["sha256"] != digest:
        theirs = profile["graph"]
        raise ProfileError(
            f"the profile is for graph {theirs['name']!r} (sha256 {theirs['sha256'][:16]}...), "
            f"not task {task.id}'s graph {task.graph.name!r} (sha256 {digest[:16]}...); "
            f"run placement-gym profile --graph {task.graph.name} ..."
        )
    have, want = set(_device_names(profile)), set(task.cluster.device_names)
    if have != want:
        raise ProfileError(
            f"the profile measured devices {sorted(have)}, task {task.id}'s cluster has {sorted(want)}: "
            f"missing {sorted(want - have)}, extra {sorted(have - want)}"
        )
    measured = profile_optimizer(profile)
    if task.objective == "train_step" and measured != task.optimizer:
        recorded = "" if "optimizer" in profile else (
            " (it records none: it predates the field, when the executor always ran SGD)"
        )
        raise ProfileError(
            f"the profile measured train steps with optimizer {measured!r}{recorded}, task {task.id} "
            f"trains with {task.optimizer!r}: its update times and train-step overheads do not apply; "
            f"run placement-gym profile --graph {task.graph.name} --optimizer {task.optimizer} ..."
        )


def _per_op_table(
    profile: Mapping[str, Any], field: str, names: Sequence[str], devices: Sequence[str], required: bool
) -> np.ndarray:
    """``(len(names), len(devices))`` seconds from ``profile[field]``; NaN where not measured (an
    error instead when ``required``)."""
    table = profile.get(field) or {}
    out = np.full((len(names), len(devices)), np.nan)
    for i, name in enumerate(names):
        row = table.get(name)
        if row is None:
            if required:
                raise ProfileError(f"profile {field} has no times for op {name!r}")
            continue
        for j, device in enumerate(devices):
            if device not in row:
                raise ProfileError(f"profile {field}[{name!r}] has no time for device {device!r}")
            value = float(row[device])
            if not np.isfinite(value) or value < 0:
                raise ProfileError(
                    f"profile {field}[{name!r}][{device!r}] = {row[device]!r} is not a time >= 0"
                )
            out[i, j] = value
    return out


def _link_matrix(profile: Mapping[str, Any], field: str, devices: Sequence[str]) -> np.ndarray:
    table = profile[field]
    n = len(devices)
    out = np.zeros((n, n))
    for i, src in enumerate(devices):
        for j, dst in enumerate(devices):
            if i == j:
                continue
            try:
                out[i, j] = float(table[src][dst])
            except (KeyError, TypeError, ValueError):
                raise ProfileError(f"profile {field} has no figure for link {src} -> {dst}") from None
    return out


def profiled_cluster(cluster: Cluster, profile: Mapping[str, Any]) -> Cluster:
    """``cluster`` with its links replaced by the profile's measured bandwidth and latency."""
    names = cluster.device_names
    return dataclasses.replace(
        cluster,
        name=f"{cluster.name}+profile",
        link_bandwidth=_link_matrix(profile, "link_bandwidth", names),
        link_latency=_link_matrix(profile, "link_latency", names),
        description=(cluster.description + " " if cluster.description else "")
        + f"(links measured, profile {profile['key']})",
    )


def profiled_task(task: Task, profile: Mapping[str, Any] | str | Path) -> Task:
    """``task`` with measured op times and links from ``profile`` (a dict or a profile file).

    ``duration[op, device]``: a forward op takes ``forward_s[op][device]``; a backward op the
    ``backward_s`` of its forward op (an error if the profile has none for an op that a train_step
    task needs); an update op ``update_s`` of its forward op when measured, else the analytical
    figure of the cost model (optimizer updates are simple element-wise passes that the analytical
    formula models well). A ``train_step`` task needs a profile of its own optimizer
    (`profile_optimizer`; a `ProfileError` otherwise). Links: the measured ones
    (`profiled_cluster`). Graph, memory, objective and optimizer are unchanged; the id keeps the
    task's (so placements and leaderboard entries stay comparable by task)."""
    if isinstance(profile, (str, Path)):
        profile = load_profile(profile)
    check_profile(profile)
    _check_matches(task, profile)
    cluster = profiled_cluster(task.cluster, profile)
    base = make_task(task.graph, cluster, task.step)
    devices = task.cluster.device_names
    names = task.graph.op_names
    duration = np.array(base.duration, dtype=np.float64)
    forward = _per_op_table(profile, "forward_s", names, devices, required=True)
    kinds, owners = task.op_kind, task.op_forward
    # A replayed op (kind 3, activation recomputation) runs its forward op again.
    replay = (kinds == 0) | (kinds == 3)
    duration[replay] = forward[owners[replay]]
    if np.any(kinds == 1):
        backward = _per_op_table(profile, "backward_s", names, devices, required=True)
        duration[kinds == 1] = backward[owners[kinds == 1]]
    if np.any(kinds == 2):
        update = _per_op_table(profile, "update_s", names, devices, required=False)
        measured = update[owners[kinds == 2]]
        rows = duration[kinds == 2]
        duration[kinds == 2] = np.where(np.isnan(measured), rows, measured)
    transfer = (profile.get("transfer_latency_s") or {}).get(task.objective)
    if transfer is not None:
        if not np.isfinite(float(transfer)) or float(transfer) <= 0:
            raise ProfileError(
                f"profile transfer_latency_s[{task.objective!r}] = {transfer!r} is not a time > 0"
            )
        latency = np.full_like(cluster.link_latency, float(transfer))
        cluster = dataclasses.replace(cluster, link_latency=latency)
    overhead = launch_overheads(profile, task.objective, devices)
    if overhead is not None:
        duration += overhead[None, :]
        cluster = dataclasses.replace(cluster, launch_overhead=np.maximum(overhead, MIN_LATENCY_S))
    duration.setflags(write=False)
    # Only the op times depend on the cluster; replacing them in ``task`` keeps its id and its
    # evaluation counter, so evaluations of the profiled task count for the task.
    return dataclasses.replace(task, cluster=cluster, duration=duration)


def launch_overheads(profile: Mapping[str, Any], objective: str, devices: Sequence[str]) -> np.ndarray | None:
    """Seconds of executor dispatch per job on each of ``devices`` for ``objective`` (the profile's
    ``launch_overhead_s``), or None when the profile has none for that objective."""
    table = (profile.get("launch_overhead_s") or {}).get(objective)
    if table is None:
        return None
    out = np.zeros(len(devices))
    for j, device in enumerate(devices):
        try:
            value = float(table[device])
        except (KeyError, TypeError, ValueError):
            raise ProfileError(
                f"profile launch_overhead_s[{objective!r}] has no figure for device {device!r}"
            ) from None
        if not np.isfinite(value) or value < 0:
            raise ProfileError(
                f"profile launch_overhead_s[{objective!r}][{device!r}] = {value!r} is not a time >= 0"
            )
        out[j] = value
    return out
