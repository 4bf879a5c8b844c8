"""`placement-gym export-graphs`: regenerate the bundled ONNX graphs (needs the export extra)."""

from __future__ import annotations

import argparse
from pathlib import Path

from placement_gym.cli.subcommands import Subcommands, add_command

DESCRIPTION = (
    "Export weight-free ONNX graphs from the plain-torch model definitions and update "
    "manifest.json (needs the export extra)."
)
"""What `placement-gym export-graphs --help` says the command does."""


def run(args: argparse.Namespace) -> int:
    # Imported here: the export module is only needed by this subcommand.
    from placement_gym.export import export_graphs

    out = args.out if args.out is not None else checkout_graphs_dir()
    if out is None:  # an installed wheel: its bundled graphs are the package's, never rewritten
        raise ValueError("export-graphs needs --out DIR outside a source checkout (the default, the "
                         "checkout's graphs/ folder, exists only there)")
    manifest = export_graphs(args.names, progress=True, out_dir=out)
    print(f"{len(manifest.get('graphs', {}))} graphs in the manifest")
    return 0


def checkout_graphs_dir() -> Path | None:
    """The ``graphs/`` folder of the source checkout this package runs from, or None (an installed
    wheel, whose graphs are ``placement_gym/_graphs``)."""
    root = Path(__file__).resolve().parents[2]
    return root / "graphs" if (root / "pyproject.toml").is_file() and (root / "graphs").is_dir() else None


def add_parser(subparsers: Subcommands) -> None:
    parser = add_command(subparsers, "export-graphs", DESCRIPTION)
    parser.add_argument("--names", nargs="+", metavar="NAME", help="graphs to export (default: all)")
    parser.add_argument("--out", metavar="DIR",
                        help="output folder (default: the source checkout's graphs/ when run from one; "
                        "required after a pip install)")
    parser.set_defaults(run=run)
