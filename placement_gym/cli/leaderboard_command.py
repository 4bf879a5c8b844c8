"""`placement-gym leaderboard validate|submit|reruns|render|bounds|init`: re-check, add and render
submissions; check the re-run records that make budgets verified; compute and re-check the proven lower
bounds the leaderboard shows; copy the leaderboard's data into a folder of one's own.

Without ``--dir`` the commands use the source checkout's ``leaderboard/`` (running from a checkout) or
else the read-only copy of it packaged in the wheel (``placement_gym/_leaderboard``); the commands that
write (render, submit, bounds, validate --record) refuse the packaged copy and ask for ``--dir DIR``,
which ``leaderboard init DIR`` makes."""

from __future__ import annotations

import argparse
import functools
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from placement_gym.cli.common import FLAG, add_options, positive_int
from placement_gym.cli.output import print_json, print_table
from placement_gym.cli.subcommands import Subcommands, add_command
from placement_gym.common.progress import Progress, ProgressCallback

DESCRIPTION = (
    "Re-evaluate submitted placements, add a submission, render leaderboard/README.md. "
    "validate, render, reruns and bounds report progress on stderr (a bar on a terminal, "
    "else a line at least every 3 s); stdout stays their answer."
)
"""What `placement-gym leaderboard --help` says the command does."""


ACTIONS = {
    "validate": (
        "re-evaluate submissions; exit 1 if any task fails, 3 if "
        "the cost model no longer reproduces the suite",
        "Re-evaluate every placement of each submission "
        "(default: every file under DIR/submissions) and check that the files of "
        "one entry (suite, track, algorithm, budget) declare the same fields but "
        "their seed (a FILE given by name: against the entries of DIR). Checking "
        "a whole folder also refuses a re-run record (reruns.json) that names a "
        "task its file does not hold, and a stored lower bound (bounds*.json) "
        "above a feasible re-simulated runtime of its task.",
    ),
    "init": (
        "copy the leaderboard's data into a new folder DIR, for render, submit and bounds",
        "Copy submissions/, reruns.json and every suite's page and bounds file from {origin} "
        "({default}) into the new (or empty) folder DIR; then run the other commands with --dir "
        "DIR. The commands that write need such a folder after a pip install, where the default "
        "is the read-only copy packaged with placement-gym.",
    ),
    "submit": (
        "validate a submission and copy it under submissions/",
        "Read FILE once, re-evaluate it and copy exactly the bytes validated into "
        "DIR/submissions (atomically, never through a symbolic link). Exit 1, with one line, "
        "when validation fails or the copy is refused: the name exists (without --force), a "
        "link, a full or read-only disk; 3 when the cost model no longer reproduces the suite.",
    ),
    "reruns": (
        "check DIR/reruns.json: every record matches its file, and "
        "a re-run of one recorded file per entry (or all) reproduces",
        "Check the records that make budgets verified "
        "(docs/leaderboard.md): exit 1 naming each record that does not match its "
        "file or whose re-run does not reproduce.",
    ),
    "render": (
        "validate every submission, then write README.md, the "
        "chart and the curves; exit 1 (writing nothing) if a submission fails "
        "validation or DIR has no submissions/ folder",
        "Validate every submission of DIR/submissions, draw every page, "
        "chart and learning curve in memory, then write them atomically, the "
        "pages last. Exit 1 with one line when a submission fails, DIR has no "
        "submissions/ folder, a file or folder is a symbolic link, or the disk is "
        "full or read-only (the files not yet written keep their old contents, "
        "which --check reports); 3 when the cost model no longer reproduces a "
        "suite.",
    ),
    "bounds": (
        "compute the proven lower bound of every task of a suite "
        "into its bounds file in DIR (about half a minute for 13 tasks of at most "
        "5,000 ops; a task of 100,000 ops takes about 15 minutes)",
        "Compute the proven lower bounds the leaderboard shows "
        "(docs/bounds.md) and write the suite's bounds file in DIR (as its suite "
        "file names it: DIR/bounds.json for the current suite); --check recomputes "
        "them instead and exits 1 naming each stored bound that differs.",
    ),
}
"""Each action's help line and the description its ``--help`` shows (``{origin}`` and ``{default}``: where
the leaderboard's data is read from by default), by action."""


OK_MARK, BAD_MARK = "✓", "✗"


NOT_COMPARABLE_MARK = "~"  # a learned entry re-run on another platform than its record's
# Exit code when the cost model no longer reproduces the suite: the code has to change (bump the
# suite), not a submission; 1 stays the code of a submission's own error.
SUITE_MISMATCH_EXIT = 3


# The suite data the commands read, as the wheel packages it (pyproject's wheel include and sources): a
# copy of the committed leaderboard/ folder's submissions/ and of its files at the top (every suite's
# page and bounds file, reruns.json).
PACKAGED_NAME = "_leaderboard"
# What ``--suite`` takes for every suite that has a page (render) or a bounds file (bounds).
ALL_SUITES = "all"
CHECKOUT_ORIGIN = "the source checkout's leaderboard/ folder"
PACKAGED_ORIGIN = "the read-only copy packaged with placement-gym"


