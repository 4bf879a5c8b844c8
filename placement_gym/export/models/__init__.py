"""Plain-torch definitions of the bundled graphs, one module per model family.

These modules import torch at import time; only `placement_gym.export.onnx_export` imports them, lazily,
so that `import placement_gym` never pulls torch in.
"""
