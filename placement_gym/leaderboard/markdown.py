"""Markdown for the leaderboard pages: escaped text, code spans, tables (one way to write each)."""

from __future__ import annotations

import re

# Text that is safe inside a Markdown code span as it is (task ids, dataset task ids such as
# ``synthetic-v1:regal-5/k80x4/train``, file names, suite versions): no backtick, no "|", no space.
_CODE_SAFE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._/+:-]*")
# Characters that start Markdown markup inside a table cell: escaped with a backslash.
_MARKDOWN_PUNCTUATION = re.compile(r"([\\`*_\[\]|~])")


def markdown_text(value: object) -> str:
    """``value`` as plain text inside a Markdown table cell: on one line, with HTML special characters
    as entities and Markdown punctuation (links, emphasis, code, cell separators) backslash-escaped, so
    that a submission's text shows as written and carries no markup into the README."""
    text = " ".join(str(value).split())
    text = text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    return _MARKDOWN_PUNCTUATION.sub(r"\\\1", text)


def code_span(value: object) -> str:
    """A name in a code span when its characters allow it, else as escaped plain text."""
    text = str(value)
    return f"`{text}`" if _CODE_SAFE.fullmatch(text) else markdown_text(text)


def markdown_table(columns: list[str], rows: list[list[str]], right: list[bool]) -> list[str]:
    lines = ["| " + " | ".join(columns) + " |", "|" + "|".join("---:" if r else "---" for r in right) + "|"]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return lines


def file_list(sources: tuple[str, ...]) -> str:
    return ", ".join(code_span(name) for name in sources)


def pretraining_text(submissions: tuple[dict, ...]) -> str:
    """The pre-training compute of an entry's submissions (each seed its own): evaluations and wall
    time (a range when the seeds differ), who counted them and the machine."""
    values = [d.get("pretraining") or {} for d in submissions]
    evaluations = sorted(v.get("evaluations", 0) for v in values)
    walls = sorted(float(v.get("wall_s", 0.0)) for v in values)
    if not evaluations[-1] and not walls[-1]:
        return "none"
    span = (f"{evaluations[0]:,}" if evaluations[0] == evaluations[-1]
            else f"{evaluations[0]:,}–{evaluations[-1]:,}")
    wall = f"{walls[0]:.0f}" if round(walls[0]) == round(walls[-1]) else f"{walls[0]:.0f}–{walls[-1]:.0f}"
    counted = sorted({v.get("counted", "declared") for v in values})
    machines = sorted({v.get("machine", "") for v in values})
    return markdown_text(f"{span} evaluations, {wall} s ({'/'.join(counted)}; {'; '.join(machines)})")
