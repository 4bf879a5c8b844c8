"""Cluster families: seeded random machines beside the presets, for placement that generalises across
machines (as GiPH trains over random device networks).

``random-v1`` cluster ``k`` (named ``random-v1:<k>``, a cluster name `placement_gym.task.named.get_task`
and the envs take) is drawn from a generator seeded with ``k``:

* one host CPU (the 8- or 18-core Xeon of the K80 and K40 presets, or the DGX-1's two sockets);
* 1 to 15 GPUs of one generation or, half of the time, of two (K80 die, K40, P100 SXM2, RTX 2080,
  V100 SXM2, H100 SXM: the presets' datasheet figures, calibrated per architecture as the presets are);
* a topology: ``pcie`` (every copy through the host's PCIe 3.0 at 12 GB/s), ``nvlink`` (GPU pairs over
  the slower of the two GPUs' NVLink pair figures, where both have NVLink; else PCIe) or
  ``two-islands`` (NVLink inside each half of the GPUs, PCIe between the halves); CPU <-> GPU over PCIe
  3.0 (PCIe 5.0, 50 GB/s, for an H100);
* each GPU's port shared by its peers (one copy at a time each way), and the executor costs of
  TensorFlow (the host's cores) or PyTorch eager, at random.

Clusters ``0 .. TRAIN_CLUSTERS - 1`` are the train split, the next `TEST_CLUSTERS` the test split.
"""

from __future__ import annotations

import numpy as np

from placement_gym.cluster.cluster import Cluster
from placement_gym.cluster.presets import (
    BROADWELL_8C,
    DGX1_CPU,
    GB,
    H100_NVSWITCH_PAIR_BANDWIDTH,
    H100_SXM,
    HASWELL_18C,
    K40,
    K80_DIE,
    NVLINK_LATENCY,
    P100_NVLINK_PAIR_BANDWIDTH,
    P100_SXM2,
    PCIE3_BANDWIDTH,
    PCIE3_LATENCY,
    PCIE5_BANDWIDTH,
    PYTORCH_EXECUTOR,
    RTX2080,
    V100_NVLINK_PAIR_BANDWIDTH,
    V100_SXM2_16GB,
    DeviceSpec,
    build_cluster,
    gpu_ports,
    tensorflow_executor,
)
from placement_gym.common.untrusted import shown

FAMILY = "random-v1"
TRAIN_CLUSTERS, TEST_CLUSTERS = 1000, 100
MAX_INDEX_DIGITS = 18  # k of random-v1:<k>: any seed below 10**18
MAX_GPUS = 15  # a cluster has 1 to MAX_GPUS GPUs and one host CPU: at most MAX_GPUS + 1 devices
# GPU generation -> its figures and its NVLink pair bandwidth (None: no NVLink; RTX 2080's bridge is
# left out: it joins two cards only)
GENERATIONS: dict[str, tuple[DeviceSpec, float | None]] = {
    "k80": (K80_DIE, None),
    "k40": (K40, None),
    "p100": (P100_SXM2, P100_NVLINK_PAIR_BANDWIDTH),
    "rtx2080": (RTX2080, None),
    "v100": (V100_SXM2_16GB, V100_NVLINK_PAIR_BANDWIDTH),
    "h100": (H100_SXM, H100_NVSWITCH_PAIR_BANDWIDTH),
}
HOSTS: dict[str, tuple[DeviceSpec, int]] = {"xeon-8c": (BROADWELL_8C, 8), "xeon-18c": (HASWELL_18C, 18),
                                             "dgx1-2x20c": (DGX1_CPU, 40)}
TOPOLOGIES: tuple[str, ...] = ("pcie", "nvlink", "two-islands")


def random_cluster(k: int) -> Cluster:
    """Cluster ``k`` of the family (see the module docstring); named ``random-v1:<k>``."""
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or k < 0:
        raise ValueError(f"a random cluster's number is an integer >= 0, got {k!r}")
    rng = np.random.default_rng([int(k), 0x636C7573])  # its own stream, apart from the graphs' seeds
    host_name = list(HOSTS)[int(rng.integers(len(HOSTS)))]
    host, cores = HOSTS[host_name]
    n_gpus = int(rng.integers(1, MAX_GPUS + 1))
    first, second = (list(GENERATIONS)[int(i)] for i in rng.integers(len(GENERATIONS), size=2))
    mixed = rng.random() < 0.5 and first != second
    generation = [second if mixed and g >= (n_gpus + 1) // 2 else first for g in range(n_gpus)]
    topology = TOPOLOGIES[int(rng.integers(len(TOPOLOGIES)))]
    executor = tensorflow_executor(cores) if rng.random() < 0.5 else PYTORCH_EXECUTOR
    devices = [("cpu:0", host)] + [(f"gpu:{g}", GENERATIONS[generation[g]][0]) for g in range(n_gpus)]

    def link(i: int, j: int) -> tuple[float, float]:
        if 0 in (i, j):
            gpu = generation[max(i, j) - 1]
            return (PCIE5_BANDWIDTH if gpu == "h100" else PCIE3_BANDWIDTH), PCIE3_LATENCY
        a, b = generation[i - 1], generation[j - 1]
        nvlink = GENERATIONS[a][1], GENERATIONS[b][1]
        same_island = topology == "nvlink" or (
            topology == "two-islands" and (i - 1 < n_gpus // 2) == (j - 1 < n_gpus // 2))
        if same_island and None not in nvlink:
            return min(nvlink), NVLINK_LATENCY
        return PCIE3_BANDWIDTH, PCIE3_LATENCY

    names = [name for name, _ in devices]
    kinds = "+".join(dict.fromkeys(generation))
    fastest = max((link(i, j)[0] for i in range(1, n_gpus + 1) for j in range(1, n_gpus + 1) if i != j),
                  default=0.0)
    description = (f"Random cluster {k} of {FAMILY}: {host_name} host, {n_gpus} GPU(s) ({kinds}), "
                   f"{topology} topology (GPU pairs at up to {fastest / GB:g} GB/s).")
    return build_cluster(f"{FAMILY}:{k}", devices, link, description, executor, gpu_ports(names))


def cluster_ids(split: str = "all") -> list[str]:
    """The ids of the family's ``train`` or ``test`` split (or ``all``)."""
    ranges = {"train": range(TRAIN_CLUSTERS), "test": range(TRAIN_CLUSTERS, TRAIN_CLUSTERS + TEST_CLUSTERS),
              "all": range(TRAIN_CLUSTERS + TEST_CLUSTERS)}
    if not isinstance(split, str) or split not in ranges:
        raise ValueError(f"unknown cluster split {shown(split)}; allowed: {', '.join(ranges)}")
    return [f"{FAMILY}:{k}" for k in ranges[split]]


def is_family_cluster_name(name: object) -> bool:
    """Whether ``name`` reads as a family cluster's name (``random-v1:<k>``)."""
    return isinstance(name, str) and name.startswith(f"{FAMILY}:")


def family_cluster(name: str) -> Cluster:
    """The cluster named ``random-v1:<k>``, or a ValueError saying what the names are."""
    family, _, index = name.partition(":") if isinstance(name, str) else ("", "", "")
    # k in ASCII digits, no leading zero, short enough to convert (int() refuses 4,300 digits)
    digits = index.isascii() and index.isdigit() and len(index) <= MAX_INDEX_DIGITS
    if family != FAMILY or not digits or str(int(index)) != index:
        raise ValueError(f"a family cluster's name is {FAMILY}:<k> (k an integer >= 0 of at most "
                         f"{MAX_INDEX_DIGITS} digits), got {shown(name)}")
    return random_cluster(int(index))
