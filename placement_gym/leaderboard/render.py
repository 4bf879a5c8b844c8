"""Render the leaderboard: ``README.md`` (per-task rankings and an overall table) and a PNG chart.

`render` validates every submission first (`validate`) and refuses, with `RenderRefused` naming each
failing file and its reasons, to publish a number it could not re-check. `render_markdown` only
formats what it is given (it escapes every text a submission supplies, but checks nothing).

Submissions of the same (suite, track, algorithm, budget) are one entry whatever their seeds: per task
the median seed's result is shown (`median_run`), with the number of seeds and the span of their
runtimes. Entries are ranked by their score (`task_score`): per task, the best runtime known for the
task / the entry's runtime, in (0, 1], 0 when infeasible or not run; overall, the mean over the track's
tasks, so that no single task moves an entry's score by more than 1 / (number of tasks). Geomean
speedup (over the best single device) and gap (to the lower bound) are shown beside it; they use the
suite's frozen fingerprint, not a fresh simulation. The generalisation track has its own tables, over
the held-out tasks of the suite's split only (`generalisation`).

Rendering is deterministic: rows are sorted, floats have fixed formats, nothing depends on the clock,
so ``render --check`` can tell whether the committed README is stale.
"""

from __future__ import annotations

import math
import os
import re
import stat
from dataclasses import dataclass, replace
from pathlib import Path

from placement_gym.common.extras import require
from placement_gym.common.progress import ProgressCallback
from placement_gym.common.untrusted import UntrustedFileError, inside, path_text, read_bytes, write_inside
from placement_gym.leaderboard.curves import (
    CONSTRUCTIVE_EVALUATIONS,
    CURVES_DIR,
    curve_file_name,
    curves_png,
    figure_png,
)
from placement_gym.leaderboard.generalisation import SPLITS, get_split
from placement_gym.leaderboard.generalisation_page import PAGE_NAME as GEN_V2_PAGE
from placement_gym.leaderboard.generalisation_page import render_generalisation_v2
from placement_gym.leaderboard.markdown import (
    code_span,
    file_list,
    markdown_table,
    markdown_text,
    pretraining_text,
)
from placement_gym.leaderboard.ranking import (
    TRACK_BUDGETS,
    AlgorithmRuns,
    Entry,
    best_known_runtimes,
    budget_track,
    entries,
    geomean,
    group_submissions,
    median_run,
    overall_rows,
    submission_track,
    task_score,
)
from placement_gym.leaderboard.rerun_records import RECORDS_NAME, read_records, verified_files
from placement_gym.leaderboard.submission import SubmissionError, load_submission, read_submission, shown
from placement_gym.leaderboard.suite import (
    COST_MODEL_SUITES,
    CURRENT_SUITE,
    GEN_V2,
    RETIRED_SUITES,
    Suite,
    get_suite,
)
from placement_gym.leaderboard.task_bounds import (
    ImpossibleBound,
    TaskBound,
    frozen_bounds,
    impossible_bounds,
    load_bounds,
)
from placement_gym.leaderboard.validate import SubmissionCheck, add_entry_problems, validate_submission

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

README_NAME = "README.md"
CHART_NAME = "leaderboard.png"
SUBMISSIONS_DIR = "submissions"
# What `render --check` reads of a page or image it compares (the README is about 100 kB, a PNG 50 kB).
MAX_README_BYTES = 64 * 2**20
# Submission file names appear in the README inside code spans: letters, digits and . _ - only.
SAFE_FILE_NAME = r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}\.json"
RENDER_COMMAND = "placement-gym leaderboard render"


@dataclass(frozen=True)
class SuitePage:
    """Where a cost-model suite's page goes in a leaderboard folder (``page``, its ``chart`` and the
    folder of its learning ``curves``, relative to the leaderboard folder) and the ``command`` that
    renders it."""

    version: str
    page: str
    chart: str
    curves: str
    command: str


def suite_page(version: str = CURRENT_SUITE) -> SuitePage:
    """The current suite's page is the README (`README_NAME`, `CHART_NAME`, `CURVES_DIR`); another
    cost-model suite's is ``suite_<version>.md`` with ``leaderboard_<version>.png`` and
    ``curves/<version>/``, rendered by ``render --suite <version>``: v2 holds v1's task ids, so its
    curves get a folder of their own. ValueError for a suite that is not of the cost-model track."""
    if version == CURRENT_SUITE:
        return SuitePage(version, README_NAME, CHART_NAME, CURVES_DIR, RENDER_COMMAND)
    if version not in COST_MODEL_SUITES:
        raise ValueError(f"no page for suite {version!r}: the cost-model suites are "
                         f"{', '.join(COST_MODEL_SUITES)} ({GEN_V2} has its own page, {GEN_V2_PAGE})")
    return SuitePage(version, f"suite_{version}.md", f"leaderboard_{version}.png", f"{CURVES_DIR}/{version}",
                     f"{RENDER_COMMAND} --suite {version}")


