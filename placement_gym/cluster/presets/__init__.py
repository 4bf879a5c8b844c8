"""The cluster presets: the machines of the device-placement papers and of today's training, one data
file each in this folder (``<name>.json``).

A preset's file is a cluster file of the format every user's file has (`placement_gym.cluster.load`'s
docstring, docs/own_model.md), read by the same code (`load_cluster`), with a ``sources`` object that
says where each figure comes from: datasheets, papers, assumptions, and the calibration of each GPU
architecture (a device's ``architecture``, `placement_gym.cluster.hardware.ARCHITECTURES`). Adding
a preset is adding its file: its stem is its name.

`PRESETS` maps each name to a function that returns the preset's cluster (`load_preset`). The device
models, links and executors the files were written from, and `build_cluster` for clusters made in
Python, are in `placement_gym.cluster.hardware`; their names are importable from here too.
"""

from __future__ import annotations

import functools
from collections.abc import Callable

from placement_gym.cluster.cluster import Cluster
from placement_gym.cluster.hardware import (
    A100_SXM_80GB,
    ARCHITECTURES,
    BAECHI_PYTORCH_COPY,
    BROADWELL_8C,
    DEFAULT_EFFICIENCY,
    DEFAULT_TENSOR_EFFICIENCY,
    DGX1_CPU,
    DGXA100_CPU,
    DGXH100_CPU,
    GB,
    H100_NVSWITCH_PAIR_BANDWIDTH,
    H100_SXM,
    HASWELL_18C,
    I9_13900K,
    K40,
    K80_DIE,
    LISTED_SEGMENTS,
    NVLINK_LATENCY,
    OP_LAUNCH_OVERHEAD,
    P100_NVLINK_PAIR_BANDWIDTH,
    P100_PCIE,
    P100_SXM2,
    PCIE3_BANDWIDTH,
    PCIE3_LATENCY,
    PCIE5_BANDWIDTH,
    PYTORCH_DISPATCH_TIME,
    PYTORCH_EXECUTOR,
    PYTORCH_TRANSFER_SYNC,
    RTX2080,
    TENSORFLOW_TRANSFER_SYNC,
    UHD770,
    V100_NVLINK_PAIR_BANDWIDTH,
    V100_SXM2_16GB,
    Architecture,
    DeviceSpec,
    Executor,
    build_cluster,
    default_efficiency_row,
    gpu_ports,
    tensor_efficiency_row,
    tensorflow_executor,
)
from placement_gym.cluster.load import PRESET_DIRECTORY, load_preset, preset_names

PRESETS: dict[str, Callable[[], Cluster]] = {
    name: functools.partial(load_preset, name) for name in preset_names()
}


def __getattr__(name: str) -> Callable[[], Cluster]:
    """A preset's function by its Python name (``k80x2``, ``dgx_h100x2``: the name with ``_`` for ``-``)."""
    preset = name.replace("_", "-")
    if preset in PRESETS:
        return PRESETS[preset]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "A100_SXM_80GB", "ARCHITECTURES", "BAECHI_PYTORCH_COPY", "BROADWELL_8C", "DEFAULT_EFFICIENCY",
    "DEFAULT_TENSOR_EFFICIENCY", "DGX1_CPU", "DGXA100_CPU", "DGXH100_CPU", "GB",
    "H100_NVSWITCH_PAIR_BANDWIDTH", "H100_SXM", "HASWELL_18C", "I9_13900K", "K40", "K80_DIE",
    "LISTED_SEGMENTS", "NVLINK_LATENCY", "OP_LAUNCH_OVERHEAD", "P100_NVLINK_PAIR_BANDWIDTH", "P100_PCIE",
    "P100_SXM2", "PCIE3_BANDWIDTH", "PCIE3_LATENCY", "PCIE5_BANDWIDTH", "PRESETS", "PRESET_DIRECTORY",
    "PYTORCH_DISPATCH_TIME", "PYTORCH_EXECUTOR", "PYTORCH_TRANSFER_SYNC", "RTX2080",
    "TENSORFLOW_TRANSFER_SYNC", "UHD770", "V100_NVLINK_PAIR_BANDWIDTH", "V100_SXM2_16GB", "Architecture",
    "DeviceSpec", "Executor", "build_cluster", "default_efficiency_row", "gpu_ports", "load_preset",
    "preset_names", "tensor_efficiency_row", "tensorflow_executor",
]
