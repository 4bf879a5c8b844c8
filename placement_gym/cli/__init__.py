"""The ``placement-gym`` console script: ``main(argv) -> exit code``.

One module per group of subcommands (`COMMANDS`), imported only when one of its commands runs; each
adds its parser and sets ``run(args) -> int``. Bad input
(unknown names, bad files, missing extras) and a file-system error a command does not handle itself (a
missing file, a full or read-only disk, a path through a file: `OSError`) end with exit code 2 and one
line ``placement-gym: error: ...`` on stderr, never a traceback.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import os
import sys
from contextlib import AbstractContextManager
from typing import NoReturn

from placement_gym.common.extras import EXTRA_OF_MODULE, install_hint

PROG = "placement-gym"

# Command -> the module of placement_gym.cli that adds its parser, and the line `placement-gym --help`
# lists for it. A module is imported only to run (or describe with its own --help) one of its commands:
# the modules import what their commands need (numba, onnx, ...) and the top-level --help needs none of
# it. A module's parsers take their lines from here (`placement_gym.cli.subcommands.add_command`). In the
# order of --help, a module's commands together.
COMMANDS: dict[str, tuple[str, str]] = {
    "demo": ("demo_command", "a short demo on bundled graphs"),
    "agents": ("catalog",
               "list the agents evaluate --agent runs: kind, default budget, the extra each needs"),
    "graphs": ("catalog", "list the bundled graphs, or describe one ONNX file"),
    "clusters": ("catalog", "list the cluster presets and this machine's clusters (cpu<N>, local)"),
    "datasets": ("catalog", "list the graph datasets, their families and splits"),
    "evaluate": ("evaluate", "evaluate a placement with the cost model"),
    "show": ("evaluate", "draw the timeline (Gantt chart) of a placement"),
    "train": ("train_command", "train a learned agent (or run a search agent) on an evaluation budget"),
    "plan": ("plan_command",
             "price a parallel training plan (tensor, pipeline, data, expert parallelism)"),
    "bench": ("bench_command", "time the fast simulator against the reference"),
    "export-graphs": ("export_command", "regenerate the bundled ONNX graphs from their torch definitions"),
    "profile": ("real_commands", "measure a graph's op times and links on real devices"),
    "fidelity": ("real_commands", "compare both cost models with real runs of many placements"),
    "leaderboard": ("leaderboard_command", "validate, submit and render leaderboard submissions"),
}
# Commands that never run the cost model: no notice that it compiles (`first_run`).
_NO_COST_MODEL = ("agents", "graphs", "clusters", "datasets", "export-graphs", "plan")



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


def _chosen_command(argv: list[str]) -> str | None:
    """The command ``argv`` runs: its first word that is not an option (the top level has only
    --help and --version, which take no value)."""
    return next((word for word in argv if not word.startswith("-")), None)


def build_parser(argv: list[str] | None = None) -> argparse.ArgumentParser:
    """The parser of every command; given ``argv``, only the module of the command it runs is imported
    (the others' commands are listed by their `COMMANDS` line alone)."""
    from placement_gym.common.version import __version__

    parser = _Parser(prog=PROG, description=(
        "Device placement as a fast, honest benchmark: list the bundled graphs and clusters, evaluate "
        "and draw placements, time the cost model."))
    parser.add_argument("--version", action="version", version=f"{PROG} {__version__}")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    chosen = None if argv is None else _chosen_command(argv)
    added: set[str] = set()
    for command, (module_name, help_line) in COMMANDS.items():
        if module_name in added:
            continue
        if argv is None or COMMANDS.get(chosen, ("",))[0] == module_name:
            module = importlib.import_module(f"placement_gym.cli.{module_name}")
            (getattr(module, "add_parsers", None) or module.add_parser)(subparsers)
            added.add(module_name)
        else:  # listed, never parsed: argv runs another command
            subparsers.add_parser(command, help=help_line, add_help=False)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run the command line ``argv`` (default: ``sys.argv[1:]``); returns the exit code."""
    try:
        argv = sys.argv[1:] if argv is None else list(argv)
        args = build_parser(argv).parse_args(argv)
        compiles: AbstractContextManager[None] = contextlib.nullcontext()
        if args.command not in _NO_COST_MODEL and getattr(args, "uses_cost_model", True):
            from placement_gym.cli.first_run import compile_progress

            compiles = compile_progress()  # numba's first compiles: a notice and a line every 3 s
        try:
            with compiles:
                return _run_flushed(lambda: args.run(args))
        except ImportError as error:  # a missing optional module: say which extra installs it
            fail(import_error_message(error))
        except ValueError as error:  # ClusterError is a ValueError
            fail(str(error))
        except BrokenPipeError:
            raise
        except OSError as error:  # a missing file, a full or read-only disk, a path through a file
            from placement_gym.common.untrusted import os_error_text

            fail(os_error_text(error))
    except SystemExit as exit_:  # --help, --version and errors: return the code instead of exiting
        code = exit_.code
        return code if isinstance(code, int) else (0 if code is None else 1)
    except KeyboardInterrupt:
        print(f"{PROG}: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # the reader went away (`... --json | head`)
        return _closed_pipe()


def _run_flushed(run) -> int:
    """``run()``, its output flushed here so that a reader that went away is noticed now rather
    than at interpreter exit (where Python would print a traceback)."""
    code = run()
    sys.stdout.flush()
    return code


def _closed_pipe() -> int:
    """Python's recipe for a closed stdout (docs: "Note on SIGPIPE"): point the stdout descriptor at
    devnull, so that the interpreter's own flush at exit cannot fail again, and exit 1 quietly."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):  # stdout has no descriptor (replaced in-process): nothing to redirect
        pass
    return 1


__all__ = ["COMMANDS", "build_parser", "main"]
