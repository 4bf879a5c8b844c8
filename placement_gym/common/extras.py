"""Optional dependencies: the extra of the project that installs each, and the error that names it.

`require` imports an optional module at the point a feature first needs it, so a user without it
reads which command to run (`install_command`) instead of a bare "No module named ...".
"""

from __future__ import annotations

import functools
import importlib
import json
import re
import shlex
from importlib import metadata
from pathlib import Path
from types import ModuleType
from urllib.parse import unquote, urlparse

PROJECT = "placement-gym"
# The project is not on the package index: `pip install 'placement-gym[x]'` would fail there, so a
# hint names the checkout the package came from, when it can be found.
_NAMES_PROJECT = re.compile(rf"""(?m)^name\s*=\s*["']{PROJECT}["']""")

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


def _is_checkout(folder: Path) -> bool:
    """Whether ``folder`` holds this project's pyproject.toml (read at most 64 KB: its own file)."""
    try:
        with open(folder / "pyproject.toml", encoding="utf-8", errors="replace") as file:
            return bool(_NAMES_PROJECT.search(file.read(65536)))
    except OSError:
        return False


def _recorded_source() -> tuple[Path | None, bool]:
    """The local folder pip installed the package from (its ``direct_url.json``, PEP 610) and
    whether that install is editable; (None, False) for a wheel or anything else."""
    try:
        text = metadata.distribution(PROJECT).read_text("direct_url.json")
        record = json.loads(text) if text else {}
    except (metadata.PackageNotFoundError, ValueError, OSError):
        return None, False
    url = urlparse(str(record.get("url", "")))
    dir_info = record.get("dir_info")
    if url.scheme != "file" or not isinstance(dir_info, dict):
        return None, False
    return Path(unquote(url.path)), bool(dir_info.get("editable"))


@functools.lru_cache(maxsize=1)
def package_source() -> tuple[str, Path | None]:
    """Where the imported placement-gym comes from: ``("checkout", folder)`` when Python imports it
    from a checkout (an editable install, or the folder on ``sys.path``), ``("folder", folder)`` when
    pip copied it from a checkout that is still there, else ``("elsewhere", None)``."""
    here = Path(__file__).resolve().parents[2]  # placement_gym/common/extras.py -> the project's root
    if _is_checkout(here):
        return "checkout", here
    folder, editable = _recorded_source()
    if folder is not None and _is_checkout(folder):
        return ("checkout" if editable else "folder"), folder
    return "elsewhere", None


def install_command(extra: str) -> str:
    """The command that installs the optional dependencies of ``extra`` where this placement-gym
    came from: in a checkout ``cd <checkout> && pip install -e '.[extra]'`` (``-e`` keeps the
    checkout what Python imports), from a copied checkout ``pip install '<checkout>[extra]'``, else
    the same from a checkout of the repository, since the project is not on the package index."""
    kind, folder = package_source()
    if kind == "checkout":
        return f"cd {shlex.quote(str(folder))} && pip install -e '.[{extra}]'"
    if kind == "folder":
        return f"pip install {shlex.quote(f'{folder}[{extra}]')}"
    return (f"pip install '<checkout>[{extra}]' from a checkout of the {PROJECT} repository "
            "(it is not on the package index)")


def install_hint(module: str) -> str:
    """`install_command` of the extra that installs ``module`` (its top-level package)."""
    return install_command(EXTRA_OF_MODULE.get(module.split(".")[0], "all"))


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
