"""Computation graphs: the `OpGraph` type, the ONNX importer and the bundled graphs.

`graph_from_onnx` is imported on first use (PEP 562): importing onnx costs a second or more, and a
command that reads no ONNX file (a cached bundled graph, a stored dataset graph) should not pay it.
"""

from typing import Any

from placement_gym.graph.bundled import bundled_graph_names, load_graph
from placement_gym.graph.opgraph import CATEGORIES, OpGraph

__all__ = ["CATEGORIES", "OpGraph", "bundled_graph_names", "graph_from_onnx", "load_graph"]


def __getattr__(name: str) -> Any:
    if name == "graph_from_onnx":
        from placement_gym.graph.onnx_import import graph_from_onnx

        return graph_from_onnx
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