def page_names(version: str = CURRENT_SUITE) -> tuple[str, ...]:
    """The pages `render` writes for ``version``: with the current suite's README, the page of the
    generalisation track v2."""
    page = suite_page(version).page
    return (page, GEN_V2_PAGE) if version == CURRENT_SUITE else (page,)


class RenderRefused(ValueError):
    """`render` found submissions that fail validation; ``checks`` holds their verdicts."""

    def __init__(self, checks: list[SubmissionCheck]) -> None:
        self.checks = checks
        named = "; ".join(f"{c.source}: {_first_reason(c)}" for c in checks)
        super().__init__(f"not rendered: {len(checks)} submission(s) fail validation ({named})")


def _first_reason(check: SubmissionCheck) -> str:
    reasons = check.problems + [f"{t.task_id}: {r}" for t in check.tasks for r in t.reasons]
    return reasons[0] + (f" (and {len(reasons) - 1} more)" if len(reasons) > 1 else "")


def load_submissions(directory: str | Path) -> list[tuple[str, dict]]:
    """(file name, submission) for every ``*.json`` under ``directory``, sorted by file name, as the files
    claim them (read and schema-checked, not re-evaluated: `checked_submissions` does both and is what
    `render` publishes)."""
    paths = sorted(Path(directory).glob("*.json"))
    return [(path.name, load_submission(path)) for path in paths]


def resimulated(data: dict, check: SubmissionCheck) -> dict:
    """``data`` with each task's runtime and feasibility replaced by the re-simulated ones of ``check``
    (the claims agree with them within float printing; what is ranked is ours)."""
    copy = {**data, "results": dict(data["results"])}
    for task in check.tasks:
        copy["results"][task.task_id] = {**data["results"][task.task_id], "runtime": task.runtime,
                                         "feasible": task.feasible}
    return copy


def checked_submissions(directory: str | Path) -> list[tuple[str, dict]]:
    """Every submission under ``directory`` after validating it (`validate_submission`) and its name
    (`SAFE_FILE_NAME`), with the re-simulated runtimes and feasibility in place of the claimed ones
    (`resimulated`). Raises `RenderRefused` naming every file that fails, and `SuiteMismatchError` when
    the cost model no longer reproduces the current suite."""
    return [(name, data) for name, _, data in _checked_files(directory)]


def _checked_files(directory: str | Path, progress: ProgressCallback | None = None
                   ) -> list[tuple[str, bytes, dict]]:
    """`checked_submissions` with the bytes each file was parsed from (what a re-run record hashes);
    ``progress`` (`placement_gym.common.progress`) is told each file as it starts."""
    failing: list[SubmissionCheck] = []
    checks: list[tuple[str, bytes, SubmissionCheck]] = []
    paths = sorted(Path(directory).glob("*.json"))
    for done, path in enumerate(paths):
        if progress is not None:
            progress("validating submissions", done, len(paths), path.name)
        if not re.fullmatch(SAFE_FILE_NAME, path.name):
            failing.append(
                SubmissionCheck(
                    shown(path.name),
                    [
                        "file name: allowed are letters, digits and . _ - (at most 128 characters), "
                        "ending in .json"
                    ],
                )
            )
            continue
        try:
            raw, data = read_submission(path)
        except SubmissionError as error:
            failing.append(SubmissionCheck(str(path), [str(error)]))
            continue
        checks.append((path.name, raw, validate_submission(data, str(path))))
    # A file that joins an entry declaring other fields than its files is refused with its entry.
    add_entry_problems([check for _, _, check in checks])
    failing += [check for _, _, check in checks if not check.ok]
    if failing:
        raise RenderRefused(failing)
    return [(name, raw, resimulated(check.data, check)) for name, raw, check in checks]


def _speedup_and_gap(entry: Entry) -> list[str]:
    """The speedup and gap cells; "-" for an infeasible placement, whose makespan is no speedup (it
    does not fit in memory, so the step would not run)."""
    if not entry.feasible:
        return ["-", "-"]
    return [f"{entry.speedup:.3f}x", f"{100 * entry.gap:.1f}%"]


