"""The suite registry: every suite file of the suite folder, read and checked, by version.

A suite is a file of `SUITE_FOLDER`, ``<version>.json``: its frozen task figures (`suite`) and what the
leaderboard's code needs to know of it (`suite_spec`). Adding a suite is adding a file; no code names
a suite version. `load_registry` reads every file of a folder as the leaderboard reads what comes from
users (`placement_gym.common.untrusted`): regular files only, never through a symbolic link, at most
`MAX_SUITE_BYTES` bytes of strict JSON nested at most `MAX_NESTING` levels, at most `MAX_SUITES` files;
every field's type is checked before it is used (`SuiteFileError` names the file and the field). Then
the suites are checked against each other (`registry_problems`): at most one current suite per track
and one for the cost-model track, no page, chart, curves folder or bounds file claimed twice, a suite
that inherits another starts with the other's tasks as it froze them.

`suite_registry` is the registry the leaderboard uses: the suites of `SUITE_FOLDER`, read once;
`use_suite_folder` puts the suites of another folder in its place while a ``with`` block runs (a copy
of the suite folder with a suite of one's own added, as ``tests/leaderboard/test_toy_suite.py`` does).
"""

from __future__ import annotations

import contextlib
import math
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from placement_gym.common.untrusted import UntrustedFileError, read_json, shown
from placement_gym.leaderboard.suite import Suite, suite_from_dict
from placement_gym.leaderboard.suite_spec import VERSION_PATTERN, SuiteFileError

# The suite files shipped in the package.
SUITE_FOLDER = Path(__file__).resolve().parent / "suites"
# The largest suite file (300 dataset tasks) is about 0.3 MB.
MAX_SUITE_BYTES = 16 * 2**20
MAX_SUITES = 256
# A suite file nests 6 levels (file > tasks > task > probes > probe > peak memory).
MAX_NESTING = 8
# The track whose current suite the leaderboard's README ranks and `get_suite()` gives.
MAIN_TRACK = "cost_model"
_HEX = re.compile(r"[0-9a-f]{1,64}")
_TASK_FIELDS = {"task_id": str, "graph_sha256": str, "best_single_runtime": float, "lower_bound": float,
                "single_device_runtimes": list, "probes": list, "cluster_sha256": str,
                "structure_sha256": str}


@dataclass(frozen=True)
class SuiteRegistry:
    """The suites by version, in version order (`version_order`)."""

    suites: dict[str, Suite]

    def get(self, version: str | None = None) -> Suite:
        """Suite ``version`` (None: the current suite of the cost-model track); a ValueError naming the
        known versions for another."""
        if version is None:
            return self.current()
        if version not in self.suites:
            raise ValueError(f"unknown suite version {version!r}; known: {', '.join(self.suites)}")
        return self.suites[version]

    def current(self, track: str = MAIN_TRACK) -> Suite:
        """The current suite of ``track`` (the one its main page ranks); ValueError when it has none."""
        for suite in self.suites.values():
            if suite.spec.status == "current" and suite.spec.track == track:
                return suite
        raise ValueError(f"no current suite of the {track} track among {', '.join(self.suites) or 'none'}")

    def currents(self) -> tuple[str, ...]:
        """The current suite of each track, in version order: what ``render`` renders by default."""
        return tuple(v for v, s in self.suites.items() if s.spec.status == "current")

    def accepted(self, track: str | None = None) -> tuple[str, ...]:
        """The suites whose submissions are accepted (current or accepted), of ``track`` when given."""
        return tuple(v for v, s in self.suites.items()
                     if s.spec.accepted and (track is None or s.spec.track == track))

    def retired(self) -> dict[str, str]:
        """Retired suite -> why (its ``retired_because``)."""
        return {v: s.spec.retired_because for v, s in self.suites.items() if s.spec.status == "retired"}

    def with_page(self) -> tuple[str, ...]:
        """The accepted suites that have a page (what ``render --suite`` takes)."""
        return tuple(v for v in self.accepted() if self.suites[v].spec.page is not None)

    def with_bounds(self) -> tuple[str, ...]:
        """The accepted suites that have a bounds file (what ``bounds --suite`` takes)."""
        return tuple(v for v in self.accepted() if self.suites[v].spec.bounds is not None)

    def requiring_pretraining(self) -> tuple[str, ...]:
        return tuple(v for v, s in self.suites.items() if s.spec.requires_pretraining)

    def filled_by(self, fill: str, drafts: bool = False) -> tuple[str, ...]:
        """The accepted suites whose ``fill`` names the script ``fill`` of ``baselines.leaderboard_fill``,
        and with ``drafts`` the drafts that do (what a script's ``--write-suite`` measures)."""
        return tuple(v for v, s in self.suites.items() if fill in s.spec.fill
                     and (s.spec.accepted or (drafts and s.spec.status == "draft")))

    def default_fill_suite(self, fill: str) -> str:
        """The suite a fill script runs on without ``--suite``: the current suite among those it fills,
        else the last of them; ValueError when it fills none."""
        filled = self.filled_by(fill)
        if not filled:
            raise ValueError(f"no accepted suite names {fill!r} in its fill")
        current = [v for v in filled if self.suites[v].spec.status == "current"]
        return (current or filled)[-1]


def version_order(version: str) -> tuple[int, str]:
    """``v0``, ``v1``... in number order, then any other version by name."""
    number = version[1:]
    return (int(number), "") if version.startswith("v") and number.isdigit() else (1 << 30, version)