def _checkout_directory() -> Path | None:
    """The ``leaderboard/`` folder of the source checkout this package runs from (an editable install),
    or None for an installed wheel."""
    root = Path(__file__).resolve().parents[2]
    folder = root / "leaderboard"
    return folder if (root / "pyproject.toml").is_file() and (folder / "submissions").is_dir() else None


def _packaged_directory() -> Path:
    """The copy of the leaderboard's data installed with the wheel (``placement_gym/_leaderboard``)."""
    return Path(__file__).resolve().parents[1] / PACKAGED_NAME


def default_directory_and_origin() -> tuple[Path, str]:
    """The folder the leaderboard commands use without ``--dir``, and where it comes from: the source
    checkout's ``leaderboard/`` when running from one, else the read-only packaged copy."""
    checkout = _checkout_directory()
    if checkout is not None:
        return checkout, CHECKOUT_ORIGIN
    return _packaged_directory(), PACKAGED_ORIGIN


def default_directory() -> Path:
    """The folder the leaderboard commands use without ``--dir`` (`default_directory_and_origin`)."""
    return default_directory_and_origin()[0]


def _directory(args: argparse.Namespace, writes: bool = False) -> Path:
    """``--dir``, else the default folder. A command that writes (``writes``) never writes into the
    packaged copy, which lives in site-packages: ValueError (one line: exit 2) asking for ``--dir``."""
    if args.dir is not None:
        return Path(args.dir)
    directory, origin = default_directory_and_origin()
    if writes and origin == PACKAGED_ORIGIN:
        raise ValueError(f"the default leaderboard folder is {origin} ({directory}), which commands never "
                         "write into; pass --dir DIR, a folder of your own (make one with 'placement-gym "
                         "leaderboard init DIR')")
    return directory


def _where(directory: Path, args: argparse.Namespace) -> str:
    """``directory``, and where it comes from when it is the default (for messages)."""
    return str(directory) if args.dir is not None else f"{directory} ({default_directory_and_origin()[1]})"


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


def packaged_files() -> tuple[str, ...]:
    """The files beside submissions/ that ``init`` copies: the re-run records, then the page and the
    bounds file of every accepted suite (as its suite file names them)."""
    from placement_gym.leaderboard.registry import suite_registry
    from placement_gym.leaderboard.rerun_records import RECORDS_NAME

    registry = suite_registry()
    names = [name for version in registry.accepted()
             for name in (registry.get(version).spec.page, registry.get(version).spec.bounds) if name]
    return tuple(dict.fromkeys((RECORDS_NAME, *names)))


def _suites(given: list[str] | None, default: tuple[str, ...], every: tuple[str, ...]) -> tuple[str, ...]:
    """The suites named by repeated ``--suite`` options (`ALL_SUITES`: ``every``), each once, in the
    order given; ``default`` without any."""
    if not given:
        return tuple(default)
    return tuple(dict.fromkeys(v for name in given for v in (every if name == ALL_SUITES else (name,))))


def _check_report(paths: list[Path], progress: ProgressCallback) -> list:
    """The checks of ``paths``, after making sure the cost model reproduces the current suite (raises
    `SuiteMismatchError` before looking at any submission when it does not); ``progress`` is told each
    stage and file (`placement_gym.common.progress`)."""
    from placement_gym.leaderboard.suite import get_suite, require_suite
    from placement_gym.leaderboard.validate import validate_file

    current = get_suite()
    progress(f"checking that the cost model reproduces suite {current.version}")
    require_suite(current)
    checks = []
    for done, path in enumerate(paths):
        progress("validating submissions", done, len(paths), path.name)
        checks.append(validate_file(path))
    return checks


def _check_json(check) -> dict:
    return {
        "file": check.source, "ok": check.ok, "problems": check.problems,
        "tasks": [{"task": t.task_id, "ok": t.ok, "reasons": list(t.reasons), "runtime": t.runtime}
                  for t in check.tasks],
    }


def _print_checks(checks: list, as_json: bool, every_row: bool = True) -> None:
    """The checks as JSON, or a table of one row per task check (with ``every_row=False``, only the
    failed ones: a whole leaderboard is more than a thousand rows)."""
    if as_json:
        print_json([_check_json(c) for c in checks])
        return
    rows = []
    for check in checks:
        for problem in check.problems:
            rows.append([check.source, "-", BAD_MARK, problem])
        for task in check.tasks:
            if every_row or not task.ok:
                rows.append([check.source, task.task_id, OK_MARK if task.ok else BAD_MARK,
                             "; ".join(task.reasons)])
    if rows:
        print_table(["file", "task", "ok", "reason"], rows, numeric=[False] * 4,
                    title="leaderboard validate" + ("" if every_row else ": the failed checks (--all lists "
                                                    "every one)"))


def _summary(checks: list) -> str:
    """One line: files, task checks passed and failed, files with problems of their own."""
    passed = sum(task.ok for check in checks for task in check.tasks)
    failed = sum(not task.ok for check in checks for task in check.tasks)
    problems = sum(bool(check.problems) for check in checks)
    bad_files = sum(not check.ok for check in checks)
    verdict = "every file passed" if not bad_files else f"{bad_files} of the files failed" + (
        f" ({problems} unreadable or invalid)" if problems else "")
    return f"{len(checks)} files: {passed} task checks passed, {failed} failed; {verdict}"


