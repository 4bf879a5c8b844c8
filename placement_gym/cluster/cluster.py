"""`Cluster`: devices and the directed links between them, as numpy arrays.

Every figure lies in a plausible range (`FIGURE_RANGES`, SI units), whoever built the cluster (a
preset, a JSON file, Python code): a bandwidth or peak of 1e-300 is no machine, and would turn the
simulated times into overflows. The ranges:

=================== ====================== ===========================================================
figure              allowed                why
=================== ====================== ===========================================================
peak_flops          1e6 to 1e18 FLOP/s     a microcontroller's MFLOP/s up to 1000x today's fastest chip
memory_bandwidth    1e6 to 1e17 bytes/s    1 MB/s up to above a wafer-scale engine's SRAM (21 PB/s)
memory_capacity     1e3 to 1e15 bytes      a few kB (toy devices that run out of memory on purpose) to 1 PB
launch_overhead     (0, 1] s               more than a second per op is no executor
efficiency          1e-4 to 1              a fraction of the peak; below 0.01% the peak is not the device's
link_bandwidth      1e6 to 1e17 bytes/s    as memory_bandwidth
link_latency        (0, 1] s               a transfer's setup; a second is beyond any network round trip
dispatch_time       0 to 1 s               as launch_overhead, and 0 for no dispatch cost
transfer_sync       0 to 1 s               as dispatch_time
tensor_peak_flops   1e6 to 1e18 FLOP/s     as peak_flops
tensor_efficiency   1e-4 to 1              as efficiency
=================== ====================== ===========================================================

Names (the cluster's, its devices', hosts' and segments') and the description are printable text
(`str.isprintable`): they reach terminals and tables as they are, so a control character (an ANSI
escape, a newline) is refused. A cluster's arrays grow with the square of its devices, so one whose
arrays would exceed the allocation limit (`placement_gym.common.limits`) is refused (`check_cluster_size`).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import numpy as np

from placement_gym.common.content_hash import dataclass_sha256
from placement_gym.common.limits import check_allocation
from placement_gym.graph.opgraph import CATEGORIES

DEVICE_KINDS: tuple[str, ...] = ("cpu", "gpu")
# Op categories that run on a device's tensor cores in half precision (bf16, fp16): the matrix
# products. The others are memory-bound and keep the FP32 path.
TENSOR_CATEGORIES: tuple[str, ...] = ("matmul", "conv")
TENSOR_CATEGORY_COLUMNS = np.array([CATEGORIES.index(category) for category in TENSOR_CATEGORIES])
# Optional figures whose default (None) follows other figures: no tensor cores, so half-precision
# matrix products run at the FP32 peak and efficiency. Left out of `Cluster.content_sha256` while at
# their default, so that the hash of a cluster without tensor cores depends on its FP32 figures only.
HALF_PRECISION_FIGURES: tuple[str, ...] = ("tensor_peak_flops", "tensor_efficiency")


@dataclass(frozen=True)
class FigureRange:
    """The values a cluster figure may take: finite, from ``low`` (excluded when ``low_open``) to
    ``high``, in ``unit``."""

    low: float
    high: float
    unit: str
    low_open: bool = False

    def admits(self, values) -> np.ndarray:
        """Whether each of ``values`` lies in the range (NaN and infinities never do)."""
        values = np.asarray(values, dtype=np.float64)
        above = values > self.low if self.low_open else values >= self.low
        return np.isfinite(values) & above & (values <= self.high)

    def describe(self) -> str:
        """The range in words, for error messages: ``a positive finite number from 1e+06 to ...``."""
        unit = f" {self.unit}" if self.unit else ""
        if self.low == 0 and not self.low_open:
            return f"a finite number >= 0, at most {self.high:g}{unit}"
        if self.low == 0:
            return f"a positive finite number, at most {self.high:g}{unit}"
        return f"a positive finite number from {self.low:g} to {self.high:g}{unit}"


# Why each range: the module docstring's table.
FIGURE_RANGES: dict[str, FigureRange] = {
    "peak_flops": FigureRange(1e6, 1e18, "FLOP/s"),
    "memory_bandwidth": FigureRange(1e6, 1e17, "bytes/s"),
    "memory_capacity": FigureRange(1e3, 1e15, "bytes"),
    "launch_overhead": FigureRange(0.0, 1.0, "s", low_open=True),
    "efficiency": FigureRange(1e-4, 1.0, ""),
    "link_bandwidth": FigureRange(1e6, 1e17, "bytes/s"),
    "link_latency": FigureRange(0.0, 1.0, "s", low_open=True),
    "dispatch_time": FigureRange(0.0, 1.0, "s"),
    "transfer_sync": FigureRange(0.0, 1.0, "s"),
    "tensor_peak_flops": FigureRange(1e6, 1e18, "FLOP/s"),
    "tensor_efficiency": FigureRange(1e-4, 1.0, ""),
}


def check_text(where: str, field: str, value: object, allow_empty: bool = False) -> str:
    """``value`` if it is a (non-empty, unless ``allow_empty``) printable string, else a ValueError
    naming ``field`` of ``where`` and what is allowed."""
    if not isinstance(value, str) or not (value or allow_empty):
        kind = "a string" if allow_empty else "a non-empty string"
        raise ValueError(f"{where}: {field} must be {kind}, got {value!r}")
    if not value.isprintable():
        raise ValueError(
            f"{where}: {field} {value!r} holds a control or format character; allowed: printable text "
            "(no escape sequences, tabs or line breaks)"
        )
    return value


def cluster_bytes(n_devices: int, route_width: int = 0) -> float:
    """Bytes of a cluster's arrays of ``n_devices`` devices whose longest link route has
    ``route_width`` segments: two float64 link matrices, the int64 segment table, and about as much
    again in the temporaries of building and checking them."""
    return 2.0 * n_devices * n_devices * 8 * (2 + route_width)


def check_cluster_size(name: str, n_devices: int, route_width: int = 0) -> None:
    """Refuse a cluster of ``n_devices`` (see `cluster_bytes`) past the allocation limit, before its
    arrays are made."""
    check_allocation(f"cluster {name!r} ({n_devices} devices)", cluster_bytes(n_devices, route_width))


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
    What real executors pay beyond op and transfer times (docs/design.md, "Costs real executors
    pay"); each defaults to nothing (0, one host, no shared segment):
        dispatch_time: per device, seconds of a host thread to issue one op on it (framework
            dispatch plus kernel launch). An op's launch waits for a free dispatch thread of the
            device's host and for its inputs (same-device producers launched, received tensors
            arrived); launches run ahead of the device, so a device pays it only when launches are
            slower than its ops.
        device_host: per device, the index of the host whose threads issue its ops.
        host_names, host_dispatch_threads: per host, a name and its number of dispatch threads (>= 1).
        transfer_sync: per device, seconds its stream spends per copy it issues (record an event,
            start the copy engine) and per received input an op waits for (wait on the event).
        segment_names: shared path segments (a PCIe switch's uplink, a socket's root port, one
            direction each). link_segments: int ``(n_devices, n_devices, k)``, the segments a
            transfer on each link occupies, padded with -1. A segment carries one transfer at a
            time, so transfers on links that share one contend.
    Half precision (bf16, fp16 tasks; each None by default, meaning no tensor cores):
        tensor_peak_flops: per device, the dense half-precision tensor-core peak FLOP/s (None: the
            FP32 ``peak_flops``).
        tensor_efficiency: float64 ``(n_devices, len(TENSOR_CATEGORIES))``, the fraction of
            ``tensor_peak_flops`` a matmul and a conv reach in half precision (None: their FP32
            ``efficiency``). A value equal to its default is stored as None.
        `tensor_rate` gives the resulting FLOP/s of each.
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
    dispatch_time: np.ndarray | None = None
    device_host: np.ndarray | None = None
    host_names: tuple[str, ...] = ("host:0",)
    host_dispatch_threads: tuple[int, ...] = (1,)
    transfer_sync: np.ndarray | None = None
    segment_names: tuple[str, ...] = ()
    link_segments: np.ndarray | None = None
    tensor_peak_flops: np.ndarray | None = None
    tensor_efficiency: np.ndarray | None = None

    def __post_init__(self) -> None:
        n = len(self.device_names)
        defaults = {
            "dispatch_time": np.zeros(n),
            "transfer_sync": np.zeros(n),
            "device_host": np.zeros(n, dtype=np.int64),
            "link_segments": np.zeros((n, n, 0), dtype=np.int64),
        }
        for key, value in defaults.items():
            if getattr(self, key) is None:
                object.__setattr__(self, key, value)
        for key in ("device_host", "link_segments"):
            array = np.array(getattr(self, key), dtype=np.int64)
            array.setflags(write=False)
            object.__setattr__(self, key, array)
        object.__setattr__(self, "host_names", tuple(self.host_names))
        object.__setattr__(self, "host_dispatch_threads", tuple(int(k) for k in self.host_dispatch_threads))
        object.__setattr__(self, "segment_names", tuple(self.segment_names))
        for key in (
            "peak_flops",
            "memory_bandwidth",
            "memory_capacity",
            "launch_overhead",
            "efficiency",
            "link_bandwidth",
            "link_latency",
            "dispatch_time",
            "transfer_sync",
        ):
            array = np.array(getattr(self, key), dtype=np.float64)
            array.setflags(write=False)
            object.__setattr__(self, key, array)
        check_text("cluster", "name", self.name)
        where = f"cluster {self.name!r}"
        check_text(where, "description", self.description, allow_empty=True)
        for kind, names in (("device", self.device_names), ("host", self.host_names),
                            ("segment", self.segment_names)):
            for position, name in enumerate(names):
                check_text(where, f"{kind} name #{position}", name)
        if n == 0:
            raise ValueError(f"cluster {self.name!r} has no devices")
        check_cluster_size(self.name, n, self.link_segments.shape[2] if self.link_segments.ndim == 3 else 0)
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
            self._check_range(key, value)
        self._check_executor_costs(n)
        self._check_half_precision(n)

    def _check_half_precision(self, n: int) -> None:
        """Shapes and ranges of the half-precision figures; a figure equal to its default becomes None."""
        defaults = {
            "tensor_peak_flops": self.peak_flops,
            "tensor_efficiency": self.efficiency[:, TENSOR_CATEGORY_COLUMNS],
        }
        for key, default in defaults.items():
            value = getattr(self, key)
            if value is None:
                continue
            array = np.array(value, dtype=np.float64)
            if array.shape != default.shape:
                raise ValueError(
                    f"cluster {self.name!r}: {key} has shape {array.shape}, expected {default.shape}"
                )
            self._check_range(key, array)
            if np.array_equal(array, default):
                object.__setattr__(self, key, None)
            else:
                array.setflags(write=False)
                object.__setattr__(self, key, array)

    @cached_property
    def tensor_rate(self) -> np.ndarray:
        """FLOP/s of a half-precision op of each `TENSOR_CATEGORIES` on each device, ``(n_devices,
        len(TENSOR_CATEGORIES))``: tensor peak x tensor efficiency (FP32 figures where the device has
        none)."""
        peak = self.peak_flops if self.tensor_peak_flops is None else self.tensor_peak_flops
        efficiency = (
            self.efficiency[:, TENSOR_CATEGORY_COLUMNS] if self.tensor_efficiency is None
            else self.tensor_efficiency
        )
        rate = peak[:, None] * efficiency
        rate.setflags(write=False)
        return rate

    def _check_range(self, key: str, value: np.ndarray) -> None:
        """Every figure of ``key`` in `FIGURE_RANGES`, or a ValueError naming the first device or link
        outside it (a link matrix's diagonal is unused and not checked)."""
        bad = ~FIGURE_RANGES[key].admits(value)
        if key.startswith("link_"):
            np.fill_diagonal(bad, False)
        if not bad.any():
            return
        at = tuple(int(k) for k in np.argwhere(bad)[0])
        names = self.device_names
        if key.startswith("link_"):
            place = f"link {names[at[0]]} -> {names[at[1]]}"
        elif key == "efficiency":
            place = f"device {names[at[0]]!r}, category {CATEGORIES[at[1]]!r}"
        elif key == "tensor_efficiency":
            place = f"device {names[at[0]]!r}, category {TENSOR_CATEGORIES[at[1]]!r}"
        else:
            place = f"device {names[at[0]]!r}"
        raise ValueError(
            f"cluster {self.name!r}: {key} of {place} must be {FIGURE_RANGES[key].describe()}, "
            f"got {float(value[at])!r}"
        )

    def _check_executor_costs(self, n: int) -> None:
        """Dispatch, synchronisation and shared-segment figures: shapes, ranges, references."""
        for key in ("dispatch_time", "transfer_sync"):
            value = getattr(self, key)
            if value.shape != (n,):
                raise ValueError(f"cluster {self.name!r}: {key} has shape {value.shape}, expected ({n},)")
            self._check_range(key, value)
        n_hosts = len(self.host_names)
        if n_hosts == 0 or len(set(self.host_names)) != n_hosts:
            raise ValueError(f"cluster {self.name!r}: host names must be unique and at least one")
        if len(self.host_dispatch_threads) != n_hosts or min(self.host_dispatch_threads) < 1:
            raise ValueError(
                f"cluster {self.name!r}: host_dispatch_threads needs one integer >= 1 per host ({n_hosts})"
            )
        if (
            self.device_host.shape != (n,)
            or np.any(self.device_host < 0)
            or np.any(self.device_host >= n_hosts)
        ):
            raise ValueError(
                f"cluster {self.name!r}: device_host needs one host index in 0..{n_hosts - 1} per device"
            )
        segments = self.link_segments
        n_segments = len(self.segment_names)
        if len(set(self.segment_names)) != n_segments:
            raise ValueError(f"cluster {self.name!r}: segment names must be unique")
        if segments.ndim != 3 or segments.shape[:2] != (n, n):
            raise ValueError(
                f"cluster {self.name!r}: link_segments has shape {segments.shape}, expected ({n}, {n}, k)"
            )
        if np.any(segments < -1) or np.any(segments >= n_segments):
            raise ValueError(
                f"cluster {self.name!r}: link_segments entries must be -1 or a segment index "
                f"0..{n_segments - 1}"
            )
        if np.any(segments[np.arange(n), np.arange(n)] >= 0):
            raise ValueError(f"cluster {self.name!r}: a device's link to itself has no segments")
        for i, j in zip(*np.nonzero((segments >= 0).sum(axis=2)), strict=True):
            route = segments[i, j][segments[i, j] >= 0]
            if len(set(route.tolist())) != len(route):
                raise ValueError(
                    f"cluster {self.name!r}: link {self.device_names[i]} -> "
                    f"{self.device_names[j]} lists a segment twice"
                )

    def link_route(self, src: int, dst: int) -> tuple[str, ...]:
        """The names of the shared segments a transfer from ``src`` to ``dst`` occupies."""
        return tuple(self.segment_names[k] for k in self.link_segments[src, dst] if k >= 0)

    @cached_property
    def content_sha256(self) -> str:
        """The hex sha256 of the devices and links (names, kinds and every figure), not the cluster's
        name nor its description: what the cost of a placement depends on. The half-precision figures
        count only where given (`HALF_PRECISION_FIGURES`)."""
        unset = tuple(key for key in HALF_PRECISION_FIGURES if getattr(self, key) is None)
        return dataclass_sha256(self, exclude=("name", "description", *unset))

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
