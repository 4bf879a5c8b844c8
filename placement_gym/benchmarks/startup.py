"""How long a user waits for a command: the wall time of a fresh process running it, cold (empty
caches) and warm (`run_startup_bench`, `StartupRow`)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from placement_gym.benchmarks.rows import BenchmarkRow

# `bench --startup`: the wall time a user waits for a command, each run a fresh process as a user starts it.
# name -> the command's arguments, and the exit code it must end with.
STARTUP_COMMANDS: dict[str, tuple[tuple[str, ...], int]] = {
    "help": (("--help",), 0),
    "evaluate": (("evaluate", "--graph", "inception_v3", "--agent", "heft"), 0),
    "unknown-graph": (("evaluate", "--graph", "inceptionv3", "--agent", "heft"), 2),
}
# The targets, warm, on an idle 2-core machine (seconds of wall time): what a user waits for without
# noticing a wait (help), for a first result (evaluate), and for an error on a misspelled name.
STARTUP_TARGETS: dict[str, float] = {"help": 0.5, "evaluate": 2.0, "unknown-graph": 1.0}


@dataclass(frozen=True)
class StartupRow(BenchmarkRow):
    """One command of `STARTUP_COMMANDS`: ``cold_s``, the wall seconds of its first run with numba's
    cache and the package's caches empty (fresh ``NUMBA_CACHE_DIR`` and ``PLACEMENT_GYM_OUTPUT``
    folders: kernels compile, bundled graphs are imported from ONNX); ``warm_s``, the least and
    ``warm_median_s`` the median wall seconds of the runs after it (same folders, caches filled);
    ``exit_code`` of the last run and whether it is the expected one (``ok``)."""

    name: str
    command: str
    cold_s: float
    warm_s: float
    warm_median_s: float
    warm_runs: int
    target_s: float
    exit_code: int
    ok: bool


def _run_cli(args: Sequence[str], env: dict[str, str]) -> tuple[float, int]:
    """Wall seconds and exit code of ``python -m placement_gym <args>`` in a fresh process (what the
    ``placement-gym`` script runs), its output discarded."""
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "placement_gym", *args], env=env, stdin=subprocess.DEVNULL,
                          stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
    return time.perf_counter() - start, done.returncode


def bench_startup_command(name: str, warm_runs: int, directory: str | os.PathLike) -> StartupRow:
    """Time command ``name`` of `STARTUP_COMMANDS` once cold and ``warm_runs`` times warm, its caches in
    fresh folders under ``directory`` (`StartupRow`). Python's bytecode and the operating system's file
    cache stay as they are: cold here is a first run after installing, not after a reboot."""
    args, expected = STARTUP_COMMANDS[name]
    env = dict(os.environ)
    env.update(NUMBA_CACHE_DIR=os.path.join(directory, name, "numba"),
               PLACEMENT_GYM_OUTPUT=os.path.join(directory, name, "output"), COLUMNS="80")
    cold, code = _run_cli(args, env)
    warm = []
    for _ in range(warm_runs):
        seconds, code = _run_cli(args, env)
        warm.append(seconds)
    return StartupRow(name, " ".join(("placement-gym", *args)), cold, min(warm), float(np.median(warm)),
                      warm_runs, STARTUP_TARGETS[name], code, code == expected)


def run_startup_bench(names: Sequence[str] | None = None, warm_runs: int = 3,
                      progress: Callable[[int, int, str, StartupRow | None], None] | None = None,
                      ) -> list[StartupRow]:
    """`bench_startup_command` of each of ``names`` (default: all of `STARTUP_COMMANDS`), in a temporary
    directory removed afterwards."""
    import tempfile

    names = list(STARTUP_COMMANDS) if names is None else list(names)
    unknown = [name for name in names if name not in STARTUP_COMMANDS]
    if unknown or not names or warm_runs < 1:
        raise ValueError(f"startup commands must be some of {', '.join(STARTUP_COMMANDS)} and the warm runs "
                         f"at least 1, got {', '.join(map(str, unknown or names)) or 'none'} and {warm_runs}")
    rows = []
    with tempfile.TemporaryDirectory(prefix="placement-gym-startup-") as directory:
        for i, name in enumerate(names):
            if progress is not None:
                progress(i, len(names), name, None)
            rows.append(bench_startup_command(name, warm_runs, directory))
            if progress is not None:
                progress(i, len(names), name, rows[-1])
    return rows
