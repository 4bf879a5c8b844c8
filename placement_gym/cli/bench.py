"""The benchmark library's former place: it is `placement_gym.benchmarks`, one module per theme. Its
names still import from here, each with a DeprecationWarning naming its module."""

from __future__ import annotations

import importlib
import warnings
from typing import Any

_MODULES: dict[str, tuple[str, ...]] = {
    "machine": ("load_average", "machine_description", "describe_machine", "describe_load"),
    "timing": ("bench_placements",),
    "simulators": ("DEFAULT_BATCH", "BenchRow", "bench_task"),
    "moves": ("move_ceiling", "one_op_moves", "incremental_ceiling", "CUTOFF_REPEATS", "cutoff_speedup",
              "start_placement", "start_agent"),
    "against": ("AGAINST_SCRIPT", "AGAINST_ROUNDS", "AgainstRunner", "compare_against"),
    "targets": ("TARGET_RATIO", "TARGET_LARGE_PER_OP", "TARGET_BATCH_GAIN", "WHY_RATIO", "WHY_LARGE_PER_OP",
                "WHY_BATCH_GAIN", "BenchTarget", "bench_targets"),
    "cost_model": ("BENCH_CLUSTER", "BENCH_OBJECTIVE", "DEFAULT_SIZES", "bench_cases", "build_case",
                   "run_bench"),
    "onnx_import": ("DEFAULT_IMPORT_SIZES", "ImportRow", "bench_import", "run_import_bench"),
    "startup": ("STARTUP_COMMANDS", "STARTUP_TARGETS", "StartupRow", "bench_startup_command",
                "run_startup_bench"),
}
MOVED: dict[str, str] = {name: f"placement_gym.benchmarks.{module}"
                         for module, names in _MODULES.items() for name in names}


def __getattr__(name: str) -> Any:
    """A name of the benchmark library from its new module, with a DeprecationWarning naming it."""
    module = MOVED.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    warnings.warn(f"placement_gym.cli.bench.{name} is deprecated; import it from {module}",
                  DeprecationWarning, stacklevel=2)
    return getattr(importlib.import_module(module), name)
