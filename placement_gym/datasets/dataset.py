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

import functools
import hashlib
import itertools
import json
import multiprocessing
import os
import sys
from collections.abc import Iterator
from concurrent.futures import ProcessPoolExecutor, as_completed
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass, field
from functools import cached_property
from importlib import metadata
from pathlib import Path
from typing import Any

from placement_gym.common.paths import output_root
from placement_gym.datasets.architectures import require_export_extra
from placement_gym.datasets.families import FAMILIES
from placement_gym.graph.opgraph import OpGraph
from placement_gym.graph.stored import read_graph, write_graph

SPLITS: tuple[str, ...] = ("train", "valid", "test-sizes", "test-families")
SPLIT_ALIASES: dict[str, tuple[str, ...]] = {"test": ("test-sizes", "test-families"), "all": SPLITS}
VALID_SHARE = 20  # one graph in this many of the seen families and sizes goes to valid
MAX_WORKERS = 8
CHUNK = 250  # graphs a worker builds per task: few enough tasks, a progress bar that moves
EXPORTED_VERSIONS = ("torch", "onnxscript")  # what else decides the graphs of an architecture family

Grid = dict[str, tuple[int, ...]]


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
        family, _, index = str(graph_id).rpartition("-")
        for spec in self.families:
            if spec.family == family and index.isdigit() and str(int(index)) == index:
                if int(index) < spec.n_graphs:
                    return spec, int(index)
        raise ValueError(
            f"dataset {self.name} has no graph {graph_id!r}; ids are <family>-<k> with families "
            + ", ".join(f"{s.family} (k < {s.n_graphs})" for s in self.families)
        )

    def split_of(self, spec: FamilySpec, k: int) -> str:
        if spec.family in self.held_out_families:
            return "test-families"
        if spec.params(k)[spec.size_key] == spec.largest_size:
            return "test-sizes"
        digest = hashlib.sha256(f"{self.name}/{spec.family}/{k}".encode()).digest()  # the split stays put
        return "valid" if int.from_bytes(digest[:8], "big") % VALID_SHARE == 0 else "train"

    def graph(self, graph_id: str) -> OpGraph:
        """Graph ``graph_id``, built from its family's parameters and seed (named ``<dataset>:<id>``); an
        architecture's graph read from this dataset's cache, or exported and cached on first use."""
        spec, k = self.locate(graph_id)
        family, params, name = FAMILIES[spec.family], spec.params(k), f"{self.name}:{spec.family}-{k}"
        if not family.cached:
            return family.build(params, k, name)
        path = self.graph_path(f"{spec.family}-{k}")
        # What the graph was built from: a changed definition under the same name builds it again.
        origin = {"family": spec.family, "params": params}
        graph = _read_cached_graph(path, name, json.dumps(origin, sort_keys=True))
        if graph is None:
            graph = family.build(params, k, name)
            write_graph(graph, path, origin)
        return graph

    def graph_path(self, graph_id: str) -> Path:
        """Where an architecture's graph ``graph_id`` is cached once built."""
        return self.manifest_path.parent / "graphs" / f"{graph_id}.npz"

    def record(self, graph_id: str) -> GraphRecord:
        """The manifest row of ``graph_id``, made from the graph (not from the cached manifest)."""
        spec, k = self.locate(graph_id)
        graph = self.graph(graph_id)
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

    def manifest(self, progress: bool | None = None) -> list[GraphRecord]:
        """Every graph's `GraphRecord`: read from the cache when it is there and its digest is the frozen
        one, else built (``progress``: a bar; None: on a terminal) and cached."""
        path = self.manifest_path
        if path in self._manifests:
            return self._manifests[path]
        rows = self._read_cached()
        if rows is None:
            rows = self.build_manifest(progress)
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(manifest_text(rows), encoding="utf-8")
        self._manifests[path] = rows
        return rows

    def _read_cached(self) -> list[GraphRecord] | None:
        try:
            text = self.manifest_path.read_text(encoding="utf-8")
        except OSError:
            return None
        if self.manifest_sha256 and hashlib.sha256(text.encode()).hexdigest() != self.manifest_sha256:
            return None  # stale or edited: built again
        return [GraphRecord(**row) for row in json.loads(text)["graphs"]]

    def build_manifest(self, progress: bool | None = None, workers: int | None = None) -> list[GraphRecord]:
        """Every graph built once for its row, in ``workers`` processes (default: one a core, at most
        `MAX_WORKERS`; the rows come back in dataset order whatever the count); a ValueError when the
        result's digest is not the frozen one (the graphs would not be this dataset's)."""
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
        bar = _bar(len(ids), f"building dataset {self.name}", progress)
        if workers == 1 or len(chunks) == 1:
            parts = []
            for chunk in chunks:
                parts.append(_records(self, chunk))
                if bar is not None:
                    bar.update(len(chunk))
        else:
            setups = tuple(dict.fromkeys(f.worker_setup for f in families if f.worker_setup is not None))
            # torch must not be forked once loaded: exported families build in fresh (spawned) processes.
            context = multiprocessing.get_context("spawn") if exported else None
            parts = [[] for _ in chunks]
            pool = ProcessPoolExecutor(workers, mp_context=context, initializer=_run_all, initargs=(setups,))
            try:
                futures = {pool.submit(_records, self, chunk): i for i, chunk in enumerate(chunks)}
                for future in as_completed(futures):
                    parts[futures[future]] = future.result()
                    if bar is not None:
                        bar.update(len(parts[futures[future]]))
            except BrokenProcessPool:
                raise RuntimeError(
                    f"building dataset {self.name}: a worker process died (out of memory, or the script that "
                    "started the build runs it at import: worker processes import it again, so it needs "
                    "`if __name__ == '__main__':`); `placement-gym datasets --build "
                    f"{self.name}` builds it once for every later use"
                ) from None
            finally:  # on an error, the graphs not started yet are not built
                pool.shutdown(wait=True, cancel_futures=True)
        if bar is not None:
            bar.close()
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
        }


