"""Running on this machine's devices: virtual CPU devices and torch's intra-op threads.

* `virtual_cpus(torch_devices)`: whether several of the devices are the CPU (virtual CPU devices,
  which run one intra-op thread each).
* `intra_op_threads(n)`: torch's intra-op thread count set for a block, and restored.
* `cluster_device_map(cluster)`: the default torch device of each cluster device (the executor's and
  fidelity's).

The clusters of this machine's devices (`virtual_cpu_cluster`, `local_cluster`, `get_real_cluster`:
``cpu<N>`` and ``local``) live in the cluster layer, `placement_gym.cluster.machine`, and are
re-exported here. Nothing here imports torch at module import time.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable
from typing import Any

from placement_gym.cluster.cluster import Cluster
from placement_gym.cluster.machine import (  # noqa: F401 - re-exported for the real-hardware mode
    get_real_cluster,
    host_memory_bytes,
    local_cluster,
    virtual_cpu_cluster,
)
from placement_gym.common import threads as torch_threads
from placement_gym.common.extras import require


def virtual_cpus(torch_devices: Iterable[Any]) -> bool:
    """Whether two or more of ``torch_devices`` (torch devices or their names) are the CPU: virtual CPU
    devices, which run one intra-op thread each (see the module docstring)."""
    torch = require("torch", "real-hardware mode")

    return sum(1 for device in torch_devices if torch.device(device).type == "cpu") > 1


def intra_op_threads(threads: int | None) -> contextlib.AbstractContextManager[None]:
    """torch's intra-op thread count set to ``threads`` while the block runs (None: left as it is),
    and restored afterwards, whatever happens (`placement_gym.common.threads.intra_op_threads`, which
    keeps it set through the cost model's first batch simulation)."""
    return torch_threads.intra_op_threads(threads, "real-hardware mode")


def cluster_device_map(cluster: Cluster) -> dict[str, str]:
    """Torch device of each device of ``cluster``: every cpu -> ``"cpu"`` (virtual CPU devices share
    it), ``gpu:<i>`` -> ``"cuda:<i>"`` (another gpu name: the next CUDA index)."""
    mapping: dict[str, str] = {}
    next_gpu = 0
    for name, kind in zip(cluster.device_names, cluster.device_kinds, strict=True):
        if kind == "cpu":
            mapping[name] = "cpu"
            continue
        suffix = name.rsplit(":", 1)[-1]
        index = int(suffix) if suffix.isdigit() else next_gpu
        mapping[name] = f"cuda:{index}"
        next_gpu = index + 1
    return mapping
