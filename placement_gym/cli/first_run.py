"""The first run's notice: the cost model's numba kernels compile on first use (about 40 s, then cached
on disk), and a command that says nothing for that long looks hung.

`announce_compile` prints one line on stderr, when it is a terminal and numba's cache holds no compiled
cost model, at most once per process (`placement_gym.cli.main` calls it before a command that may
simulate). The check only looks for numba's index files (no import of numba): in-tree
``__pycache__`` next to the kernels, ``$NUMBA_CACHE_DIR``, or numba's per-user cache folder, which numba
uses when the package folder is not writable.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

NOTICE = "placement-gym: compiling the cost model (first run only, about 40 s; cached afterwards)..."
# The kernel every simulation runs (placement_gym/cost_model/fast.py, `_run`); its index file names it.
_KERNEL_MODULE = "fast"
_KERNEL = "_run"
_COST_MODEL_DIR = Path(__file__).resolve().parents[1] / "cost_model"

_announced = False


def _index_pattern() -> str:
    """The glob of numba's index file of the kernel for this Python (``fast._run-<line>.py311.nbi``)."""
    return f"{_KERNEL_MODULE}.{_KERNEL}-*.py{sys.version_info.major}{sys.version_info.minor}.nbi"


def _cache_is_cold() -> bool:
    """Whether no numba cache holds the cost model's kernel (so the next simulation compiles it)."""
    pattern = _index_pattern()
    if any((_COST_MODEL_DIR / "__pycache__").glob(pattern)):
        return False
    # Numba's other cache places: the user's choice, then its per-user folder for read-only packages.
    roots = [os.environ.get("NUMBA_CACHE_DIR"),
             os.path.join(os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "numba")]
    for root in filter(None, roots):
        if Path(root).is_dir() and any(Path(root).rglob(pattern)):
            return False
    return True


def _is_terminal() -> bool:
    """Whether stderr is a terminal: a person waits there. A log or a test capture gets no notice, so
    that a command's stderr stays what it says of its own work (one line for an error)."""
    return sys.stderr.isatty()


def announce_compile() -> None:
    """Print `NOTICE` on stderr when it is a terminal and the cost model is not compiled yet, once
    per process."""
    global _announced
    if _announced:
        return
    _announced = True
    if _is_terminal() and _cache_is_cold():
        print(NOTICE, file=sys.stderr, flush=True)
