"""Optional dependencies: the extra of the project that installs each, and the error that names it.

`require` imports an optional module at the point a feature first needs it, so a user without it
reads which ``pip install 'placement-gym[<extra>]'`` to run instead of a bare "No module named ...".
"""

from __future__ import annotations

import importlib
from types import ModuleType

# The extra that installs each optional third-party module (pyproject.toml [project.optional-dependencies]).
EXTRA_OF_MODULE: dict[str, str] = {
    "torch": "real",
    "ray": "distributed",
    "onnxscript": "export",
    "matplotlib": "viz",
    "rich": "viz",
    "tqdm": "baselines",
    "stable_baselines3": "baselines",
    "sb3_contrib": "baselines",
    "ortools": "baselines",
    "tensorboard": "baselines",
    "torch_geometric": "pyg",
}


class MissingExtraError(ModuleNotFoundError):
    """An optional dependency is not installed; the message names the extra that installs it."""


def install_hint(module: str) -> str:
    """``pip install 'placement-gym[<extra>]'`` for ``module`` (its top-level package)."""
    return f"pip install 'placement-gym[{EXTRA_OF_MODULE.get(module.split('.')[0], 'all')}]'"


def require(module: str, purpose: str) -> ModuleType:
    """``module`` imported, or `MissingExtraError` ("<purpose> needs <module>, which is not installed:
    pip install ...") when it (not something it imports) is missing."""
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as error:
        top = module.split(".")[0]
        if (error.name or "").split(".")[0] != top:
            raise
        raise MissingExtraError(
            f"{purpose} needs {top}, which is not installed: {install_hint(top)}", name=top
        ) from None