def exported_versions() -> str:
    """``torch X, onnxscript Y`` as installed here (what `Dataset.frozen_with` records)."""
    def version(package: str) -> str:
        try:
            return metadata.version(package)
        except metadata.PackageNotFoundError:
            return "not installed"
    return ", ".join(f"{package} {version(package)}" for package in EXPORTED_VERSIONS)


@functools.lru_cache(maxsize=32)
def _read_stored(path: Path, mtime_ns: int, size: int) -> tuple[OpGraph, str] | None:
    try:
        graph, extra = read_graph(path)
    except ValueError:
        return None  # damaged or edited: built again
    return graph, json.dumps(extra, sort_keys=True)


def _read_cached_graph(path: Path, name: str, origin: str) -> OpGraph | None:
    """The graph cached at ``path`` when it is ``name`` built from ``origin``; None otherwise. A file is
    read once per version (graphs are immutable; a rewritten file has another mtime)."""
    try:
        stat = path.stat()
    except OSError:
        return None
    stored = _read_stored(path, stat.st_mtime_ns, stat.st_size)
    if stored is None or stored[0].name != name or stored[1] != origin:
        return None
    return stored[0]


def _run_all(setups: tuple) -> None:
    for setup in setups:
        setup()


def _records(dataset: Dataset, ids: list[str]) -> list[GraphRecord]:
    """The rows of ``ids`` (what one worker of `Dataset.build_manifest` builds)."""
    return [dataset.record(graph_id) for graph_id in ids]


def manifest_text(rows: list[GraphRecord]) -> str:
    """The manifest file: one JSON object, one row a line (so that a diff reads row by row)."""
    lines = ",\n".join(json.dumps(row.__dict__, sort_keys=True) for row in rows)
    return '{"graphs": [\n' + lines + "\n]}\n"


def _split_names(split: str) -> tuple[str, ...]:
    if split in SPLITS:
        return (split,)
    if split in SPLIT_ALIASES:
        return SPLIT_ALIASES[split]
    raise ValueError(f"unknown split {split!r}; allowed: {', '.join([*SPLITS, *SPLIT_ALIASES])}")


def _bar(total: int, label: str, enabled: bool | None):
    if enabled is None:
        enabled = sys.stderr.isatty()
    if not enabled:
        return None
    try:
        from tqdm.auto import tqdm
    except ImportError:
        return None
    return tqdm(total=total, desc=label, unit="graph", dynamic_ncols=True)