def _seconds(value: float) -> str:
    return f"{value:.6g}"


def _ratio(value: float, suffix: str, scale: float = 1.0, digits: int = 3) -> str:
    return "-" if math.isnan(value) else f"{scale * value:.{digits}f}{suffix}"


def _spread(entry: Entry) -> str:
    """The runtimes' span over seeds, or "-" for a single seed."""
    if entry.seeds < 2:
        return "-"
    return f"{_seconds(entry.runtime_min)}–{_seconds(entry.runtime_max)}"


def _meaning(suite: Suite, bounds: dict[str, TaskBound]) -> list[str]:
    """The paragraphs that say what each figure of the tables means."""
    n = len(suite.tasks)
    loosest = max(suite.tasks, key=lambda t: t.best_single_runtime / bounds[t.task_id].value)
    tracks = ", ".join(f"{b:,}" for b in TRACK_BUDGETS)
    return [
        "What the figures mean:",
        "",
        "- **runtime**: the cost model's runtime (makespan of one step, seconds) of the entry's placement, "
        "re-evaluated from the submitted placement by `placement-gym leaderboard validate` before rendering.",
        f"- **budget tracks** ({tracks} evaluations): an entry is in a track when every one of its runs made "
        "at most that many evaluations of every task (as the harness measured them, not as the entry "
        "declares) and its budget is verified: a re-run of every one of its files reproduced (recorded "
        "in `reruns.json`; entries without are listed apart, under *Unverified budgets*); per "
        "algorithm a track shows its entry with the most evaluations that fits. A heuristic "
        "that evaluates its placement once is in every track. Entries above the largest track (the "
        "best-known portfolio) appear only under *Bounds and best known* and in the per-task tables.",
        "- **score**: per task, the best runtime known for the task / this runtime, in (0, 1]: 1 for the "
        f"best placement any submission of suite {suite.version} has reached on that task (any algorithm, "
        "budget, seed or track), 0 for an infeasible placement (it does not fit in memory) or a task the "
        f"entry did not run. Overall, the mean over the {n} tasks, so that no single task can move an entry "
        f"by more than 1/{n}; entries are ranked by it. A better submission raises the bar for everyone on "
        "its task. The lower bound is not the reference because its distance to what is reachable differs "
        "from task to task, which would weigh tasks unequally.",
        "- **speedup**: the best single device's runtime / runtime. Its geomean is shown, but does not "
        "rank: one task where the best single device is slow would lift it on its own (on "
        f"`{loosest.task_id}` the best single device takes {_seconds(loosest.best_single_runtime)} s, "
        f"{loosest.best_single_runtime / bounds[loosest.task_id].value:.1f}x the lower bound).",
        "- **lower bound** and **gap**: gap = runtime / lower bound - 1. The lower bound is proven: no "
        "feasible placement of the task runs faster (the argument that gives it is named per task; "
        "docs/bounds.md has the proofs). `placement-gym leaderboard validate` recomputes it.",
        "- **seeds**: submissions of one algorithm and budget with several seeds are one entry: per task "
        "the median seed's result is shown (runs sorted by infeasible, then runtime; the lower middle for "
        "an even count), with the number of seeds and the span of their runtimes.",
        "- **evaluations** and **wall (s)**: the evaluations of the task the algorithm made (counted by the "
        "harness on the agent's copy of the task, whatever the agent reports; `validate --rerun` "
        "re-counts them) and the wall-clock seconds it spent on the task, as the submitter's machine "
        "reported them (not re-measured).",
        f"- **learning curves** (one plot per task, under `{suite_page(suite.version).curves}/`): the best "
        "feasible runtime an entry had "
        "evaluated after each number of evaluations, as the harness recorded it (median seed; a single "
        "point for entries without a recorded curve), with the lower bound and the best known as lines. "
        "Validation checks that a curve ends at the entry's re-simulated runtime and stays above the lower "
        "bound; a re-run compares the whole curve.",
        "",
        "Speedup and the reference runtimes come from the suite's frozen fingerprint; geomeans are over "
        "an entry's feasible per-task results.",
    ]


