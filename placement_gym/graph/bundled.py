"""The graphs bundled with placement-gym: weight-free ONNX files listed in ``manifest.json``.

In an installed wheel they live in ``placement_gym/_graphs/`` (see pyproject's force-include); in a
source checkout or an editable install, in ``<repo>/graphs/``.

Importing onnx (and ml_dtypes through it) costs a second or more, so a bundled graph, once imported, is
kept as a stored graph (`placement_gym.graph.stored`) under ``$PLACEMENT_GYM_OUTPUT/cache/graphs/``: a
later process reads it in milliseconds without importing onnx. Its name holds the ONNX file's sha256
(checked against the manifest before every use) and a fingerprint of the importer (the sources of this
folder, the onnx and numpy versions), so a changed file or importer never reads a stale graph; reading
checks the stored content hash, and a file that fails it is imported again.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import sys
import warnings
from importlib import metadata
from pathlib import Path
from typing import Any

from placement_gym.common.names import unknown_name
from placement_gym.common.paths import is_file, output_root
from placement_gym.graph.opgraph import OpGraph
from placement_gym.graph.stored import read_graph, write_graph

_PACKAGE_DIR = Path(__file__).resolve().parent.parent


def _bundled_graphs_dir() -> Path:
    installed = _PACKAGE_DIR / "_graphs"
    return installed if installed.is_dir() else _PACKAGE_DIR.parent / "graphs"


BUNDLED_GRAPHS_DIR: Path = _bundled_graphs_dir()
MANIFEST_FILE = "manifest.json"


def manifest() -> dict[str, Any]:
    """The parsed ``manifest.json`` of the bundled graphs ({} when there is none)."""
    path = BUNDLED_GRAPHS_DIR / MANIFEST_FILE
    if not path.is_file():
        return {}
    return json.loads(path.read_text())


def _entries() -> dict[str, dict[str, Any]]:
    """Manifest entries by graph name (the manifest keeps them under "graphs", as a dict or a list)."""
    data = manifest()
    graphs = data.get("graphs", data)
    if isinstance(graphs, list):
        return {entry["name"]: entry for entry in graphs}
    return {name: entry for name, entry in graphs.items() if isinstance(entry, dict)}


def bundled_graph_names() -> list[str]:
    """Names of the bundled graphs, sorted."""
    return sorted(_entries())


def _bundled_file(name: str, entry: dict[str, Any]) -> Path:
    return BUNDLED_GRAPHS_DIR / entry.get("file", f"{name}.onnx")


def bundled_onnx_file(graph: OpGraph) -> Path | None:
    """The bundled ONNX file ``graph`` was imported from: the file of its name, when it exists and
    has the graph's sha256 (a graph without one matches by name); None otherwise."""
    entry = _entries().get(graph.name)
    if entry is None:
        return None
    path = _bundled_file(graph.name, entry)
    if path.is_file() and (not graph.sha256 or graph.sha256 == entry.get("sha256", graph.sha256)):
        return path
    return None


@functools.cache
def importer_fingerprint() -> str:
    """A digest of what decides the graph an ONNX file imports to: the sources of this folder (the importer
    and the cost formulas) and the onnx, numpy and Python versions."""
    digest = hashlib.sha256()
    for source in sorted(Path(__file__).resolve().parent.glob("*.py")):
        digest.update(source.name.encode() + b"\0" + source.read_bytes() + b"\0")
    for package in ("onnx", "numpy"):
        try:
            digest.update(f"{package}={metadata.version(package)};".encode())
        except metadata.PackageNotFoundError:
            digest.update(f"{package}=?;".encode())
    digest.update(f"python={sys.version_info[:2]}".encode())
    return digest.hexdigest()[:16]


def bundled_cache_dir() -> Path:
    """Where imported bundled graphs are kept (see the module's docstring)."""
    return output_root() / "cache" / "graphs"


def _cached_path(name: str, sha256: str) -> Path:
    return bundled_cache_dir() / f"{name}-{sha256[:16]}-{importer_fingerprint()}.npz"


def _file_sha256(path: Path) -> str | None:
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest()
    except OSError:
        return None


