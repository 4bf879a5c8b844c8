"""Computation graphs: the `OpGraph` type, the ONNX importer and the bundled graphs."""

from placement_gym.graph.bundled import bundled_graph_names, load_graph
from placement_gym.graph.onnx_import import graph_from_onnx
from placement_gym.graph.opgraph import CATEGORIES, OpGraph

__all__ = ["CATEGORIES", "OpGraph", "bundled_graph_names", "graph_from_onnx", "load_graph"]
