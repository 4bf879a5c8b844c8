"""Regenerating the bundled weight-free ONNX graphs from plain-torch model definitions.

`GRAPH_NAMES` and `export_graphs` are importable without torch; exporting needs the export extra
(torch and onnxscript), imported only when `export_graphs` runs.
"""

from placement_gym.export.onnx_export import GRAPH_NAMES, MISSING_EXTRA_MESSAGE, export_graphs, load_manifest
from placement_gym.export.weight_free import PARAMETERS_KEY, SOURCE_KEY

__all__ = ["GRAPH_NAMES", "MISSING_EXTRA_MESSAGE", "PARAMETERS_KEY", "SOURCE_KEY", "export_graphs",
           "load_manifest"]
