"""The first run's notice: the cost model's numba kernels compile on first use (30 to 60 s on a 2-core
machine, measured with `placement-gym bench --startup`), then load from numba's on-disk cache in well
under a second; a command that says nothing for that long looks hung.

`announce_compile` prints one line on stderr, terminal or not (a log shows why a job paused), when numba's
cache lacks the kernels, at most once per process (`placement_gym.cli.main` calls it before a command that
may simulate). The check only looks for numba's
index files (no import of numba) where numba keeps them: ``$NUMBA_CACHE_DIR`` when set (numba then uses
that folder alone), else ``__pycache__`` next to the kernels, or numba's per-user cache folder, which
numba uses when the package folder is not writable (an installed wheel in a read-only site-packages).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

NOTICE = ("placement-gym: compiling the cost model with numba (first run only: 30 to 60 s on a 2-core "
          "machine; cached afterwards)...")
_PACKAGE_DIR = Path(__file__).resolve().parents[1]
_COST_MODEL_DIR = _PACKAGE_DIR / "cost_model"
# The kernel every simulation runs (placement_gym/cost_model/fast.py, `_run`); its index file names it.
_KERNEL_MODULE = "fast"
_KERNEL = "_run"

_announced = False


def _index_pattern(module: str, kernel: str) -> str:
    """The glob of numba's index file of ``kernel`` for this Python (``fast._run-<line>.py311.nbi``)."""
    return f"{module}.{kernel}-*.py{sys.version_info.major}{sys.version_info.minor}.nbi"


def _in(root: str | os.PathLike, pattern: str) -> bool:
    return Path(root).is_dir() and any(Path(root).rglob(pattern))


def _is_cached(folder: Path, pattern: str) -> bool:
    """Whether numba's cache holds the kernel of index ``pattern`` of the module in ``folder``."""
    user = os.environ.get("NUMBA_CACHE_DIR")
    if user:
        return _in(user, pattern)
    if any((folder / "__pycache__").glob(pattern)):
        return True
    xdg = os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache")
    return _in(os.path.join(xdg, "numba"), pattern)


def _cache_is_cold() -> bool:
    """Whether numba's cache lacks the cost model's kernel (so that the next simulation compiles it)."""
    return not _is_cached(_COST_MODEL_DIR, _index_pattern(_KERNEL_MODULE, _KERNEL))


def announce_compile() -> None:
    """Print `NOTICE` on stderr when the kernels are not compiled yet, once per process."""
    global _announced
    if _announced:
        return
    _announced = True
    if _cache_is_cold():
        print(NOTICE, file=sys.stderr, flush=True)
