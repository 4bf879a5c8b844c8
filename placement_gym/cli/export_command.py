"""`placement-gym export-graphs`: regenerate the bundled ONNX graphs (needs the export extra)."""

from __future__ import annotations

import argparse


def run(args: argparse.Namespace) -> int:
    # Imported here: the export module is only needed by this subcommand.
    from placement_gym.export import export_graphs

    kwargs = {} if args.out is None else {"out_dir": args.out}
    manifest = export_graphs(args.names, progress=True, **kwargs)
    print(f"{len(manifest.get('graphs', {}))} graphs in the manifest")
    return 0


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "export-graphs", help="regenerate the bundled ONNX graphs from their torch definitions",
        description="Export weight-free ONNX graphs from the plain-torch model definitions and update "
                    "manifest.json (needs the export extra: pip install 'placement-gym[export]').")
    parser.add_argument("--names", nargs="+", metavar="NAME", help="graphs to export (default: all)")
    parser.add_argument("--out", metavar="DIR", help="output folder (default: the repository's graphs/)")
    parser.set_defaults(run=run)
