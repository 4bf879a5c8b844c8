"""The ONNX import's scaling: synthetic chains of growing size imported by `graph_from_onnx`, side by
side with what ONNX itself does with the same file (`run_import_bench`, `ImportRow`)."""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from placement_gym.benchmarks.rows import BenchmarkRow
from placement_gym.benchmarks.timing import timed

DEFAULT_IMPORT_SIZES: tuple[int, ...] = (25_000, 50_000, 100_000, 200_000)


@dataclass(frozen=True)
class ImportRow(BenchmarkRow):
    """The import of one synthetic ONNX chain (`onnx_chain_model`) of ``nodes`` nodes, side by side with
    what ONNX itself does with the same file: ``baseline`` is ``onnx.load`` plus
    ``onnx.shape_inference.infer_shapes`` (the importer's call: strict, type-checked, with data
    propagation), ``import`` is `graph_from_onnx` of the path (which does both, and the rest). Seconds are
    this process's CPU seconds (``time.process_time``: other processes' load moves them less than wall
    seconds) and wall seconds; ``ratio`` = import / baseline CPU seconds."""

    nodes: int
    file_mb: float
    ops: int
    edges: int
    baseline_cpu_s: float
    import_cpu_s: float
    ratio: float
    baseline_wall_s: float
    import_wall_s: float


def bench_import(nodes: int, directory: str | os.PathLike) -> ImportRow:
    """Write an ONNX chain of ``nodes`` nodes to ``directory`` and time its baseline and its import
    (`ImportRow`), the baseline first."""
    import onnx

    from placement_gym.graph.onnx_import import graph_from_onnx
    from placement_gym.graph.synthetic import onnx_chain_model

    path = os.path.join(directory, f"chain{nodes}.onnx")
    onnx.save(onnx_chain_model(nodes), path)

    def baseline() -> None:
        model = onnx.load(path)
        onnx.shape_inference.infer_shapes(model, check_type=True, strict_mode=True, data_prop=True)

    _, base_cpu, base_wall = timed(baseline)
    graph, cpu, wall = timed(lambda: graph_from_onnx(path))
    return ImportRow(nodes, os.path.getsize(path) / 1e6, graph.n_ops, graph.n_edges, base_cpu, cpu,
                     cpu / base_cpu if base_cpu > 0 else float("inf"), base_wall, wall)


def run_import_bench(sizes: Sequence[int] = DEFAULT_IMPORT_SIZES,
                     progress: Callable[[int, int, str, ImportRow | None], None] | None = None,
                     ) -> list[ImportRow]:
    """`bench_import` of each size in turn, in a temporary directory removed afterwards."""
    import tempfile

    bad = [n for n in sizes if n < 1]
    if bad:
        raise ValueError(f"import sizes must be positive node counts, got {bad}")
    rows = []
    with tempfile.TemporaryDirectory(prefix="placement-gym-import-") as directory:
        for i, n in enumerate(sizes):
            if progress is not None:
                progress(i, len(sizes), f"chain{n}", None)
            rows.append(bench_import(n, directory))
            if progress is not None:
                progress(i, len(sizes), f"chain{n}", rows[-1])
            os.remove(os.path.join(directory, f"chain{n}.onnx"))
    return rows
