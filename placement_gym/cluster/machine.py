"""This machine's own devices as clusters, for the real-hardware mode: ``local`` and ``cpu<N>``.

* `virtual_cpu_cluster(n)`: the CPU split into ``n`` devices ``cpu:0 .. cpu:n-1``, each one worker
  thread with one intra-op thread (the executor, `placement_gym.real.executor`, runs them so). Fixed
  per-core estimates, the same cluster on every machine; runs everywhere, CI included.
* `local_cluster()`: the CPU and every CUDA device torch finds, with figures measured on this machine.
* `get_real_cluster(name)`: ``"local"`` or ``"cpu<N>"`` (what `load_cluster` gives for those names).

The clusters are data of the cluster layer; only the measurements need torch, imported inside the
functions that measure (nothing here imports torch at module import time). `placement_gym.real`
runs placements on these devices.
"""

from __future__ import annotations

import functools
import os
import re
import time

import numpy as np

from placement_gym.cluster.cluster import Cluster, check_cluster_size
from placement_gym.cluster.hardware import default_efficiency_row
from placement_gym.common.extras import require
from placement_gym.common.threads import intra_op_threads

GB = 1e9

# Estimates for one CPU core running one intra-op thread (documented choices, not measurements):
# - peak: 2 AVX2 FMA units x 8 FP32 lanes x 2 FLOP x 3 GHz = 96 GFLOP/s, the Haswell-and-later core
#   figure behind an 8-18-core server CPU's 0.5-1.3 TFLOP/s (docs/references.md);
# - memory bandwidth: one core streams about 10 GB/s (a share of a server CPU's 60-70 GB/s);
# - launch overhead: 20 us, the Python dispatch of one op by the executor's worker (queue, lookup,
#   torch call), much more than TensorFlow's 5.7 us C++ executor gap;
# - link: the executor copies a tensor between virtual devices (tensor.clone()): memcpy at about
#   5 GB/s for one thread (read + write), 10 us latency for the hand-over between worker threads;
# - memory: the whole host memory, shared (each device is allowed all of it).
VIRTUAL_CPU_PEAK_FLOPS = 2 * 8 * 2 * 3.0e9
VIRTUAL_CPU_MEMORY_BANDWIDTH = 10 * GB
VIRTUAL_CPU_LAUNCH_OVERHEAD = 20e-6
VIRTUAL_CPU_LINK_BANDWIDTH = 5 * GB
VIRTUAL_CPU_LINK_LATENCY = 10e-6
_FALLBACK_HOST_MEMORY = 16 * GB


