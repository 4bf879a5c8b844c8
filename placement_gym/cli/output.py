"""Printing results: one table helper for every subcommand (rich when installed, else aligned text),
each table and line fitted to the terminal's width, and JSON that is always valid (no NaN or infinity)."""

from __future__ import annotations

import json
import math
import re
import shutil
import sys
import textwrap
from collections.abc import Sequence
from typing import Any, TextIO

# Narrower than this, a table of several columns cannot be read however it is wrapped.
MIN_WIDTH = 40
# Where an id (``inception_v3/k80x4/train``) may break when its column must be narrower than the id.
ID_SEPARATOR = "/"
# A text cell wrapped narrower than this many characters reads poorly: a table drops its frame first.
TEXT_WIDTH = 24


def output_width() -> int:
    """The columns output may use: the terminal's (``COLUMNS`` when set), 80 when stdout is not a
    terminal (`shutil.get_terminal_size`'s fallback), never under `MIN_WIDTH`."""
    return max(shutil.get_terminal_size((80, 24)).columns, MIN_WIDTH)


def print_text(text: str, stream: TextIO | None = None, indent: str = "  ") -> None:
    """Print ``text`` wrapped to `output_width` at spaces (a path or id longer than a line stays
    whole), continuation lines indented by ``indent``."""
    stream = sys.stdout if stream is None else stream
    for line in text.splitlines() or [""]:
        print(textwrap.fill(line, output_width(), subsequent_indent=indent, break_long_words=False,
                            break_on_hyphens=False) if line.strip() else "", file=stream)


def _whole(cells: Sequence[str], numeric: bool) -> bool:
    """Whether a column is of names or numbers (no cell has a space), which are never broken
    mid-name, or of text, which wraps at spaces."""
    return numeric or not any(" " in cell for cell in cells)


def _text_room(cells: list[list[str]], numeric: Sequence[bool]) -> int:
    """The columns that text cells want beyond their longest word to read well (a line of up to
    `TEXT_WIDTH` characters), summed over the text columns: a layout is chosen only with that room."""
    room = 0
    for i, right in enumerate(numeric):
        column = [row[i] for row in cells]
        if not _whole(column, right):
            longest_word = max(len(word) for cell in column for word in cell.split() or [""])
            room += max(0, min(max(map(len, column)), TEXT_WIDTH) - longest_word)
    return room


def _split_id(cell: str) -> str:
    """``a/b/c`` as ``a/``, ``b/``, ``c`` on lines of their own."""
    return f"{ID_SEPARATOR}\n".join(cell.split(ID_SEPARATOR))


def _header(name: str, cells: Sequence[str]) -> str:
    """The header of a name column wrapped at spaces and hyphens to the column's cells (no narrower
    than its longest word), since such a column is as wide as its longest cell and no wider."""
    pieces = re.findall(r"[^\s-]+-?", name)  # textwrap breaks at spaces and after hyphens
    width = max([len(line) for cell in cells for line in cell.splitlines()] + [len(p) for p in pieces],
                default=1)
    return "\n".join(textwrap.wrap(name, width)) or name


def _rich_table(columns: Sequence[str], cells: list[list[str]], numeric: Sequence[bool], title: str | None,
                header: bool, gap: int, short_headers: bool, split: bool, whole_words: bool = True):
    """A rich Table of the cells: boxed (``gap`` 3), or without a frame and ``gap`` spaces between
    columns; ``short_headers`` wraps the headers of name columns; ``split`` breaks the cells of
    name columns at `ID_SEPARATOR`; ``whole_words``: a text column no narrower than its longest word."""
    from rich import box
    from rich.table import Table
    from rich.text import Text

    framed = gap == 3
    table = Table(title=title, title_justify="left", show_header=header,
                  box=box.HEAVY_HEAD if framed else box.SIMPLE_HEAD, show_edge=framed, pad_edge=framed,
                  padding=(0, 1) if framed else (0, gap - 1, 0, 0))
    columns_cells = []
    for i, (name, right) in enumerate(zip(columns, numeric)):
        column = [row[i] for row in cells]
        whole = _whole(column, right)
        if split and whole:
            column = [_split_id(cell) for cell in column]
        columns_cells.append(column)
        # Name columns are no_wrap, so that rich narrows the text columns, never them (rich would
        # narrow the widest column first, a column of task ids, and then fold every id).
        heading = _header(name, column) if whole and short_headers else name
        if whole:
            # rich measures a header as if it wrapped, but crops a no_wrap column to that: its true width
            min_width: int | None = max(len(line) for text in (*column, heading)
                                        for line in text.splitlines())
        else:
            min_width = max((len(word) for cell in column for word in cell.split()), default=1)
        table.add_column(heading, justify="right" if right else "left", overflow="fold", no_wrap=whole,
                         min_width=min_width if whole or whole_words else None)
    for row in zip(*columns_cells):
        # Text, not str: rich would read "[...]" in a cell (an op name in a submission, say) as markup.
        table.add_row(*(Text(cell) for cell in row))
    return table


