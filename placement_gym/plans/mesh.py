"""The device mesh a parallel plan is laid on: nodes of identical GPUs, NVSwitch inside a node,
one rail-aligned NIC per GPU between nodes; or a mixed mesh of DGX A100 and DGX H100 nodes.

`Mesh` holds the figures a plan's price needs (per GPU: dense tensor-core peaks, HBM bandwidth and
capacity; per link class: the bus bandwidth NCCL reaches and a per-hop latency), each with its source
in `Mesh.sources`. `mesh_from_name` reads ``dgx-h100xN`` and ``dgx-a100xN`` for any N from 1 to
`MAX_NODES` (``dgx-h100`` and ``dgx-a100`` are one node), and mixed meshes, parts of both joined by
``+`` (``dgx-a100x4+dgx-h100x4``: ranks 0-31 on the A100 nodes, 32-63 on the H100 nodes; each
generation once, `MAX_NODES` nodes at most in all). Bus bandwidth is what nccl-tests report as
``busbw``: a collective's bytes per rank over its time, so that it compares with a link's speed
(REFERENCE: NCCL's bytes per rank).

A mixed mesh (`mixed_mesh`) keeps its homogeneous ``parts`` in node order; its own figures are the
*lock-step* figures of its kinds (`lockstep_gpu`; each link figure the lower bandwidth and the higher
latency of the parts), what work spanning both kinds runs at. `Mesh.figures` gives the figures a
stretch of ranks runs at: its part's where the ranks lie on one kind of node, the lock-step ones where
they span both (docs/cost_model.md, "Mixed meshes").
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
    # GPUs of different models run in lock step (`lockstep_gpu`): each op takes its slowest member's
    # time (`placement_gym.plans.kernels.op_seconds`); empty for one GPU model
    members: tuple[GpuFigures, ...] = ()


def lockstep_gpu(*gpus: GpuFigures) -> GpuFigures:
    """GPUs of different models running the same ops in lock step: each op at the slowest member's
    time (``members``), the peaks of the precisions all of them have (the lowest of each), the lowest
    HBM bandwidth and the smallest memory."""
    members = tuple(member for gpu in gpus for member in (gpu.members or (gpu,)))
    common = [p for p in members[0].peak if all(p in member.peak for member in members)]
    return GpuFigures(
        " + ".join(member.model for member in members),
        "+".join(member.architecture for member in members),
        {p: min(member.peak[p] for member in members) for p in common},
        min(member.memory_bandwidth for member in members),
        min(member.memory for member in members),
        members,
    )


@dataclass(frozen=True)
class Mesh:
    """``nodes`` x ``gpus_per_node`` GPUs of one model. ``intra_busbw``: the bus bandwidth of ring
    collectives inside a node; ``intra_allreduce_busbw``: of an all-reduce inside a node (NVLink
    SHARP where the switch reduces); ``nic_busbw``: what one GPU's own NIC carries one way;
    ``intra_p2p`` and ``nic_p2p``: a send/recv's bandwidth; ``intra_latency`` and ``inter_latency``:
    each step of a ring inside or across nodes; ``collective_launch``: each collective's fixed cost.

    A mixed mesh (`mixed_mesh`) has ``parts``, homogeneous meshes in node order (ranks fill the first
    part's nodes, then the next's), and the lock-step figures of its kinds as its own: ``gpu`` is
    `lockstep_gpu` of the parts' GPUs, each bandwidth the lowest of the parts' and each latency the
    highest. Empty ``parts``: one GPU model, priced as ever."""

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
    parts: tuple[Mesh, ...] = ()

    @property
    def gpus(self) -> int:
        return self.nodes * self.gpus_per_node

    def peak_flops(self, precision: str) -> float:
        """Every GPU's dense peak at ``precision`` summed (FLOP/s); KeyError where a GPU lacks it."""
        if not self.parts:
            return self.gpus * self.gpu.peak[precision]
        return sum(part.gpus * part.gpu.peak[precision] for part in self.parts)

    def figures(self, *spans: tuple[int, int]) -> Mesh:
        """The mesh whose figures work on the ranks ``[first, stop)`` of each span runs at: this mesh
        where it has one GPU model; on a mixed mesh the part that holds every one of those ranks, or
        the lock-step figures of the parts they lie on (this mesh itself where they lie on all)."""
        if not self.parts:
            return self
        touched, first_node = [], 0
        for part in self.parts:
            low, high = first_node * self.gpus_per_node, (first_node + part.nodes) * self.gpus_per_node
            if any(first < high and stop > low for first, stop in spans):
                touched.append(part)
            first_node += part.nodes
        if len(touched) == 1:
            return touched[0]
        return self if len(touched) == len(self.parts) else mixed_mesh(*touched)

    def describe(self) -> str:
        if self.parts:
            return (
                f"{self.name}: "
                + " then ".join(f"{part.nodes} node(s) x {part.gpus_per_node} {part.gpu.model}"
                                for part in self.parts)
                + f" ({self.gpus} GPUs); work spanning both kinds in lock step at the slower figures"
            )
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