def _submission_paths(files: list[str], directory: Path | None, args: argparse.Namespace) -> list[Path]:
    from placement_gym.common.untrusted import inside

    if files:
        return [Path(f) for f in files]
    assert directory is not None
    inside(directory, "submissions")  # a link here would validate files outside the folder
    paths = sorted((directory / "submissions").glob("*.json"))
    if not paths:
        raise ValueError(f"no submission files given and none under the submissions/ of "
                         f"{_where(directory, args)}; pass FILE... or --dir DIR")
    return paths


@_exits_on_suite_mismatch
def run_validate(args: argparse.Namespace) -> int:
    if args.rerun is not None or args.tasks is not None or args.budget is not None or args.record:
        return _run_rerun(args)
    directory = None if args.files else _directory(args)
    paths = _submission_paths(args.files, directory, args)
    folder = []
    with Progress() as progress:
        checks = _check_report(paths, progress)
        progress("checking the files against each other, the re-run records and the bounds")
        if directory is None:
            _check_entries_against_folder(checks, args)
        else:
            folder = _folder_checks(checks, directory)
    _print_checks([*checks, *folder], args.json, every_row=args.all)
    if not args.json:
        problems = f"; {len(folder)} problems of the folder's other files" if folder else ""
        where = "" if directory is None else f"; folder {_where(directory, args)}"
        print(_summary(checks) + problems + where)
    return 0 if all(c.ok for c in [*checks, *folder]) else 1


def _check_entries_against_folder(checks: list, args: argparse.Namespace) -> None:
    """Add to ``checks`` (of files given by name) the `entry_problems` of each file that would join an
    entry of the leaderboard folder (``--dir`` or the default; none when it has no submissions/), judged
    against the folder's readable files that are not among those checked."""
    from placement_gym.leaderboard.submission import SubmissionError, read_submission
    from placement_gym.leaderboard.validate import add_entry_problems

    folder = (Path(args.dir) if args.dir is not None else default_directory()) / "submissions"
    if folder.is_symlink() or not folder.is_dir():
        return
    given = {Path(check.source).resolve() for check in checks}
    others = []
    for path in sorted(folder.glob("*.json")):
        if path.resolve() in given:
            continue
        try:
            others.append((path.name, read_submission(path)[1]))
        except SubmissionError:
            continue  # the folder's own validate names it
    add_entry_problems(checks, others)


def _folder_checks(checks: list, directory: Path) -> list:
    """What a whole leaderboard folder must satisfy beyond each file (``checks``, of every file of its
    submissions/): files of one entry declare alike (`validate.entry_problems`, added to ``checks``);
    and, as checks of their own, no re-run record names a task its file does not hold
    (`rerun_records.record_problems`) and no stored lower bound is above a feasible re-simulated runtime
    of its task (`task_bounds.impossible_bounds`)."""
    from placement_gym.leaderboard.ranking import best_known_runtimes
    from placement_gym.leaderboard.registry import suite_registry
    from placement_gym.leaderboard.rerun_records import RECORDS_NAME, read_records, record_problems
    from placement_gym.leaderboard.submission import read_submission
    from placement_gym.leaderboard.suite import get_suite
    from placement_gym.leaderboard.task_bounds import impossible_bounds, load_bounds
    from placement_gym.leaderboard.validate import SubmissionCheck, add_entry_problems

    add_entry_problems(checks)
    readable = [check for check in checks if check.data is not None]
    records = read_records(directory)
    files = {}
    for check in readable:
        name = Path(check.source).name
        if name in records:
            files[name] = (read_submission(check.source)[0], check.data)
    extra = [SubmissionCheck(RECORDS_NAME, record_problems(records, files))]
    # The re-simulated runtime of each feasible placement, in the form `best_known_runtimes` reads.
    simulated = [(check.source, {"suite": check.data["suite"], "results": {
        task.task_id: {"runtime": task.runtime, "feasible": task.feasible} for task in check.tasks
        if task.runtime is not None and task.feasible}}) for check in readable]
    for version in suite_registry().accepted("cost_model"):
        suite = get_suite(version)
        problems = impossible_bounds(load_bounds(directory, suite), best_known_runtimes(simulated, suite))
        extra.append(SubmissionCheck(f"bounds of suite {version}", problems))
    return [check for check in extra if check.problems]


def _run_rerun(args: argparse.Namespace) -> int:
    """``validate --rerun FILE [--tasks ...] [--budget N]`` (placement_gym/leaderboard/rerun.py)."""
    if args.rerun is None:
        raise ValueError("--tasks, --budget and --record are options of --rerun FILE")
    if args.files:
        raise ValueError(f"--rerun takes one file; also given: {' '.join(args.files)}")
    if args.record and args.budget is not None:
        raise ValueError("--record needs a re-run at the file's own budget; drop --budget")
    record_in = _directory(args, writes=True) if args.record else None
    return _rerun_command(args.rerun, args.tasks, args.budget, args.json, record_in)