def _print_rich(columns: Sequence[str], cells: list[list[str]], numeric: Sequence[bool], title: str | None,
                header: bool, stream: TextIO) -> bool:
    """Print with rich, in the first layout whose narrowest form (with `_text_room`) fits
    `output_width`: boxed, then boxed with wrapped headers, then unframed with two spaces between
    columns, then one, then without the text's room, then names broken at `ID_SEPARATOR` (rich
    folds what still does not fit: no line is wider than the output). False without rich (the viz
    extra)."""
    try:
        from rich.console import Console
        from rich.measure import Measurement
    except ImportError:
        return False
    width = output_width()
    console = Console(file=stream, width=width, soft_wrap=False, highlight=False)
    room = _text_room(cells, numeric)
    # Whole names come first, then room for the text, then a frame.
    # Words of text cells stay whole in every layout but the last, which folds what still does not fit.
    layouts = ((3, False, False, room, True), (3, True, False, room, True), (2, True, False, room, True),
               (1, True, False, room, True), (1, True, False, 0, True), (1, True, True, room, True),
               (1, True, True, 0, True), (1, True, True, 0, False))
    for gap, short_headers, split, wanted, whole_words in layouts:
        table = _rich_table(columns, cells, numeric, title, header, gap, short_headers, split, whole_words)
        # Measured unbounded: rich clamps a measurement to the width it is given.
        if Measurement.get(console, console.options.update(max_width=10**6), table).minimum + wanted <= width:
            break
    console.print(table)
    return True


def _print_plain(columns: Sequence[str], cells: list[list[str]], numeric: Sequence[bool], title: str | None,
                 header: bool, stream: TextIO) -> None:
    """Aligned text without rich: text columns narrowed (widest first) and wrapped until the table
    fits `output_width`, names broken at `ID_SEPARATOR` only when it still does not."""
    width = output_width()
    rows = [list(columns), *cells] if header else cells
    whole = [_whole([row[i] for row in cells], numeric[i]) for i in range(len(columns))]
    if sum(max(len(row[i]) for row in rows) + 2 for i in range(len(columns))) > width:
        rows = [[_split_id(cell) if whole[i] else cell for i, cell in enumerate(row)] for row in rows]
    widths = [max(len(line) for row in rows for line in row[i].splitlines() or [""])
              for i in range(len(columns))]
    floor = [max(widths[i] if whole[i] else 8, 1) for i in range(len(columns))]
    while sum(widths) + 2 * (len(widths) - 1) > width:
        i = max(range(len(widths)), key=lambda i: widths[i] - floor[i])
        if widths[i] <= floor[i]:
            break
        widths[i] -= 1
    if title:
        print_text(title, stream)
    for number, row in enumerate(rows):
        wrapped = [textwrap.wrap(cell, w) if not whole[i] else cell.splitlines()
                   for i, (cell, w) in enumerate(zip(row, widths))]
        for k in range(max(len(lines) for lines in wrapped) or 1):
            parts = [(lines[k] if k < len(lines) else "") for lines in wrapped]
            print("  ".join(v.rjust(w) if right else v.ljust(w)
                            for v, w, right in zip(parts, widths, numeric)).rstrip(), file=stream)
        if header and number == 0:
            print("  ".join("-" * w for w in widths).rstrip(), file=stream)


def print_table(
    columns: Sequence[str],
    rows: Sequence[Sequence[Any]],
    title: str | None = None,
    numeric: Sequence[bool] | None = None,
    header: bool = True,
    stream: TextIO | None = None,
) -> None:
    """Print ``rows`` (already formatted as strings or numbers) under ``columns``, fitted to
    `output_width`: text cells wrap at spaces; names and numbers (cells without a space) stay whole,
    an id such as ``inception_v3/k80x4/train`` breaking only after a ``/``.

    ``numeric`` says which columns are right-aligned (default: those whose cells are all numbers);
    ``header=False`` hides the column names (key-value tables)."""
    stream = sys.stdout if stream is None else stream
    cells = [[str(cell) for cell in row] for row in rows]
    if numeric is None:
        numeric = [all(isinstance(row[i], (int, float)) for row in rows) if rows else False
                   for i in range(len(columns))]
    if not _print_rich(columns, cells, numeric, title, header, stream):
        _print_plain(columns, cells, numeric, title, header, stream)


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
