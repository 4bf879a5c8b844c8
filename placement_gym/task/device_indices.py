"""The one check of arrays of device indices: task placements (one device per forward op) and the
envs' actions (one device per group)."""

from __future__ import annotations

import numpy as np


def check_device_indices(
    values, device_names, length: int, subject: str, unit: str, locate, batch: bool = False
) -> np.ndarray:
    """``values`` as an int64 array of device indices, one per ``unit`` (shape ``(length,)``, or
    ``(batch, length)`` with ``batch``), or a ValueError that starts with ``subject``: wrong shape, values
    that are not integers (floats with integral values pass), or an index outside ``device_names``
    (the first one located by ``locate(position)``). `Task.check_placement` and the envs' actions
    (one device per group) are checked by it."""
    array = np.asarray(values)
    shape = ("batch, " if batch else "") + f"{length},"
    if array.ndim != 1 + batch or array.shape[-1] != length:
        raise ValueError(
            f"{subject} must have shape ({shape}): one device index per {unit}; got shape {array.shape}"
        )
    if array.dtype.kind not in "iu":
        if array.dtype.kind != "f" or not np.all(np.isfinite(array)) or np.any(array != np.round(array)):
            raise ValueError(f"{subject} must hold integer device indices, got dtype {array.dtype}")
    array = array.astype(np.int64)
    n_devices = len(device_names)
    bad = np.argwhere((array < 0) | (array >= n_devices))
    if len(bad):
        raise ValueError(
            f"{subject}: device index {int(array[tuple(bad[0])])} at {locate(int(bad[0][-1]))} is out of "
            f"range; allowed 0..{n_devices - 1} ({', '.join(device_names)})"
        )
    return array
