"""The base of every benchmark's row."""

from __future__ import annotations

from dataclasses import asdict
from typing import Any


class BenchmarkRow:
    """A benchmark's row (each subclass a frozen dataclass): `to_dict` is the row as the JSON object
    ``placement-gym bench --json`` prints."""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)  # type: ignore[call-overload]
