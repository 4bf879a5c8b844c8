"""Preset clusters: the machines of the device-placement papers, with every figure's source.

Sources (see docs/references.md, "Hardware figures" and "Papers"):
- GPU peak FP32 FLOP/s, memory and memory bandwidth: NVIDIA datasheets (per GK210 die for the K80,
  which has two dies per board).
- Server CPUs: peak = cores x base clock x 32 FP32 FLOP/cycle (AVX2: two 256-bit FMA units x 8 lanes
  x 2 FLOP per FMA), which puts a Broadwell/Haswell server CPU of 8-18 cores at 0.5-1.3 TFLOP/s as
  docs/references.md says; 60-70 GB/s memory bandwidth (four DDR4-2133 channels: 4 x 17 GB/s).
- Links: PCIe 3.0 x16 about 12 GB/s achievable (15.75 theoretical); PCIe 5.0 about 50 GB/s.
  Latency per transfer 25 us on PCIe (Addanki's / Park's simulator, p2.8xlarge constants), a few us
  over NVLink / NVSwitch.
- Per-op launch overhead 5.7 us (the gap between ops in Addanki's / Park's simulator: kernel launch
  plus TensorFlow executor dispatch); the CPU pays a similar executor dispatch cost.
- Tensor cores (V100, A100, H100): the datasheets' dense fp16/bf16 peaks (125, 312, 989 TFLOP/s),
  for half-precision tasks; multi-node DGX presets (`multi_node_cluster`): the DGX A100 and DGX H100
  datasheets (CPUs, NVSwitch bandwidth per GPU, one InfiniBand NIC per GPU: 200 Gb/s HDR and
  400 Gb/s NDR).

Beyond op and link figures each preset states what its framework's executor pays (`Executor`: host
dispatch, per-copy synchronisation) and which links share a path (`gpu_ports`, `grouped_route`: a
GPU's own port, a K80 board's uplink, a PCIe switch), and its GPUs carry their architecture's
calibrated efficiency (`ARCHITECTURES`, docs/calibration.md).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from placement_gym.cluster.cluster import DEVICE_KINDS, TENSOR_CATEGORIES, Cluster
from placement_gym.graph.opgraph import CATEGORIES

GB = 1e9  # datasheet GB and GB/s are decimal

# Fraction of FP32 peak an op of each category reaches, per device kind. Why these values:
# - matmul / conv are compute-bound; cuBLAS/cuDNN reach 70-90% of peak on large problems, less on the
#   mid-sized ones of a training step, so 0.7 / 0.6 on GPUs. CPUs (MKL / oneDNN) lose more to threading,
#   memory layout changes and lower clocks under AVX load: 0.5 / 0.4.
# - elementwise, normalization, reduction and data movement are memory-bound: the bytes / bandwidth term
#   of the cost model decides their time, and the FLOP efficiency only matters for the rare compute-heavy
#   one (e.g. an exp-heavy softmax), so moderate values suffice.
# - "other" (op types with no formula) gets the lowest value.
# Every value lies in the efficiency range of `FIGURE_RANGES` (0.0001 to 1). Users override them per
# device in a cluster JSON file.
DEFAULT_EFFICIENCY: dict[str, dict[str, float]] = {
    "gpu": {
        "matmul": 0.7,
        "conv": 0.6,
        "elementwise": 0.5,
        "normalization": 0.4,
        "reduction": 0.4,
        "data_movement": 0.5,
        "other": 0.3,
    },
    "cpu": {
        "matmul": 0.5,
        "conv": 0.4,
        "elementwise": 0.3,
        "normalization": 0.25,
        "reduction": 0.25,
        "data_movement": 0.3,
        "other": 0.2,
    },
}
assert set(DEFAULT_EFFICIENCY) == set(DEVICE_KINDS)
assert all(tuple(table) == CATEGORIES for table in DEFAULT_EFFICIENCY.values())

# Per-op launch overhead: 5.7 us gap between ops in Addanki's simulator (Placeto) and Park's
# tf_placement_sim. Used for GPUs and, as a TensorFlow executor dispatch of similar cost, for CPUs.
OP_LAUNCH_OVERHEAD = 5.7e-6

# Per-copy synchronisation on a GPU's stream (record an event and start the copy engine on the
# sender, wait for the event on the receiver). TensorFlow: calibrated on tensorflow/nmt's K40 GNMT
# ratios (docs/calibration.md). PyTorch: Baechi's fitted copy cost of 0.1 ms per transfer is the link
# latency of that machine; its eager copies also hold both devices' streams for a few more us.
TENSORFLOW_TRANSFER_SYNC = 50e-6
PYTORCH_TRANSFER_SYNC = 20e-6
# PyTorch eager: Python, the dispatcher and a CUDA launch per op, issued by one thread.
PYTORCH_DISPATCH_TIME = 20e-6

# PCIe 3.0 x16: about 12 GB/s achievable of 15.75 GB/s theoretical (docs/references.md). Latency 25 us per
# transfer (Addanki's simulator: transfer = bytes / 7600 B/us + 25 us). That simulator's 7.6 GB/s was
# measured on p2.8xlarge K80s; users who want it can load a JSON cluster with that figure.
PCIE3_BANDWIDTH = 12 * GB
PCIE3_LATENCY = 25e-6
# PCIe 5.0 x16: about 50 GB/s achievable (docs/references.md); same per-transfer latency assumed.
PCIE5_BANDWIDTH = 50 * GB
# NVLink / NVSwitch latency: a few microseconds (copy issue and DMA start; no PCIe root complex hop).
NVLINK_LATENCY = 5e-6


@dataclass(frozen=True)
class Architecture:
    """What a device generation reaches of its datasheet figures, calibrated on published step times
    (docs/calibration.md): ``efficiency`` per op category (categories left out take the defaults of
    the device's kind), ``bandwidth_fraction``, the share of the datasheet memory bandwidth that
    memory-bound ops reach, and ``tensor_efficiency``, the share of the tensor-core peak that a
    half-precision matmul and conv reach (`TENSOR_CATEGORIES`; used only by devices with a
    ``tensor_peak_flops``; categories left out take `DEFAULT_TENSOR_EFFICIENCY`)."""

    efficiency: dict[str, float]
    bandwidth_fraction: float
    calibrated_on: str
    tensor_efficiency: dict[str, float] = field(default_factory=dict)


# Half-precision tensor-core efficiency of an architecture not calibrated in half precision: the FP32
# GPU defaults' compute-bound figures (cuBLAS/cuDNN reach 70-90% of peak on large problems).
DEFAULT_TENSOR_EFFICIENCY: dict[str, float] = {"matmul": 0.7, "conv": 0.6}
assert tuple(DEFAULT_TENSOR_EFFICIENCY) == TENSOR_CATEGORIES


# Each architecture's efficiencies (the defaults of its kind where it sets none) put the one-device
# rows of docs/calibration.md on that architecture within their tolerance. experiments/calibration/fit.py
# checks it (its README has the command and output): it scales the FP32 efficiency row, and separately
# the tensor efficiency, and prints per architecture the interval of scales that keeps every such row
# within its tolerance, and whether the shipped figures (scale 1) lie inside.
ARCHITECTURES: dict[str, Architecture] = {
    # Kepler (K80 die, K40): TensorFlow 1.x on cuDNN 5.1 reaches about half the FLOP efficiency of
    # later generations (boost clocks are rarely held under load); ECC-on GDDR5 about 75% of its peak.
    "kepler": Architecture(
        {"matmul": 0.28, "conv": 0.32},
        0.75,
        "TensorFlow benchmarks (K80: Inception-V3, ResNet-50, ResNet-152), tensorflow/nmt (K40m)",
    ),
    "pascal": Architecture(
        {}, 0.8, "TensorFlow benchmarks (DGX-1 P100: Inception-V3, ResNet-50, ResNet-152)"
    ),
    "turing": Architecture({}, 0.8, "Baechi's PyTorch Inception-V3 single-GPU step (RTX 2080)"),
    # Volta's fp16 tensor-core convolutions: DeepLearningExamples ResNet-50 AMP (V100) comes out 7%
    # slow at the FP32 conv figure, 0.8, kept; its matmuls are not calibrated in half precision.
    "volta": Architecture(
        {"conv": 0.8}, 0.8, "NVIDIA DeepLearningExamples ResNet-50 FP32 and AMP (V100)", {"conv": 0.8}
    ),
    # Ampere and Hopper, FP32 not calibrated (their published single-GPU figures run TF32 or half
    # precision): the defaults of the kind. Half precision: Ampere's convolutions on
    # DeepLearningExamples ResNet-50 AMP (A100), its matmuls on Megatron-LM's 52% utilisation of A100s
    # (SC'21); Hopper's matmuls on Megatron-LM's 47% utilisation of H100s. Hopper's convolutions take
    # Ampere's figure: the one published H100 ResNet-50 step (MLPerf) fuses what the model costs
    # op by op (docs/calibration.md, the rows beyond the model).
    "ampere": Architecture(
        {}, 0.8, "half precision: DeepLearningExamples ResNet-50 AMP (A100), Megatron-LM (SC'21) utilisation",
        {"matmul": 0.58, "conv": 0.7},
    ),
    "hopper": Architecture(
        {}, 0.8, "half precision: Megatron-LM utilisation of GPT-3 175B on H100 (matmul); conv as Ampere",
        {"matmul": 0.65, "conv": 0.7},
    ),
    "xe-lp": Architecture({}, 0.8, "not calibrated: defaults"),
    "x86": Architecture({}, 1.0, "not calibrated: defaults"),
}


@dataclass(frozen=True)
class DeviceSpec:
    """Figures of one device model (SI units); ``memory_bandwidth`` is the datasheet figure (the
    cluster gets the architecture's achievable share of it); ``tensor_peak_flops`` the dense
    bf16/fp16 tensor-core peak (None: no tensor cores, half precision runs at the FP32 peak)."""

    kind: str
    peak_flops: float
    memory_bandwidth: float
    memory: float
    architecture: str = "x86"
    launch_overhead: float = OP_LAUNCH_OVERHEAD
    tensor_peak_flops: float | None = None


def default_efficiency_row(kind: str, architecture: str | None = None) -> np.ndarray:
    """`DEFAULT_EFFICIENCY[kind]`, with ``architecture``'s calibrated figures where it has them, as a
    float64 array in `CATEGORIES` order."""
    table = dict(DEFAULT_EFFICIENCY[kind])
    if architecture is not None:
        table.update(ARCHITECTURES[architecture].efficiency)
    return np.array([table[category] for category in CATEGORIES], dtype=np.float64)


def tensor_efficiency_row(architecture: str) -> np.ndarray:
    """The half-precision tensor-core efficiency of ``architecture`` in `TENSOR_CATEGORIES` order."""
    table = {**DEFAULT_TENSOR_EFFICIENCY, **ARCHITECTURES[architecture].tensor_efficiency}
    return np.array([table[category] for category in TENSOR_CATEGORIES], dtype=np.float64)


# --- CPUs ------------------------------------------------------------------------------------------
# Spotlight (Gao et al. 2018): "Broadwell 8-core CPU" on Google Cloud. 8 cores x 2.2 GHz (Google Cloud
# Broadwell all-core clock) x 32 FLOP/cycle = 0.563 TFLOP/s; 68 GB/s (four DDR4-2133 channels).
# Host memory: 128 GB, an assumption (a plausible cloud host for 2-4 K80s; the papers do not say).
BROADWELL_8C = DeviceSpec("cpu", peak_flops=8 * 2.2e9 * 32, memory_bandwidth=68 * GB, memory=128 * GB)
# Mirhoseini et al. 2017/2018: a Haswell server CPU with 18 cores ("Intel Haswell 2300"). 18 x 2.3 GHz x
# 32 FLOP/cycle = 1.32 TFLOP/s; 68 GB/s. Host memory: 256 GB, an assumption for an 8-GPU server.
HASWELL_18C = DeviceSpec("cpu", peak_flops=18 * 2.3e9 * 32, memory_bandwidth=68 * GB, memory=256 * GB)
# NVIDIA DGX-1 (V100) datasheet: 2x Xeon E5-2698 v4 (20 cores, 2.2 GHz, Broadwell), 512 GB DDR4-2133.
# Modelled as one device: 40 x 2.2 GHz x 32 = 2.82 TFLOP/s; 2 sockets x 4 channels x 17.07 GB/s.
DGX1_CPU = DeviceSpec("cpu", peak_flops=40 * 2.2e9 * 32, memory_bandwidth=2 * 4 * 17.07 * GB, memory=512 * GB)
# NVIDIA DGX H100 datasheet: 2x Xeon Platinum 8480C (56 cores each, 2.0 GHz base, Sapphire Rapids),
# 2 TB memory. AVX-512 with two FMA units: 64 FP32 FLOP/cycle, so 112 x 2.0 GHz x 64 = 14.3 TFLOP/s;
# 2 sockets x 8 channels DDR5-4800 (38.4 GB/s each) = 614 GB/s. Modelled as one device.
DGXH100_CPU = DeviceSpec(
    "cpu", peak_flops=112 * 2.0e9 * 64, memory_bandwidth=2 * 8 * 38.4 * GB, memory=2000 * GB
)

# --- GPUs (NVIDIA datasheets, docs/references.md table) --------------------------------------------
# Tesla K80, one GK210 die: 4.37 TFLOP/s FP32 (boost), 12 GB GDDR5, 240 GB/s.
K80_DIE = DeviceSpec(
    "gpu", peak_flops=4.37e12, memory_bandwidth=240 * GB, memory=12 * GB, architecture="kepler"
)
# Tesla K40: 4.29 TFLOP/s FP32 (boost), 12 GB, 288 GB/s.
K40 = DeviceSpec("gpu", peak_flops=4.29e12, memory_bandwidth=288 * GB, memory=12 * GB, architecture="kepler")
# Tesla P100 PCIe 16 GB: 9.3 TFLOP/s FP32, 16 GB HBM2, 732 GB/s.
P100_PCIE = DeviceSpec(
    "gpu", peak_flops=9.3e12, memory_bandwidth=732 * GB, memory=16 * GB, architecture="pascal"
)
# Tesla P100 SXM2 16 GB (the DGX-1 P100's GPU): 10.6 TFLOP/s FP32, 16 GB HBM2, 732 GB/s.
P100_SXM2 = DeviceSpec(
    "gpu", peak_flops=10.6e12, memory_bandwidth=732 * GB, memory=16 * GB, architecture="pascal"
)
# GeForce RTX 2080 (Turing TU104): 10.07 TFLOP/s FP32 at boost clock, 8 GB GDDR6, 448 GB/s.
RTX2080 = DeviceSpec(
    "gpu", peak_flops=10.07e12, memory_bandwidth=448 * GB, memory=8 * GB, architecture="turing"
)
# Tesla V100 SXM2, the 16 GB model of the original DGX-1 (V100): 15.7 TFLOP/s FP32, 900 GB/s; 125
# TFLOP/s fp16 tensor cores (NVIDIA V100 datasheet; Volta has no bf16: a bf16 task is costed as fp16).
V100_SXM2_16GB = DeviceSpec(
    "gpu", peak_flops=15.7e12, memory_bandwidth=900 * GB, memory=16 * GB, architecture="volta",
    tensor_peak_flops=125e12,
)
# H100 SXM: 67 TFLOP/s FP32 (non-tensor), 80 GB HBM3, 3.35 TB/s; 989 TFLOP/s dense bf16/fp16 tensor
# cores (NVIDIA H100 datasheet gives 1,979 with 2:4 sparsity, half of it dense).
H100_SXM = DeviceSpec(
    "gpu", peak_flops=67e12, memory_bandwidth=3350 * GB, memory=80 * GB, architecture="hopper",
    tensor_peak_flops=989e12,
)
# A100 SXM 80 GB: 19.5 TFLOP/s FP32 (non-tensor), 312 TFLOP/s dense bf16/fp16 tensor cores, 80 GB
# HBM2e at 2,039 GB/s (NVIDIA A100 datasheet, SXM column).
A100_SXM_80GB = DeviceSpec(
    "gpu", peak_flops=19.5e12, memory_bandwidth=2039 * GB, memory=80 * GB, architecture="ampere",
    tensor_peak_flops=312e12,
)

# --- Links between GPUs of one server ----------------------------------------------------------------
# V100 NVLink 2.0: 6 links per GPU, 25 GB/s each way per link = 150 GB/s each way (300 GB/s total, the
# datasheet figure). In the DGX-1 hybrid cube-mesh a GPU reaches 4 of its 7 peers directly (two peers
# over 2 links = 50 GB/s, two over 1 link = 25 GB/s); the other 3 go over PCIe (~12 GB/s) or two hops.
# The mean over the 7 peers is (2 x 50 + 2 x 25 + 3 x 12) / 7 = 26.6 GB/s, so every pair gets one
# link's 25 GB/s: a uniform figure that keeps the preset symmetric.
V100_NVLINK_PAIR_BANDWIDTH = 25 * GB
# P100 NVLink 1.0: 4 links per GPU, 20 GB/s each way per link (160 GB/s total, the datasheet figure);
# in the DGX-1 cube-mesh a pair shares at most one link: 20 GB/s one way.
P100_NVLINK_PAIR_BANDWIDTH = 20 * GB
# Baechi's fitted PyTorch GPU-to-GPU copy time (BaechiPyTorch config.py: 1.788e-7 ms per byte + 0.1 ms),
# measured on its 4-GPU testbed: 5.59 GB/s and 0.1 ms per transfer.
BAECHI_PYTORCH_COPY = (1.0 / 1.788e-10, 1e-4)
# H100 NVLink 4 through NVSwitch: 900 GB/s total per GPU = 450 GB/s each way, and the switch gives any
# one pair the full port, so a pair gets up to 450 GB/s one way. Links here are independent (no shared
# port), so a GPU sending to several peers at once is modelled optimistically.
H100_NVSWITCH_PAIR_BANDWIDTH = 450 * GB


@dataclass(frozen=True)
class Executor:
    """How a framework runs a step on a machine (the `Cluster` fields of the same names): seconds of a
    host thread per op launch, dispatch threads per host, and seconds a GPU's stream spends per
    copy it issues or waits for (CPUs pay none: their copies are the GPU's DMA)."""

    dispatch_time: float
    dispatch_threads: int
    transfer_sync: float
    framework: str = ""

    def describe(self) -> str:
        return (
            f"{self.framework}: {self.dispatch_time * 1e6:g} us of a host thread per op launch, "
            f"{self.dispatch_threads} dispatch thread(s); {self.transfer_sync * 1e6:g} us of a GPU's stream "
            "per copy sent or received"
        )


def tensorflow_executor(cores: int) -> Executor:
    """TensorFlow 1.x: its inter-op thread pool (one thread per core by default) dispatches ready ops;
    a launch costs the 5.7 us op gap of Addanki's / Park's simulators; a cross-device copy records
    and waits on an event on each side (calibrated, docs/calibration.md)."""
    return Executor(OP_LAUNCH_OVERHEAD, cores, TENSORFLOW_TRANSFER_SYNC, "TensorFlow 1.x")


# PyTorch eager (Baechi's testbed): one Python thread issues every op of the step, in program order.
PYTORCH_EXECUTOR = Executor(PYTORCH_DISPATCH_TIME, 1, PYTORCH_TRANSFER_SYNC, "PyTorch eager")


def build_cluster(
    name: str,
    devices: list[tuple[str, DeviceSpec]],
    link: Callable[[int, int], tuple[float, float]],
    description: str,
    executor: Executor | None = None,
    route: Callable[[int, int], tuple[str, ...]] | None = None,
    hosts: tuple[str, ...] = ("host:0",),
    host_of: Callable[[int], int] | None = None,
) -> Cluster:
    """A `Cluster` from named device specs, ``link(i, j) -> (bandwidth, latency)`` for i != j, the
    framework's `Executor` (None: no dispatch or synchronisation cost) and ``route(i, j)``, the
    names of the shared segments the link from i to j crosses (None: no shared segment).

    Efficiencies are those of each device's kind and architecture (`default_efficiency_row`); memory
    bandwidth is the datasheet figure times the architecture's ``bandwidth_fraction``; devices with
    a tensor-core peak get their architecture's `tensor_efficiency_row`. ``host_of(i)`` is the index
    in ``hosts`` of device i's host (None: every device on the first), each host with the
    executor's dispatch threads.
    """
    n = len(devices)
    bandwidth = np.zeros((n, n))
    latency = np.zeros((n, n))
    routes: dict[tuple[int, int], tuple[str, ...]] = {}
    for i in range(n):
        for j in range(n):
            if i != j:
                bandwidth[i, j], latency[i, j] = link(i, j)
                routes[i, j] = route(i, j) if route is not None else ()
    segment_names = tuple(dict.fromkeys(name for path in routes.values() for name in path))
    segments = np.full((n, n, max((len(path) for path in routes.values()), default=0)), -1, dtype=np.int64)
    for (i, j), path in routes.items():
        segments[i, j, : len(path)] = [segment_names.index(name) for name in path]
    specs = [spec for _, spec in devices]
    is_gpu = np.array([spec.kind == "gpu" for spec in specs])
    efficiency = np.stack([default_efficiency_row(spec.kind, spec.architecture) for spec in specs])
    tensor_peak, tensor_efficiency = None, None
    if any(spec.tensor_peak_flops is not None for spec in specs):
        tensor_peak = np.array([spec.tensor_peak_flops or spec.peak_flops for spec in specs])
        tensor_efficiency = np.stack([
            efficiency[k, [CATEGORIES.index(c) for c in TENSOR_CATEGORIES]] if spec.tensor_peak_flops is None
            else tensor_efficiency_row(spec.architecture)
            for k, spec in enumerate(specs)
        ])
    return Cluster(
        name=name,
        device_names=tuple(device_name for device_name, _ in devices),
        device_kinds=tuple(spec.kind for spec in specs),
        peak_flops=np.array([spec.peak_flops for spec in specs]),
        memory_bandwidth=np.array(
            [spec.memory_bandwidth * ARCHITECTURES[spec.architecture].bandwidth_fraction for spec in specs]
        ),
        memory_capacity=np.array([spec.memory for spec in specs]),
        launch_overhead=np.array([spec.launch_overhead for spec in specs]),
        efficiency=efficiency,
        link_bandwidth=bandwidth,
        link_latency=latency,
        description=description
        + (f" Executor costs ({executor.describe()})." if executor else "")
        + _segments_text(segment_names),
        dispatch_time=np.full(n, executor.dispatch_time if executor else 0.0),
        device_host=np.array([host_of(i) if host_of else 0 for i in range(n)], dtype=np.int64),
        host_names=hosts,
        host_dispatch_threads=(executor.dispatch_threads if executor else 1,) * len(hosts),
        transfer_sync=np.where(is_gpu, executor.transfer_sync if executor else 0.0, 0.0),
        segment_names=segment_names,
        link_segments=segments,
        tensor_peak_flops=tensor_peak,
        tensor_efficiency=tensor_efficiency,
    )


# A description lists its shared segments up to this many (a single 8-GPU server has 16 ports and a
# few uplinks); beyond, it counts them.
LISTED_SEGMENTS = 32


def _segments_text(segment_names: tuple[str, ...]) -> str:
    if not segment_names:
        return ""
    if len(segment_names) > LISTED_SEGMENTS:
        return (f" Shared segments: {len(segment_names)} ({segment_names[0]}, ..., {segment_names[-1]}; "
                "Cluster.segment_names lists them).")
    return f" Shared segments: {', '.join(segment_names)}."


def gpu_ports(names: tuple[str, ...] | list[str]) -> Callable[[int, int], tuple[str, ...]]:
    """Routes over each GPU's own port, one segment per direction (``gpu:0 out``, ``gpu:1 in``): a GPU
    sends one copy at a time and receives one at a time, whatever the peers."""

    def route(i: int, j: int) -> tuple[str, ...]:
        ports = []
        if names[i].startswith("gpu"):
            ports.append(f"{names[i]} out")
        if names[j].startswith("gpu"):
            ports.append(f"{names[j]} in")
        return tuple(ports)

    return route


def _host_with_gpus(
    name: str,
    cpu: DeviceSpec,
    gpu: DeviceSpec,
    n_gpus: int,
    host_link: tuple[float, float],
    gpu_link: tuple[float, float],
    description: str,
    executor: Executor | None = None,
    route: Callable[[int, int], tuple[str, ...]] | None = None,
) -> Cluster:
    """``cpu:0`` plus ``gpu:0 .. gpu:{n_gpus-1}``; host_link for CPU<->GPU, gpu_link for GPU<->GPU;
    ``route`` defaults to `gpu_ports`."""
    devices = [("cpu:0", cpu)] + [(f"gpu:{k}", gpu) for k in range(n_gpus)]

    def link(i: int, j: int) -> tuple[float, float]:
        return host_link if 0 in (i, j) else gpu_link

    names = [device_name for device_name, _ in devices]
    return build_cluster(name, devices, link, description, executor, route or gpu_ports(names))


def grouped_route(
    names: list[str], group: Callable[[int], int], label: str
) -> Callable[[int, int], tuple[str, ...]]:
    """`gpu_ports` plus, for a copy between devices of two groups (``group(i)``: a K80 board, a CPU
    socket; the CPU is its own group -1), the up- and down-links of the groups it leaves and enters
    (``board 0 up``, ``board 1 down``): devices of one group share them."""
    ports = gpu_ports(names)

    def route(i: int, j: int) -> tuple[str, ...]:
        path = list(ports(i, j))
        if group(i) != group(j):
            if group(i) >= 0:
                path.append(f"{label} {group(i)} up")
            if group(j) >= 0:
                path.append(f"{label} {group(j)} down")
        return tuple(path)

    return route


_PCIE3 = (PCIE3_BANDWIDTH, PCIE3_LATENCY)


def _k80(n_gpus: int) -> Cluster:
    # A K80 board holds two GK210 dies behind an on-board PCIe switch; its x16 uplink is shared by both
    # dies: a copy leaving or entering a board crosses that board's up- or down-link.
    names = ["cpu:0"] + [f"gpu:{k}" for k in range(n_gpus)]
    return _host_with_gpus(
        f"k80x{n_gpus}",
        BROADWELL_8C,
        K80_DIE,
        n_gpus,
        host_link=_PCIE3,
        gpu_link=_PCIE3,
        description=(
            f"Broadwell 8-core server CPU + {n_gpus} Tesla K80 dies ({n_gpus // 2} boards) over PCIe 3.0 "
            "x16, the machine of Spotlight (Gao et al. 2018) and Mirhoseini et al. 2017 / Placeto. "
            "K80 die: 4.37 TFLOP/s FP32, 12 GB, 240 GB/s (NVIDIA datasheet); links 12 GB/s, 25 us "
            "(Addanki's simulator latency); 5.7 us per-op overhead (Addanki/Park simulator). The two "
            "dies of a board share one PCIe switch and its uplink."
        ),
        executor=tensorflow_executor(8),
        route=grouped_route(names, lambda i: (i - 1) // 2 if i > 0 else -1, "board"),
    )


def k80x2() -> Cluster:
    """Broadwell CPU + 2 K80 dies (one board) over PCIe 3.0 (Spotlight; Mirhoseini et al. 2017)."""
    return _k80(2)


def k80x4() -> Cluster:
    """Broadwell CPU + 4 K80 dies (two boards) over PCIe 3.0 (Spotlight; Mirhoseini et al. 2017)."""
    return _k80(4)


def _k40(n_gpus: int) -> Cluster:
    # Eight x16 GPUs need more lanes than a Haswell socket has (40): two PCIe switches of four GPUs
    # each are assumed, their uplinks shared (the papers do not describe the topology).
    names = ["cpu:0"] + [f"gpu:{k}" for k in range(n_gpus)]
    route = grouped_route(names, lambda i: (i - 1) // 4 if i > 0 else -1, "switch") if n_gpus > 4 else None
    return _host_with_gpus(
        f"k40x{n_gpus}",
        HASWELL_18C,
        K40,
        n_gpus,
        host_link=_PCIE3,
        gpu_link=_PCIE3,
        description=(
            f"Haswell 18-core server CPU + {n_gpus} Tesla K40 over PCIe 3.0 x16, the machine of Mirhoseini "
            "et al. 2018 (hierarchical placement). K40: 4.29 TFLOP/s FP32, 12 GB, 288 GB/s (NVIDIA "
            "datasheet); links 12 GB/s, 25 us; 5.7 us per-op overhead (Addanki/Park simulator)."
            + (" Two PCIe switches of four GPUs (assumed) share their uplinks." if n_gpus > 4 else "")
        ),
        executor=tensorflow_executor(18),
        route=route,
    )


def k40x2() -> Cluster:
    """Haswell 18-core CPU + 2 Tesla K40 over PCIe 3.0 (Mirhoseini et al. 2018)."""
    return _k40(2)


def k40x4() -> Cluster:
    """Haswell 18-core CPU + 4 Tesla K40 over PCIe 3.0 (Mirhoseini et al. 2018; tensorflow/nmt)."""
    return _k40(4)


def k40x8() -> Cluster:
    """Haswell 18-core CPU + 8 Tesla K40 over PCIe 3.0 (Mirhoseini et al. 2018)."""
    return _k40(8)


def dgx1_p100() -> Cluster:
    """NVIDIA DGX-1 (P100): 8 Tesla P100 SXM2 16 GB over NVLink 1.0 (TensorFlow's 2017 benchmarks)."""
    return _host_with_gpus(
        "dgx1-p100",
        DGX1_CPU,
        P100_SXM2,
        8,
        host_link=_PCIE3,
        gpu_link=(P100_NVLINK_PAIR_BANDWIDTH, NVLINK_LATENCY),
        description=(
            "NVIDIA DGX-1 (P100): 2x Xeon E5-2698 v4 (one cpu device, 512 GB) + 8 Tesla P100 SXM2 16 GB "
            "(10.6 TFLOP/s FP32, 732 GB/s; NVIDIA datasheets), the machine of TensorFlow's May 2017 "
            "benchmarks. GPU pairs: one NVLink 1.0 link, 20 GB/s one way, 5 us; CPU<->GPU PCIe 3.0 x16."
        ),
        executor=tensorflow_executor(40),
    )


def baechi_rtx2080x4() -> Cluster:
    """Four 8 GB GeForce RTX 2080 GPUs with Baechi's measured PyTorch copy cost (Baechi's testbed)."""
    return _host_with_gpus(
        "baechi-rtx2080x4",
        BROADWELL_8C,
        RTX2080,
        4,
        host_link=_PCIE3,
        gpu_link=BAECHI_PYTORCH_COPY,
        description=(
            "Baechi's PyTorch testbed as far as its code says: four 8 GB GPUs (GeForce RTX 2080: 10.07 "
            "TFLOP/s FP32, 448 GB/s), GPU-to-GPU copies at Baechi's fitted 5.59 GB/s + 0.1 ms. The host "
            "CPU is not stated: a Broadwell 8-core figure stands in (only CPU placements depend on it)."
        ),
        executor=PYTORCH_EXECUTOR,
    )


def p100x4() -> Cluster:
    """Haswell-class server CPU + 4 Tesla P100 PCIe over PCIe 3.0."""
    return _host_with_gpus(
        "p100x4",
        HASWELL_18C,
        P100_PCIE,
        4,
        host_link=_PCIE3,
        gpu_link=_PCIE3,
        description=(
            "Haswell-class 18-core server CPU + 4 Tesla P100 PCIe 16 GB over PCIe 3.0 x16. P100: 9.3 "
            "TFLOP/s FP32, 16 GB, 732 GB/s (NVIDIA datasheet); links 12 GB/s, 25 us (Addanki's "
            "simulator latency); 5.7 us per-op overhead."
        ),
        executor=tensorflow_executor(18),
    )


def v100x8() -> Cluster:
    """NVIDIA DGX-1 (V100 SXM2 16 GB x 8, NVLink 2.0 hybrid cube-mesh, approximated uniformly)."""
    return _host_with_gpus(
        "v100x8",
        DGX1_CPU,
        V100_SXM2_16GB,
        8,
        host_link=_PCIE3,
        gpu_link=(V100_NVLINK_PAIR_BANDWIDTH, NVLINK_LATENCY),
        description=(
            "NVIDIA DGX-1: 2x Xeon E5-2698 v4 (one cpu device, 512 GB) + 8 Tesla V100 SXM2 16 GB "
            "(15.7 TFLOP/s FP32, 900 GB/s; NVIDIA datasheets). GPU pairs: 25 GB/s one way, 5 us "
            "(one NVLink 2.0 link; 300 GB/s total per GPU; the cube-mesh's mean per peer is about "
            "26 GB/s); CPU<->GPU PCIe 3.0 x16 12 GB/s, 25 us; 5.7 us per-op overhead."
        ),
        executor=tensorflow_executor(40),
    )


def h100x8() -> Cluster:
    """NVIDIA DGX H100 (H100 SXM 80 GB x 8 over NVSwitch)."""
    return _host_with_gpus(
        "h100x8",
        DGXH100_CPU,
        H100_SXM,
        8,
        host_link=(PCIE5_BANDWIDTH, PCIE3_LATENCY),
        gpu_link=(H100_NVSWITCH_PAIR_BANDWIDTH, NVLINK_LATENCY),
        description=(
            "NVIDIA DGX H100: 2x Xeon Platinum 8480C (one cpu device, 2 TB) + 8 H100 SXM 80 GB "
            "(67 TFLOP/s FP32, 3.35 TB/s; NVIDIA datasheets). GPU pairs over NVSwitch: 450 GB/s one "
            "way (900 GB/s total per GPU), 5 us; CPU<->GPU PCIe 5.0 x16 50 GB/s, 25 us; 5.7 us per-op "
            "overhead. A GPU's NVLink port is shared by its peers (one copy at a time each way)."
        ),
        executor=tensorflow_executor(112),
    )


# --- Multi-node DGX clusters ---------------------------------------------------------------------------
# NVIDIA DGX A100 datasheet / user guide: 2x AMD EPYC 7742 (64 cores each, 2.25 GHz base), 2 TB
# memory in the 640 GB (8 x A100 80 GB) system. Zen 2 has two 256-bit FMA units: 32 FP32 FLOP/cycle,
# so 128 x 2.25 GHz x 32 = 9.2 TFLOP/s; 8 channels of DDR4-3200 per socket (25.6 GB/s each) = 409.6 GB/s
# for two. Modelled as one device; no bf16 units (Zen 2), so no tensor peak.
DGXA100_CPU = DeviceSpec(
    "cpu", peak_flops=128 * 2.25e9 * 32, memory_bandwidth=2 * 8 * 25.6 * GB, memory=2000 * GB
)
# A100 NVLink 3 through six NVSwitches: 600 GB/s total per GPU = 300 GB/s each way (DGX A100
# datasheet); as on the H100 box, any one pair gets the full port.
A100_NVSWITCH_PAIR_BANDWIDTH = 300 * GB
# PCIe 4.0 x16 between a DGX A100's CPUs and GPUs: about 25 GB/s achievable (docs/references.md).
PCIE4_BANDWIDTH = 25 * GB
# Compute fabric: DGX H100, 8 x ConnectX-7 400 Gb/s InfiniBand NDR (one per GPU; DGX H100 datasheet);
# DGX A100, 8 x ConnectX-6 200 Gb/s InfiniBand HDR (one per GPU; DGX A100 datasheet). Line rates:
# 50 GB/s and 25 GB/s one way per NIC (an RDMA write reaches close to line rate on large messages).
# Latency per transfer 10 us, an assumption: a few us of RDMA and switch hops plus the copy's issue
# and completion, between NVLink's 5 us and PCIe's 25 us.
NDR_NIC_BANDWIDTH = 400e9 / 8
HDR_NIC_BANDWIDTH = 200e9 / 8
INFINIBAND_LATENCY = 10e-6
# PyTorch with one process per device (torchrun, Megatron-LM): each device's ops are issued by its
# own Python thread (20 us per op launch, as PYTORCH_EXECUTOR), so a host has as many dispatch
# threads as it has devices (a CPU and 8 GPUs).
DGX_EXECUTOR = Executor(PYTORCH_DISPATCH_TIME, 9, PYTORCH_TRANSFER_SYNC, "PyTorch, one process per device")


@dataclass(frozen=True)
class Node:
    """One DGX-style node of a multi-node preset: its CPU (one device), its 8 GPUs, the GPU pair
    link inside the node, the CPU<->GPU link and the bandwidth of each GPU's NIC."""

    label: str
    cpu: DeviceSpec
    gpu: DeviceSpec
    gpu_link: tuple[float, float]
    host_link: tuple[float, float]
    nic_bandwidth: float
    gpus: int = 8


def multi_node_cluster(name: str, nodes: list[Node], description: str) -> Cluster:
    """A cluster of several nodes: node k contributes ``cpu:k`` and its GPUs, numbered on across nodes
    (``gpu:8k .. gpu:8k+7``), and is host ``node:k`` (`DGX_EXECUTOR`).

    Inside a node: links and GPU ports as `_host_with_gpus` (NVSwitch pairs, PCIe to the CPU). Between
    nodes, rail-aligned InfiniBand: GPU j of a node owns NIC j (``node:k nic:j``); a copy between
    nodes leaves through the sender's NIC and enters through the receiver's (segments ``... out`` and
    ``... in``: a NIC carries one copy each way at a time), at the slower NIC's bandwidth. A CPU
    uses the NIC of the rail of the GPU it talks to (rail 0 to another CPU)."""
    devices: list[tuple[str, DeviceSpec]] = []
    node_of: list[int] = []
    rail: list[int] = []  # a GPU's index inside its node; -1 for a CPU
    gpu_count = 0
    for k, node in enumerate(nodes):
        devices.append((f"cpu:{k}", node.cpu))
        node_of.append(k)
        rail.append(-1)
        for j in range(node.gpus):
            devices.append((f"gpu:{gpu_count}", node.gpu))
            node_of.append(k)
            rail.append(j)
            gpu_count += 1
    names = [device_name for device_name, _ in devices]
    ports = gpu_ports(names)

    def rails(i: int, j: int) -> tuple[int, int]:
        """The NIC rail each end of an inter-node copy uses."""
        ri, rj = rail[i], rail[j]
        return (ri if ri >= 0 else max(rj, 0)), (rj if rj >= 0 else max(ri, 0))

    def link(i: int, j: int) -> tuple[float, float]:
        a, b = nodes[node_of[i]], nodes[node_of[j]]
        if node_of[i] != node_of[j]:
            return min(a.nic_bandwidth, b.nic_bandwidth), INFINIBAND_LATENCY
        return a.host_link if rail[i] < 0 or rail[j] < 0 else a.gpu_link

    def route(i: int, j: int) -> tuple[str, ...]:
        if node_of[i] == node_of[j]:
            return ports(i, j)
        ri, rj = rails(i, j)
        return (f"node:{node_of[i]} nic:{ri} out", f"node:{node_of[j]} nic:{rj} in")

    hosts = tuple(f"node:{k}" for k in range(len(nodes)))
    return build_cluster(
        name, devices, link, description, DGX_EXECUTOR, route, hosts, lambda i: node_of[i]
    )


def _dgx_h100_node() -> Node:
    return Node("DGX H100", DGXH100_CPU, H100_SXM, (H100_NVSWITCH_PAIR_BANDWIDTH, NVLINK_LATENCY),
                (PCIE5_BANDWIDTH, PCIE3_LATENCY), NDR_NIC_BANDWIDTH)


def _dgx_a100_node() -> Node:
    return Node("DGX A100", DGXA100_CPU, A100_SXM_80GB, (A100_NVSWITCH_PAIR_BANDWIDTH, NVLINK_LATENCY),
                (PCIE4_BANDWIDTH, PCIE3_LATENCY), HDR_NIC_BANDWIDTH)


_DGX_H100_TEXT = (
    "DGX H100 node: 2x Xeon Platinum 8480C (one cpu device, 2 TB) + 8 H100 SXM 80 GB (67 TFLOP/s FP32, "
    "989 TFLOP/s dense bf16, 3.35 TB/s; NVIDIA datasheets) on NVSwitch (450 GB/s one way per pair, 5 us), "
    "CPU<->GPU PCIe 5.0 50 GB/s, 25 us; 8 x ConnectX-7 400 Gb/s InfiniBand NICs, one per GPU."
)
_DGX_A100_TEXT = (
    "DGX A100 node: 2x AMD EPYC 7742 (one cpu device, 2 TB) + 8 A100 SXM 80 GB (19.5 TFLOP/s FP32, "
    "312 TFLOP/s dense bf16, 2,039 GB/s; NVIDIA datasheets) on NVSwitch (300 GB/s one way per pair, "
    "5 us), CPU<->GPU PCIe 4.0 25 GB/s, 25 us; 8 x ConnectX-6 200 Gb/s InfiniBand HDR NICs, one per GPU."
)
_FABRIC_TEXT = (
    " Between nodes: rail-aligned InfiniBand (GPU j's copies leave and enter through NIC j of its node; "
    "each NIC carries one copy each way at a time) at the slower NIC's line rate, 10 us per transfer."
)


def _dgx_h100(n_nodes: int) -> Cluster:
    return multi_node_cluster(
        f"dgx-h100x{n_nodes}",
        [_dgx_h100_node() for _ in range(n_nodes)],
        f"{n_nodes} NVIDIA DGX H100 nodes ({8 * n_nodes} GPUs, {n_nodes} CPUs). Each {_DGX_H100_TEXT}"
        + _FABRIC_TEXT,
    )


def dgx_h100x2() -> Cluster:
    """Two DGX H100 nodes (16 H100 SXM, 2 CPUs) over rail-aligned 400 Gb/s InfiniBand."""
    return _dgx_h100(2)


def dgx_h100x4() -> Cluster:
    """Four DGX H100 nodes (32 H100 SXM, 4 CPUs) over rail-aligned 400 Gb/s InfiniBand."""
    return _dgx_h100(4)


def dgx_h100x8() -> Cluster:
    """Eight DGX H100 nodes (64 H100 SXM, 8 CPUs) over rail-aligned 400 Gb/s InfiniBand."""
    return _dgx_h100(8)


def dgx_a100() -> Cluster:
    """One NVIDIA DGX A100 (8 x A100 SXM 80 GB on NVSwitch, 2x AMD EPYC 7742)."""
    return multi_node_cluster(
        "dgx-a100", [_dgx_a100_node()], f"NVIDIA DGX A100 (640 GB). One {_DGX_A100_TEXT}"
    )


def h100_a100() -> Cluster:
    """Two GPU generations (as Metis studies): a DGX A100 node and a DGX H100 node over InfiniBand."""
    return multi_node_cluster(
        "h100-a100",
        [_dgx_a100_node(), _dgx_h100_node()],
        "Two GPU generations (the heterogeneous setting of Metis, Um et al., ATC 2024): node 0 (cpu:0, "
        f"gpu:0..7) is a {_DGX_A100_TEXT} Node 1 (cpu:1, gpu:8..15) is a {_DGX_H100_TEXT}" + _FABRIC_TEXT
        + " Copies between the nodes run at the A100 node's 200 Gb/s.",
    )


# --- Desktop CPU + integrated GPU (HSDAG's kind of machine: an Intel CPU and GPU under OpenVINO) -----
# Intel Core i9-13900K (Intel ARK): 8 P-cores at 3.0 GHz base, 16 E-cores at 2.2 GHz base; DDR5-5600
# dual channel, 89.6 GB/s max memory bandwidth. AVX2 only: a P-core (two 256-bit FMA) does 32 FP32
# FLOP/cycle, an E-core (two 128-bit FMA) 16, so 8 x 3.0 x 32 + 16 x 2.2 x 16 = 1.33 TFLOP/s.
I9_13900K = DeviceSpec(
    "cpu", peak_flops=(8 * 3.0e9 * 32 + 16 * 2.2e9 * 16), memory_bandwidth=89.6 * GB, memory=16 * GB
)
# Intel UHD Graphics 770 of the i9-13900K (Xe-LP, Intel ARK): 32 execution units, 1.65 GHz max dynamic
# frequency; an Xe-LP EU does 8 FP32 FMA per clock (16 FLOP), so 32 x 16 x 1.65 GHz = 0.845 TFLOP/s.
# It reads the same DDR5 as the CPU (89.6 GB/s).
UHD770 = DeviceSpec(
    "gpu", peak_flops=32 * 16 * 1.65e9, memory_bandwidth=89.6 * GB, memory=16 * GB, architecture="xe-lp"
)
# Memory: 32 GB of system DDR5 (an assumption: a common desktop size) shared by CPU and iGPU. The
# cluster model has no shared capacity, so each side gets half (16 GB): together they cannot exceed the
# physical pool.
# CPU <-> iGPU: no bus, a copy inside the same DRAM reads and writes every byte, so half of 89.6 GB/s;
# latency a few us (queue synchronisation, no PCIe transfer setup).
SHARED_MEMORY_COPY_BANDWIDTH = 89.6 * GB / 2
SHARED_MEMORY_LATENCY = 5e-6


def cpu_igpu() -> Cluster:
    """Desktop Intel Core i9-13900K + its integrated UHD Graphics 770, sharing system memory."""
    return build_cluster(
        "cpu-igpu",
        [("cpu:0", I9_13900K), ("gpu:0", UHD770)],
        lambda i, j: (SHARED_MEMORY_COPY_BANDWIDTH, SHARED_MEMORY_LATENCY),
        description=(
            "Desktop Intel Core i9-13900K (8P+16E cores, 1.33 TFLOP/s FP32 at base clocks, DDR5-5600 "
            "89.6 GB/s; Intel ARK) + integrated Intel UHD Graphics 770 (32 Xe-LP EUs at 1.65 GHz, "
            "0.845 TFLOP/s FP32), the kind of CPU + GPU machine HSDAG (Duan et al. 2024) measures with "
            "OpenVINO. 32 GB shared system memory split 16/16; CPU<->iGPU copies within DRAM at "
            "44.8 GB/s, 5 us; 5.7 us per-op overhead (Addanki/Park simulator). Both copy directions "
            "share the one DRAM."
        ),
        route=lambda i, j: ("dram",),
    )


PRESETS: dict[str, Callable[[], Cluster]] = {
    "k80x2": k80x2,
    "k80x4": k80x4,
    "k40x2": k40x2,
    "k40x4": k40x4,
    "k40x8": k40x8,
    "dgx1-p100": dgx1_p100,
    "baechi-rtx2080x4": baechi_rtx2080x4,
    "p100x4": p100x4,
    "v100x8": v100x8,
    "h100x8": h100x8,
    "cpu-igpu": cpu_igpu,
    "dgx-a100": dgx_a100,
    "dgx-h100x2": dgx_h100x2,
    "dgx-h100x4": dgx_h100x4,
    "dgx-h100x8": dgx_h100x8,
    "h100-a100": h100_a100,
}