def _recorded_name(path: Path, directory: Path) -> str:
    """The file name under which ``path`` is recorded: it must be a file of ``directory/submissions``."""
    if path.resolve().parent != (directory / "submissions").resolve():
        raise ValueError(f"--record: {path} is not a file of {directory / 'submissions'}; records are kept "
                         "for the leaderboard's own submissions (submit it first)")
    return path.name


def _task_ids(text: str | None) -> list[str] | None:
    """The ids of a ``--tasks`` option (comma-separated, blanks dropped); None when it was not given."""
    return None if text is None else [t.strip() for t in text.split(",") if t.strip()]


def _rerun_command(path: str, tasks: str | None, budget: int | None, as_json: bool,
                   record_in: Path | None = None) -> int:
    """The command line's ``validate --rerun``: print the verdict per task (a table, or JSON) and
    return the exit code, 0 reproduced, 1 not (the first differing task named on stderr). With
    ``record_in`` (a leaderboard folder), a reproduced re-run is recorded in its ``reruns.json``."""
    from placement_gym.leaderboard.rerun import TaskRerun, rerun_json, rerun_submission
    from placement_gym.leaderboard.rerun_records import write_record

    chosen = _task_ids(tasks)
    if record_in is not None:
        from placement_gym.leaderboard.submission import read_submission

        name = _recorded_name(Path(path), record_in)
        raw, _ = read_submission(path)

    def show(verdict: TaskRerun) -> None:
        mark = "reproduced" if verdict.ok else "NOT reproduced: " + "; ".join(verdict.reasons)
        print(f"  {verdict.task_id}: {mark}", file=sys.stderr, flush=True)

    with Progress() as progress:  # a task's re-run may take minutes; `show` writes once each ends
        progress(f"re-running {path}")
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
    if record_in is not None:
        written = write_record(record_in, name, raw, [t.task_id for t in rerun.tasks])
        if not as_json:
            print(f"recorded in {written}")
    return 0


@_exits_on_suite_mismatch
def run_reruns(args: argparse.Namespace) -> int:
    """``reruns [--all | --part K/N] [--seed N] [--since REF]``: check DIR/reruns.json
    (placement_gym/leaderboard/rerun_records.py): every record matches its file and names only tasks of
    it, and the recorded tasks of a sample of them (one file per entry drawn with a random seed, or all),
    and of every record new or changed since git revision REF, reproduce."""
    from placement_gym.leaderboard.rerun_records import (
        RECORDS_NAME,
        changed_records,
        new_seed,
        parse_part,
        read_records,
        records_at,
        sample_per_entry,
        this_platform,
    )

    if args.all and args.part:
        print("placement-gym: leaderboard reruns: --all and --part exclude each other", file=sys.stderr)
        return 2
    try:
        part = parse_part(args.part) if args.part else None
    except ValueError as error:
        print(f"placement-gym: leaderboard reruns: {error}", file=sys.stderr)
        return 2
    directory = _directory(args)
    records = read_records(directory)
    try:  # before the re-runs: a wrong revision is a one-line error, not minutes later
        since = None if args.since is None else changed_records(records_at(directory, args.since), records)
    except ValueError as error:
        print(f"placement-gym: leaderboard reruns: {error}", file=sys.stderr)
        return 2
    entries, problems = _recorded_entries(directory, records)
    seed = new_seed() if args.seed is None else args.seed
    chosen = sorted(n for names in entries.values() for n in names) if args.all else \
        sample_per_entry(entries, records, part, seed)
    valid = {name for names in entries.values() for name in names}
    new = [name for name in since or () if name in valid and name not in chosen]
    if not args.all:
        print(f"drawn with --seed {seed}" + (f"; {len(new)} more new or changed since {args.since}"
                                             if since is not None else ""), flush=True)
    with Progress() as progress:
        not_comparable = _rerun_records(directory, records, entries, [*chosen, *new], problems, progress)
    for problem in problems:
        print(f"{BAD_MARK} {problem}", file=sys.stderr)
    if problems:
        return 1
    what = ("every record" if args.all else "one file per entry" if part is None
            else f"one file per entry of bucket {part[0]} of {part[1]}")
    if since is not None:
        what += f" and every record new or changed since {args.since} ({len(since)})"
    apart = (f", {len(not_comparable)} learned files not comparable on {this_platform()}" if not_comparable
             else "")
    count = len(chosen) + len(new)
    print(f"{directory / RECORDS_NAME}: {len(records)} records match their files; re-ran {what} "
          f"({count} files), {count - len(not_comparable)} reproduced{apart}, none failed")
    return 0