def _overall_table(
    rows: list[dict], n_tasks: int, tasks_column: str = "tasks", trained_on: bool = False, names: bool = False
) -> list[str]:
    """The overall ranking table of ``rows`` (`overall_rows`); ``names``: the algorithm's name alone (a
    budget track has one entry per algorithm, its budget in its own column)."""
    columns = [
        "rank",
        "algorithm",
        "budget",
        "score",
        "seeds",
        tasks_column,
        "infeasible",
        "geomean speedup",
        "geomean gap",
    ]
    right = [True, False, True, True, True, True, True, True, True]
    if trained_on:
        columns.append("trained on")
        right.append(True)
    cells = []
    for i, r in enumerate(rows):
        row = [
            str(i + 1),
            markdown_text(r["name"] if names else r["algorithm"]),
            r["budget"],
            f"{r['score']:.3f}",
            str(r["seeds"]),
            f"{r['tasks']}/{n_tasks}",
            str(r["infeasible"]),
            _ratio(r["geomean_speedup"], "x"),
            _ratio(r["geomean_gap"], "%", 100, 1),
        ]
        if trained_on:
            row.append(f"{len(r['trained_on'])} tasks")
        cells.append([*row, file_list(r["sources"])])
    return markdown_table([*columns, "files"], cells, [*right, False])


_ENTRY_COLUMNS = [
    "algorithm",
    "budget",
    "runtime (s)",
    "score",
    "speedup",
    "gap to bound",
    "evaluations",
    "wall (s)",
    "feasible",
    "seeds",
    "runtime over seeds (s)",
]
_ENTRY_RIGHT = [False, True, True, True, True, True, True, True, False, True, True]


def _entry_cells(entry: Entry) -> list[str]:
    """One entry's cells, in `_ENTRY_COLUMNS` order."""
    return [
        markdown_text(entry.algorithm),
        entry.budget,
        _seconds(entry.runtime),
        f"{entry.score:.3f}",
        *_speedup_and_gap(entry),
        str(entry.evaluations),
        f"{entry.wall_s:.2f}",
        "yes" if entry.feasible else "no",
        str(entry.seeds),
        _spread(entry),
    ]


def _bounds_section(
    submissions: list[tuple[str, dict]], suite: Suite, bounds: dict[str, TaskBound]
) -> list[str]:
    """Per task: the proven lower bound and its argument, the best known runtime and who reached it, and
    their ratio (how far from optimal the best known can at most be)."""
    best_known = best_known_runtimes(submissions, suite)
    holders: dict[str, list[str]] = {t: [] for t in suite.task_ids}
    for group in group_submissions(submissions, suite):
        for data in group.submissions:
            for task_id, result in data["results"].items():
                if (
                    task_id in holders
                    and result["feasible"]
                    and float(result["runtime"]) == best_known[task_id]
                    and group.label not in holders[task_id]
                ):
                    holders[task_id].append(group.label)
    rows, ratios = [], []
    for suite_task in suite.tasks:
        task_id, bound = suite_task.task_id, bounds[suite_task.task_id]
        known = best_known[task_id]
        ratio = known / bound.value if known == known else math.nan
        if ratio == ratio:
            ratios.append(ratio)
        rows.append(
            [
                code_span(task_id),
                _seconds(suite_task.best_single_runtime),
                _seconds(bound.value),
                markdown_text(bound.source),
                "-" if known != known else _seconds(known),
                _ratio(ratio, "x"),
                markdown_text(", ".join(sorted(holders[task_id])) or "-"),
            ]
        )
    return [
        "## Bounds and best known",
        "",
        "Per task, the proven lower bound (no feasible placement is faster; the argument that gives it is "
        "named, docs/bounds.md has the proofs), the best runtime any submission reached and the entries "
        "that reached it. Best known / bound is how far the best known placement can at most be from "
        f"optimal; its geomean over the {len(ratios)} tasks is **{geomean(ratios):.3f}x**.",
        "",
        *markdown_table(
            [
                "task",
                "best single (s)",
                "lower bound (s)",
                "argument",
                "best known (s)",
                "best known / bound",
                "reached by",
            ],
            rows,
            [False, True, True, False, True, True, False],
        ),
        "",
    ]


def refuse_impossible_bounds(bounds: dict[str, TaskBound], submissions: list[tuple[str, dict]],
                             suite: Suite) -> None:
    """Raise `ImpossibleBound` (one line) when a stored bound of ``suite`` is above the runtime of a
    feasible placement among ``submissions`` (re-simulated, as `checked_submissions` returns them): no
    page shows a "lower bound" that one of its own rows beats (`task_bounds.impossible_bounds`)."""
    refuted = impossible_bounds(bounds, best_known_runtimes(submissions, suite))
    if refuted:
        more = f" (and {len(refuted) - 1} more)" if len(refuted) > 1 else ""
        raise ImpossibleBound(f"not rendered: {refuted[0]}{more}")


