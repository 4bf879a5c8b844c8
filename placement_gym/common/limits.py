"""The allocation limit: what a cluster, a task or an observation space may ask for at once.

A cluster of ``cpu100000`` devices or an env with ``max_ops=10**9`` would allocate tens of GiB
before anything else could fail; the code that builds them estimates its arrays first and calls
`check_allocation`, which refuses an estimate above the limit with one line saying what asked for
how much and how to raise the limit.

The limit is `MAX_ALLOCATION_BYTES` (4 GiB: orders of magnitude above what any bundled graph on any
preset needs), unless the environment variable ``PLACEMENT_GYM_MAX_ALLOCATION_BYTES`` holds
another number of bytes (such as ``16e9``). A program may also assign the module constant.
"""

from __future__ import annotations

import math
import os

MAX_ALLOCATION_BYTES: float = 4 * 2**30
LIMIT_VARIABLE = "PLACEMENT_GYM_MAX_ALLOCATION_BYTES"


class AllocationLimitError(ValueError):
    """An estimated allocation above `max_allocation_bytes`."""


def max_allocation_bytes() -> float:
    """The limit in bytes: ``$PLACEMENT_GYM_MAX_ALLOCATION_BYTES`` when set, else `MAX_ALLOCATION_BYTES`."""
    text = os.environ.get(LIMIT_VARIABLE)
    if text is None or not text.strip():
        return float(MAX_ALLOCATION_BYTES)
    try:
        limit = float(text)
    except ValueError:
        limit = math.nan
    if not (math.isfinite(limit) and limit > 0):
        raise AllocationLimitError(
            f"{LIMIT_VARIABLE} must be a positive number of bytes (such as 16e9), got {text!r}"
        )
    return limit


def _gib(nbytes: float) -> str:
    return f"{nbytes / 2**30:.3g} GiB"


def check_allocation(what: str, nbytes: float) -> None:
    """Refuse ``what`` (such as ``"cluster 'cpu100000' (100000 devices)"``) when its estimated
    ``nbytes`` exceed the limit, with an `AllocationLimitError` naming both and the way to raise it."""
    limit = max_allocation_bytes()
    if nbytes > limit:
        raise AllocationLimitError(
            f"{what} would allocate about {_gib(nbytes)}, above the allocation limit of {_gib(limit)} "
            f"(set {LIMIT_VARIABLE} to a larger number of bytes to allow it)"
        )