def _recorded_entries(directory: Path, records: dict) -> tuple[dict[tuple, list[str]], list[str]]:
    """The recorded files of ``directory`` by entry (track, algorithm, budget), and one problem per
    record that does not match its file: no such file, other bytes, or tasks the file does not hold."""
    from placement_gym.common.untrusted import inside, shown
    from placement_gym.leaderboard.rerun_records import file_sha256, record_problems
    from placement_gym.leaderboard.submission import read_submission

    folder = directory / "submissions"
    problems = []
    entries: dict[tuple, list[str]] = {}
    for name in sorted(records):
        path = inside(directory, Path("submissions") / name)
        if not os.path.lexists(path):
            problems.append(f"{shown(name)}: recorded, but there is no such file under {folder}")
            continue
        raw, data = read_submission(path)
        if file_sha256(raw) != records[name].sha256:
            problems.append(f"{name}: the file changed since its re-run was recorded; run 'placement-gym "
                            f"leaderboard validate --rerun {path} --record'")
            continue
        foreign = record_problems(records, {name: (raw, data)})
        if foreign:
            problems += foreign
            continue
        key = (data.get("track", "cost_model"), data["algorithm"], repr(data.get("budget")))
        entries.setdefault(key, []).append(name)
    return entries, problems


def _rerun_records(directory: Path, records: dict, entries: dict[tuple, list[str]], chosen: list[str],
                   problems: list[str], progress: ProgressCallback) -> list[str]:
    """Re-run the recorded tasks of the files ``chosen``, printing a line per file (``progress`` told
    each file as it starts); a file that does not reproduce is added to ``problems``, or, for a learned
    entry recorded on another platform, returned as not comparable here (rerun_records' docstring)."""
    from placement_gym.evaluation.agents import describe_agents
    from placement_gym.leaderboard.rerun import rerun_submission
    from placement_gym.leaderboard.rerun_records import this_platform

    here = this_platform()
    learned = {row["name"] for row in describe_agents() if row["kind"] == "learned"}
    algorithms = {name: key[1] for key, names in entries.items() for name in names}
    not_comparable = []
    for done, name in enumerate(chosen):
        progress("re-running recorded files", done, len(chosen), name)
        rerun = rerun_submission(directory / "submissions" / name, records[name].tasks)
        elsewhere = algorithms[name] in learned and records[name].platform != here
        mark = OK_MARK if rerun.ok else (NOT_COMPARABLE_MARK if elsewhere else BAD_MARK)
        print(f"{mark} {name}: {', '.join(records[name].tasks)}", flush=True)
        if rerun.ok:
            continue
        first = rerun.first_failure
        if elsewhere:  # torch's float kernels differ between CPU makers (rerun_records' docstring)
            not_comparable.append(f"{name}: differs on {first.task_id}, but it was learned with torch on "
                                  f"{records[name].platform} and this is {here}: not comparable here")
        else:
            problems.append(f"{name}: not reproduced on {first.task_id}: {'; '.join(first.reasons)}")
    for note in not_comparable:
        print(f"{NOT_COMPARABLE_MARK} {note}")
    return not_comparable


def _read_and_check(path: str) -> tuple:
    """Read the submission ``path`` once and check those bytes: (its `SubmissionCheck`, the bytes, the
    parsed file or None when it cannot be read). Raises `SuiteMismatchError` first, as `_check_report`."""
    from placement_gym.leaderboard.submission import SubmissionError, read_submission
    from placement_gym.leaderboard.suite import require_suite
    from placement_gym.leaderboard.validate import SubmissionCheck, validate_submission

    require_suite()
    try:
        raw, data = read_submission(path)
    except SubmissionError as error:
        return SubmissionCheck(path, [str(error)]), b"", None
    return validate_submission(data, path), raw, data


def _refuse_another_entrys_file(target: Path, data: dict) -> None:
    """Raise `UntrustedFileError` when ``target`` holds a file of another entry than ``data``'s (another
    algorithm or budget whose names make the same file name): --force replaces a run of one's own entry,
    never another's."""
    from placement_gym.common.untrusted import UntrustedFileError
    from placement_gym.leaderboard.submission import SubmissionError, read_submission
    from placement_gym.leaderboard.validate import entry_key

    if not os.path.lexists(target):
        return
    try:
        _, existing = read_submission(target)
        theirs = entry_key(existing)
    except (SubmissionError, KeyError, TypeError):
        return  # not a readable submission: --force replaces it, as it always did
    if theirs != entry_key(data):
        raise UntrustedFileError(f"{target} is a file of another entry (algorithm {theirs[2]!r}, budget "
                                 f"{theirs[3]}); --force replaces only a file of the same algorithm and "
                                 "budget")


@_exits_on_suite_mismatch
def run_submit(args: argparse.Namespace) -> int:
    """``submit FILE``: read FILE once, validate those bytes and copy exactly them into DIR/submissions
    (`placement_gym.common.untrusted.write_inside`: atomically, never through a symbolic link, the
    folder locked from the check that the name is free to the rename, so that of two submits of one
    name without --force one fails). Exit 1, with one line on stderr, when validation fails or the copy
    is refused: the name exists (without --force), a symbolic link, a file-system error (a full or
    read-only disk, DIR not a folder); 3 when the cost model no longer reproduces the suite."""
    from placement_gym.common.untrusted import UntrustedFileError, inside, os_error_text, write_inside
    from placement_gym.leaderboard.submission import submission_filename

    directory = _directory(args, writes=True)
    check, raw, data = _read_and_check(args.file)
    _print_checks([check], args.json)
    if not check.ok:
        print(f"{args.file}: not submitted (validation failed)", file=sys.stderr)
        return 1
    relative = Path("submissions", submission_filename(data))
    target = directory / relative
    try:
        if args.force:  # `a-1k` at the default budget and `a` at 1,000 share a file name: not each other's
            _refuse_another_entrys_file(inside(directory, relative), data)
        write_inside(directory, relative, raw, exclusive=not args.force, lock=True)
    except FileExistsError:
        print(f"placement-gym: {target} exists; pass --force to replace it; not submitted", file=sys.stderr)
        return 1
    except UntrustedFileError as error:
        print(f"placement-gym: {error}; not submitted", file=sys.stderr)
        return 1
    except OSError as error:
        print(f"placement-gym: cannot write {os_error_text(error)}; not submitted", file=sys.stderr)
        return 1
    if not args.json:
        again = "" if args.dir is None else f" --dir {directory}"
        print(f"submitted as {target}; run 'placement-gym leaderboard render{again}' to update the README")
    return 0


