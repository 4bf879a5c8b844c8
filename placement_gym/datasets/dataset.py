"""Named, versioned datasets of graphs, each graph with a stable id, a manifest row and a split.

A dataset is a list of families, each with a grid of parameters and a number of graphs: graph ``k`` of a
family takes the grid's point ``k mod len(grid)`` and seed ``k``, and its id is ``<family>-<k>``
(``regal-17``); outside the dataset it is named ``<dataset>:<family>-<k>`` (``synthetic-v1:regal-17``: a
graph name `placement_gym.task.named.get_task` and the envs take). A grid is one product of parameter
values or a tuple of them (their points one after the other); a family whose graphs depend on their
parameters alone (the architectures) has one graph per point (``count`` None), no two alike.
Building graph ``k`` again gives the same graph, bit for bit, so the dataset itself ships as this
definition: nothing is downloaded. A synthetic graph is built again each time it is asked for
(milliseconds; `Dataset.graph`); an architecture's graph, whose export takes seconds, is built on first
use and kept as ``<output root>/datasets/<name>/graphs/<id>.npz`` (`placement_gym.graph.stored`), read
back in milliseconds.

The manifest (one row a graph: id, family, parameters, seed, ops, edges, parameters' elements, the
bytes of its tensors, the content hash of its `OpGraph`, its split) needs every graph built once: the
first `Dataset.manifest` builds it (with a progress bar on a terminal), caches it as
``<output root>/datasets/<name>/manifest.json`` (the output root: ``$PLACEMENT_GYM_OUTPUT``, else
``~/placement-gym-output``) and checks its digest against the one frozen here (``manifest_sha256``),
so a build on another machine or numpy (or torch and onnxscript, for the architectures) that would give
other graphs is an error, not a silent drift.

Splits, fixed by the definition (no graph is in two):

* ``test-families``: every graph of the held-out families (no such family has a graph in ``train``);
* ``test-sizes``: the graphs of the other families at their largest size (``size_key`` of the
  family: ops, cells, steps, layers...), sizes ``train`` never holds for that family;
* ``valid``: one graph in twenty of the rest (by a hash of the id), for tuning;
* ``train``: the rest. ``test`` is both test splits together.
"""

from __future__ import annotations

import ctypes
import functools
import hashlib
import itertools
import json
import multiprocessing
import os
import shutil
import signal
import stat
import sys
import tempfile
import threading
import time
import zipfile
from collections.abc import Callable, Iterator
from concurrent.futures import ProcessPoolExecutor, as_completed
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass, field
from functools import cached_property
from importlib import metadata
from pathlib import Path
from typing import Any

from placement_gym.common.paths import OUTPUT_ENV, output_root
from placement_gym.common.progress import Progress, ProgressCallback
from placement_gym.common.untrusted import parse_json, path_text, read_bytes, shown
from placement_gym.datasets import shipped
from placement_gym.datasets.architectures import require_export_extra
from placement_gym.datasets.families import FAMILIES
from placement_gym.graph.opgraph import OpGraph
from placement_gym.graph.stored import graph_bytes, read_graph, write_graph

SPLITS: tuple[str, ...] = ("train", "valid", "test-sizes", "test-families")
SPLIT_ALIASES: dict[str, tuple[str, ...]] = {"test": ("test-sizes", "test-families"), "all": SPLITS}
VALID_SHARE = 20  # one graph in this many of the seen families and sizes goes to valid
MAX_WORKERS = 8
MAX_INDEX_DIGITS = 18  # k of a graph id <family>-<k>: far above any family's count, below 2**63
CHUNK = 250  # graphs a worker builds per task: few enough tasks, a progress bar that moves
EXPORTED_VERSIONS = ("torch", "onnxscript")  # what else decides the graphs of an architecture family