def split_verified(
    groups: list[AlgorithmRuns], verified: set[str] | None
) -> tuple[list[AlgorithmRuns], list[AlgorithmRuns]]:
    """``groups`` as (verified, unverified): an entry's budget is verified when every one of its files is
    in ``verified`` (`rerun_records`); None counts every file as verified."""
    if verified is None:
        return list(groups), []
    ok: list[AlgorithmRuns] = []
    unverified: list[AlgorithmRuns] = []
    for group in groups:
        (ok if set(group.sources) <= verified else unverified).append(group)
    return ok, unverified


def _unverified_section(
    submissions: list[tuple[str, dict]], suite: Suite, groups: list[AlgorithmRuns],
    lower_bounds: dict[str, float],
) -> list[str]:
    """The entries whose budget no reproduced re-run backs, in a table of their own (not ranked with the
    budget tracks; runtimes re-simulated as everywhere)."""
    shown_groups = [g for g in groups if g.max_evaluations <= TRACK_BUDGETS[-1]]
    if not shown_groups:
        return []
    rows = overall_rows(submissions, suite, groups=shown_groups, lower_bounds=lower_bounds)
    return [
        "### Unverified budgets",
        "",
        "Entries whose evaluation counts no reproduced re-run backs (no record in `reruns.json` matching "
        "every file of the entry: docs/leaderboard.md, *Verified budgets*). Their runtimes are "
        "re-simulated like every other, but they are not ranked in the budget tracks above.",
        "",
        *_overall_table(rows, len(suite.tasks)),
        "",
    ]


def render_markdown(
    submissions: list[tuple[str, dict]],
    suite: str | Suite = CURRENT_SUITE,
    bounds: dict[str, TaskBound] | None = None,
    verified: set[str] | None = None,
) -> str:
    """The page text (`suite_page`: the README for the current suite) for ``submissions`` (as
    `checked_submissions` returns them), with the proven ``bounds`` per task (default: the suite's
    frozen lower bounds); ``verified``: the files whose budget is verified (`rerun_records`; None: all).
    Checks nothing: use `render`, which validates first (and `refuse_impossible_bounds`), to publish."""
    suite = get_suite(suite)
    page = suite_page(suite.version)
    bounds = frozen_bounds(suite) if bounds is None else bounds
    lower_bounds = {t: b.value for t, b in bounds.items()}
    n = len(suite.tasks)
    current = suite.version == CURRENT_SUITE
    lines = [
        "# Leaderboard" if current else f"# Leaderboard, suite {suite.version}",
        "",
        f"Task suite **{suite.version}** ({n} tasks), cost-model track. Generated by "
        f"`{page.command}` (which re-checks every submission first); do not edit by hand. "
        "Submit with `placement-gym leaderboard submit FILE` (it re-evaluates every placement first).",
        "",
        *([
            f"Suite {other} ({len(get_suite(other).tasks)} tasks) is accepted and ranked on its own page: "
            f"[{suite_page(other).page}]({suite_page(other).page})."
            for other in COST_MODEL_SUITES if other != CURRENT_SUITE
        ] + [""] if current else [
            f"Suite {suite.version} is accepted and ranked here, on its own submissions; the leaderboard's "
            f"[{README_NAME}]({README_NAME}) ranks suite {CURRENT_SUITE}.",
            "",
        ]),
        f"The generalisation track, version 2 (suite {GEN_V2}: unseen graphs of a dataset), has its own "
        f"page: [{GEN_V2_PAGE}]({GEN_V2_PAGE}).",
        "",
        *[f"Suite {version} is retired: {why}" for version, why in RETIRED_SUITES.items()],
        "",
        *_meaning(suite, bounds),
        "",
        "## Overall, by budget track",
        "",
    ]
    groups = group_submissions(submissions, suite)
    ranked, unverified = split_verified(groups, verified)
    if not groups:
        lines += ["No submissions yet.", ""]
    previous = CONSTRUCTIVE_EVALUATIONS
    for budget in TRACK_BUDGETS:
        track = budget_track(ranked, budget)
        rows = overall_rows(submissions, suite, groups=track, lower_bounds=lower_bounds)
        lines += [f"### At most {budget:,} evaluations per task", ""]
        entered = sorted(g.algorithm for g in track if g.max_evaluations > previous)
        if entered:
            lines += [
                f"Run at more than {previous:,} evaluations for this track: "
                f"{', '.join(markdown_text(a) for a in entered)}; every other row is its algorithm's "
                "largest entry that fits.",
                "",
            ]
        previous = budget
        lines += [*_overall_table(rows, n, names=True), ""] if rows else ["No entries.", ""]
    lines += _pretraining_section(ranked)
    lines += _unverified_section(submissions, suite, unverified, lower_bounds)
    if groups:
        lines += [f"![score per algorithm and budget track]({page.chart})", ""]
    lines += _bounds_section(submissions, suite, bounds)
    lines += ["## Per task", ""]
    best_known = best_known_runtimes(submissions, suite)
    unverified_labels = {g.label for g in unverified}
    for task_id, task_entries in entries(submissions, suite, groups, lower_bounds=lower_bounds).items():
        task_entries = [replace(e, budget=f"{e.budget} (unverified)") if e.algorithm in unverified_labels
                        else e for e in task_entries]
        frozen = suite.get(task_id)
        known = "" if math.isnan(best_known[task_id]) else f", best known {_seconds(best_known[task_id])} s"
        lines += [
            f"### `{task_id}`",
            "",
            f"Best single device {_seconds(frozen.best_single_runtime)} s, "
            f"lower bound {_seconds(bounds[task_id].value)} s "
            f"({markdown_text(bounds[task_id].source)}){known}.",
            "",
        ]
        if not task_entries:
            lines += ["No submissions yet.", ""]
            continue
        lines += [f"![learning curves of {task_id}]({page.curves}/{curve_file_name(task_id)})", ""]
        lines += markdown_table(
            ["rank", *_ENTRY_COLUMNS],
            [[str(i + 1), *_entry_cells(e)] for i, e in enumerate(task_entries)],
            [True, *_ENTRY_RIGHT],
        )
        lines.append("")
    lines += _generalisation_track(submissions, suite, lower_bounds)
    lines += _real_track(submissions, suite)
    return "\n".join(lines).rstrip() + "\n"


