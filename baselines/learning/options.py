"""The one check of the learned agents' numeric options: a clear ValueError naming the option and what
is allowed.

The rule, for every agent and every option: a number is a Python or numpy integer or float, never a
bool (``True`` is not a learning rate), and finite; an integer option takes only Python or numpy
integers (``2.0`` is not a batch size). Bounds are inclusive unless ``open_low`` / ``open_high``."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

_INTEGERS = (int, np.integer)
_NUMBERS = (int, float, np.integer, np.floating)


def _bound(low: float | None, high: float | None, open_low: bool, open_high: bool) -> str:
    if low is not None and high is not None:
        return f"in {'(' if open_low else '['}{low:g}, {high:g}{')' if open_high else ']'}"
    if low is not None:
        return f"{'>' if open_low else '>='} {low:g}"
    if high is not None:
        return f"{'<' if open_high else '<='} {high:g}"
    return ""


def _finite(value: Any) -> bool:
    try:
        return math.isfinite(value)
    except OverflowError:  # an int too large for a float
        return False


def check_number(
    name: str,
    value: Any,
    low: float | None = None,
    high: float | None = None,
    *,
    integer: bool = False,
    open_low: bool = False,
    open_high: bool = False,
) -> Any:
    """``value`` as an int (``integer``) or a float, or a ValueError naming ``name`` and the allowed
    values unless it is a number (module docstring) within ``low`` and ``high``."""
    ok = isinstance(value, _INTEGERS if integer else _NUMBERS) and not isinstance(value, (bool, np.bool_))
    ok = ok and (integer or _finite(value))
    ok = ok and (low is None or (value > low if open_low else value >= low))
    ok = ok and (high is None or (value < high if open_high else value <= high))
    if not ok:
        what = "an integer" if integer else "a finite number"
        bound = _bound(low, high, open_low, open_high)
        raise ValueError(f"{name} must be {what}{' ' if bound else ''}{bound}, got {value!r}")
    return int(value) if integer else float(value)
