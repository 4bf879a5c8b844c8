"""Where the tests find the checkout's files, whatever folder of tests/ a module sits in."""

from __future__ import annotations

from pathlib import Path

TESTS = Path(__file__).resolve().parent
"""The tests/ folder: conftest.py, the shared helpers and fixtures/."""
ROOT = TESTS.parent
"""The checkout's root: README.md, docs/, examples/, graphs/, placement_gym/, pyproject.toml."""
