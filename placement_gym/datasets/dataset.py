"""Named, versioned datasets of graphs, each graph with a stable id, a manifest row and a split.

A dataset is a list of families, each with a grid of parameters and a number of graphs: graph ``k`` of a
family takes the grid's point ``k mod len(grid)`` and seed ``k``, and its id is ``<family>-<k>``
(``regal-17``); outside the dataset it is named ``<dataset>:<family>-<k>`` (``synthetic-v1:regal-17``: a
graph name `placement_gym.task.named.get_task` and the envs take). Building graph ``k`` again gives the same
graph, bit for bit, so the dataset itself ships as this definition: nothing is downloaded, and loading one
graph is building it (milliseconds; `Dataset.graph`).

The manifest (one row a graph: id, family, parameters, seed, ops, edges, parameters' elements, the
bytes of its tensors, the content hash of its `OpGraph`, its split) needs every graph built once: the
first `Dataset.manifest` builds it (with a progress bar on a terminal), caches it as
``<output root>/datasets/<name>/manifest.json`` (the output root: ``$PLACEMENT_GYM_OUTPUT``, else
``~/placement-gym-output``) and checks its digest against the one frozen here (``manifest_sha256``),
so a build on another machine or numpy that would give other graphs is an error, not a silent drift.

Splits, fixed by the definition (no graph is in two):

* ``test-families``: every graph of the held-out families (no such family has a graph in ``train``);
* ``test-sizes``: the graphs of the other families at their largest size (``size_key`` of the
  family: ops, cells or steps), sizes ``train`` never holds for that family;
* ``valid``: one graph in twenty of the rest (by a hash of the id), for tuning;
* ``train``: the rest. ``test`` is both test splits together.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import os
import sys
from collections.abc import Iterator
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

from placement_gym.common.paths import output_root
from placement_gym.datasets.families import FAMILIES
from placement_gym.graph.opgraph import OpGraph

SPLITS: tuple[str, ...] = ("train", "valid", "test-sizes", "test-families")
SPLIT_ALIASES: dict[str, tuple[str, ...]] = {"test": ("test-sizes", "test-families"), "all": SPLITS}
VALID_SHARE = 20  # one graph in this many of the seen families and sizes goes to valid
MAX_WORKERS = 8
CHUNK = 250  # graphs a worker builds per task: few enough tasks, a progress bar that moves


@dataclass(frozen=True)
class FamilySpec:
    """``count`` graphs of family ``family`` over the grid of ``grid`` (parameter -> values);
    ``size_key``: the parameter whose largest value makes the unseen sizes."""

    family: str
    count: int
    grid: dict[str, tuple[int, ...]]
    size_key: str

    @cached_property
    def points(self) -> list[dict[str, int]]:
        keys = list(self.grid)
        return [dict(zip(keys, values)) for values in itertools.product(*(self.grid[k] for k in keys))]

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
    _manifests: dict = field(default_factory=dict, init=False, compare=False, repr=False)

    # ----------------------------------------------------------------------------- graphs by id

    def __len__(self) -> int:
        return sum(spec.count for spec in self.families)

    def ids(self, split: str = "all") -> list[str]:
        """The ids of ``split`` (`SPLITS`, ``test`` or ``all``), in dataset order."""
        wanted = set(_split_names(split))
        return [graph_id for graph_id, spec, k in self._graphs() if self.split_of(spec, k) in wanted]

    def _graphs(self) -> Iterator[tuple[str, FamilySpec, int]]:
        for spec in self.families:
            for k in range(spec.count):
                yield f"{spec.family}-{k}", spec, k

    def locate(self, graph_id: str) -> tuple[FamilySpec, int]:
        """The family spec and index of ``graph_id``, or a ValueError saying what the ids are."""
        family, _, index = str(graph_id).rpartition("-")
        for spec in self.families:
            if spec.family == family and index.isdigit() and str(int(index)) == index:
                if int(index) < spec.count:
                    return spec, int(index)
        raise ValueError(
            f"dataset {self.name} has no graph {graph_id!r}; ids are <family>-<k> with families "
            + ", ".join(f"{s.family} (k < {s.count})" for s in self.families)
        )

    def split_of(self, spec: FamilySpec, k: int) -> str:
        if spec.family in self.held_out_families:
            return "test-families"
        if spec.params(k)[spec.size_key] == max(spec.grid[spec.size_key]):
            return "test-sizes"
        digest = hashlib.sha256(f"{self.name}/{spec.family}/{k}".encode()).digest()  # the split stays put
        return "valid" if int.from_bytes(digest[:8], "big") % VALID_SHARE == 0 else "train"

    def graph(self, graph_id: str) -> OpGraph:
        """Graph ``graph_id``, built from its family's parameters and seed (named ``<dataset>:<id>``)."""
        spec, k = self.locate(graph_id)
        return FAMILIES[spec.family].build(spec.params(k), k, f"{self.name}:{spec.family}-{k}")

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
        chunks = [ids[i:i + CHUNK] for i in range(0, len(ids), CHUNK)]
        bar = _bar(len(ids), f"building dataset {self.name}", progress)
        rows: list[GraphRecord] = []
        if workers == 1 or len(chunks) == 1:
            done = map(_records, itertools.repeat(self), chunks)
            rows = self._collect(done, bar)
        else:
            with ProcessPoolExecutor(workers) as pool:
                rows = self._collect(pool.map(_records, itertools.repeat(self), chunks), bar)
        if bar is not None:
            bar.close()
        digest = hashlib.sha256(manifest_text(rows).encode()).hexdigest()
        if self.manifest_sha256 and digest != self.manifest_sha256:
            raise ValueError(
                f"dataset {self.name}: the graphs built here (manifest sha256 {digest[:16]}) are not the "
                f"dataset's ({self.manifest_sha256[:16]}): a family or numpy's generators changed"
            )
        return rows

    @staticmethod
    def _collect(done: Iterator[list[GraphRecord]], bar) -> list[GraphRecord]:
        rows: list[GraphRecord] = []
        for chunk in done:
            rows += chunk
            if bar is not None:
                bar.update(len(chunk))
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
