"""Render the leaderboard: each suite's page (`layout`: the README for the current suite), its chart and
its learning curves, into a leaderboard folder.

`render` loads and validates every submission first (`loading`) and refuses, with `RenderRefused`
naming each failing file and its reasons, to publish a number it could not re-check. Each suite's page
is drawn by the page of its track: a cost-model suite's by `cost_model_page` (with `chart`'s images), a
parallel-plan suite's by `parallel_page` (with its images too), a generalisation suite's by
`generalisation_page`. The proven bounds a page shows are the folder's
(`task_bounds.load_bounds`), refused when one is above a re-simulated runtime.

Rendering is deterministic: rows are sorted, floats have fixed formats, nothing depends on the clock,
so ``render --check`` can tell whether the committed pages are stale.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from placement_gym.common.progress import ProgressCallback
from placement_gym.common.untrusted import inside, read_bytes, write_inside
from placement_gym.leaderboard.chart import chart_png, render_all_curves, render_chart
from placement_gym.leaderboard.cost_model_page import render_markdown
from placement_gym.leaderboard.generalisation_page import render_generalisation_page
from placement_gym.leaderboard.layout import SuitePage, default_suites, suite_page
from placement_gym.leaderboard.loading import (
    SUBMISSIONS_DIR,
    RenderRefused,
    checked_files,
    checked_submissions,
    load_submissions,
    require_submissions_folder,
)
from placement_gym.leaderboard.markdown import markdown_text
from placement_gym.leaderboard.parallel_page import render_parallel_page
from placement_gym.leaderboard.ranking import best_known_runtimes, median_run, overall_rows, task_score
from placement_gym.leaderboard.rerun_records import RECORDS_NAME, read_records, verified_files
from placement_gym.leaderboard.suite import Suite, get_suite
from placement_gym.leaderboard.task_bounds import ImpossibleBound, TaskBound, impossible_bounds, load_bounds

# Re-exported: the package's public names (placement_gym.leaderboard) and older imports read them here.
__all__ = [
    "RenderRefused",
    "Rendered",
    "SuitePage",
    "checked_submissions",
    "load_submissions",
    "median_run",
    "render",
    "render_chart",
    "render_markdown",
    "suite_page",
    "task_score",
    "overall_rows",
    "markdown_text",
]

# What `render --check` reads of a page or image it compares (the README is about 100 kB, a PNG 50 kB).
MAX_README_BYTES = 64 * 2**20


def refuse_impossible_bounds(bounds: dict[str, TaskBound], submissions: list[tuple[str, dict]],
                             suite: Suite) -> None:
    """Raise `ImpossibleBound` (one line) when a stored bound of ``suite`` is above the runtime of a
    feasible placement among ``submissions`` (re-simulated, as `checked_submissions` returns them): no
    page shows a "lower bound" that one of its own rows beats (`task_bounds.impossible_bounds`)."""
    refuted = impossible_bounds(bounds, best_known_runtimes(submissions, suite))
    if refuted:
        more = f" (and {len(refuted) - 1} more)" if len(refuted) > 1 else ""
        raise ImpossibleBound(f"not rendered: {refuted[0]}{more}")


def render(
    directory: str | Path, check: bool = False, chart: bool = True, suite: str | None = None
) -> bool:
    """Validate every submission under ``directory/submissions`` (`checked_submissions`: raises
    `RenderRefused` naming each failing file, `SuiteMismatchError` when the cost model no longer
    reproduces a suite), then render the page of ``suite`` (default: the current suite of each track,
    `layout.default_suites`: the README and the generalisation track's page), where its suite file puts
    it (`suite_page`), with the bounds stored in ``directory`` (`task_bounds.load_bounds`: the suite's
    bounds file and the current suite's, for the suite's tasks) and, with ``chart``, a cost-model
    suite's chart and learning curves.

    With ``check=True`` nothing is written; returns whether the pages and, with ``chart``, the charts and
    the curves are up to date (byte for byte). Otherwise draws everything in memory, then writes it, the
    pages last (`render_pages`), and returns True. A folder without ``submissions/`` is refused
    (`UntrustedFileError`) rather than rendered as an empty leaderboard. Nothing is read or written
    through a symbolic link (`placement_gym.common.untrusted`): a link among the files and folders it
    reads or writes is an `UntrustedFileError`; a file-system failure is an `OSError`."""
    return not render_pages(directory, None if suite is None else (suite,), check, chart).stale


@dataclass(frozen=True)
class Rendered:
    """What `render_pages` drew: the ``names`` (in the leaderboard folder) of every page, chart and
    curve, images first, and with ``check`` those ``stale`` or missing (none otherwise)."""

    names: tuple[str, ...]
    stale: tuple[str, ...] = ()


def render_pages(
    directory: str | Path, suites: Sequence[str] | None = None, check: bool = False, chart: bool = True,
    progress: ProgressCallback | None = None,
) -> Rendered:
    """`render` for several suites (default: `layout.default_suites`), validating the submissions once:
    with ``check=True`` compares the pages, charts and curves with the folder's (nothing written),
    otherwise writes them all; returns what was drawn and, with ``check``, what is stale or missing
    (`Rendered`). ``progress`` (`placement_gym.common.progress`) is told each stage and step as it starts.

    Every file is drawn before the first is written, each is written atomically (`write_inside`), the
    images before the pages: a render stopped or failed on the way leaves the old files, or new images
    beside old pages, which ``--check`` reports stale."""
    directory = Path(directory)
    suites = default_suites() if suites is None else tuple(suites)
    layouts = [suite_page(suite) for suite in suites]
    for layout in layouts:
        for name in (SUBMISSIONS_DIR, layout.page, layout.chart, layout.curves, RECORDS_NAME):
            if name is not None:
                inside(directory, name)  # before validating
    require_submissions_folder(directory)
    files = checked_files(directory / SUBMISSIONS_DIR, progress)
    submissions = [(name, data) for name, _, data in files]
    verified = verified_files(read_records(directory), {name: (raw, data) for name, raw, data in files})
    images: dict[str, bytes] = {}
    pages: dict[str, str] = {}
    for layout in layouts:
        drawn_images, pages[layout.page] = draw_suite(directory, get_suite(layout.version), submissions,
                                                      verified, chart, progress)
        images.update(drawn_images)
    rendered = {**images, **pages}
    stage = "comparing with the folder's files" if check else "writing"
    stale = []
    for done, (name, data) in enumerate(rendered.items()):
        if progress is not None:
            progress(stage, done, len(rendered), name)
        if not check:
            write_inside(directory, name, data)
        elif not _up_to_date(directory, name, data):
            stale.append(name)
    return Rendered(tuple(rendered), tuple(stale))


def draw_suite(
    directory: Path, suite: Suite, submissions: list[tuple[str, dict]], verified: set[str], chart: bool,
    progress: ProgressCallback | None = None,
) -> tuple[dict[str, bytes], str]:
    """``(images by file name, page text)`` of ``suite`` for the checked ``submissions``: the page of its
    track, and for a cost-model suite with ``chart`` its learning curves and chart, with the bounds of
    ``directory`` (`refuse_impossible_bounds` first)."""
    layout = suite_page(suite)
    if suite.spec.track == "generalisation":
        if progress is not None:
            progress(f"drawing the pages of suite {suite.version}")
        return {}, render_generalisation_page(submissions, suite)
    bounds = load_bounds(directory, suite)
    refuse_impossible_bounds(bounds, submissions, suite)
    if progress is not None:
        progress(f"drawing the pages of suite {suite.version}")
    page = (render_parallel_page(submissions, suite, bounds, verified) if suite.spec.track == "parallel"
            else render_markdown(submissions, suite, bounds, verified))
    images: dict[str, bytes] = {}
    if chart:
        images.update(render_all_curves(submissions, bounds, suite, progress))
        if progress is not None:
            progress(f"drawing the chart of suite {suite.version}")
        png = chart_png(submissions, suite, verified)
        if png is not None and layout.chart is not None:
            images[layout.chart] = png
    return images, page


def _up_to_date(directory: Path, name: str, rendered: str | bytes) -> bool:
    """Whether the file ``name`` of ``directory`` holds ``rendered`` (a page, or an image's bytes)."""
    path = inside(directory, name)
    if not os.path.lexists(path):
        return False
    committed = read_bytes(path, MAX_README_BYTES, name, follow_symlinks=False)
    if isinstance(rendered, bytes):
        return committed == rendered
    # A checkout may turn line ends into CRLF (git's autocrlf); that is not a stale table.
    return committed.decode("utf-8", "replace").replace("\r\n", "\n") == rendered
