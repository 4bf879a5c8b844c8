"""Collectives over a group of a mesh's GPUs, priced as NCCL runs them.

A group is a set of the mesh's ranks (node-major: rank = node x GPUs per node + local index): its
size, the most of them in one node (`Group.per_node`) and the nodes it spans (`Group.nodes`). Bytes per
rank are NCCL's (REFERENCE): a ring all-reduce sends 2(n-1)/n of the buffer, reduce-scatter and
all-gather (n-1)/n of the whole buffer, an all-to-all (n-1)/n of the rank's send buffer. The time
is a latency term plus those bytes over the bus bandwidth of the group's bottleneck:

- inside one node, NVSwitch's bus bandwidth (an all-reduce takes NVLink SHARP's where the mesh has it);
- across nodes, the ring crosses each node through the NICs of the group's GPUs there (rail-aligned,
  one NIC a GPU), so the inter-node bus bandwidth is ``per_node`` x one NIC's, and the group's is the
  smaller of that and NVSwitch's (a hierarchical ring: the slower level bounds it);
- an all-to-all sends (per_node - 1)/n of its buffer over NVSwitch and (n - per_node)/n through its own
  NIC, both at once: the slower of the two.

All-reduce takes the faster of NCCL's ring (2(n-1) steps of latency) and tree (2 log2 steps across
nodes) at the same bandwidth, as NCCL's tuner picks by size.

A group's ``mesh`` gives the figures: on a mixed mesh, those its stage's ranks run at
(`placement_gym.plans.mesh.Mesh.figures`: one kind's, or the lock-step figures where they span both).
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from placement_gym.plans.mesh import Mesh

COLLECTIVES = ("all_reduce", "reduce_scatter", "all_gather", "all_to_all", "send_recv")


@dataclass(frozen=True)
class Group:
    """``size`` ranks of ``mesh`` over ``nodes`` nodes, ``per_node`` of them in the node that holds the
    fewest (its NICs carry the ring's traffic between nodes: the bottleneck)."""

    size: int
    per_node: int
    nodes: int
    mesh: Mesh

    @classmethod
    def of_ranks(cls, ranks: Sequence[int], mesh: Mesh) -> Group:
        """The group of these ranks (node-major: rank // GPUs per node is the node)."""
        counts = Counter(int(rank) // mesh.gpus_per_node for rank in ranks)
        return cls(len(ranks), min(counts.values()), len(counts), mesh)

    def busbw(self, operation: str) -> float:
        """The bus bandwidth of ``operation`` over the group (bytes/s)."""
        mesh = self.mesh
        intra = mesh.intra_allreduce_busbw if operation == "all_reduce" else mesh.intra_busbw
        if self.nodes == 1:
            return intra
        return min(intra, self.per_node * mesh.nic_busbw)


def collective_time(operation: str, buffer_bytes: float, group: Group) -> float:
    """Seconds of ``operation`` over ``group`` on a buffer of ``buffer_bytes`` (the whole tensor for
    all-reduce, reduce-scatter and all-gather; the rank's send buffer for all-to-all; the message for
    send_recv, whose group is the two ranks). Zero for a group
    of one."""
    if operation not in COLLECTIVES:
        raise ValueError(f"collective must be one of {', '.join(COLLECTIVES)}, got {operation!r}")
    n, mesh = group.size, group.mesh
    if n <= 1 or buffer_bytes <= 0:
        return 0.0
    crosses = group.nodes > 1
    hop = mesh.inter_latency if crosses else mesh.intra_latency
    if operation == "send_recv":
        bandwidth = mesh.nic_p2p if crosses else mesh.intra_p2p
        return hop + buffer_bytes / bandwidth
    if operation == "all_to_all":
        inside = buffer_bytes * (group.per_node - 1) / n / mesh.intra_busbw
        across = buffer_bytes * (n - group.per_node) / n / mesh.nic_busbw
        return mesh.collective_launch + (n - 1) * hop + max(inside, across)
    busbw = group.busbw(operation)
    if operation == "all_reduce":
        moved = 2.0 * (n - 1) / n * buffer_bytes / busbw
        ring = 2 * (n - 1) * hop
        tree = (
            2
            * (
                math.ceil(math.log2(group.nodes)) * mesh.inter_latency
                + (group.per_node - 1) * mesh.intra_latency
            )
            if crosses
            else ring
        )
        return mesh.collective_launch + min(ring, tree) + moved
    return mesh.collective_launch + (n - 1) * hop + (n - 1) / n * buffer_bytes / busbw
