"""Op time on every device (docs/cost_model.md): max(FLOPs / (peak x efficiency), bytes / bandwidth)
+ overhead, and what computing it for a task allocates."""

from __future__ import annotations

import numpy as np

from placement_gym.cluster.cluster import TENSOR_CATEGORY_COLUMNS, Cluster

# float64 arrays of (task ops x devices) alive at once while a task is compiled: the durations and
# the temporaries of `op_durations` (rate, compute time, memory time, their maximum).
DURATION_ARRAYS = 5


def task_bytes(n_task_ops: int, n_devices: int) -> float:
    """Bytes a task of ``n_task_ops`` ops (forward, backward and update) on ``n_devices`` devices
    allocates for its per-op-and-device arrays while it is compiled."""
    return 8.0 * DURATION_ARRAYS * n_task_ops * n_devices


def op_durations(
    flops: np.ndarray,
    bytes_moved: np.ndarray,
    category: np.ndarray,
    cluster: Cluster,
    tensor_cores: bool = False,
) -> np.ndarray:
    """Seconds of every op (``flops``, ``bytes_moved`` and ``category`` per op, float64, float64 and
    int64) on every device of ``cluster``, as a C-contiguous (ops x devices) float64 array; with
    ``tensor_cores`` (half precision) matmul and conv ops take the devices' `Cluster.tensor_rate`."""
    rate = cluster.peak_flops[None, :] * cluster.efficiency.T[category]  # (ops, devices)
    if tensor_cores:
        for k, column in enumerate(TENSOR_CATEGORY_COLUMNS):
            rate[category == column] = cluster.tensor_rate[:, k]
    compute = flops[:, None] / rate
    memory = bytes_moved[:, None] / cluster.memory_bandwidth[None, :]
    return np.ascontiguousarray(np.maximum(compute, memory) + cluster.launch_overhead[None, :])
