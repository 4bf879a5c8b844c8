"""Datasets shipped built: the graphs of a dataset that needs torch to build (the architectures), packed
once by a maintainer into ``placement_gym/datasets/built/<name>.zip`` and read from there, so that an
env over ``architectures-v1`` starts in seconds on a machine without torch.

An archive holds ``manifest.json`` (the manifest's exact bytes) and ``graphs/<id>.npz`` (the file
`placement_gym.graph.stored.write_graph` writes, its arrays stored as they are: the archive compresses
each member with LZMA, some half the size of compressing each array alone). Nothing in it is trusted
for being there: `placement_gym.datasets.dataset.Dataset` takes the manifest only when its digest is
the one frozen in the code, and a graph only when its content hash is its manifest row's, so that an
edited or damaged archive is read as no archive (the graph is exported again, with torch) and never
gives another graph. Sizes are read from the archive's directory and bounded before anything is
unpacked. `pack` writes an archive; `placement-gym datasets --build NAME` builds the dataset again
without it and checks it, whole or on a sample (``--sample``).
"""

from __future__ import annotations

import os
import zipfile
from collections.abc import Iterable
from pathlib import Path

BUILT_DIR = Path(__file__).with_name("built")
MANIFEST_MEMBER = "manifest.json"
MAX_MEMBER_BYTES = 2**30  # unpacked: the largest graph of a shipped dataset is some 10 MB
MAX_MEMBERS = 100_000


def archive_path(name: str) -> Path:
    """Where dataset ``name``'s archive ships (whether or not it does)."""
    return BUILT_DIR / f"{name}.zip"


def has_archive(name: str) -> bool:
    """Whether dataset ``name`` ships built (a regular file at `archive_path`)."""
    return archive_path(name).is_file()


def _graph_member(graph_id: str) -> str:
    return f"graphs/{graph_id}.npz"


def read_member(name: str, member: str) -> bytes | None:
    """The unpacked bytes of ``member`` of dataset ``name``'s archive; None when there is no archive,
    no such member, or the archive is damaged or out of bounds (`MAX_MEMBERS`, `MAX_MEMBER_BYTES`).
    The archive is opened for each read: a handle kept open would share its file offset with the
    processes forked from this one (vector envs), and opening costs about a millisecond."""
    path = archive_path(name)
    try:
        with zipfile.ZipFile(path) as archive:
            if len(archive.infolist()) > MAX_MEMBERS:
                return None
            info = archive.getinfo(member)
            if info.file_size > MAX_MEMBER_BYTES:
                return None
            with archive.open(info) as handle:
                data = handle.read(MAX_MEMBER_BYTES + 1)  # the directory's size, not trusted either
    except (OSError, KeyError, ValueError, EOFError, zipfile.BadZipFile, NotImplementedError):
        return None  # NotImplementedError: a compression this Python lacks (lzma is optional in CPython)
    return data if len(data) <= MAX_MEMBER_BYTES else None


def manifest_bytes(name: str) -> bytes | None:
    """The shipped manifest of dataset ``name`` (not checked here), or None."""
    return read_member(name, MANIFEST_MEMBER)


def graph_bytes(name: str, graph_id: str) -> bytes | None:
    """The shipped graph file of ``graph_id`` (not checked here), or None."""
    return read_member(name, _graph_member(graph_id))


def pack(manifest: bytes, graphs: Iterable[tuple[str, bytes]], destination: str | os.PathLike) -> Path:
    """Write an archive of ``manifest`` and ``graphs`` (id, file bytes) to ``destination``, whole or not
    at all; members in the order given, each LZMA-compressed, with a fixed timestamp (the same graphs
    give the same archive, byte for byte)."""
    destination = Path(destination)
    temporary = destination.with_name(f".{destination.name}.{os.getpid()}.tmp")
    try:
        with zipfile.ZipFile(temporary, "w", zipfile.ZIP_LZMA) as archive:
            for member, data in ((MANIFEST_MEMBER, manifest), *((_graph_member(i), d) for i, d in graphs)):
                info = zipfile.ZipInfo(member, date_time=(2026, 1, 1, 0, 0, 0))
                info.compress_type = zipfile.ZIP_LZMA
                info.external_attr = 0o644 << 16
                archive.writestr(info, data)
        os.replace(temporary, destination)
    finally:
        temporary.unlink(missing_ok=True)
    return destination
