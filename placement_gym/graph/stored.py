"""An `OpGraph` stored as one ``.npz`` file, read back in milliseconds (no ONNX import, no shape inference).

The file holds the graph's arrays as they are and one JSON document (as bytes) with its names, its data
inputs, its content hash and whatever the writer adds under ``extra`` (a dataset stores the family and
parameters a graph was built from). Reading checks the format tag and that the graph rebuilt from the
arrays has the stored content hash, so that a truncated or edited file is an error, never another graph.
Nothing is unpickled (``allow_pickle=False``).
"""

from __future__ import annotations

import io
import json
import os
import zipfile
from pathlib import Path
from typing import Any

import numpy as np

from placement_gym.graph.opgraph import OpGraph

FORMAT = "placement-gym-opgraph-1"
_ARRAYS = ("category", "flops", "bytes_accessed", "param_bytes", "tensor_producer", "tensor_bytes",
           "tensor_is_parameter", "tensor_is_output", "edge_tensor", "edge_dst")
_HEADER = "header"


def graph_bytes(graph: OpGraph, extra: dict[str, Any] | None = None, compress: bool = True) -> bytes:
    """The file `write_graph` writes, as bytes (``compress`` False: the arrays stored as they are, for an
    archive that compresses its members itself)."""
    header = {
        "format": FORMAT, "name": graph.name, "sha256": graph.sha256, "op_names": list(graph.op_names),
        "op_types": list(graph.op_types), "tensor_names": list(graph.tensor_names),
        "data_inputs": [[name, list(shape)] for name, shape in graph.data_inputs],
        "content_sha256": graph.content_sha256, "extra": extra or {},
    }
    arrays = {key: getattr(graph, key) for key in _ARRAYS}
    arrays[_HEADER] = np.frombuffer(json.dumps(header).encode(), dtype=np.uint8)
    buffer = io.BytesIO()
    (np.savez_compressed if compress else np.savez)(buffer, **arrays)
    return buffer.getvalue()


def write_graph(graph: OpGraph, path: str | Path, extra: dict[str, Any] | None = None) -> Path:
    """Store ``graph`` (and ``extra``, JSON-serialisable) at ``path``; the file appears whole or not at
    all (written beside it, then renamed), so a reader never sees half a file."""
    path = Path(path)
    data = graph_bytes(graph, extra)
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    with open(temporary, "wb") as handle:
        handle.write(data)
    os.replace(temporary, path)
    return path


def read_graph(path: str | Path | bytes, label: str = "") -> tuple[OpGraph, dict[str, Any]]:
    """The graph stored at ``path`` (or given as the bytes of such a file, ``label`` naming it in errors)
    and its ``extra``; a ValueError saying what is wrong with a file that is not one `write_graph` wrote
    or whose content is not the stored content hash."""
    source: Any = io.BytesIO(path) if isinstance(path, bytes) else Path(path)
    where = (label or "graph bytes") if isinstance(path, bytes) else str(path)
    try:
        with np.load(source, allow_pickle=False) as stored:
            arrays = {key: stored[key] for key in (*_ARRAYS, _HEADER)}
        header = json.loads(arrays.pop(_HEADER).tobytes().decode())
    except (OSError, KeyError, ValueError, zipfile.BadZipFile, UnicodeDecodeError) as error:
        raise ValueError(f"{where} is not a stored graph ({type(error).__name__}: {error})") from None
    if not isinstance(header, dict) or header.get("format") != FORMAT:
        raise ValueError(f"{where} is not a stored graph of format {FORMAT}")
    try:
        graph = OpGraph(
            name=header["name"], op_names=tuple(header["op_names"]), op_types=tuple(header["op_types"]),
            tensor_names=tuple(header["tensor_names"]), sha256=header["sha256"],
            data_inputs=tuple((name, tuple(shape)) for name, shape in header["data_inputs"]), **arrays,
        )
    except (KeyError, TypeError) as error:
        raise ValueError(f"{where} is not a stored graph ({type(error).__name__}: {error})") from None
    if graph.content_sha256 != header.get("content_sha256"):
        raise ValueError(f"{where}: the stored graph's content is not its recorded content hash (edited or "
                         "damaged)")
    return graph, header.get("extra", {})
