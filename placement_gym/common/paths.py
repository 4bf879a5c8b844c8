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
