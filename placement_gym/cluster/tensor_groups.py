"""A cluster's GPUs seen in tensor-parallel groups: the devices of a task whose ops are split T ways
(`placement_gym.task.step.Step.tensor_parallel`), and the time of a collective over one group.

Group ``k`` is the cluster's GPUs ``k T .. k T + T - 1`` in device order (the GPUs of one host, with
the same figures). A group is one device of the view, whose figures are its first GPU's (its
*representative rank*: every rank of a group runs the same share of each op at the same time), and a
transfer from one group to another is timed on the link between their representative ranks (each rank
sends its own copy to its peer at once, on its own link: as fast as one). CPUs are left out: a host
CPU does not join a tensor-parallel group.

A collective over a group runs NCCL's ring on the group's links, in the group's device order (the
ring closing from the last GPU to the first): a step moves ``1/T`` of the buffer over every ring link
at once, so it takes the slowest ring link's latency plus ``buffer / T`` over its bandwidth. An
all-reduce is ``2 (T - 1)`` steps (reduce-scatter then all-gather), an all-gather and a
reduce-scatter ``T - 1`` each: the bytes per rank are NCCL's ``2 (T - 1) / T`` and ``(T - 1) / T`` of the
buffer. The op-placement clusters state point-to-point links, not the bus bandwidths nccl-tests report,
so this is the ring on those links (docs/cost_model.md, "Tensor parallelism over an op graph")."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from placement_gym.cluster.cluster import Cluster

# collective -> ring steps for a group of T: a function of T
RING_STEPS = {"all_reduce": lambda t: 2 * (t - 1), "all_gather": lambda t: t - 1,
              "reduce_scatter": lambda t: t - 1}
# Per-GPU figures that must agree inside a group for one rank to stand for all of them.
_SAME_IN_GROUP = ("peak_flops", "memory_bandwidth", "memory_capacity", "launch_overhead", "efficiency",
                  "dispatch_time", "transfer_sync", "device_host")


@dataclass(frozen=True, eq=False)
class TensorGroups:
    """``cluster``: the view, one device per group (named ``gpu:0-7`` after its GPUs' names, the
    first's figures); ``members``: int ``(groups, T)``, each group's device indices in the original
    cluster; ``ring_bandwidth`` and ``ring_latency`` per group: its slowest ring link's."""

    cluster: Cluster
    members: np.ndarray
    ring_bandwidth: np.ndarray
    ring_latency: np.ndarray

    @property
    def degree(self) -> int:
        return int(self.members.shape[1])

    def collective_seconds(self, collective: str, buffer_bytes: float) -> np.ndarray:
        """Seconds of ``collective`` (a key of `RING_STEPS`) over each group on a buffer of
        ``buffer_bytes`` (the whole tensor): 0 for a group of one GPU or an empty buffer."""
        t = self.degree
        if t == 1 or buffer_bytes <= 0:
            return np.zeros(len(self.members))
        return RING_STEPS[collective](t) * (self.ring_latency + buffer_bytes / t / self.ring_bandwidth)


def tensor_groups(cluster: Cluster, degree: int) -> TensorGroups:
    """The view of ``cluster``'s GPUs in groups of ``degree`` (module docstring), or a one-line
    ValueError: no GPU, a GPU count that ``degree`` does not divide, or a group that spans two hosts or
    mixes figures. A degree of 1 is refused too: a task with one device per op keeps its cluster."""
    where = f"tensor_parallel={degree} on cluster {cluster.name!r}"
    if degree < 2:
        raise ValueError(f"{where}: tensor groups need a degree of 2 or more")
    gpus = np.flatnonzero(np.asarray(cluster.device_kinds) == "gpu")
    if len(gpus) == 0 or len(gpus) % degree:
        divisors = [str(d) for d in range(2, len(gpus) + 1) if len(gpus) % d == 0]
        raise ValueError(f"{where}: the degree must divide the cluster's {len(gpus)} GPUs (allowed: "
                         f"{', '.join(divisors) or 'none'})")
    members = gpus.reshape(-1, degree)
    for group in members:
        for key in _SAME_IN_GROUP:
            values = np.asarray(getattr(cluster, key))[group]
            if not (values == values[0]).all():
                names = ", ".join(cluster.device_names[i] for i in group)
                what = "hosts" if key == "device_host" else key
                raise ValueError(f"{where}: the group {names} mixes {what}; a group is GPUs of one host "
                                 "with the same figures")
    leaders = members[:, 0]
    following = np.roll(members, -1, axis=1)
    bandwidth = cluster.link_bandwidth[members, following].min(axis=1)
    latency = cluster.link_latency[members, following].max(axis=1)
    names = tuple(f"{cluster.device_names[first]}-{cluster.device_names[last].split(':')[-1]}"
                  for first, last in zip(leaders, members[:, -1]))
    pick = np.ix_(leaders, leaders)
    half = {}
    if cluster.tensor_peak_flops is not None:
        half["tensor_peak_flops"] = cluster.tensor_peak_flops[leaders]
    if cluster.tensor_efficiency is not None:
        half["tensor_efficiency"] = cluster.tensor_efficiency[leaders]
    view = Cluster(
        name=f"{cluster.name}/tp{degree}",
        device_names=names,
        device_kinds=tuple(cluster.device_kinds[i] for i in leaders),
        peak_flops=cluster.peak_flops[leaders],
        memory_bandwidth=cluster.memory_bandwidth[leaders],
        memory_capacity=cluster.memory_capacity[leaders],
        launch_overhead=cluster.launch_overhead[leaders],
        efficiency=cluster.efficiency[leaders],
        link_bandwidth=cluster.link_bandwidth[pick],
        link_latency=cluster.link_latency[pick],
        description=f"{cluster.name}'s GPUs in tensor-parallel groups of {degree}; each group's figures "
                    "are its first GPU's.",
        dispatch_time=cluster.dispatch_time[leaders],
        device_host=cluster.device_host[leaders],
        host_names=cluster.host_names,
        host_dispatch_threads=cluster.host_dispatch_threads,
        transfer_sync=cluster.transfer_sync[leaders],
        segment_names=cluster.segment_names,
        link_segments=cluster.link_segments[pick],
        **half,
    )
    return TensorGroups(view, members, bandwidth, latency)
