"""The sizes every Transformer of the model zoo is described by first; each family's config adds its own."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class TransformerSizes:
    """``layers`` Transformer layers (blocks), each ``hidden`` wide with ``heads`` attention heads. A
    family's config extends it, so its own fields follow these three (positionally too)."""

    layers: int
    hidden: int
    heads: int