def _read_cached(name: str, path: Path, expected: str) -> OpGraph | None:
    """The stored import of bundled graph ``name``, when its ONNX file still has the manifest's sha256
    and a cache file for that sha256 and this importer holds it whole; None otherwise."""
    if not expected or _file_sha256(path) != expected:
        return None
    cached = _cached_path(name, expected)
    if not cached.is_file():
        return None
    try:
        graph, _ = read_graph(cached)
    except ValueError:  # damaged: imported again and rewritten below
        return None
    return graph if graph.name == name and graph.sha256 == expected else None


def _import_bundled(name: str, path: Path, expected: str) -> OpGraph:
    """Import the bundled ONNX file (imports onnx) and keep it in the cache when it has the manifest's
    sha256 ``expected`` and the import said nothing (a warning is shown again, never cached away)."""
    from placement_gym.graph.onnx_import import graph_from_onnx

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        graph = graph_from_onnx(path, name=name)
    for warning in caught:
        warnings.warn_explicit(warning.message, warning.category, warning.filename, warning.lineno)
    if not caught and expected and graph.sha256 == expected:
        try:
            write_graph(graph, _cached_path(name, graph.sha256))
        except OSError:  # a read-only or full output folder: the next process imports again
            pass
    return graph


@functools.cache  # lru_cache without a bound: one entry per bundled graph
def _load_bundled(name: str) -> OpGraph:
    entry = _entries()[name]
    path = _bundled_file(name, entry)
    expected = entry.get("sha256")
    graph = _read_cached(name, path, expected or "")
    if graph is not None:
        return graph
    graph = _import_bundled(name, path, expected or "")
    if expected and graph.sha256 != expected:
        raise ValueError(
            f"bundled graph {name!r} ({_bundled_file(name, entry)}) does not match the sha256 in "
            f"{MANIFEST_FILE}: the file was modified; regenerate the bundled graphs"
        )
    return graph


@functools.lru_cache(maxsize=32)
def _load_file(path: Path, mtime_ns: int, size: int) -> OpGraph:
    from placement_gym.graph.onnx_import import graph_from_onnx

    return graph_from_onnx(path)


def is_bundled_graph(graph: OpGraph) -> bool:
    """Whether ``graph`` is the bundled graph of its name: same name, imported from a file with the
    bundled file's sha256, and the same content (`OpGraph.content_sha256`: a graph re-imported at
    another batch keeps the file's sha256 but not its content). Task ids give such a graph its
    plain name; any other graph, even one named like a bundled graph, carries its content hash."""
    entry = _entries().get(graph.name)
    if entry is None or graph.sha256 != entry.get("sha256", graph.sha256) or not graph.sha256:
        return False  # the sha256 test first: it needs no import of the bundled file
    bundled = _load_bundled(graph.name)
    return graph is bundled or graph.content_sha256 == bundled.content_sha256


def load_graph(name_or_path: str | Path) -> OpGraph:
    """A bundled graph by name (see `bundled_graph_names`), or any ONNX file by path.

    Graphs are immutable and cached: a bundled name once per process, a file until it changes.
    """
    if not isinstance(name_or_path, (str, os.PathLike)):
        raise ValueError(
            f"graph must be a bundled graph name or the path to an .onnx file, got {name_or_path!r} "
            f"({type(name_or_path).__name__})"
        )
    entries = _entries()
    if isinstance(name_or_path, str) and name_or_path in entries:
        return _load_bundled(name_or_path)
    path = Path(name_or_path)
    if is_file(path):
        stat = path.stat()
        return _load_file(path.resolve(), stat.st_mtime_ns, stat.st_size)
    names = ", ".join(sorted(entries)) or "(none found in " + str(BUNDLED_GRAPHS_DIR) + ")"
    # A path-like argument (a folder or suffix in it) is a missing file, not a misspelled name.
    looks_like_path = isinstance(name_or_path, Path) or "/" in str(name_or_path) or "." in str(name_or_path)
    raise ValueError(unknown_name(
        "graph", str(name_or_path), [] if looks_like_path else entries,
        f"a bundled graph name ({names}) or the path to an existing .onnx file",
    ))
