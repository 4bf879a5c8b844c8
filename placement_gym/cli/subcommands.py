"""`Subcommands`: the type of what ``ArgumentParser.add_subparsers()`` returns, as each command module
uses it to add its parser (argparse gives that class only a private name)."""

from __future__ import annotations

import argparse
from typing import Any, Protocol


class Subcommands(Protocol):
    """The object a command module adds its subcommand's parser to."""

    def add_parser(self, name: str, **kwargs: Any) -> argparse.ArgumentParser: ...