@_exits_on_suite_mismatch
def run_render(args: argparse.Namespace) -> int:
    """``render``: validate every submission, then write the pages, charts and curves of the suites
    (`render_pages`); with ``--check`` compare them instead. Exit 1, with one line on stderr, when a
    page, chart or curve is stale (--check), a submission fails, or the folder is refused (no
    submissions/, a link, not a folder, a file-system error such as a full or read-only disk: the
    files not yet written keep their old contents, which --check reports); 3 when the cost model no
    longer reproduces a suite."""
    from placement_gym.common.untrusted import UntrustedFileError, os_error_text
    from placement_gym.leaderboard.layout import default_suites, suite_page
    from placement_gym.leaderboard.registry import suite_registry
    from placement_gym.leaderboard.render import RenderRefused, render_pages

    directory = _directory(args, writes=not args.check)
    suites = _suites(args.suite, default_suites(), suite_registry().with_page())
    try:
        with Progress() as progress:
            rendered = render_pages(directory, suites, check=args.check, chart=not args.no_chart,
                                    progress=progress)
    except RenderRefused as refused:  # a number that fails validation is never published
        _print_checks(refused.checks, args.json)
        print(f"placement-gym: {refused}", file=sys.stderr)
        return 1
    except UntrustedFileError as error:  # a link in the folder: nothing is read or written through it
        print(f"placement-gym: {error}", file=sys.stderr)
        return 1
    except OSError as error:
        kept = "" if args.check else "; files not written keep their old contents (render --check names them)"
        print(f"placement-gym: cannot render: {os_error_text(error)}{kept}", file=sys.stderr)
        return 1
    drawn = _rendered_text(directory, suites, rendered.names)
    if not args.check:
        print(f"wrote {drawn}")
        return 0
    stale = rendered.stale
    if not stale:
        print(f"{drawn} {'are' if len(rendered.names) > 1 else 'is'} up to date")
        return 0
    for suite in suites:
        layout = suite_page(suite)
        own = [name for name in stale if name in (layout.page, layout.chart)
               or Path(name).parent.as_posix() == layout.curves]
        if own:
            listed = ", ".join(str(directory / name) for name in own[:3])
            more = f" and {len(own) - 3} more" if len(own) > 3 else ""
            again = "" if suite in default_suites() else f" --suite {suite}"
            print(f"{listed}{more} stale or missing; run 'placement-gym leaderboard render{again}'",
                  file=sys.stderr)
    return 1


def _rendered_text(directory: Path, suites: tuple[str, ...], names: tuple[str, ...]) -> str:
    """What `render_pages` drew, for the closing line: every page by its path, then per suite the number
    of charts and of curves under its curves folder (such as "<folder>/README.md, 1 chart
    (<folder>/leaderboard.png) and 47 curves under <folder>/curves")."""
    from placement_gym.leaderboard.layout import suite_page

    pages = {suite_page(suite).page for suite in suites}
    parts = [str(directory / name) for name in names if name in pages]
    for suite in suites:
        layout = suite_page(suite)
        if layout.chart is None:
            continue
        charts = [name for name in names if name == layout.chart]
        curves = sum(Path(name).parent.as_posix() == layout.curves for name in names)
        chart_text = f"1 chart ({directory / charts[0]})" if charts else "no chart"
        if charts or curves:
            parts.append(f"{chart_text} and {curves} curve{'' if curves == 1 else 's'} under "
                         f"{directory / layout.curves}")
    return ", ".join(parts)


