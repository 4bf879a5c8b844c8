"""Where commands and built datasets write what a user did not place with ``--out``."""

from __future__ import annotations

import os
from pathlib import Path

# Where commands write the files a user did not place with --out: this variable, else
# `DEFAULT_OUTPUT_ROOT`. Never the current folder, so that running a command somewhere leaves no
# files behind there by surprise.
OUTPUT_ENV = "PLACEMENT_GYM_OUTPUT"
DEFAULT_OUTPUT_ROOT = "~/placement-gym-output"
OUTPUT_ROOT_HELP = f"${OUTPUT_ENV}, else {DEFAULT_OUTPUT_ROOT}"


def output_root() -> Path:
    """The folder of the commands' default outputs (`OUTPUT_ENV`, else `DEFAULT_OUTPUT_ROOT`);
    not created here: a command creates what it writes."""
    return Path(os.environ.get(OUTPUT_ENV) or DEFAULT_OUTPUT_ROOT).expanduser()


def is_file(path: str | os.PathLike) -> bool:
    """Whether ``path`` is an existing file (a link to one included), False also for a name no file
    system can hold (too long, a NUL byte), which `Path.is_file` raises on: such a name, typed or handed
    over by a stranger, is an unknown name like any other."""
    try:
        return Path(path).is_file()
    except (OSError, ValueError):
        return False