def mixed_mesh(*parts: Mesh) -> Mesh:
    """One mesh of homogeneous ``parts`` (of different GPU models, the same GPUs a node), their nodes
    in the order given, named by their names joined with ``+``; its own figures are the parts'
    lock-step figures (`Mesh`). ValueError for fewer than two parts, a part that is itself mixed, a
    GPU model named twice, different GPUs a node or more than `MAX_NODES` nodes in all."""
    if len(parts) < 2 or any(not isinstance(part, Mesh) or part.parts for part in parts):
        raise ValueError("a mixed mesh joins two or more meshes of one GPU model each")
    models = [part.gpu.model for part in parts]
    if len(set(models)) != len(models):
        raise ValueError(f"a mixed mesh names each GPU model once, got {' + '.join(models)} "
                         "(give one part the nodes of both)")
    if len({part.gpus_per_node for part in parts}) != 1:
        raise ValueError("the parts of a mixed mesh have the same GPUs a node")
    nodes = sum(part.nodes for part in parts)
    if nodes > MAX_NODES:
        raise ValueError(f"a mixed mesh has at most {MAX_NODES:,} nodes in all, got {nodes:,}")
    sources = {f"{part.name} {key}": text for part in parts for key, text in part.sources.items()}
    sources["mixed"] = (
        "ranks fill the parts' nodes in order; work spanning parts runs in lock step: each op at the "
        "slowest GPU's time, each collective and send at the lowest bandwidth and highest latency"
    )
    return Mesh(
        "+".join(part.name for part in parts),
        nodes,
        parts[0].gpus_per_node,
        lockstep_gpu(*(part.gpu for part in parts)),
        min(part.intra_busbw for part in parts),
        min(part.intra_allreduce_busbw for part in parts),
        min(part.nic_busbw for part in parts),
        min(part.intra_p2p for part in parts),
        min(part.nic_p2p for part in parts),
        max(part.intra_latency for part in parts),
        max(part.inter_latency for part in parts),
        max(part.collective_launch for part in parts),
        sources,
        tuple(parts),
    )


_NAME = re.compile(r"dgx-([a-z0-9]+?)(?:x([0-9]{1,5}))?")


def mesh_from_name(name: str) -> Mesh:
    """The mesh named ``dgx-h100xN`` or ``dgx-a100xN`` (N from 1 to `MAX_NODES`; no ``xN``: one
    node), or a mixed mesh of such parts joined by ``+`` (``dgx-a100x4+dgx-h100x4``, `mixed_mesh`).
    A one-line ValueError names what is allowed."""
    allowed = (f"plans run on dgx-h100xN or dgx-a100xN (N nodes of 8 GPUs, 1 to {MAX_NODES:,}), or a mixed "
               "mesh of both joined by + (dgx-a100x4+dgx-h100x4)")
    texts = name.strip().split("+") if isinstance(name, str) and len(name) <= 100 else [None]
    parts = []
    for text in texts:
        match = _NAME.fullmatch(text) if text is not None else None
        if match is None or match.group(1) not in _SOURCES:
            raise ValueError(f"unknown mesh {name!r}: {allowed}")
        parts.append(dgx_mesh(match.group(1), int(match.group(2) or 1)))
    return parts[0] if len(parts) == 1 else mixed_mesh(*parts)