@_exits_on_suite_mismatch
def run_bounds(args: argparse.Namespace) -> int:
    """``bounds``: write the suite's bounds file (DIR/bounds.json for the current suite,
    DIR/bounds_<SUITE>.json for another), or with ``--check`` recompute it (``--tasks``: those tasks
    only; ``--part K/N``: part K of N of the tasks of every suite named, split by cost) and name what
    differs."""
    from placement_gym.leaderboard.registry import suite_registry
    from placement_gym.leaderboard.rerun_records import parse_part
    from placement_gym.leaderboard.suite import get_suite, require_suite
    from placement_gym.leaderboard.task_bounds import bounds_name, check_bounds, write_bounds

    current = get_suite().version
    versions = list(_suites(args.suite, (current,), suite_registry().with_bounds()))
    for option, value in (("--tasks", args.tasks), ("--part", args.part)):
        if value is not None and not args.check:
            raise ValueError(f"{option} is an option of --check (the bounds file holds every task of the "
                             "suite)")
    if args.tasks is not None and args.part is not None:
        raise ValueError("--tasks and --part exclude each other")
    if len(versions) > 1 and args.part is None:
        raise ValueError("several --suite are taken with --check --part only; name one suite otherwise")
    part = parse_part(args.part) if args.part is not None else None
    chosen = _task_ids(args.tasks)
    if chosen == []:
        raise ValueError("--tasks names no task; give comma-separated task ids of the suite")
    for version in versions:
        require_suite(version)
    suites = [get_suite(version) for version in versions]
    directory = _directory(args, writes=not args.check)

    if not args.check:
        with Progress() as progress:
            written = write_bounds(directory, suites[0], progress)
        print(f"wrote {written}")
        return 0
    missing = [suite for suite in suites if not (directory / bounds_name(suite)).is_file()]
    if missing:
        again = "" if missing[0].version == current else f" --suite {missing[0].version}"
        print(f"placement-gym: {directory / bounds_name(missing[0])} does not exist; run "
              f"'placement-gym leaderboard bounds{again}'", file=sys.stderr)
        return 1
    if part is not None:
        return _check_bounds_part(directory, suites, part)
    suite = suites[0]
    with Progress() as progress:
        problems = check_bounds(directory, suite, progress, chosen)
    for problem in problems:
        print(f"{BAD_MARK} {problem}", file=sys.stderr)
    if problems:
        return 1
    which = "every bound" if chosen is None else f"the bounds of {len(chosen)} task(s)"
    print(f"{directory / bounds_name(suite)}: {which} of suite {suite.version} recomputed and equal")
    return 0


def _check_bounds_part(directory: Path, suites: list, part: tuple[int, int]) -> int:
    """``bounds --check --part K/N``: recompute part K of the cost-balanced split of the stored tasks of
    ``suites`` (`task_bounds.check_bounds_part`); exit 1 naming each bound that differs."""
    import time

    from placement_gym.leaderboard.task_bounds import check_bounds_part

    started = time.monotonic()
    with Progress() as progress:
        chosen, problems = check_bounds_part(directory, suites, part, progress)
    for problem in problems:
        print(f"{BAD_MARK} {problem}", file=sys.stderr)
    if problems:
        return 1
    names = ", ".join(suite.version for suite in suites)
    print(f"bounds of suites {names}, part {part[0]} of {part[1]} (split by cost): {len(chosen)} task(s) "
          f"recomputed and equal to every bounds file that stores them ({time.monotonic() - started:.0f} s)")
    return 0


def run_init(args: argparse.Namespace) -> int:
    """``init DIR``: copy the default folder's data (submissions/ and `packaged_files`) into the new
    folder DIR, for the commands that write (render, submit, bounds) to work on. The copy is made in a
    temporary folder beside DIR and renamed into place, so that a failure (a full disk) leaves no
    half-made DIR. ValueError (exit 2) when DIR exists and is not an empty folder: a file, a symbolic
    link (even a dangling one), a folder with anything in it."""
    import shutil
    import tempfile

    source, origin = default_directory_and_origin()
    target = Path(args.target)
    if os.path.lexists(target) and (target.is_symlink() or not target.is_dir() or any(target.iterdir())):
        raise ValueError(f"{target} exists and is not an empty folder; init makes a new leaderboard folder")
    if not (source / "submissions").is_dir():
        raise FileNotFoundError(f"{source} ({origin}) has no submissions/ to copy: a broken install?")
    parent = target.absolute().parent
    parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{target.name}.", suffix=".tmp", dir=parent))
    try:
        count = _copy_data(source, staging)
        staging.chmod(0o755)  # mkdtemp's folder is the owner's alone
        os.rename(staging, target)  # replaces an empty folder; fails on anything else
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    print(f"copied {count} submissions and {', '.join(packaged_files())} from {source} ({origin}) into "
          f"{target}; use it with --dir {target}")
    return 0


def _copy_data(source: Path, target: Path) -> int:
    """Copy the submissions and `packaged_files` of ``source`` into the empty folder ``target``; returns
    the number of submissions. Plain files only, never a link: the copy is as trustworthy as the
    packaged data it comes from."""
    import shutil

    (target / "submissions").mkdir()
    count = 0
    for path in sorted((source / "submissions").glob("*.json")):
        if path.is_file() and not path.is_symlink():
            shutil.copyfile(path, target / "submissions" / path.name)
            count += 1
    for name in packaged_files():
        if (source / name).is_file() and not (source / name).is_symlink():
            shutil.copyfile(source / name, target / name)
    return count