# A cached manifest or graph above these is not read (built again): the largest manifest
# (synthetic-v1's 10,000 rows) is about 3 MB, the largest cached graph (GNMT-8 at 400 steps, 103,000
# ops, at some 100 bytes an op) about 10 MB unpacked.
MAX_MANIFEST_BYTES = 64 * 2**20
MAX_CACHED_GRAPH_BYTES = 2**30
PR_SET_PDEATHSIG = 1  # prctl(2) option: the signal a process gets when its parent dies (Linux)
PARENT_CHECK_S = 0.5  # how often a build worker checks that its parent is alive (where prctl is not)
STOP_GRACE_S = 1.0  # how long a stopped build worker has to end on SIGTERM before it is killed

Grid = dict[str, tuple[int, ...]]


class DatasetCacheError(ValueError):
    """A dataset's cache (a manifest, a graph) that could not be written: a one-line message."""


@dataclass(frozen=True)
class FamilySpec:
    """``count`` graphs of family ``family`` over ``grid`` (parameter -> values, every combination; or a
    tuple of such grids, their points in turn); ``count`` None: one graph per point, the points all
    different. ``size_key``: the parameter whose largest value makes the unseen sizes."""

    family: str
    count: int | None
    grid: Grid | tuple[Grid, ...]
    size_key: str

    def __post_init__(self) -> None:
        if self.count is None and len({tuple(sorted(p.items())) for p in self.points}) != len(self.points):
            raise ValueError(f"family {self.family}: one graph per grid point needs the points all different")
        if any(self.size_key not in point for point in self.points):
            raise ValueError(f"family {self.family}: size_key {self.size_key!r} is not a parameter of every "
                             "point")

    @cached_property
    def points(self) -> list[dict[str, int]]:
        grids = (self.grid,) if isinstance(self.grid, dict) else self.grid
        return [dict(zip(grid, values)) for grid in grids for values in itertools.product(*grid.values())]

    @property
    def n_graphs(self) -> int:
        return len(self.points) if self.count is None else self.count

    @cached_property
    def largest_size(self) -> int:
        return max(point[self.size_key] for point in self.points)

    def params(self, k: int) -> dict[str, int]:
        return self.points[k % len(self.points)]


@dataclass(frozen=True)
class GraphRecord:
    """One manifest row."""

    id: str
    family: str
    params: dict[str, int]
    seed: int
    split: str
    ops: int
    edges: int
    parameters: int
    tensor_bytes: float
    content_sha256: str


