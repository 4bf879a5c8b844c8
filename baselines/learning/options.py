"""Checks of the learned agents' options: a clear ValueError naming the option and what is allowed."""

from __future__ import annotations

import numpy as np


def check_int(name: str, value, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < minimum:
        raise ValueError(f"{name} must be an integer >= {minimum}, got {value!r}")
    return int(value)


def check_float(name: str, value, low: float, high: float = float("inf"), open_low: bool = False) -> float:
    ok = isinstance(value, (int, float, np.floating)) and not isinstance(value, bool)
    ok = ok and np.isfinite(value) and (value > low if open_low else value >= low) and value <= high
    if not ok:
        bound = f"{'>' if open_low else '>='} {low}" + (f" and <= {high}" if high != float("inf") else "")
        raise ValueError(f"{name} must be a number {bound}, got {value!r}")
    return float(value)


def check_positive(name: str, value, integer: bool = False, allow_zero: bool = False) -> None:
    """A ValueError naming ``name`` unless ``value`` is a positive (or >= 0) number / integer."""
    kind = (int, np.integer) if integer else (int, float, np.integer, np.floating)
    ok = isinstance(value, kind) and not isinstance(value, bool) and np.isfinite(value)
    if not ok or value < 0 or (value == 0 and not allow_zero):
        what = "integer" if integer else "number"
        bound = ">= 0" if allow_zero else "> 0"
        raise ValueError(f"{name} must be a finite {what} {bound}, got {value!r}")