def host_memory_bytes() -> float:
    """Physical memory of this machine (bytes), or 16 GB where the OS does not say."""
    try:
        return float(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"))
    except (ValueError, OSError, AttributeError):
        return _FALLBACK_HOST_MEMORY


def _uniform_cluster(name: str, kinds: list[str], names: list[str], peak: list[float], bandwidth: list[float],
                     memory: list[float], overhead: list[float], link_bandwidth: np.ndarray,
                     link_latency: np.ndarray, description: str) -> Cluster:
    return Cluster(
        name=name,
        device_names=tuple(names),
        device_kinds=tuple(kinds),
        peak_flops=np.array(peak),
        memory_bandwidth=np.array(bandwidth),
        memory_capacity=np.array(memory),
        launch_overhead=np.array(overhead),
        efficiency=np.stack([default_efficiency_row(kind) for kind in kinds]),
        link_bandwidth=link_bandwidth,
        link_latency=link_latency,
        description=description,
    )


def virtual_cpu_cluster(n_devices: int = 2, name: str | None = None, measure: bool = False) -> Cluster:
    """A cluster of ``n_devices`` virtual CPU devices ``cpu:0 ...`` (one core each).

    Figures are the fixed per-core estimates above (same cluster on every machine, so cost-model
    results stay reproducible); ``measure=True`` replaces peak FLOP/s, memory bandwidth and the link
    bandwidth with quick single-thread measurements of this machine (about 0.2 s, cached).
    """
    if not isinstance(n_devices, (int, np.integer)) or isinstance(n_devices, bool) or n_devices < 1:
        raise ValueError(f"n_devices must be a positive integer, got {n_devices!r}")
    n = int(n_devices)
    check_cluster_size(name or f"cpu{n}", n)
    peak, bandwidth, link = VIRTUAL_CPU_PEAK_FLOPS, VIRTUAL_CPU_MEMORY_BANDWIDTH, VIRTUAL_CPU_LINK_BANDWIDTH
    how = "per-core estimates"
    if measure:
        peak, bandwidth = _measure_cpu_thread()
        link = bandwidth / 2  # a copy reads and writes every byte
        how = "single-thread measurements of this machine"
    off_diagonal = ~np.eye(n, dtype=bool)
    return _uniform_cluster(
        name or f"cpu{n}", ["cpu"] * n, [f"cpu:{i}" for i in range(n)], [peak] * n, [bandwidth] * n,
        [host_memory_bytes()] * n, [VIRTUAL_CPU_LAUNCH_OVERHEAD] * n,
        np.where(off_diagonal, link, 0.0), np.where(off_diagonal, VIRTUAL_CPU_LINK_LATENCY, 0.0),
        f"{n} virtual CPU devices (one worker thread and one intra-op thread each; {how})",
    )


@functools.cache
def _measure_cpu_thread() -> tuple[float, float]:
    """(FLOP/s of a 512x512 matmul, bytes/s of a 32 MB copy) on one intra-op thread."""
    torch = require("torch", "measuring this machine's devices")

    with intra_op_threads(1, "measuring this machine's devices"):
        a = torch.randn(512, 512)
        flops = _best_rate(lambda: a @ a, 2 * 512**3)
        src = torch.empty(8 * 1024 * 1024)
        dst = torch.empty_like(src)
        bandwidth = _best_rate(lambda: dst.copy_(src), 2 * src.numel() * 4)
    return flops, bandwidth


def _best_rate(fn, work: float, repeats: int = 5, synchronize=None) -> float:
    """``work`` divided by the best of ``repeats`` timed calls (after one warm-up call)."""
    fn()
    if synchronize:
        synchronize()
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        if synchronize:
            synchronize()
        best = min(best, time.perf_counter() - start)
    return work / max(best, 1e-9)


def _measure_link(src: str, dst: str) -> tuple[float, float]:
    """(bandwidth bytes/s of a 64 MB copy, latency s of a 4-byte copy) from ``src`` to ``dst``."""
    torch = require("torch", "measuring this machine's links")

    def sync() -> None:
        torch.cuda.synchronize()

    big = torch.empty(16 * 1024 * 1024, device=src)
    small = torch.empty(1, device=src)
    bandwidth = _best_rate(lambda: big.to(dst), big.numel() * 4, synchronize=sync)
    latency = 1.0 / _best_rate(lambda: small.to(dst), 1.0, repeats=20, synchronize=sync)
    return bandwidth, latency


@functools.cache
def local_cluster() -> Cluster:
    """The local machine as a cluster: ``cpu:0`` (all its cores) and ``gpu:i`` for every CUDA device.

    Measured once per process (cached): CPU and GPU FP32 matmul rate, memory copy bandwidth, launch
    overhead of a tiny op, and per ordered pair the bandwidth of a 64 MB copy and the latency of a
    4-byte copy. GPU memory is the device's total memory; the CPU's is the host memory.
    """
    torch = require("torch", "the local cluster")

    names, kinds, peak, bandwidth, memory, overhead = ["cpu:0"], ["cpu"], [], [], [host_memory_bytes()], []
    a = torch.randn(1024, 1024)
    peak.append(_best_rate(lambda: a @ a, 2 * 1024**3))
    src = torch.empty(16 * 1024 * 1024)
    dst = torch.empty_like(src)
    bandwidth.append(_best_rate(lambda: dst.copy_(src), 2 * src.numel() * 4))
    tiny = torch.ones(1)
    overhead.append(1.0 / _best_rate(lambda: tiny + 1, 1.0, repeats=50))
    torch_devices = ["cpu"]
    n_gpus = torch.cuda.device_count() if torch.cuda.is_available() else 0
    for i in range(n_gpus):
        device = f"cuda:{i}"
        torch_devices.append(device)
        names.append(f"gpu:{i}")
        kinds.append("gpu")
        memory.append(float(torch.cuda.get_device_properties(i).total_memory))

        def sync(i: int = i) -> None:
            torch.cuda.synchronize(i)

        a = torch.randn(4096, 4096, device=device)
        peak.append(_best_rate(lambda a=a: a @ a, 2 * 4096**3, synchronize=sync))
        src = torch.empty(64 * 1024 * 1024, device=device)
        dst = torch.empty_like(src)
        bandwidth.append(_best_rate(lambda s=src, d=dst: d.copy_(s), 2 * src.numel() * 4, synchronize=sync))
        tiny = torch.ones(1, device=device)
        overhead.append(1.0 / _best_rate(lambda t=tiny: t + 1, 1.0, repeats=50, synchronize=sync))

        torch.cuda.empty_cache()
    n = len(names)
    link_bandwidth, link_latency = np.zeros((n, n)), np.zeros((n, n))
    for i in range(n):
        for j in range(n):
            if i != j:
                link_bandwidth[i, j], link_latency[i, j] = _measure_link(torch_devices[i], torch_devices[j])
    return _uniform_cluster(
        "local", kinds, names, peak, bandwidth, memory, overhead, link_bandwidth, link_latency,
        f"this machine: CPU and {n_gpus} CUDA device(s), figures measured",
    )


_CPU_N = re.compile(r"cpu(\d+)")


def get_real_cluster(name: str) -> Cluster:
    """``"local"`` (`local_cluster`) or ``"cpu<N>"`` (`virtual_cpu_cluster` with N devices, N >= 1)."""
    if name == "local":
        return local_cluster()
    match = _CPU_N.fullmatch(name) if isinstance(name, str) else None
    if match and int(match.group(1)) >= 1:
        return virtual_cpu_cluster(int(match.group(1)), name=name)
    raise ValueError(
        f"unknown real-hardware cluster {name!r}; allowed: 'local' or 'cpu<N>' with N >= 1 (cpu2)"
    )
