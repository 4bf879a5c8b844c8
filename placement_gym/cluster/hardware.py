"""The hardware the cluster presets and the random cluster family (`placement_gym.datasets.clusters`)
are made of: device models with their datasheet figures and how each is derived (`DeviceSpec`), GPU
architectures with their calibrated efficiencies (`ARCHITECTURES`, docs/calibration.md), link and
executor figures, and `build_cluster`, which assembles a `Cluster` from them.

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
  for half-precision tasks.

The presets themselves are data files (`placement_gym.cluster.presets`), each figure written out with
its source; these are the figures they were written from.
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

# NVIDIA DGX A100 datasheet / user guide: 2x AMD EPYC 7742 (64 cores each, 2.25 GHz base), 2 TB
# memory in the 640 GB (8 x A100 80 GB) system. Zen 2 has two 256-bit FMA units: 32 FP32 FLOP/cycle,
# so 128 x 2.25 GHz x 32 = 9.2 TFLOP/s; 8 channels of DDR4-3200 per socket (25.6 GB/s each) = 409.6 GB/s
# for two. Modelled as one device; no bf16 units (Zen 2), so no tensor peak.
DGXA100_CPU = DeviceSpec(
    "cpu", peak_flops=128 * 2.25e9 * 32, memory_bandwidth=2 * 8 * 25.6 * GB, memory=2000 * GB
)
# Desktop CPU of HSDAG's kind of machine (an Intel CPU and its integrated GPU under OpenVINO): Intel
# Core i9-13900K (Intel ARK), 8 P-cores at 3.0 GHz base, 16 E-cores at 2.2 GHz base; DDR5-5600 dual
# channel, 89.6 GB/s max memory bandwidth. AVX2 only: a P-core (two 256-bit FMA) does 32 FP32
# FLOP/cycle, an E-core (two 128-bit FMA) 16, so 8 x 3.0 x 32 + 16 x 2.2 x 16 = 1.33 TFLOP/s. Memory:
# 32 GB of system DDR5 (an assumption: a common desktop size) shared with the integrated GPU; the
# cluster model has no shared capacity, so each side gets half (16 GB): together they cannot exceed
# the physical pool.
I9_13900K = DeviceSpec(
    "cpu", peak_flops=(8 * 3.0e9 * 32 + 16 * 2.2e9 * 16), memory_bandwidth=89.6 * GB, memory=16 * GB
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
# Intel UHD Graphics 770 of the i9-13900K (Xe-LP, Intel ARK): 32 execution units, 1.65 GHz max dynamic
# frequency; an Xe-LP EU does 8 FP32 FMA per clock (16 FLOP), so 32 x 16 x 1.65 GHz = 0.845 TFLOP/s.
# It reads the same DDR5 as the CPU (89.6 GB/s), and has the other half of its 32 GB.
UHD770 = DeviceSpec(
    "gpu", peak_flops=32 * 16 * 1.65e9, memory_bandwidth=89.6 * GB, memory=16 * GB, architecture="xe-lp"
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
