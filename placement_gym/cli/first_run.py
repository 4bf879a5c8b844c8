"""The first run's notice and progress: the package's numba kernels (`KERNEL_MODULES`) compile on first
use (about a minute on a 2-core machine in all, measured with `placement-gym bench --startup`), then load
from numba's on-disk cache in well under a second; a command that says nothing for that long looks hung.

`compile_progress` wraps a command that may run a kernel (`placement_gym.cli.main`): where numba's cache
lacks a kernel it prints one notice on stderr, terminal or not (a log shows why a job paused), saying how
many kernels of each module are not cached yet, and while numba compiles it writes a
`placement_gym.common.progress` line at least every 3 s ("[12 s] compiling numba kernels
(partition._fm_passes)"); once the compiles are
done the lines go on ("compiled ...; running") until the command ends, so that a first run is never
silent. Where every kernel is cached it prints nothing and does not even import numba.

The check only looks for numba's index files where numba keeps them: ``$NUMBA_CACHE_DIR`` when set (numba
then uses that folder alone), else ``__pycache__`` next to the kernels, or numba's per-user cache folder,
which numba uses when the package folder is not writable (an installed wheel in a read-only
site-packages). Kernels are found by reading their modules' sources (no import).
"""

from __future__ import annotations

import importlib.abc
import importlib.util
import os
import re
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

_PACKAGE_DIR = Path(__file__).resolve().parents[1]
_COST_MODEL_DIR = _PACKAGE_DIR / "cost_model"
# Every module of the package with numba kernels (a test checks that none is missing), and what it is.
KERNEL_MODULES = {
    "cost_model/fast.py": "the cost model",
    "cost_model/bounds.py": "the lower bound",
    "cost_model/proven_bounds.py": "the proven bounds",
    "task/partition.py": "the k-way partition",
}
_KERNEL_DEF = re.compile(r"^@numba\.njit\b[^\n]*\n(?:@[^\n]*\n)*def (\w+)", re.MULTILINE)
# The kernel every simulation runs (placement_gym/cost_model/fast.py, `_run`): cold on a first run.
_KERNEL_MODULE = "fast"
_KERNEL = "_run"
NOTICE = ("placement-gym: compiling the cost model and the other numba kernels on first use (first run "
          "only: about a minute on a 2-core machine; cached afterwards)")

_announced = False


def _index_pattern(module: str, kernel: str) -> str:
    """The glob of numba's index file of ``kernel`` for this Python (``fast._run-<line>.py311.nbi``)."""
    return f"{module}.{kernel}-*.py{sys.version_info.major}{sys.version_info.minor}.nbi"


def _index_names(folder: Path) -> set[str]:
    """Names of numba's index files where numba looks for those of the modules in ``folder``."""
    user = os.environ.get("NUMBA_CACHE_DIR")
    roots = [Path(user)] if user else [folder / "__pycache__", Path(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache")) / "numba"]
    return {path.name for root in roots if root.is_dir() for path in root.rglob("*.nbi")}


def _is_cached(names: set[str], module: str, kernel: str) -> bool:
    prefix, suffix = _index_pattern(module, kernel).split("*")
    return any(name.startswith(prefix) and name.endswith(suffix) for name in names)


def _cache_is_cold() -> bool:
    """Whether numba's cache lacks the cost model's kernel (so that the next simulation compiles it)."""
    return not _is_cached(_index_names(_COST_MODEL_DIR), _KERNEL_MODULE, _KERNEL)


def cold_kernels() -> list[str]:
    """``module.kernel`` of every kernel of `KERNEL_MODULES` that numba's cache lacks, in module order."""
    cold = []
    for relative in KERNEL_MODULES:
        path = _PACKAGE_DIR / relative
        names = _index_names(path.parent)
        cold += [f"{path.stem}.{kernel}" for kernel in _KERNEL_DEF.findall(path.read_text(encoding="utf-8"))
                 if not _is_cached(names, path.stem, kernel)]
    return cold


def _notice(cold: list[str]) -> str:
    """`NOTICE` and how many kernels of each module are not cached yet (the progress lines name each)."""
    what = {Path(relative).stem: label for relative, label in KERNEL_MODULES.items()}
    stems = [kernel.partition(".")[0] for kernel in cold]
    listed = ", ".join(f"{stems.count(stem)} of {what[stem]}" for stem in dict.fromkeys(stems))
    return NOTICE + (f"; {len(cold)} kernels not cached yet: {listed}" if cold else "") + "..."


def _print_notice(cold: list[str]) -> None:
    global _announced
    if not _announced:
        _announced = True
        print(_notice(cold), file=sys.stderr, flush=True)


def announce_compile() -> None:
    """Print the notice on stderr when the cost model's kernel is not compiled yet, once per process."""
    if _announced:
        return
    if _cache_is_cold():
        _print_notice(cold_kernels())


def _compile_listener(progress: Any, cold: list[str]) -> Any:
    """A numba event listener that reports each compile to ``progress`` (a `Progress`)."""
    from numba.core import event

    class CompileListener(event.Listener):
        """Names the package's kernel being compiled (numba also compiles its own helpers, nested in
        ours: those are not named) and counts the package's kernels compiled."""

        def __init__(self) -> None:
            self.depth, self.done, self.ours = 0, 0, []

        def on_start(self, ev: Any) -> None:
            _print_notice(cold)  # the first compile of a command whose cost model was cached
            func = ev.data["dispatcher"].py_func
            module = func.__module__ or ""
            self.depth += 1
            self.ours.append(f"{module.rpartition('.')[2]}.{func.__qualname__}"
                             if module.startswith("placement_gym.") else None)
            named = [name for name in self.ours if name]
            progress("compiling numba kernels", self.done, None, named[-1] if named else "")

        def on_end(self, ev: Any) -> None:
            self.depth -= 1
            self.done += self.ours.pop() is not None
            if self.depth == 0:  # the command runs on: its lines keep the first run from looking hung
                progress(f"compiled {self.done} numba kernels (cached now); running")

    return CompileListener()


class _AfterImport(importlib.abc.MetaPathFinder):
    """Calls ``then`` right after the top-level module ``name`` is imported, so that a command that never
    runs a kernel does not pay numba's import (0.4 s) for its progress."""

    def __init__(self, name: str, then: Callable[[], None]) -> None:
        self.name, self.then = name, then

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> Any:
        if fullname != self.name:
            return None
        sys.meta_path.remove(self)  # before the search below, which would ask this finder again
        spec = importlib.util.find_spec(fullname)
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return spec
        run, then = spec.loader.exec_module, self.then

        def exec_module(module: Any) -> None:
            run(module)
            then()

        spec.loader.exec_module = exec_module  # type: ignore[method-assign]  # this spec's own loader
        return spec


@contextmanager
def compile_progress() -> Iterator[None]:
    """Around a command that may run a kernel: the notice (`announce_compile`) and, where a kernel is
    not cached, progress lines on stderr while numba compiles (see the module docstring)."""
    announce_compile()
    cold = cold_kernels()
    if not cold:
        yield
        return
    from placement_gym.common.progress import Progress

    with Progress() as progress:
        listener = None

        def register() -> None:
            nonlocal listener
            from numba.core import event

            listener = _compile_listener(progress, cold)
            event.register("numba:compile", listener)

        finder = _AfterImport("numba", register)
        if "numba" in sys.modules:
            register()
        else:
            sys.meta_path.insert(0, finder)
        try:
            yield
        finally:
            if finder in sys.meta_path:
                sys.meta_path.remove(finder)
            if listener is not None:
                from numba.core import event

                event.unregister("numba:compile", listener)
