"""The device mesh a parallel plan is laid on: nodes of identical GPUs, NVSwitch inside a node,
one rail-aligned NIC per GPU between nodes.

`Mesh` holds the figures a plan's price needs (per GPU: dense tensor-core peaks, HBM bandwidth and
capacity; per link class: the bus bandwidth NCCL reaches and a per-hop latency), each with its source
in `Mesh.sources`. `mesh_from_name` reads ``dgx-h100xN`` and ``dgx-a100xN`` for any N from 1 to
`MAX_NODES` (``dgx-h100`` and ``dgx-a100`` are one node). Bus bandwidth is what nccl-tests report as
``busbw``: a collective's bytes per rank over its time, so that it compares with a link's speed
(REFERENCE: NCCL's bytes per rank).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

GB = 1e9
MAX_NODES = 1024


@dataclass(frozen=True)
class GpuFigures:
    """One GPU model: dense tensor-core peaks by precision (FLOP/s), HBM bandwidth (bytes/s, the
    datasheet figure) and capacity (bytes), and its calibration key (`placement_gym.plans.kernels`)."""

    model: str
    architecture: str
    peak: dict[str, float]
    memory_bandwidth: float
    memory: float


@dataclass(frozen=True)
class Mesh:
    """``nodes`` x ``gpus_per_node`` GPUs of one model. ``intra_busbw``: the bus bandwidth of ring
    collectives inside a node; ``intra_allreduce_busbw``: of an all-reduce inside a node (NVLink
    SHARP where the switch reduces); ``nic_busbw``: what one GPU's own NIC carries one way;
    ``intra_p2p`` and ``nic_p2p``: a send/recv's bandwidth; ``intra_latency`` and ``inter_latency``:
    each step of a ring inside or across nodes; ``collective_launch``: each collective's fixed cost."""

    name: str
    nodes: int
    gpus_per_node: int
    gpu: GpuFigures
    intra_busbw: float
    intra_allreduce_busbw: float
    nic_busbw: float
    intra_p2p: float
    nic_p2p: float
    intra_latency: float
    inter_latency: float
    collective_launch: float
    sources: dict[str, str] = field(default_factory=dict, compare=False)

    @property
    def gpus(self) -> int:
        return self.nodes * self.gpus_per_node

    def describe(self) -> str:
        return (
            f"{self.name}: {self.nodes} node(s) x {self.gpus_per_node} {self.gpu.model} "
            f"({self.gpus} GPUs); NVSwitch busbw {self.intra_busbw / GB:.0f} GB/s, "
            f"NIC {self.nic_busbw / GB:.1f} GB/s per GPU"
        )


H100 = GpuFigures("H100 SXM 80GB", "hopper", {"bf16": 989e12, "fp16": 989e12, "fp8": 1979e12}, 3.35e12, 80e9)
A100 = GpuFigures("A100 SXM 80GB", "ampere", {"bf16": 312e12, "fp16": 312e12}, 2.039e12, 80e9)

# NCCL's per-step latencies are small against the megabytes of a training step's collectives; these
# are assumptions of the order of NCCL's own tuning model (a microsecond or two a hop over NVLink,
# several over InfiniBand) plus a launch of each collective kernel.
INTRA_LATENCY = 1e-6
INTER_LATENCY = 5e-6
COLLECTIVE_LAUNCH = 10e-6
# nccl-tests between nodes reach about 0.9 of the NICs' line rate (NVIDIA/nccl-tests issue 119: 85-96
# GB/s busbw on A100 nodes with 4 x 200 Gb/s HDR per 8 GPUs, 100 GB/s of line rate).
NIC_EFFICIENCY = 0.9

