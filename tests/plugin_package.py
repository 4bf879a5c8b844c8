"""A third-party package made in a test's temporary folder: a module and the dist-info an installer
writes for it (its entry points), put on ``sys.path`` so that `importlib.metadata` finds it as it finds
an installed package, in this process and in a subprocess given `subprocess_env`."""

from __future__ import annotations

import os
import textwrap
from pathlib import Path


def install_package(folder: Path, monkeypatch, name: str, source: str, entry_points: dict[str, str]) -> Path:
    """Write module ``name`` (``source``) and its dist-info into ``folder``, whose ``entry_points``
    map an entry-point group to its lines (``"tiny = module:provider"``); put ``folder`` on sys.path
    (undone after the test by ``monkeypatch``) and return it."""
    (folder / f"{name}.py").write_text(textwrap.dedent(source), encoding="utf-8")
    dist = folder / f"{name}-0.1.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 0.1\n", encoding="utf-8")
    groups = "".join(f"[{group}]\n{line}\n" for group, line in entry_points.items())
    (dist / "entry_points.txt").write_text(groups, encoding="utf-8")
    monkeypatch.syspath_prepend(str(folder))
    return folder


def subprocess_env(folder: Path) -> dict[str, str]:
    """This process's environment with ``folder`` first on PYTHONPATH, for a subprocess that must find
    the package too."""
    return {**os.environ, "PYTHONPATH": os.pathsep.join([str(folder), os.environ.get("PYTHONPATH", "")])}