@dataclass(frozen=True)
class Dataset:
    """A named, versioned dataset (see the module docstring)."""

    name: str
    description: str
    families: tuple[FamilySpec, ...]
    held_out_families: tuple[str, ...]
    manifest_sha256: str = ""
    frozen_with: str = ""  # for exported families: the torch and onnxscript the digest was frozen with
    _manifests: dict = field(default_factory=dict, init=False, compare=False, repr=False)

    # ----------------------------------------------------------------------------- graphs by id

    def __len__(self) -> int:
        return sum(spec.n_graphs for spec in self.families)

    def ids(self, split: str = "all") -> list[str]:
        """The ids of ``split`` (`SPLITS`, ``test`` or ``all``), in dataset order."""
        wanted = set(_split_names(split))
        return [graph_id for graph_id, spec, k in self._graphs() if self.split_of(spec, k) in wanted]

    def _graphs(self) -> Iterator[tuple[str, FamilySpec, int]]:
        for spec in self.families:
            for k in range(spec.n_graphs):
                yield f"{spec.family}-{k}", spec, k

    def locate(self, graph_id: str) -> tuple[FamilySpec, int]:
        """The family spec and index of ``graph_id``, or a ValueError saying what the ids are."""
        family, _, index = graph_id.rpartition("-") if isinstance(graph_id, str) else ("", "", "")
        # k in ASCII digits, no leading zero, short enough to convert (int() refuses 4,300 digits)
        digits = index.isascii() and index.isdigit() and len(index) <= MAX_INDEX_DIGITS
        if digits and str(int(index)) == index:
            for spec in self.families:
                if spec.family == family and int(index) < spec.n_graphs:
                    return spec, int(index)
        raise ValueError(
            f"dataset {self.name} has no graph {shown(graph_id)}; ids are <family>-<k> with families "
            + ", ".join(f"{s.family} (k < {s.n_graphs})" for s in self.families)
        )

    def has_graph(self, graph_id: str) -> bool:
        """Whether ``graph_id`` is the id of one of this dataset's graphs."""
        try:
            self.locate(graph_id)
        except ValueError:
            return False
        return True

    def split_of(self, spec: FamilySpec, k: int) -> str:
        if spec.family in self.held_out_families:
            return "test-families"
        if spec.params(k)[spec.size_key] == spec.largest_size:
            return "test-sizes"
        digest = hashlib.sha256(f"{self.name}/{spec.family}/{k}".encode()).digest()  # the split stays put
        return "valid" if int.from_bytes(digest[:8], "big") % VALID_SHARE == 0 else "train"

    def graph(self, graph_id: str, shipped: bool = True) -> OpGraph:
        """Graph ``graph_id``, built from its family's parameters and seed (named ``<dataset>:<id>``); an
        architecture's graph read from this dataset's cache, else from the archive it ships in
        (``shipped``: `placement_gym.datasets.shipped`), else exported and cached on first use."""
        spec, k = self.locate(graph_id)
        family, params, name = FAMILIES[spec.family], spec.params(k), f"{self.name}:{spec.family}-{k}"
        if not family.cached:
            return family.build(params, k, name)
        path = self.graph_path(f"{spec.family}-{k}")
        # What the graph was built from: a changed definition under the same name builds it again.
        origin = {"family": spec.family, "params": params}
        graph = _read_cached_graph(path, name, json.dumps(origin, sort_keys=True))
        if graph is None and shipped:
            graph = self._shipped_graph(f"{spec.family}-{k}", name, origin)
        if graph is None:
            graph = family.build(params, k, name)
            _write_whole(path, lambda temporary: write_graph(graph, temporary, origin))
        return graph

    def _shipped_graph(self, graph_id: str, name: str, origin: dict[str, Any]) -> OpGraph | None:
        """``graph_id`` from the archive this dataset ships in, when it is the graph its frozen manifest
        row names (its content hash) and was built from ``origin``; None otherwise (no archive, or one
        damaged or edited: the graph is exported instead)."""
        row = self._shipped_rows().get(graph_id)
        data = shipped.graph_bytes(self.name, graph_id) if row is not None else None
        if data is None:
            return None
        try:
            graph, extra = read_graph(data, f"{shipped.archive_path(self.name)}:{graph_id}")
        except ValueError:
            return None
        if graph.name != name or extra != origin or graph.content_sha256 != row.content_sha256:
            return None
        return graph

    def _shipped_rows(self) -> dict[str, GraphRecord]:
        """The rows of the shipped manifest by id, when its digest is the frozen one (else none)."""
        if "shipped" not in self._manifests:
            data = shipped.manifest_bytes(self.name) if self.manifest_sha256 else None
            rows = self._frozen_rows(data, str(shipped.archive_path(self.name))) if data is not None else None
            self._manifests["shipped"] = {row.id: row for row in rows or ()}
        return self._manifests["shipped"]

    @property
    def ships_built(self) -> bool:
        """Whether this dataset's manifest ships in the package with the frozen digest (and its graphs
        with it: `placement_gym.datasets.shipped`)."""
        return bool(self._shipped_rows())

    def graph_path(self, graph_id: str) -> Path:
        """Where an architecture's graph ``graph_id`` is cached once built."""
        return self.manifest_path.parent / "graphs" / f"{graph_id}.npz"

    def record(self, graph_id: str, shipped: bool = True) -> GraphRecord:
        """The manifest row of ``graph_id``, made from the graph (not from a manifest; ``shipped``: as
        `graph`)."""
        spec, k = self.locate(graph_id)
        return self._row(spec, k, self.graph(graph_id, shipped))

    def _row(self, spec: FamilySpec, k: int, graph: OpGraph) -> GraphRecord:
        return GraphRecord(
            id=f"{spec.family}-{k}", family=spec.family, params=spec.params(k), seed=k,
            split=self.split_of(spec, k), ops=graph.n_ops, edges=len(graph.edge_dst),
            parameters=int(round(float(graph.param_bytes.sum()) / 4.0)),
            tensor_bytes=float(graph.tensor_bytes.sum()), content_sha256=graph.content_sha256,
        )

    # ----------------------------------------------------------------------------- the manifest

    @property
    def manifest_path(self) -> Path:
        return output_root() / "datasets" / self.name / "manifest.json"

    def manifest(self, progress: bool | ProgressCallback | None = None) -> list[GraphRecord]:
        """Every graph's `GraphRecord`: read from the cache, or the shipped archive, when it is there and
        its digest is the frozen one, else built (``progress``: as `build_manifest`) and cached."""
        path = self.manifest_path
        if path in self._manifests:
            return self._manifests[path]
        rows = self._read_cached()
        if rows is None:
            rows = self.build_manifest(progress)
            self.write_manifest(rows)
        self._manifests[path] = rows
        return rows

    def write_manifest(self, rows: list[GraphRecord]) -> Path:
        """Cache ``rows`` (`build_manifest`'s) as this machine's manifest (`manifest_path`)."""
        text = manifest_text(rows)
        _write_whole(self.manifest_path, lambda temporary: temporary.write_text(text, encoding="utf-8"))
        return self.manifest_path

    def _read_cached(self) -> list[GraphRecord] | None:
        """The cached manifest's rows, else the shipped manifest's; None (build it again) when neither is
        there, is a regular file within `MAX_MANIFEST_BYTES`, has the frozen digest and reads as a
        manifest."""
        try:
            data = read_bytes(self.manifest_path, MAX_MANIFEST_BYTES, "dataset manifest")
        except (OSError, ValueError):
            data = None
        rows = self._frozen_rows(data, path_text(self.manifest_path)) if data is not None else None
        if rows is None and self.ships_built:
            rows = list(self._shipped_rows().values())
        return rows

    def _frozen_rows(self, data: bytes, where: str) -> list[GraphRecord] | None:
        """The rows of manifest ``data`` when its digest is the frozen one (any, for a dataset without
        one) and it reads as a manifest; else None. Linear in its size: hashed, then parsed with the
        bounds of `placement_gym.common.untrusted.parse_json`."""
        if len(data) > MAX_MANIFEST_BYTES:
            return None
        if self.manifest_sha256 and hashlib.sha256(data).hexdigest() != self.manifest_sha256:
            return None  # stale or edited: built again
        try:
            return [GraphRecord(**row) for row in parse_json(data, where)["graphs"]]
        except (ValueError, TypeError, KeyError):
            return None  # not a manifest (a dataset without a frozen digest): built again

    def build_manifest(self, progress: bool | ProgressCallback | None = None,
                       workers: int | None = None) -> list[GraphRecord]:
        """Every graph built once for its row (read from this machine's cache, never from the shipped
        archive: this is how a shipped dataset is checked), in ``workers`` processes (default: one a core,
        at most `MAX_WORKERS`; the rows come back in dataset order whatever the count); a ValueError when
        the result's digest is not the frozen one (the graphs would not be this dataset's). ``progress``:
        a `placement_gym.common.progress` callback, or True for a `Progress` on stderr (None: on a
        terminal). An interrupt
        stops the workers at once, and they exit by themselves if this process dies
        (`_build_in_workers`)."""
        ids = [graph_id for graph_id, _, _ in self._graphs()]
        workers = min(os.cpu_count() or 1, MAX_WORKERS) if workers is None else max(1, int(workers))
        families = [FAMILIES[spec.family] for spec in self.families]
        exported = any(family.cached for family in families)
        if exported:
            to_export = [i for i in ids if FAMILIES[self.locate(i)[0].family].cached
                         and not self.graph_path(i).is_file()]
            if any(FAMILIES[self.locate(i)[0].family].needs_torch for i in to_export):
                require_export_extra(f"building dataset {self.name} ({len(to_export)} graphs to export)")
            else:
                workers = 1  # every graph is cached: reading them is quicker than starting workers
        # An export takes seconds: one graph a task, so that the workers stay busy to the end.
        size = 1 if exported else CHUNK
        chunks = [ids[i:i + size] for i in range(0, len(ids), size)]
        report, owned = _reporter(progress)
        stage = f"building dataset {self.name}"
        try:
            if workers == 1 or len(chunks) == 1:
                parts = []
                for chunk in chunks:
                    report(stage, sum(map(len, parts)), len(ids), chunk[0])
                    parts.append(_records(self, chunk))
            else:
                setups = tuple(dict.fromkeys(f.worker_setup for f in families if f.worker_setup is not None))
                # torch must not be forked once loaded: exported families build in fresh (spawned) processes.
                context = multiprocessing.get_context("spawn") if exported else None
                parts = self._build_in_workers(chunks, workers, context, setups, lambda done: report(
                    stage, done, len(ids)))
            report(stage, len(ids), len(ids))
        finally:
            if owned is not None:
                owned.close()
        rows = [row for part in parts for row in part]
        digest = hashlib.sha256(manifest_text(rows).encode()).hexdigest()
        if self.manifest_sha256 and digest != self.manifest_sha256:
            cause = "a family or numpy's generators changed"
            if self.frozen_with:
                cause = (f"it was frozen with {self.frozen_with}, and another torch or onnxscript version "
                         f"may export other graphs (here: {exported_versions()}); or a family changed")
            raise ValueError(
                f"dataset {self.name}: the graphs built here (manifest sha256 {digest[:16]}) are not the "
                f"dataset's ({self.manifest_sha256[:16]}): {cause}"
            )
        return rows

    def _build_in_workers(self, chunks: list[list[str]], workers: int, context: Any, setups: tuple,
                          report: Callable[[int], None]) -> list[list[GraphRecord]]:
        """The rows of each of ``chunks``, built by a pool of ``workers`` processes. An interrupt or an
        error stops the workers at once (the chunks they were building are dropped, not waited for),
        and a worker exits by itself when this process dies (`_start_worker`), so that no build goes
        on without its caller."""
        parts: list[list[GraphRecord]] = [[] for _ in chunks]
        others = set(multiprocessing.active_children())  # the caller's own, which are not stopped
        pool = ProcessPoolExecutor(workers, mp_context=context, initializer=_start_worker,
                                   initargs=(os.getpid(), setups))
        try:
            futures = {pool.submit(_records, self, chunk): i for i, chunk in enumerate(chunks)}
            done = 0
            report(done)
            for future in as_completed(futures):
                parts[futures[future]] = future.result()
                done += len(parts[futures[future]])
                report(done)
        except BrokenProcessPool:
            raise RuntimeError(
                f"building dataset {self.name}: a worker process died (out of memory, or the script that "
                "started the build runs it at import: worker processes import it again, so it needs "
                "`if __name__ == '__main__':`); `placement-gym datasets --build "
                f"{self.name}` builds it once for every later use"
            ) from None
        except BaseException:  # KeyboardInterrupt included: the workers would finish their chunks first
            _stop(set(multiprocessing.active_children()) - others)
            raise
        finally:  # the graphs not started yet are not built
            pool.shutdown(wait=True, cancel_futures=True)
        return parts

    def check(self, ids: list[str], progress: ProgressCallback | None = None) -> list[GraphRecord]:
        """Build each of ``ids`` again from its family (no cache, no archive read) and check its row
        against the frozen manifest (cached or shipped); the rows, or a ValueError naming the first graph
        that differs (or that there is no frozen manifest to check against: build it whole first)."""
        frozen = self._read_cached()
        if frozen is None:
            raise ValueError(f"dataset {self.name} has no manifest to check graphs against: build it whole "
                             f"first (placement-gym datasets --build {self.name})")
        by_id = {row.id: row for row in frozen}
        if any(FAMILIES[self.locate(i)[0].family].needs_torch for i in ids):
            require_export_extra(f"checking {len(ids)} graphs of dataset {self.name}")
        rows = []
        for done, graph_id in enumerate(ids):
            if progress is not None:
                progress(f"checking dataset {self.name}", done, len(ids), graph_id)
            spec, k = self.locate(graph_id)
            graph = FAMILIES[spec.family].build(spec.params(k), k, f"{self.name}:{graph_id}")
            row = self._row(spec, k, graph)
            if row != by_id[graph_id]:
                differs = [key for key in row.__dict__ if getattr(row, key) != getattr(by_id[graph_id], key)]
                raise ValueError(f"dataset {self.name}: graph {graph_id} built here differs from its frozen "
                                 f"row in {', '.join(differs)} (here: {exported_versions()}; frozen with "
                                 f"{self.frozen_with or 'numpy'})")
            rows.append(row)
        return rows

    def summary(self) -> dict[str, Any]:
        """What ``placement-gym datasets`` lists, without building anything."""
        return {
            "name": self.name,
            "description": self.description,
            "graphs": len(self),
            "families": [spec.family for spec in self.families],
            "held_out_families": list(self.held_out_families),
            "splits": {split: len(self.ids(split)) for split in SPLITS},
            "built": self._read_cached() is not None,
            "shipped": self.ships_built,
        }

    def pack(self, destination: str | os.PathLike | None = None) -> Path:
        """Write the archive this dataset ships in (`placement_gym.datasets.shipped`; default: where the
        package reads it) from this machine's cache: its manifest, which must have the frozen digest, and
        every graph, each checked against its row."""
        try:
            data = read_bytes(self.manifest_path, MAX_MANIFEST_BYTES, "dataset manifest")
        except (OSError, ValueError):
            data = b""
        rows = self._frozen_rows(data, path_text(self.manifest_path)) if self.manifest_sha256 else None
        if rows is None:
            raise ValueError(f"dataset {self.name}: no manifest with the frozen digest in "
                             f"{path_text(self.manifest_path)}; build it first (placement-gym datasets "
                             f"--build {self.name})")

        def graphs() -> Iterator[tuple[str, bytes]]:
            for row in rows:
                spec, k = self.locate(row.id)
                graph = self.graph(row.id, shipped=False)
                if graph.content_sha256 != row.content_sha256:
                    raise ValueError(f"dataset {self.name}: graph {row.id} is not its manifest row's")
                yield row.id, graph_bytes(graph, {"family": spec.family, "params": spec.params(k)},
                                          compress=False)

        return shipped.pack(data, graphs(), destination or shipped.archive_path(self.name))


