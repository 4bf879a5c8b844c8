"""`Cluster`: devices and the directed links between them, as numpy arrays."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import numpy as np

from placement_gym.content_hash import dataclass_sha256
from placement_gym.graph.opgraph import CATEGORIES

DEVICE_KINDS: tuple[str, ...] = ("cpu", "gpu")


@dataclass(frozen=True, eq=False)
class Cluster:
    """A set of devices and links (all figures in SI units: FLOP/s, bytes/s, bytes, seconds).

    Per device (length ``n_devices``):
        device_names: unique names such as ``"cpu:0"``, ``"gpu:1"``.
        device_kinds: ``"cpu"`` or ``"gpu"``.
        peak_flops: FP32 peak FLOP/s.
        memory_bandwidth: bytes/s of device memory.
        memory_capacity: bytes usable for a training step.
        launch_overhead: seconds added to every op (kernel launch, executor dispatch).
        efficiency: float64 ``(n_devices, len(CATEGORIES))``, the fraction of peak FLOP/s an op of
            each category reaches.
    Per ordered pair (``(n_devices, n_devices)``, diagonal unused and 0):
        link_bandwidth (bytes/s), link_latency (seconds).
    ``content_sha256`` (computed): of every figure, device name and kind, not ``name`` nor
    ``description``.
    """

    name: str
    device_names: tuple[str, ...]
    device_kinds: tuple[str, ...]
    peak_flops: np.ndarray
    memory_bandwidth: np.ndarray
    memory_capacity: np.ndarray
    launch_overhead: np.ndarray
    efficiency: np.ndarray
    link_bandwidth: np.ndarray
    link_latency: np.ndarray
    description: str = ""

    def __post_init__(self) -> None:
        n = len(self.device_names)
        for key in (
            "peak_flops",
            "memory_bandwidth",
            "memory_capacity",
            "launch_overhead",
            "efficiency",
            "link_bandwidth",
            "link_latency",
        ):
            array = np.array(getattr(self, key), dtype=np.float64)
            array.setflags(write=False)
            object.__setattr__(self, key, array)
        if n == 0:
            raise ValueError(f"cluster {self.name!r} has no devices")
        if len(set(self.device_names)) != n:
            raise ValueError(f"cluster {self.name!r}: device names are not unique")
        if len(self.device_kinds) != n:
            raise ValueError(f"cluster {self.name!r}: device_kinds must have {n} entries")
        for kind in self.device_kinds:
            if kind not in DEVICE_KINDS:
                raise ValueError(f"cluster {self.name!r}: device kind {kind!r} is not one of {DEVICE_KINDS}")
        shapes = {
            "peak_flops": (n,),
            "memory_bandwidth": (n,),
            "memory_capacity": (n,),
            "launch_overhead": (n,),
            "efficiency": (n, len(CATEGORIES)),
            "link_bandwidth": (n, n),
            "link_latency": (n, n),
        }
        for key, shape in shapes.items():
            value = getattr(self, key)
            if value.shape != shape:
                raise ValueError(f"cluster {self.name!r}: {key} has shape {value.shape}, expected {shape}")
            checked = value[~np.eye(n, dtype=bool)] if key.startswith("link_") else value
            if not np.all(np.isfinite(checked)) or np.any(checked <= 0):
                raise ValueError(
                    f"cluster {self.name!r}: every {key} figure must be a positive finite number"
                )
        if np.any(self.efficiency > 1):
            raise ValueError(f"cluster {self.name!r}: efficiency figures must be in (0, 1]")

    @cached_property
    def content_sha256(self) -> str:
        """The hex sha256 of the devices and links (names, kinds and every figure), not the cluster's
        name nor its description: what the cost of a placement depends on."""
        return dataclass_sha256(self, exclude=("name", "description"))

    @property
    def n_devices(self) -> int:
        return len(self.device_names)

    def device_index(self, name: str) -> int:
        """Index of a device by name, with a clear error naming the allowed names."""
        try:
            return self.device_names.index(name)
        except ValueError:
            raise ValueError(
                f"unknown device {name!r} in cluster {self.name!r}; "
                f"devices are: {', '.join(self.device_names)}"
            ) from None

    def __repr__(self) -> str:
        return f"Cluster({self.name!r}, {self.n_devices} devices: {_device_ranges(self.device_names)})"


def _device_ranges(names: tuple[str, ...], limit: int = 8) -> str:
    """Device names with runs of one prefix and consecutive numbers shortened to a range
    (``cpu:0, gpu:0..3``); at most ``limit`` entries, then how many more."""
    runs: list[list] = []  # [prefix, first, last] or [name, None, None]
    for name in names:
        prefix, _, number = name.rpartition(":")
        if prefix and number.isdigit():
            if runs and runs[-1][0] == prefix and runs[-1][2] == int(number) - 1:
                runs[-1][2] = int(number)
                continue
            runs.append([prefix, int(number), int(number)])
        else:
            runs.append([name, None, None])
    shown = [
        name if first is None else f"{name}:{first}" if first == last else f"{name}:{first}..{last}"
        for name, first, last in runs[:limit]
    ]
    more = f", ... ({len(runs) - limit} more)" if len(runs) > limit else ""
    return ", ".join(shown) + more
