"""The ``placement-gym`` console script: ``main(argv) -> exit code``.

One module per group of subcommands; each adds its parser and sets ``run(args) -> int``. Bad input
(unknown names, bad files, missing extras) ends with exit code 2 and one line
``placement-gym: error: ...`` on stderr, never a traceback.
"""

from __future__ import annotations

import argparse
import sys
from typing import NoReturn

import placement_gym.cli.leaderboard_command as leaderboard_command
import placement_gym.cli.real_commands as real_commands
from placement_gym.cli import bench_command, catalog, demo_command, evaluate, export_command, train_command
from placement_gym.extras import EXTRA_OF_MODULE, install_hint

PROG = "placement-gym"



def import_error_message(error: ImportError) -> str:
    """The message of ``error``, with the ``pip install 'placement-gym[<extra>]'`` command of the
    missing module (`EXTRA_OF_MODULE`) when the message does not name one already."""
    message = str(error)
    missing = (getattr(error, "name", None) or "").split(".")[0]
    if "pip install" in message or missing not in EXTRA_OF_MODULE:
        return message
    return f"{message}: {install_hint(missing)}"


class _Parser(argparse.ArgumentParser):
    """An ArgumentParser whose errors are one line (no usage block), as the library's errors are."""

    def error(self, message: str) -> NoReturn:
        hint = f"; see '{self.prog} --help'"
        fail(message + hint)


def fail(message: str) -> NoReturn:
    """Print ``placement-gym: error: <message>`` as one line on stderr and exit with code 2."""
    print(f"{PROG}: error: {' '.join(str(message).split())}", file=sys.stderr)
    raise SystemExit(2)


def build_parser() -> argparse.ArgumentParser:
    from placement_gym.version import __version__

    parser = _Parser(prog=PROG, description=(
        "Device placement as a fast, honest benchmark: list the bundled graphs and clusters, evaluate "
        "and draw placements, time the cost model."))
    parser.add_argument("--version", action="version", version=f"{PROG} {__version__}")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    demo_command.add_parser(subparsers)
    catalog.add_parsers(subparsers)
    evaluate.add_parsers(subparsers)
    train_command.add_parser(subparsers)
    bench_command.add_parser(subparsers)
    export_command.add_parser(subparsers)
    real_commands.add_parsers(subparsers)
    leaderboard_command.add_parser(subparsers)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run the command line ``argv`` (default: ``sys.argv[1:]``); returns the exit code."""
    try:
        args = build_parser().parse_args(argv)
        try:
            return args.run(args)
        except ImportError as error:  # a missing optional module: say which extra installs it
            fail(import_error_message(error))
        except (ValueError, FileNotFoundError) as error:  # ClusterError is a ValueError
            fail(str(error))
    except SystemExit as exit_:  # --help, --version and errors: return the code instead of exiting
        code = exit_.code
        return code if isinstance(code, int) else (0 if code is None else 1)
    except KeyboardInterrupt:
        print(f"{PROG}: interrupted", file=sys.stderr)
        return 130


__all__ = ["build_parser", "main"]