def _pretraining_section(groups: list[AlgorithmRuns]) -> list[str]:
    """What the pre-trained entries spent before their scored runs (their files' ``pretraining``),
    which no budget track counts (empty: no such entry)."""
    rows = [(g.label, pretraining_text(g.submissions)) for g in groups]
    rows = [(label, text) for label, text in rows if text != "none"]
    if not rows:
        return []
    return [
        "Pre-trained entries: what they spent before their scored runs (the files' `pretraining`: "
        "evaluations and wall time, who counted them, the machine), on tasks outside this suite; "
        "no budget track counts it.",
        "",
        *[f"- {markdown_text(label)}: {text}" for label, text in rows],
        "",
    ]


def _generalisation_track(
    submissions: list[tuple[str, dict]], suite: Suite, lower_bounds: dict[str, float]
) -> list[str]:
    """The generalisation track: the split, an overall table and a per-held-out-task table (suites
    without a split: nothing)."""
    if suite.version not in SPLITS:
        return []
    split = get_split(suite)
    held_out = split.held_out_tasks()
    lines = [
        "## Generalisation track",
        "",
        f"Split of suite {suite.version}: entries train on graphs "
        f"{', '.join(f'`{g}`' for g in split.training_graphs())} (or graphs outside the suite) and are "
        f"scored zero-shot or fine-tuned on the held-out graphs "
        f"{', '.join(f'`{g}`' for g in split.held_out_graphs)} only, whose {len(held_out)} tasks are "
        f"{', '.join(f'`{t}`' for t in held_out)}. Every held-out task has a training task with the same "
        "number of devices. Each entry states the tasks it trained on (`trained_on`); validation rejects "
        "one that trained on a held-out graph or that lists a training task's result. Evaluations of a "
        "held-out task during the scored run (zero-shot samples, fine-tuning) are allowed and counted in "
        "its evaluations. Scores use the same "
        f"best known runtimes as above; the overall score is the mean over the {len(held_out)} held-out "
        "tasks.",
        "",
    ]
    groups = group_submissions(submissions, suite, "generalisation")
    rows = overall_rows(submissions, suite, "generalisation", held_out, groups, lower_bounds)
    if not rows:
        return [*lines, "No submissions yet.", ""]
    lines += [*_overall_table(rows, len(held_out), "held-out tasks", trained_on=True), ""]
    table_rows = [
        [f"`{task_id}`", str(i + 1), *_entry_cells(e)]
        for task_id, task_entries in entries(submissions, suite, groups, held_out, lower_bounds).items()
        for i, e in enumerate(task_entries)
    ]
    lines += markdown_table(["held-out task", "rank", *_ENTRY_COLUMNS], table_rows,
                            [False, True, *_ENTRY_RIGHT])
    return [*lines, ""]


