"""Baselines: placement agents built on `placement_gym` (the dependency never goes the other way).

Agents register by name in `baselines.registry` (`get_agent`, `registered_names`): simple ones there, the
expert, partitioning, scheduling (HEFT, Baechi), search and exact agents in their modules, the
learned agents in `baselines.learning`.

`baselines.policies` (needs torch and stable-baselines3, the ``baselines`` extra) holds
`FactorizedPlacementPolicy`, a fast SB3 policy for per-op placement actions. Its names are
re-exported here lazily, so ``import baselines`` works without torch.
"""

from __future__ import annotations

import importlib
from typing import Any

# Imported on first use (`__getattr__`): torch and stable-baselines3 are an optional extra.
_POLICY_NAMES = (
    "FactorizedPlacementPolicy", "MaskableFactorizedPlacementPolicy", "FactorizedCategoricalDistribution",
    "PlacementGraphNet",
)
__all__ = sorted(_POLICY_NAMES)


def __getattr__(name: str) -> Any:
    if name in _POLICY_NAMES:
        return getattr(importlib.import_module("baselines.policies"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
