"""Printing results: one table helper for every subcommand (rich when installed, else aligned text)
and JSON that is always valid (no NaN or infinity)."""

from __future__ import annotations

import json
import math
import sys
from collections.abc import Sequence
from typing import Any, TextIO


def _rich_console(stream: TextIO):
    """A rich Console on ``stream``, or None when rich (the viz extra) is not installed."""
    try:
        from rich.console import Console
    except ImportError:
        return None
    # Wide enough for the numeric columns when output is piped; rich wraps long text cells.
    return Console(file=stream, width=None if stream.isatty() else 160, soft_wrap=False)


def print_table(
    columns: Sequence[str],
    rows: Sequence[Sequence[Any]],
    title: str | None = None,
    numeric: Sequence[bool] | None = None,
    header: bool = True,
    stream: TextIO | None = None,
) -> None:
    """Print ``rows`` (already formatted as strings or numbers) under ``columns``.

    ``numeric`` says which columns are right-aligned (default: those whose cells are all numbers);
    ``header=False`` hides the column names (key-value tables)."""
    stream = sys.stdout if stream is None else stream
    cells = [[str(cell) for cell in row] for row in rows]
    if numeric is None:
        numeric = [all(isinstance(row[i], (int, float)) for row in rows) if rows else False
                   for i in range(len(columns))]
    console = _rich_console(stream)
    if console is not None:
        from rich.table import Table

        table = Table(title=title, title_justify="left", show_header=header)
        for name, right in zip(columns, numeric):
            table.add_column(name, justify="right" if right else "left", overflow="fold")
        from rich.text import Text

        for row in cells:
            # Text, not str: rich would read "[...]" in a cell (an op name in a submission, say) as markup.
            table.add_row(*(Text(cell) for cell in row))
        console.print(table)
        return
    widths = [max([len(name)] + [len(row[i]) for row in cells]) for i, name in enumerate(columns)]

    def line(values: Sequence[str]) -> str:
        parts = [v.rjust(w) if right else v.ljust(w) for v, w, right in zip(values, widths, numeric)]
        return "  ".join(parts).rstrip()

    if title:
        print(title, file=stream)
    if header:
        print(line(list(columns)), file=stream)
        print("  ".join("-" * w for w in widths).rstrip(), file=stream)
    for row in cells:
        print(line(row), file=stream)


def _finite(value: Any) -> Any:
    """JSON has no NaN/infinity: such floats become None (recursively)."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {key: _finite(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(item) for item in value]
    return value


def print_json(data: Any, stream: TextIO | None = None) -> None:
    """Print ``data`` as indented, strictly valid JSON."""
    print(json.dumps(_finite(data), indent=2, allow_nan=False), file=sys.stdout if stream is None else stream)


def fmt_bytes(value: float) -> str:
    """Bytes in GB (decimal, as the datasheets quote memory) or MB for small values."""
    return f"{value / 1e9:.2f} GB" if abs(value) >= 1e8 else f"{value / 1e6:.1f} MB"


def fmt_seconds(value: float) -> str:
    """A duration in ms (or s above 10 s)."""
    return f"{value:.2f} s" if value >= 10 else f"{value * 1e3:.3f} ms"