def _check_task(task: object, where: str) -> None:
    """Raise `SuiteFileError` unless ``task`` has a task's fields, each of its type (numbers finite)."""
    if not isinstance(task, dict) or set(task) != set(_TASK_FIELDS):
        raise SuiteFileError(f"{where}: a task has exactly the fields {', '.join(_TASK_FIELDS)}")
    for name, kind in _TASK_FIELDS.items():
        value = task[name]
        ok = (isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
              if kind is float else isinstance(value, kind))
        if not ok or (name.endswith("sha256") and not _HEX.fullmatch(value)):
            raise SuiteFileError(f"{where}: task field {name!r} is {shown(value)}")
    if not all(isinstance(r, (int, float)) and not isinstance(r, bool) and math.isfinite(r)
               for r in task["single_device_runtimes"]):
        raise SuiteFileError(f"{where}: single_device_runtimes holds a value that is not a finite number")
    for probe in task["probes"]:
        if not (isinstance(probe, dict) and set(probe) == {"name", "runtime", "peak_memory"}
                and isinstance(probe["name"], str) and isinstance(probe["runtime"], (int, float))
                and isinstance(probe["peak_memory"], list)
                and all(type(p) is int for p in probe["peak_memory"])):
            raise SuiteFileError(f"{where}: a probe has name (text), runtime (a number) and peak_memory "
                                 "(whole bytes per device)")


def read_suite_file(path: str | Path) -> Suite:
    """The suite of the suite file ``path``, every field checked (module docstring); `SuiteFileError`
    (an `UntrustedFileError`) naming the file and the problem otherwise."""
    path = Path(path)
    where = str(path)
    try:
        data = read_json(path, MAX_SUITE_BYTES, "suite file", max_depth=MAX_NESTING, follow_symlinks=False)
    except UntrustedFileError as error:
        raise SuiteFileError(str(error)) from None
    if not isinstance(data, dict) or not all(isinstance(data.get(k), t) for k, t in
                                             (("version", str), ("description", str), ("tasks", list))):
        raise SuiteFileError(f"{where}: a suite file is an object with version, description and tasks")
    if data["version"] != path.stem or not re.fullmatch(VERSION_PATTERN, data["version"]):
        raise SuiteFileError(f"{where} holds suite {shown(data['version'])}; its name is its version, "
                             f"letters, digits and . _ - ({VERSION_PATTERN})")
    if not (len(data["description"]) <= 4000 and data["description"].isprintable()):
        raise SuiteFileError(f"{where}: the description is printable text of at most 4000 characters")
    for task in data["tasks"]:
        _check_task(task, where)
    suite = suite_from_dict(data, where)
    if len(set(suite.task_ids)) != len(suite.tasks) or (not suite.tasks and suite.spec.status != "draft"):
        raise SuiteFileError(f"{where}: a suite lists each task once, and only a draft lists none")
    return suite


def registry_problems(suites: dict[str, Suite]) -> list[str]:
    """What makes ``suites`` no registry (one line each; empty: none): a track with two current suites,
    no current suite of the cost-model track, a file name two suites claim, a suite that does not start
    with the frozen tasks of the suite it inherits."""
    problems = []
    currents: dict[str, str] = {}
    for version, suite in suites.items():
        if suite.spec.status == "current":
            other = currents.setdefault(suite.spec.track, version)
            if other != version:
                problems.append(f"suites {other} and {version} are both the current suite of the "
                                f"{suite.spec.track} track")
    if suites and MAIN_TRACK not in currents:
        problems.append(f"no suite is the current suite of the {MAIN_TRACK} track")
    claimed: dict[str, str] = {}
    for version, suite in suites.items():
        if not suite.spec.accepted:  # a retired suite's or a draft's files are never rendered
            continue
        for name in (suite.spec.page, suite.spec.chart, suite.spec.curves, suite.spec.bounds):
            if name is not None and claimed.setdefault(name, version) != version:
                problems.append(f"suites {claimed[name]} and {version} both claim {name}")
    for version, suite in suites.items():
        base = suite.spec.measure.inherits
        if base is None or not suite.tasks:
            continue
        if base not in suites or version_order(base) >= version_order(version):
            problems.append(f"suite {version} inherits {base}, which is not an earlier suite")
        elif suite.tasks[:len(suites[base].tasks)] != suites[base].tasks:
            problems.append(f"suite {version} inherits {base} but does not start with its frozen tasks")
    return problems


def load_registry(folder: str | Path = SUITE_FOLDER) -> SuiteRegistry:
    """Every suite file (``*.json``) of ``folder``, read and checked (`read_suite_file`,
    `registry_problems`), in version order; `SuiteFileError` naming the problem otherwise."""
    folder = Path(folder)
    paths = sorted(folder.glob("*.json"), key=lambda path: version_order(path.stem))
    if len(paths) > MAX_SUITES:
        raise SuiteFileError(f"{folder} holds {len(paths)} suite files; at most {MAX_SUITES}")
    suites = {}
    for path in paths:
        suite = read_suite_file(path)
        suites[suite.version] = suite
    problems = registry_problems(suites)
    if problems:
        raise SuiteFileError(f"{folder}: {'; '.join(problems)}")
    return SuiteRegistry(suites)


_active: list[SuiteRegistry] = []


def suite_registry() -> SuiteRegistry:
    """The registry in use: the suites of `SUITE_FOLDER` (read on first use), or those of the folder
    of the innermost `use_suite_folder` block."""
    if not _active:
        _active.append(load_registry())
    return _active[-1]


@contextlib.contextmanager
def use_suite_folder(folder: str | Path) -> Iterator[SuiteRegistry]:
    """Use the suites of ``folder`` (`load_registry`) instead of the registry in use while the block
    runs; gives the new registry."""
    suite_registry()
    registry = load_registry(folder)
    _active.append(registry)
    try:
        yield registry
    finally:
        del _active[next(i for i, r in enumerate(_active) if r is registry)]