def _real_track(submissions: list[tuple[str, dict]], suite: Suite) -> list[str]:
    """The real-hardware track's table, only when such submissions exist: measured runtimes as
    reported, beside the cost model's."""
    rows = []
    for source, data in submissions:
        if data["suite"] != suite.version or submission_track(data) != "real":
            continue
        for task_id in sorted(data["results"]):
            result = data["results"][task_id]
            measured = result.get("measured_runtime")
            rows.append(
                [
                    markdown_text(data["algorithm"]),
                    code_span(task_id),
                    _seconds(float(result["runtime"])),
                    "-" if measured is None else _seconds(float(measured)),
                    markdown_text(data.get("hardware") or "-"),
                    "yes" if result["trained_on_task"] else "no",
                    code_span(source),
                ]
            )
    if not rows:
        return []
    rows.sort()
    lines = [
        "## Real-hardware track",
        "",
        "Measured step times as their submitters reported them: they cannot be re-checked here, so they "
        "are shown, never ranked; the cost-model runtime beside each is re-simulated.",
        "",
    ]
    lines += markdown_table(
        [
            "algorithm",
            "task",
            "cost-model runtime (s)",
            "measured runtime (s, reported)",
            "hardware",
            "trained on task",
            "file",
        ],
        rows,
        [False, False, True, True, False, False, False],
    )
    return [*lines, ""]


def render_chart(
    submissions: list[tuple[str, dict]], path: str | Path, suite: str | Suite = CURRENT_SUITE,
    verified: set[str] | None = None,
) -> bool:
    """Write the chart (`chart_png`) to ``path`` (`write_inside`: atomically, never through a link);
    False when there is nothing to draw."""
    png = chart_png(submissions, suite, verified)
    if png is None:
        return False
    path = Path(path)
    write_inside(path.parent, path.name, png)
    return True


def chart_png(
    submissions: list[tuple[str, dict]], suite: str | Suite = CURRENT_SUITE, verified: set[str] | None = None
) -> bytes | None:
    """The PNG of a bar chart of the overall score per entry, one panel per budget track (entries whose
    budget is verified, as in `render_markdown`); None when there is nothing."""
    suite = get_suite(suite)
    groups, _ = split_verified(group_submissions(submissions, suite), verified)
    tracks = [
        (budget, overall_rows(submissions, suite, groups=budget_track(groups, budget)))
        for budget in TRACK_BUDGETS
    ]
    if not any(rows for _, rows in tracks):
        return None
    matplotlib = require("matplotlib", "drawing the plot")
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    longest = max(len(rows) for _, rows in tracks)
    figure, panels = plt.subplots(1, len(tracks), figsize=(5 * len(tracks), 0.32 * longest + 1.4))
    for axes, (budget, rows) in zip(panels, tracks):
        rows = rows[::-1]  # best at the top of a horizontal bar chart
        # "$" would start matplotlib's math text: labels are shown as written.
        axes.barh([r["name"].replace("$", r"\$") for r in rows], [r["score"] for r in rows], color="#4c72b0")
        axes.set_xlim(0.0, 1.0)
        axes.tick_params(axis="y", labelsize=8)
        axes.set_title(f"at most {budget:,} evaluations")
        axes.set_xlabel("score (mean of best known / runtime)")
    figure.suptitle(f"placement-gym leaderboard, suite {suite.version}")
    figure.tight_layout()
    return figure_png(figure, dpi=100)


def render_all_curves(
    submissions: list[tuple[str, dict]], bounds: dict[str, TaskBound], suite: str | Suite = CURRENT_SUITE,
    progress: ProgressCallback | None = None,
) -> dict[str, bytes]:
    """Every task's learning curves (`curves.curves_png`), by their file names in a leaderboard folder
    (in the suite's curves folder, `suite_page`); ``progress`` is told each task as it starts."""
    suite = get_suite(suite)
    folder = suite_page(suite.version).curves
    best_known = best_known_runtimes(submissions, suite)
    groups = group_submissions(submissions, suite)
    drawn = [(task_id, task_entries) for task_id, task_entries in entries(submissions, suite, groups).items()
             if task_entries]
    curves = {}
    for done, (task_id, task_entries) in enumerate(drawn):
        if progress is not None:
            progress(f"drawing the learning curves of suite {suite.version}", done, len(drawn), task_id)
        png = curves_png(task_id, task_entries, bounds[task_id].value, best_known[task_id])
        curves[f"{folder}/{curve_file_name(task_id)}"] = png
    return curves


