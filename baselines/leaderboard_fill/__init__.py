"""The scripts that made the leaderboard's baseline entries (``leaderboard/submissions/``), one module
per kind of agent, each run from the repository root with ``python -m``:

- `baselines.leaderboard_fill.classic`: the heuristic, search and exact agents, one submission each;
- `baselines.leaderboard_fill.learned`: the learned agents, three seeds, resumable (it also made the
  small entry CI re-runs, ``leaderboard/reproducible/v1-pg-200-seed0.json``, and, with ``--from-suite``,
  any registry agent's entries of a later suite from an earlier suite's files);
- `baselines.leaderboard_fill.generalisation`: the GNN placers on a suite's generalisation split;
- `baselines.leaderboard_fill.generalisation_v2`: the baselines on a generalisation suite drawn from a
  dataset;
- `baselines.leaderboard_fill.parallel`: the plan agents on a parallel-plan suite.

A suite file names the scripts that fill its suite (its ``fill``, by module name); each script runs on
those suites only, by default on the current one among them (`placement_gym.leaderboard.registry`).
Each runs an agent through the leaderboard harness (`placement_gym.leaderboard.evaluate`) and writes
its submission; ``placement-gym leaderboard validate --rerun`` runs a seeded entry again through
`baselines.registry.harness_agent`, the agent the classic and learned fills run.
"""

from __future__ import annotations

import argparse
import time


def add_suite_options(parser: argparse.ArgumentParser, fill: str) -> None:
    """The options every fill script takes: ``--suite`` (one of the accepted suites whose file names
    ``fill``, default the current one among them), ``--no-render`` and ``--write-suite VERSION``."""
    from placement_gym.leaderboard.registry import suite_registry

    registry = suite_registry()
    filled = registry.filled_by(fill)
    parser.add_argument("--suite", default=registry.default_fill_suite(fill) if filled else None,
                        help=f"suite version the entries run on, one of {', '.join(filled) or 'none yet'} "
                        "(default: %(default)s)")
    parser.add_argument("--no-render", action="store_true")
    parser.add_argument("--write-suite", metavar="VERSION",
                        help="measure the suite of suites/VERSION.json, write its tasks into it and stop")


def suite_written(parser: argparse.ArgumentParser, args: argparse.Namespace, fill: str) -> bool:
    """Do what ``--write-suite`` asks (measure the suite file and write its tasks into it) and say so;
    else check ``--suite`` against the suites ``fill`` fills (the parser's error otherwise)."""
    from placement_gym.leaderboard.registry import SUITE_FOLDER, suite_registry
    from placement_gym.leaderboard.suite_measure import write_suite_file

    if args.write_suite:
        started = time.perf_counter()
        path = SUITE_FOLDER / f"{args.write_suite}.json"
        if not path.is_file():
            parser.error(f"--write-suite: no suite file {path}")
        write_suite_file(path)
        print(f"wrote {path} ({time.perf_counter() - started:.1f} s)")
        return True
    filled = suite_registry().filled_by(fill)
    if args.suite not in filled:
        parser.error(f"--suite must be one of {', '.join(filled)}, got {args.suite!r}")
    return False

