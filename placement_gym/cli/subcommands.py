"""`Subcommands`: the type of what ``ArgumentParser.add_subparsers()`` returns, as each command module
uses it to add its parser (argparse gives that class only a private name), and `add_command`, which adds
a command's parser with its help line from `placement_gym.cli.COMMANDS`."""

from __future__ import annotations

import argparse
from typing import Any, Protocol


class Subcommands(Protocol):
    """The object a command module adds its subcommand's parser to."""

    def add_parser(self, name: str, **kwargs: Any) -> argparse.ArgumentParser: ...


def add_command(subparsers: Subcommands, name: str, description: str) -> argparse.ArgumentParser:
    """The parser of the command ``name``: its help line is the one `placement_gym.cli.COMMANDS` lists
    for it (what ``placement-gym --help`` shows without importing the command's module) and
    ``description`` what its own ``--help`` says."""
    from placement_gym.cli import COMMANDS

    return subparsers.add_parser(name, help=COMMANDS[name][1], description=description)
