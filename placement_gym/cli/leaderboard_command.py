"""`placement-gym leaderboard validate|submit|render|bounds`: re-check, add and render submissions; compute
and re-check the proven lower bounds the leaderboard shows."""

from __future__ import annotations

import argparse
import functools
import shutil
import sys
from collections.abc import Callable
from pathlib import Path

from placement_gym.cli.common import positive_int
from placement_gym.cli.output import print_json, print_table

OK_MARK, BAD_MARK, SKIP_MARK = "✓", "✗", "-"
# Exit code when the cost model no longer reproduces the suite: the code has to change (bump the
# suite), not a submission; 1 stays the code of a submission's own error.
SUITE_MISMATCH_EXIT = 3


def default_directory() -> Path:
    """The repository's ``leaderboard/`` folder (next to the package)."""
    return Path(__file__).resolve().parents[2] / "leaderboard"


def _exits_on_suite_mismatch(run: Callable[[argparse.Namespace], int]) -> Callable[[argparse.Namespace], int]:
    """``run``, returning `SUITE_MISMATCH_EXIT` with the one-line reason on stderr when the cost model
    does not reproduce the suite, instead of blaming each submission."""
    @functools.wraps(run)
    def guarded(args: argparse.Namespace) -> int:
        from placement_gym.leaderboard.suite import SuiteMismatchError

        try:
            return run(args)
        except SuiteMismatchError as error:
            print(f"placement-gym: {error}", file=sys.stderr)
            return SUITE_MISMATCH_EXIT
    return guarded


def _check_report(paths: list[Path]) -> list:
    """The checks of ``paths``, after making sure the cost model reproduces the current suite (raises
    `SuiteMismatchError` before looking at any submission when it does not)."""
    from placement_gym.leaderboard.suite import CURRENT_SUITE, require_suite
    from placement_gym.leaderboard.validate import validate_file

    require_suite(CURRENT_SUITE)
    return [validate_file(path) for path in paths]


def _check_json(check) -> dict:
    return {
        "file": check.source, "ok": check.ok, "problems": check.problems, "skipped": check.skipped,
        "tasks": [{"task": t.task_id, "ok": t.ok, "reasons": list(t.reasons), "runtime": t.runtime}
                  for t in check.tasks],
    }


def _print_checks(checks: list, as_json: bool) -> None:
    if as_json:
        print_json([_check_json(c) for c in checks])
        return
    rows = []
    for check in checks:
        for problem in check.problems:
            rows.append([check.source, "-", BAD_MARK, problem])
        if check.skipped:
            rows.append([check.source, "-", SKIP_MARK, check.skipped])
        for task in check.tasks:
            rows.append([check.source, task.task_id, OK_MARK if task.ok else BAD_MARK,
                         "; ".join(task.reasons)])
    print_table(["file", "task", "ok", "reason"], rows, title="leaderboard validate",
                numeric=[False] * 4)


def _submission_paths(files: list[str], directory: Path) -> list[Path]:
    if files:
        return [Path(f) for f in files]
    paths = sorted((directory / "submissions").glob("*.json"))
    if not paths:
        raise ValueError(f"no submission files given and none under {directory / 'submissions'}")
    return paths


@_exits_on_suite_mismatch
def run_validate(args: argparse.Namespace) -> int:
    if args.rerun is not None or args.tasks is not None or args.budget is not None:
        return _run_rerun(args)
    checks = _check_report(_submission_paths(args.files, Path(args.dir)))
    _print_checks(checks, args.json)
    return 0 if all(c.ok for c in checks) else 1


def _run_rerun(args: argparse.Namespace) -> int:
    """``validate --rerun FILE [--tasks ...] [--budget N]`` (placement_gym/leaderboard/rerun.py)."""
    if args.rerun is None:
        raise ValueError("--tasks and --budget are options of --rerun FILE")
    if args.files:
        raise ValueError(f"--rerun takes one file; also given: {' '.join(args.files)}")
    return _rerun_command(args.rerun, args.tasks, args.budget, args.json)


def _rerun_command(path: str, tasks: str | None, budget: int | None, as_json: bool) -> int:
    """The command line's ``validate --rerun``: print the verdict per task (a table, or JSON) and
    return the exit code, 0 reproduced, 1 not (the first differing task named on stderr)."""
    from placement_gym.leaderboard.rerun import TaskRerun, rerun_json, rerun_submission

    chosen = None if tasks is None else [t.strip() for t in tasks.split(",") if t.strip()]

    def show(verdict: TaskRerun) -> None:
        mark = "reproduced" if verdict.ok else "NOT reproduced: " + "; ".join(verdict.reasons)
        print(f"  {verdict.task_id}: {mark}", file=sys.stderr, flush=True)

    rerun = rerun_submission(path, chosen, budget, progress=None if as_json else show)
    if as_json:
        print_json(rerun_json(rerun))
    else:
        budget_text = "the agent's default" if rerun.budget is None else str(rerun.budget)
        print(f"re-run of {rerun.algorithm} (seed {rerun.seed}, budget {budget_text}) compared with "
              f"{rerun.compared_with}")
        rows = [[t.task_id, "✓" if t.ok else "✗", str(t.evaluations), "; ".join(t.reasons)]
                for t in rerun.tasks]
        print_table(["task", "ok", "evaluations", "reason"], rows, numeric=[False, False, True, False])
    first = rerun.first_failure
    if first is not None:
        print(f"{path}: not reproduced; first differing task {first.task_id}: {'; '.join(first.reasons)}",
              file=sys.stderr)
        return 1
    if not as_json:
        print(f"{path}: reproduced on {len(rerun.tasks)} task(s)")
    return 0