def exported_versions() -> str:
    """``torch X, onnxscript Y`` as installed here (what `Dataset.frozen_with` records)."""
    def version(package: str) -> str:
        try:
            return metadata.version(package)
        except metadata.PackageNotFoundError:
            return "not installed"
    return ", ".join(f"{package} {version(package)}" for package in EXPORTED_VERSIONS)


def _unpacks_within_limit(path: Path, size: int) -> bool:
    """Whether the ``.npz`` at ``path`` (``size`` bytes) and every array in it unpacked stay within
    `MAX_CACHED_GRAPH_BYTES`: read from the archive's directory, before anything is unpacked (a
    compressed file of kilobytes may unpack to gigabytes)."""
    if size > MAX_CACHED_GRAPH_BYTES:
        return False
    try:
        with zipfile.ZipFile(path) as archive:
            unpacked = sum(info.file_size for info in archive.infolist())
    except (OSError, ValueError, zipfile.BadZipFile):
        return False
    return unpacked <= MAX_CACHED_GRAPH_BYTES


@functools.lru_cache(maxsize=32)
def _read_stored(path: Path, mtime_ns: int, size: int) -> tuple[OpGraph, str] | None:
    try:
        graph, extra = read_graph(path)
    except ValueError:
        return None  # damaged or edited: built again
    return graph, json.dumps(extra, sort_keys=True)