_SOURCES = {
    "h100": {
        "gpu": "NVIDIA H100 SXM datasheet: 989 TFLOP/s dense bf16/fp16, 1,979 dense fp8, 3.35 TB/s HBM3, "
        "80 GB.",
        "intra": "DGX H100: NVLink 4 through NVSwitch, 450 GB/s one way per GPU. nccl-tests all_reduce busbw "
        "on 8 H100 SXM at large sizes: 460-480 GB/s with NVLink SHARP (Alaya NeW, 'NCCL-tests in "
        "practice', 2026): 470 GB/s taken. Ring collectives (all-gather, reduce-scatter, all-to-all) "
        "take the NVLink port's one-way rate at A100's measured share (230/300): 345 GB/s.",
        "nic": "DGX H100 datasheet: 8 x ConnectX-7 400 Gb/s InfiniBand NDR, one per GPU, rail-aligned; "
        "50 GB/s x 0.9 (nccl-tests' share of line rate, NVIDIA/nccl-tests issue 119) = 45 GB/s.",
    },
    "a100": {
        "gpu": "NVIDIA A100 SXM datasheet: 312 TFLOP/s dense bf16/fp16 (no fp8), 2.039 TB/s HBM2e, 80 GB.",
        "intra": "DGX A100: NVLink 3 through NVSwitch, 300 GB/s one way per GPU. nccl-tests all_reduce busbw "
        "on 8 A100 SXM: 230-250 GB/s (Alaya NeW, 2026), about 200 GB/s on other A100 nodes "
        "(NVIDIA/nccl-tests issues 149 and 178): 230 GB/s taken for every collective (no NVLink "
        "SHARP on A100's switch).",
        "nic": "DGX A100 datasheet: 8 x ConnectX-6 200 Gb/s InfiniBand HDR, one per GPU, rail-aligned; "
        "25 GB/s x 0.9 = 22.5 GB/s.",
    },
}
_COMMON_SOURCES = {
    "latency": f"assumptions: {INTRA_LATENCY * 1e6:g} us per ring step inside a node, "
    f"{INTER_LATENCY * 1e6:g} us across nodes, {COLLECTIVE_LAUNCH * 1e6:g} us per collective launch",
    "p2p": "a pipeline send/recv runs at the NVLink port's one-way rate inside a node and at the NIC's "
    "share of line rate across nodes",
}


def dgx_mesh(generation: str, nodes: int) -> Mesh:
    """``nodes`` DGX nodes of ``generation`` ('h100' or 'a100'), 8 GPUs each."""
    if generation not in _SOURCES:
        raise ValueError(f"DGX generation must be h100 or a100, got {generation!r}")
    if not isinstance(nodes, int) or not 1 <= nodes <= MAX_NODES:
        raise ValueError(f"a DGX mesh has 1 to {MAX_NODES:,} nodes, got {nodes!r}")
    sources = {**_SOURCES[generation], **_COMMON_SOURCES}
    name = f"dgx-{generation}" if nodes == 1 else f"dgx-{generation}x{nodes}"
    if generation == "h100":
        return Mesh(
            name,
            nodes,
            8,
            H100,
            345 * GB,
            470 * GB,
            50 * GB * NIC_EFFICIENCY,
            450 * GB,
            50 * GB * NIC_EFFICIENCY,
            INTRA_LATENCY,
            INTER_LATENCY,
            COLLECTIVE_LAUNCH,
            sources,
        )
    return Mesh(
        name,
        nodes,
        8,
        A100,
        230 * GB,
        230 * GB,
        25 * GB * NIC_EFFICIENCY,
        300 * GB,
        25 * GB * NIC_EFFICIENCY,
        INTRA_LATENCY,
        INTER_LATENCY,
        COLLECTIVE_LAUNCH,
        sources,
    )


_NAME = re.compile(r"dgx-(h100|a100)(?:x([0-9]{1,5}))?")


def mesh_from_name(name: str) -> Mesh:
    """The mesh named ``dgx-h100xN`` or ``dgx-a100xN`` (N from 1 to `MAX_NODES`; no ``xN``: one
    node). A ValueError names what is allowed."""
    match = _NAME.fullmatch(name.strip()) if isinstance(name, str) else None
    if match is None:
        raise ValueError(
            f"unknown mesh {name!r}: plans run on dgx-h100xN or dgx-a100xN (N nodes of 8 GPUs, "
            f"1 to {MAX_NODES:,})"
        )
    return dgx_mesh(match.group(1), int(match.group(2) or 1))