def render(
    directory: str | Path, check: bool = False, chart: bool = True, suite: str = CURRENT_SUITE
) -> bool:
    """Validate every submission under ``directory/submissions`` (`checked_submissions`: raises
    `RenderRefused` naming each failing file, `SuiteMismatchError` when the cost model no longer
    reproduces the suite), then render the page of ``suite`` (`suite_page`: for the current suite the
    ``README.md`` of ``directory``, with the page of the generalisation track v2,
    ``generalisation_v2.md``, `generalisation_page`; for another cost-model suite ``suite_<v>.md``) with
    the bounds stored in ``directory`` (`task_bounds.load_bounds`: the suite's bounds file and the current
    suite's ``bounds.json``, for the suite's tasks) and, with
    ``chart``, its chart and learning curves.

    With ``check=True`` nothing is written; returns whether the pages (`page_names`) and, with ``chart``,
    the chart and the curves are up to date (byte for byte). Otherwise draws everything in memory, then
    writes it, the pages last (`render_pages`), and returns True. A folder without ``submissions/`` is
    refused (`UntrustedFileError`) rather than rendered as an empty leaderboard. Nothing is read or
    written through a symbolic link (`placement_gym.common.untrusted`): a link among the files and
    folders it reads or writes is an `UntrustedFileError`; a file-system failure is an `OSError`."""
    return not render_pages(directory, (suite,), check, chart).stale


@dataclass(frozen=True)
class Rendered:
    """What `render_pages` drew: the ``names`` (in the leaderboard folder) of every page, chart and
    curve, images first, and with ``check`` those ``stale`` or missing (none otherwise)."""

    names: tuple[str, ...]
    stale: tuple[str, ...] = ()


def render_pages(
    directory: str | Path, suites: tuple[str, ...], check: bool = False, chart: bool = True,
    progress: ProgressCallback | None = None,
) -> Rendered:
    """`render` for several suites, validating the submissions once: with ``check=True`` compares the
    pages, charts and curves with the folder's (nothing written), otherwise writes them all; returns
    what was drawn and, with ``check``, what is stale or missing (`Rendered`). ``progress``
    (`placement_gym.common.progress`) is told each stage and step as it starts.

    Every file is drawn before the first is written, each is written atomically (`write_inside`), the
    images before the pages: a render stopped or failed on the way leaves the old files, or new images
    beside old pages, which ``--check`` reports stale."""
    directory = Path(directory)
    layouts = [suite_page(suite) for suite in suites]
    for suite, layout in zip(suites, layouts):
        for name in (SUBMISSIONS_DIR, *page_names(suite), layout.chart, layout.curves, RECORDS_NAME):
            inside(directory, name)  # before validating
    _require_submissions_folder(directory)
    files = _checked_files(directory / SUBMISSIONS_DIR, progress)
    submissions = [(name, data) for name, _, data in files]
    verified = verified_files(read_records(directory), {name: (raw, data) for name, raw, data in files})
    images: dict[str, bytes] = {}
    pages: dict[str, str] = {}
    for suite in suites:
        ranked = get_suite(suite)
        bounds = load_bounds(directory, ranked)
        refuse_impossible_bounds(bounds, submissions, ranked)
        if progress is not None:
            progress(f"drawing the pages of suite {suite}")
        pages[suite_page(suite).page] = render_markdown(submissions, ranked, bounds, verified)
        if GEN_V2_PAGE in page_names(suite):
            pages[GEN_V2_PAGE] = render_generalisation_v2(submissions)
        if chart:
            images.update(render_all_curves(submissions, bounds, ranked, progress))
            if progress is not None:
                progress(f"drawing the chart of suite {suite}")
            png = chart_png(submissions, ranked, verified)
            if png is not None:
                images[suite_page(suite).chart] = png
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


def _require_submissions_folder(directory: Path) -> None:
    """`UntrustedFileError` unless ``directory`` holds a folder ``submissions/``: without one, `render`
    would replace the pages by an empty leaderboard."""
    try:
        is_folder = stat.S_ISDIR(os.lstat(directory / SUBMISSIONS_DIR).st_mode)
    except OSError:  # missing, or ``directory`` is not a folder
        is_folder = False
    if not is_folder:
        raise UntrustedFileError(f"{path_text(directory)} is not a leaderboard folder: it has no folder "
                                 f"{SUBMISSIONS_DIR}/ (a leaderboard folder is made with 'placement-gym "
                                 "leaderboard init DIR'); nothing rendered")


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
