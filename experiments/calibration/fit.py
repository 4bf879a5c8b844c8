"""For each GPU architecture of `ARCHITECTURES`, the interval of scale factors on its calibrated
efficiencies for which every held one-device row of docs/calibration.md on that architecture stays
within its tolerance, and whether the shipped figures (scale 1) lie inside it.

Two scans: ``efficiency`` scales the device's FP32 efficiency row (every op category) with its
tensor-core figures held, over the architecture's one-device rows of any precision; ``tensor`` scales
its half-precision tensor efficiency (matmul, conv), over its bf16/fp16 rows. A row's figure is
monotone in the scale (faster ops: a shorter step, a higher matmul utilisation), so each row's
interval is found by bisection. Scales stop where an efficiency would pass 1.

    python experiments/calibration/fit.py
"""

from __future__ import annotations

import dataclasses
import functools

import numpy as np

from placement_gym.calibration import PUBLISHED, PublishedRow
from placement_gym.calibration.compare import matmul_utilisation, row_task
from placement_gym.cluster import presets
from placement_gym.cluster.cluster import TENSOR_CATEGORY_COLUMNS
from placement_gym.cost_model import simulate
from placement_gym.task.compiled import make_task

LOWEST = 0.05  # the smallest scale scanned
STEPS = 16  # bisection steps on the log of the scale: to 1e-4 of the scale, below the digits printed


def architecture(row: PublishedRow) -> str:
    """The architecture of the row's device: the preset device spec with its FP32 peak."""
    cluster = row_task(row.graph, row.batch, row.cluster, row.optimizer, row.precision).cluster
    peak = float(cluster.peak_flops[cluster.device_index(row.device)])
    specs = {s.architecture for s in vars(presets).values() if isinstance(s, presets.DeviceSpec)
             and s.peak_flops == peak}
    assert len(specs) == 1, (row.id, specs)
    return specs.pop()


@functools.cache
def scaled_error(row: PublishedRow, scan: str, scale: float) -> float:
    """The row's model / published - 1 with the device's ``scan`` figures multiplied by ``scale``."""
    task = row_task(row.graph, row.batch, row.cluster, row.optimizer, row.precision)
    cluster, device = task.cluster, task.cluster.device_index(row.device)
    tensor = np.array(cluster.tensor_efficiency if cluster.tensor_efficiency is not None
                      else cluster.efficiency[:, TENSOR_CATEGORY_COLUMNS])
    efficiency = np.array(cluster.efficiency)
    (efficiency if scan == "efficiency" else tensor)[device] *= scale
    scaled = dataclasses.replace(cluster, efficiency=efficiency, tensor_efficiency=tensor)
    task = make_task(task.graph, scaled, task.step)
    if row.kind == "mfu":
        return matmul_utilisation(task, device)[0] / row.published - 1.0
    placement = np.full(task.n_forward, device, dtype=np.int64)
    return simulate(task, placement).runtime / row.published - 1.0


def highest(row: PublishedRow, scan: str) -> float:
    """The largest scale that keeps every scanned efficiency of the row's device at most 1."""
    cluster = row_task(row.graph, row.batch, row.cluster, row.optimizer, row.precision).cluster
    device = cluster.device_index(row.device)
    if scan == "efficiency":
        return 1.0 / float(cluster.efficiency[device].max())
    peak = cluster.tensor_efficiency if cluster.tensor_efficiency is not None else (
        cluster.efficiency[:, TENSOR_CATEGORY_COLUMNS])
    return 1.0 / float(peak[device].max())


def crossing(row: PublishedRow, scan: str, level: float, low: float, high: float) -> float | None:
    """The scale in [low, high] where the row's error crosses ``level`` (None: it does not)."""
    below_low = scaled_error(row, scan, low) < level
    if below_low == (scaled_error(row, scan, high) < level):
        return None
    for _ in range(STEPS):
        middle = float(np.sqrt(low * high))
        if (scaled_error(row, scan, middle) < level) == below_low:
            low = middle
        else:
            high = middle
    return float(np.sqrt(low * high))


def row_interval(row: PublishedRow, scan: str) -> tuple[float, float]:
    """The scales in [LOWEST, highest] for which the row is within its tolerance (empty: low > high)."""
    top = highest(row, scan)
    ends = [crossing(row, scan, level, LOWEST, top) for level in (-row.tolerance, row.tolerance)]
    inside = [s for s in (LOWEST, top) if abs(scaled_error(row, scan, s)) <= row.tolerance]
    points = [s for s in [*ends, *inside] if s is not None]
    return (min(points), max(points)) if points else (np.inf, -np.inf)


def shown(value: float, row: PublishedRow, scan: str) -> str:
    """A scale, starred where it is an end of the scan rather than a tolerance edge."""
    return f"{value:.3f}" + ("*" if value in (LOWEST, highest(row, scan)) else "")


def main() -> None:
    """Print each row's interval, then the table per architecture and scan."""
    held = [r for r in PUBLISHED if not r.beyond_model and r.kind in ("step", "mfu")]
    found: dict[tuple[str, str], list[tuple[PublishedRow, float, float]]] = {}
    for row in held:
        for scan in ["efficiency"] + ([] if row.precision == "fp32" else ["tensor"]):
            low, high = row_interval(row, scan)
            found.setdefault((architecture(row), scan), []).append((row, low, high))
            print(f"{row.id:24s} {scan:10s} error at 1 {scaled_error(row, scan, 1.0):+.3f}, within "
                  f"{row.tolerance:.0%} for scales {shown(low, row, scan)} to {shown(high, row, scan)}")
    print("\n| architecture | scaled | rows | scales within tolerance | shipped (1) inside | bound by |")
    print("|---|---|---:|---|---|---|")
    for (name, scan), rows in found.items():
        low_row, low, _ = max(rows, key=lambda r: r[1])
        high_row, _, high = min(rows, key=lambda r: r[2])
        inside = "yes" if low <= 1.0 <= high else "NO"
        interval = f"{shown(low, low_row, scan)} to {shown(high, high_row, scan)}"
        print(f"| {name} | {scan} | {len(rows)} | {interval} | {inside} | {low_row.id} / {high_row.id} |")
    print("\n*: an end of the scan (scale 0.05, or an efficiency of 1), not a tolerance edge")


if __name__ == "__main__":
    main()