def add_parser(subparsers: Subcommands) -> None:
    """Add ``leaderboard`` with its ``validate``, ``submit``, ``reruns``, ``render`` and ``bounds``
    subcommands."""
    from placement_gym.leaderboard.registry import suite_registry

    registry = suite_registry()
    current = registry.current().version
    parser = add_command(subparsers, "leaderboard", DESCRIPTION)
    commands = parser.add_subparsers(dest="leaderboard_command", metavar="ACTION", required=True)

    default, origin = default_directory_and_origin()
    read_only = "" if origin == CHECKOUT_ORIGIN else (
        "; commands that write need a --dir of your own: 'placement-gym leaderboard init DIR' makes one")

    def common(sub: argparse.ArgumentParser) -> None:
        # Resolved when the command runs (`_directory`): None says "the default" to the messages.
        sub.add_argument("--dir", default=None,
                         help=f"leaderboard folder (holds submissions/, bounds.json, reruns.json, "
                         f"README.md); default: {origin}, {default}{read_only}")
        sub.add_argument("--json", action="store_true", help="print the checks as JSON")

    def action(name: str, run: Callable, rows: tuple, shared: bool = True, **defaults: Any) -> None:
        """Adds the action ``name`` (its `ACTIONS` lines) with the arguments of ``rows`` (`add_options`),
        then with ``shared`` the ones every action that reads DIR takes (``common``); ``run`` runs it."""
        help_line, description = ACTIONS[name]
        parser = commands.add_parser(
            name, help=help_line, description=description.format(origin=origin, default=default)
        )
        add_options(parser, rows)
        if shared:
            common(parser)
        parser.set_defaults(run=run, **defaults)

    # Each action's arguments, as rows (name, argparse keywords, help), in the order --help lists them.
    action("validate", run_validate, (
        ("files", {"nargs": "*", "metavar": "FILE"}, None),
        ("--rerun", {"metavar": "FILE"},
         "run FILE's algorithm again (same seed, budget and tasks, found through the "
         "entry-point group placement_gym.agents) and check its placements bit for bit and "
         "its evaluation counts; exit 0 reproduced, 1 not (the first differing task named)"),
        ("--tasks", {"metavar": "IDS"}, "with --rerun: only these comma-separated task ids of the file"),
        ("--record", FLAG,
         "with --rerun: when it reproduces, record it in DIR/reruns.json, which makes "
         "the entry's budget verified (docs/leaderboard.md); FILE must be under "
         "DIR/submissions"),
        ("--budget", {"type": positive_int, "metavar": "N"},
         "with --rerun: run at N evaluations instead of the file's budget; the run "
         "then cannot match the file, so two runs at N are compared with each other"),
        ("--all", FLAG, "list every task check (default: only the failed ones, then a summary line)"),
    ))
    action("init", run_init, (("target", {"metavar": "DIR"}, None),), shared=False, uses_cost_model=False)
    action("submit", run_submit, (
        ("file", {"metavar": "FILE"}, None),
        ("--force", FLAG, "replace a submission of the same name (two submits of one name take turns)"),
    ))
    action("reruns", run_reruns, (
        ("--all", FLAG,
         "re-run every record's tasks (default: one file per entry, drawn at random; "
         "hours for the whole leaderboard)"),
        ("--part", {"metavar": "K/N"},
         "re-run only the entries in bucket K of N (by the hash of the entry: track, "
         "algorithm, budget), or day/N for the day's bucket (CI: day/3, every entry every "
         "third day); every record's file hash is still checked"),
        ("--seed", {"type": int, "metavar": "N"},
         "draw the one file per entry with seed N (default: a fresh seed from the "
         "operating system's random source, printed, so that a run can be repeated)"),
        ("--since", {"metavar": "REF"},
         "also re-run every task of every record that is new or changed since the "
         "records file of git revision REF (read from git; CI: the base of the change "
         "under test), so that a new or changed file counts only once its re-run reproduced"),
    ))
    action("render", run_render, (
        ("--check", FLAG,
         "exit 1 naming what is stale: a page, a chart or a curve (compared byte for "
         "byte); write nothing"),
        ("--no-chart", FLAG, "skip the PNG chart and curves (with --check: compare the pages only)"),
        ("--suite", {"choices": (*registry.with_page(), ALL_SUITES), "action": "append"},
         "the suite whose page to render, where its suite file puts the page, chart and "
         f"curves (default: the current suite of each track, {', '.join(registry.currents())}:"
         " the README and the generalisation track's page); repeat it for several suites, "
         f"the submissions validated once; '{ALL_SUITES}': every suite with a page"),
    ))
    action("bounds", run_bounds, (
        ("--check", FLAG, "recompute and compare; write nothing"),
        ("--tasks", {"metavar": "IDS"},
         "with --check: recompute only these comma-separated task ids of the suite "
         "(a sample, where the whole suite takes long)"),
        ("--part", {"metavar": "K/N"},
         "with --check: recompute part K of N of the tasks of every suite named (each "
         "task once, the parts balanced by their cost, estimated from the task's ops), or "
         f"day/N for the day's part (CI: day/3 over --suite {ALL_SUITES}, every stored bound "
         "every third day)"),
        ("--suite", {"choices": (*registry.with_bounds(), ALL_SUITES), "action": "append"},
         f"the suite whose bounds to compute (default: {current}); with --check --part "
         f"it may be repeated; '{ALL_SUITES}': every suite with a bounds file"),
    ))
