"""What a benchmark figure depends on: the machine (CPU model, cores, system) and its load."""

from __future__ import annotations

import os
import platform
from typing import Any


def _cpu_model() -> str:
    """The CPU's model name (Linux: /proc/cpuinfo), else what `platform` knows."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as info:
            for line in info:
                if line.lower().startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:  # not Linux: platform's answer below
        pass
    return platform.processor() or platform.machine() or "unknown CPU"


def load_average() -> tuple[float, float, float] | None:
    """The 1, 5 and 15 minute load averages, or None where the system has none (Windows)."""
    try:
        return tuple(float(x) for x in os.getloadavg())  # type: ignore[return-value]
    except (AttributeError, OSError):
        return None


def machine_description() -> dict[str, Any]:
    """What a bench figure depends on: ``cpu`` (model name), ``logical_cores`` (``os.cpu_count``),
    ``usable_cores`` (those this process may run on), ``system`` and ``load_average`` (1, 5, 15 min;
    None where unknown)."""
    logical = os.cpu_count() or 1
    try:
        usable = len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        usable = logical
    return {"cpu": _cpu_model(), "logical_cores": logical, "usable_cores": usable,
            "system": f"{platform.system()} {platform.release()}", "load_average": load_average()}


def describe_machine(machine: dict[str, Any]) -> str:
    """``machine: <cpu>, N logical cores (M usable), <system>``."""
    cores, logical = machine["usable_cores"], machine["logical_cores"]
    usable = "" if cores == logical else f" ({cores} usable)"
    return f"machine: {machine['cpu']}, {machine['logical_cores']} logical cores{usable}, {machine['system']}"


def describe_load(load: tuple[float, float, float] | None, cores: int) -> str:
    """``load average 0.21, 0.80, 1.10 (1, 5, 15 min) on 2 cores``, with a note when busy."""
    if load is None:
        return "load average: unknown on this system"
    busy = (" (busy: rates, the batched one most, are lower than on an idle machine)"
            if load[0] > 0.5 * cores else "")
    return f"load average {load[0]:.2f}, {load[1]:.2f}, {load[2]:.2f} (1, 5, 15 min) on {cores} cores{busy}"