@_exits_on_suite_mismatch
def run_submit(args: argparse.Namespace) -> int:
    from placement_gym.leaderboard.submission import load_submission, submission_filename

    checks = _check_report([Path(args.file)])
    _print_checks(checks, args.json)
    if not checks[0].ok:
        print(f"{args.file}: not submitted (validation failed)", file=sys.stderr)
        return 1
    target = Path(args.dir) / "submissions" / submission_filename(load_submission(args.file))
    if target.exists() and not args.force:
        raise ValueError(f"{target} exists; pass --force to replace it")
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(args.file, target)
    if not args.json:
        print(f"submitted as {target}; run 'placement-gym leaderboard render' to update the README")
    return 0


@_exits_on_suite_mismatch
def run_render(args: argparse.Namespace) -> int:
    from placement_gym.leaderboard.render import README_NAME, RenderRefused, render

    directory = Path(args.dir)
    try:
        fresh = render(directory, check=args.check, chart=not args.no_chart)
    except RenderRefused as refused:  # a number that fails validation is never published
        _print_checks(refused.checks, args.json)
        print(f"placement-gym: {refused}", file=sys.stderr)
        return 1
    if not args.check:
        print(f"wrote {directory / README_NAME}")
        return 0
    if fresh:
        print(f"{directory / README_NAME} is up to date")
        return 0
    print(f"{directory / README_NAME} is stale; run 'placement-gym leaderboard render'", file=sys.stderr)
    return 1


@_exits_on_suite_mismatch
def run_bounds(args: argparse.Namespace) -> int:
    """``bounds``: write DIR/bounds.json, or with ``--check`` recompute it and name what differs."""
    from placement_gym.leaderboard.suite import CURRENT_SUITE, get_suite, require_suite
    from placement_gym.leaderboard.task_bounds import BOUNDS_NAME, check_bounds, write_bounds

    require_suite(CURRENT_SUITE)
    suite = get_suite(CURRENT_SUITE)
    directory = Path(args.dir)

    def progress(task_id: str) -> None:
        print(f"  {task_id}", file=sys.stderr, flush=True)

    if not args.check:
        print(f"wrote {write_bounds(directory, suite, progress)}")
        return 0
    if not (directory / BOUNDS_NAME).is_file():
        print(f"placement-gym: {directory / BOUNDS_NAME} does not exist; run 'placement-gym leaderboard "
              "bounds'", file=sys.stderr)
        return 1
    problems = check_bounds(directory, suite, progress)
    for problem in problems:
        print(f"{BAD_MARK} {problem}", file=sys.stderr)
    if problems:
        return 1
    print(f"{directory / BOUNDS_NAME}: every bound of suite {suite.version} recomputed and equal")
    return 0


def add_parser(subparsers) -> None:
    """Add ``leaderboard`` with its ``validate``, ``submit``, ``render`` and ``bounds`` subcommands."""
    parser = subparsers.add_parser(
        "leaderboard", help="validate, submit and render leaderboard submissions",
        description="Re-evaluate submitted placements, add a submission, render leaderboard/README.md.")
    commands = parser.add_subparsers(dest="leaderboard_command", metavar="ACTION", required=True)

    def common(sub: argparse.ArgumentParser) -> None:
        sub.add_argument("--dir", default=str(default_directory()),
                         help="leaderboard folder (holds submissions/ and README.md); default: %(default)s")
        sub.add_argument("--json", action="store_true", help="print the checks as JSON")

    validate = commands.add_parser("validate", help="re-evaluate submissions; exit 1 if any task fails, 3 if "
                                   "the cost model no longer reproduces the suite",
                                   description="Re-evaluate every placement of each submission "
                                   "(default: every file under DIR/submissions).")
    validate.add_argument("files", nargs="*", metavar="FILE")
    validate.add_argument("--rerun", metavar="FILE",
                          help="run FILE's algorithm again (same seed, budget and tasks, found through the "
                          "entry-point group placement_gym.agents) and check its placements bit for bit and "
                          "its evaluation counts; exit 0 reproduced, 1 not (the first differing task named)")
    validate.add_argument("--tasks", metavar="IDS",
                          help="with --rerun: only these comma-separated task ids of the file")
    validate.add_argument("--budget", type=positive_int, metavar="N",
                          help="with --rerun: run at N evaluations instead of the file's budget; the run "
                          "then cannot match the file, so two runs at N are compared with each other")
    common(validate)
    validate.set_defaults(run=run_validate)

    submit = commands.add_parser("submit", help="validate a submission and copy it under submissions/")
    submit.add_argument("file", metavar="FILE")
    submit.add_argument("--force", action="store_true", help="replace a submission of the same name")
    common(submit)
    submit.set_defaults(run=run_submit)

    render = commands.add_parser("render", help="validate every submission, then write README.md and the "
                                 "chart; exit 1 (writing nothing) if a submission fails validation")
    render.add_argument("--check", action="store_true", help="exit 1 when the README is stale; write nothing")
    render.add_argument("--no-chart", action="store_true", help="skip the PNG chart")
    common(render)
    render.set_defaults(run=run_render)

    bounds = commands.add_parser("bounds", help="compute the proven lower bound of every task of the current "
                                 "suite into DIR/bounds.json (about half a minute for suite v1)",
                                 description="Compute the proven lower bounds the leaderboard shows "
                                 "(docs/bounds.md) and write DIR/bounds.json; --check recomputes "
                                 "them instead and exits 1 naming each stored bound that differs.")
    bounds.add_argument("--check", action="store_true", help="recompute and compare; write nothing")
    common(bounds)
    bounds.set_defaults(run=run_bounds)