def _read_cached_graph(path: Path, name: str, origin: str) -> OpGraph | None:
    """The graph cached at ``path`` when it is ``name`` built from ``origin``; None otherwise (built
    again): also for what is not a regular file or would unpack to more than `MAX_CACHED_GRAPH_BYTES`.
    A file is read once per version (graphs are immutable; a rewritten file has another mtime)."""
    try:
        status = path.stat()
    except OSError:
        return None
    if not stat.S_ISREG(status.st_mode) or not _unpacks_within_limit(path, status.st_size):
        return None
    stored = _read_stored(path, status.st_mtime_ns, status.st_size)
    if stored is None or stored[0].name != name or stored[1] != origin:
        return None
    return stored[0]


def _start_worker(parent: int, setups: tuple) -> None:
    """What a build worker runs first: it exits when ``parent`` (the building process) dies, leaves
    Ctrl-C to the parent (which stops the workers: `Dataset._build_in_workers`) and runs ``setups``."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    if sys.platform.startswith("linux"):
        # The kernel sends SIGTERM the moment the parent dies (prctl(2), PR_SET_PDEATHSIG).
        try:
            ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, int(signal.SIGTERM))
        except (OSError, AttributeError):
            pass
    # Elsewhere, and should the parent have died before the prctl: a worker whose parent is gone has
    # another parent pid (the process that adopted it).
    threading.Thread(target=_exit_without, args=(parent,), daemon=True, name="exit-with-parent").start()
    for setup in setups:
        setup()


def _exit_without(parent: int) -> None:
    """End this process once ``parent`` is no longer its parent (checked every `PARENT_CHECK_S`)."""
    while os.getppid() == parent:
        time.sleep(PARENT_CHECK_S)
    os.kill(os.getpid(), signal.SIGTERM)  # as PR_SET_PDEATHSIG would


def _stop(processes: set) -> None:
    """Terminate ``processes`` (multiprocessing children) and reap them, killing any that lingers."""
    for process in processes:
        process.terminate()
    deadline = time.monotonic() + STOP_GRACE_S
    for process in processes:
        process.join(max(0.0, deadline - time.monotonic()))
        if process.is_alive():
            process.kill()
            process.join()


def _write_whole(path: Path, write: Callable[[Path], object]) -> None:
    """Write ``path`` whole or not at all, leaving nothing behind on failure: ``write(temporary)``
    writes the file in a fresh hidden folder beside ``path``, which is renamed into place; the folder
    and whatever is in it are removed whatever happens (a full disk, an interrupt). An OSError is a
    one-line `DatasetCacheError`."""
    folder = None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        folder = Path(tempfile.mkdtemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent))
        write(folder / path.name)
        os.replace(folder / path.name, path)
    except OSError as error:
        reason = error.strerror or type(error).__name__
        raise DatasetCacheError(
            f"cannot write the dataset cache {path_text(path)}: {reason} (free space there, or set "
            f"{OUTPUT_ENV} to another folder)"
        ) from None
    finally:
        if folder is not None:
            shutil.rmtree(folder, ignore_errors=True)


def _records(dataset: Dataset, ids: list[str]) -> list[GraphRecord]:
    """The rows of ``ids`` built here, not read from the shipped archive (what one worker of
    `Dataset.build_manifest` builds)."""
    return [dataset.record(graph_id, shipped=False) for graph_id in ids]


def manifest_text(rows: list[GraphRecord]) -> str:
    """The manifest file: one JSON object, one row a line (so that a diff reads row by row)."""
    lines = ",\n".join(json.dumps(row.__dict__, sort_keys=True) for row in rows)
    return '{"graphs": [\n' + lines + "\n]}\n"


def _split_names(split: str) -> tuple[str, ...]:
    if split in SPLITS:
        return (split,)
    if split in SPLIT_ALIASES:
        return SPLIT_ALIASES[split]
    raise ValueError(f"unknown split {shown(split)}; allowed: {', '.join([*SPLITS, *SPLIT_ALIASES])}")


def _reporter(progress: bool | ProgressCallback | None) -> tuple[ProgressCallback, Progress | None]:
    """The callback that reports a build, and the `Progress` made for it (to close), if any."""
    if callable(progress):
        return progress, None
    if progress is None:
        progress = sys.stderr.isatty()
    if not progress:
        return (lambda *args, **kwargs: None), None
    owned = Progress()
    return owned, owned
