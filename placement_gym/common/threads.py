"""torch's intra-op thread count, set so that it stays set.

numba's OpenMP threading layer starts its thread pool at the first parallel simulation (the batch
simulator of `placement_gym.cost_model`), and on Linux torch shares the OpenMP runtime: when torch has
already run a parallel operation, the pool's start puts torch back on every core, undoing a thread
count set before. A computation's threads, and so the last bits of its sums, would then depend on
what the process ran earlier. Both functions start numba's pool before they set the count.

* `set_torch_threads(n)`: torch's intra-op thread count set to ``n`` from now on.
* `intra_op_threads(n)`: the same for a block, and restored afterwards.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from placement_gym.common.extras import require


def set_torch_threads(threads: int, purpose: str = "setting torch's thread count") -> None:
    """torch's intra-op thread count set to ``threads`` (>= 1), numba's thread pool started first
    (module docstring). ``purpose``: what needs torch, named in the error when it is missing."""
    import numba

    if int(threads) < 1:
        raise ValueError(f"threads must be >= 1, got {threads}")
    torch = require("torch", purpose)
    numba.get_num_threads()  # starts numba's pool, whose start would reset the count set below
    torch.set_num_threads(int(threads))


@contextlib.contextmanager
def intra_op_threads(threads: int | None, purpose: str = "setting torch's thread count") -> Iterator[None]:
    """torch's intra-op thread count set to ``threads`` while the block runs (None: left as it is),
    and restored afterwards, whatever happens; as `set_torch_threads`."""
    torch = require("torch", purpose)
    before = torch.get_num_threads()
    # set again even for None: the pool's start may have changed it
    set_torch_threads(before if threads is None else threads, purpose)
    try:
        yield
    finally:
        torch.set_num_threads(before)
