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

import json
import math
import re
from dataclasses import dataclass
from pathlib import Path

from placement_gym.extras import require
from placement_gym.leaderboard.generalisation import SPLITS, get_split
from placement_gym.leaderboard.submission import load_submission, shown
from placement_gym.leaderboard.suite import CURRENT_SUITE, RETIRED_SUITES, Suite, get_suite
from placement_gym.leaderboard.validate import SubmissionCheck, validate_file

README_NAME = "README.md"
CHART_NAME = "leaderboard.png"
SUBMISSIONS_DIR = "submissions"
# Submission file names appear in the README inside code spans: letters, digits and . _ - only.
SAFE_FILE_NAME = r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}\.json"
# Text that is safe inside a Markdown code span as it is (task ids, file names, suite versions).
_CODE_SAFE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._/+-]*")
# Characters that start Markdown markup inside a table cell: escaped with a backslash.
_MARKDOWN_PUNCTUATION = re.compile(r"([\\`*_\[\]|~])")


class RenderRefused(ValueError):
    """`render` found submissions that fail validation; ``checks`` holds their verdicts."""

    def __init__(self, checks: list[SubmissionCheck]) -> None:
        self.checks = checks
        named = "; ".join(f"{c.source}: {_first_reason(c)}" for c in checks)
        super().__init__(f"not rendered: {len(checks)} submission(s) fail validation ({named})")


def _first_reason(check: SubmissionCheck) -> str:
    reasons = check.problems + [f"{t.task_id}: {r}" for t in check.tasks for r in t.reasons]
    return reasons[0] + (f" (and {len(reasons) - 1} more)" if len(reasons) > 1 else "")


def markdown_text(value: object) -> str:
    """``value`` as plain text inside a Markdown table cell: on one line, with HTML special characters
    as entities and Markdown punctuation (links, emphasis, code, cell separators) backslash-escaped, so
    that a submission's text shows as written and carries no markup into the README."""
    text = " ".join(str(value).split())
    text = text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    return _MARKDOWN_PUNCTUATION.sub(r"\\\1", text)


def _code(value: object) -> str:
    """A name in a code span when its characters allow it, else as escaped plain text."""
    text = str(value)
    return f"`{text}`" if _CODE_SAFE.fullmatch(text) else markdown_text(text)


@dataclass(frozen=True)
class Run:
    """One submission's result on one task."""

    source: str
    seed: int
    runtime: float
    feasible: bool
    evaluations: int
    wall_s: float


@dataclass(frozen=True)
class Entry:
    """One algorithm's shown result on one task (its median seed's), with the numbers the tables show.
    ``seeds`` counts the runs on the task; ``runtime_min`` and ``runtime_max`` span their runtimes;
    ``score`` is `task_score` of the shown result."""

    algorithm: str
    source: str
    runtime: float
    feasible: bool
    speedup: float
    gap: float
    evaluations: int
    wall_s: float
    seeds: int = 1
    runtime_min: float = math.nan
    runtime_max: float = math.nan
    score: float = 0.0


@dataclass(frozen=True)
class AlgorithmRuns:
    """The submissions of one algorithm: same suite, track, algorithm name and budget, any seeds."""

    label: str
    sources: tuple[str, ...]
    submissions: tuple[dict, ...]


def load_submissions(directory: str | Path) -> list[tuple[str, dict]]:
    """(file name, submission) for every ``*.json`` under ``directory``, sorted by file name (read and
    schema-checked, not re-evaluated: `checked_submissions` does both)."""
    paths = sorted(Path(directory).glob("*.json"))
    return [(path.name, load_submission(path)) for path in paths]


def checked_submissions(directory: str | Path) -> list[tuple[str, dict]]:
    """`load_submissions` after validating every file (`validate_file`) and its name (`SAFE_FILE_NAME`).
    Raises `RenderRefused` naming every file that fails, and `SuiteMismatchError` when the cost model
    no longer reproduces the current suite."""
    failing = []
    for path in sorted(Path(directory).glob("*.json")):
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
        check = validate_file(path)
        if not check.ok:
            failing.append(check)
    if failing:
        raise RenderRefused(failing)
    return load_submissions(directory)


def task_score(best_known: float, runtime: float, feasible: bool) -> float:
    """An entry's score on one task: ``best_known / runtime`` in (0, 1] for a feasible placement (1 for
    the best runtime known for the task), 0 for an infeasible one (it does not run)."""
    if not feasible or not best_known > 0 or not runtime > 0:
        return 0.0
    return min(1.0, best_known / runtime)


def best_known_runtimes(submissions: list[tuple[str, dict]], suite: Suite) -> dict[str, float]:
    """Per task of ``suite``, the best feasible runtime of any run of any submission of its version
    (any track, algorithm or seed); NaN for a task no feasible run reached."""
    best = {task_id: math.inf for task_id in suite.task_ids}
    for _, data in submissions:
        if data["suite"] != suite.version:
            continue
        for task_id, result in data["results"].items():
            if task_id in best and result["feasible"]:
                best[task_id] = min(best[task_id], float(result["runtime"]))
    return {task_id: value if math.isfinite(value) else math.nan for task_id, value in best.items()}


def _speedup_and_gap(entry: Entry) -> list[str]:
    """The speedup and gap cells; "-" for an infeasible placement, whose makespan is no speedup (it
    does not fit in memory, so the step would not run)."""
    if not entry.feasible:
        return ["-", "-"]
    return [f"{entry.speedup:.3f}x", f"{100 * entry.gap:.1f}%"]


def _seconds(value: float) -> str:
    return f"{value:.6g}"


def _geomean(values: list[float]) -> float:
    return math.exp(sum(math.log(v) for v in values) / len(values)) if values else float("nan")


def median_run(runs: list[Run]) -> Run:
    """The median seed's run: runs sorted by (infeasible, runtime), ties by seed then file name; the
    middle one, the lower middle for an even count (so that of two seeds the better one is shown)."""
    if not runs:
        raise ValueError("median_run needs at least one run")
    ordered = sorted(runs, key=lambda r: (not r.feasible, r.runtime, r.seed, r.source))
    return ordered[(len(ordered) - 1) // 2]


def _track(data: dict) -> str:
    return data.get("track", "cost_model")


def group_submissions(
    submissions: list[tuple[str, dict]], suite: Suite, track: str = "cost_model"
) -> list[AlgorithmRuns]:
    """The submissions of ``suite``'s version and ``track``, one group per (algorithm, budget), sorted by
    algorithm then budget. A group's label is its algorithm name, with the budget added when the same
    name comes with several budgets."""
    groups: dict[tuple[str, str], list[tuple[str, dict]]] = {}
    for source, data in submissions:
        if data["suite"] != suite.version or _track(data) != track:
            continue
        # The budget as text: None (the agent's default) and numbers are then one sortable kind.
        groups.setdefault((data["algorithm"], json.dumps(data.get("budget"))), []).append((source, data))
    names = [algorithm for algorithm, _ in groups]
    result = []
    for (algorithm, budget), members in sorted(groups.items()):
        members.sort(key=lambda member: member[0])
        shown_budget = "default" if budget == "null" else budget
        label = algorithm if names.count(algorithm) == 1 else f"{algorithm} (budget {shown_budget})"
        result.append(AlgorithmRuns(label, tuple(s for s, _ in members), tuple(d for _, d in members)))
    return result


def _entries(
    submissions: list[tuple[str, dict]],
    suite: Suite,
    track: str = "cost_model",
    task_ids: tuple[str, ...] | None = None,
) -> dict[str, list[Entry]]:
    """Per task id (default: every task of ``suite``), one entry per algorithm of ``track`` that ran
    the task: its median seed's result, ranked by (infeasible, runtime)."""
    task_ids = suite.task_ids if task_ids is None else task_ids
    best_known = best_known_runtimes(submissions, suite)
    by_task: dict[str, list[Entry]] = {t: [] for t in task_ids}
    for group in group_submissions(submissions, suite, track):
        runs: dict[str, list[Run]] = {}
        for source, data in zip(group.sources, group.submissions):
            for task_id, result in data["results"].items():
                if task_id in by_task:
                    runs.setdefault(task_id, []).append(
                        Run(
                            source,
                            int(data["seed"]),
                            float(result["runtime"]),
                            bool(result["feasible"]),
                            int(result["evaluations"]),
                            float(result["wall_s"]),
                        )
                    )
        for task_id, task_runs in runs.items():
            frozen = suite.get(task_id)
            shown_run = median_run(task_runs)
            runtimes = [r.runtime for r in task_runs]
            by_task[task_id].append(
                Entry(
                    group.label,
                    shown_run.source,
                    shown_run.runtime,
                    shown_run.feasible,
                    frozen.best_single_runtime / shown_run.runtime,
                    shown_run.runtime / frozen.lower_bound - 1.0,
                    shown_run.evaluations,
                    shown_run.wall_s,
                    len(task_runs),
                    min(runtimes),
                    max(runtimes),
                    task_score(best_known[task_id], shown_run.runtime, shown_run.feasible),
                )
            )
    for entries in by_task.values():
        entries.sort(key=lambda e: (not e.feasible, e.runtime, e.algorithm, e.source))
    return by_task


def _table(columns: list[str], rows: list[list[str]], right: list[bool]) -> list[str]:
    lines = ["| " + " | ".join(columns) + " |", "|" + "|".join("---:" if r else "---" for r in right) + "|"]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return lines


def overall_rows(
    submissions: list[tuple[str, dict]],
    suite: Suite,
    track: str = "cost_model",
    task_ids: tuple[str, ...] | None = None,
) -> list[dict]:
    """Per algorithm of ``track`` (one row for all its seeds), ranked best first, over ``task_ids``
    (default: every task of ``suite``): ``score``, the mean of `task_score` over all those tasks (a
    task it did not run counts 0), then geomean speedup and gap over its feasible per-task median-seed
    results. Ties on the score go by geomean speedup, then name."""
    task_ids = suite.task_ids if task_ids is None else task_ids
    by_task = _entries(submissions, suite, track, task_ids)
    groups = {g.label: g for g in group_submissions(submissions, suite, track)}
    per_algorithm: dict[str, list[Entry]] = {}
    for entries in by_task.values():
        for entry in entries:
            per_algorithm.setdefault(entry.algorithm, []).append(entry)
    rows = []
    for label, entries in per_algorithm.items():
        feasible = [e for e in entries if e.feasible]
        rows.append(
            {
                "algorithm": label,
                "sources": groups[label].sources,
                "seeds": len(groups[label].sources),
                "tasks": len(entries),
                "infeasible": len(entries) - len(feasible),
                "trained_on": sorted({t for d in groups[label].submissions for t in d.get("trained_on", [])}),
                "score": sum(e.score for e in entries) / len(task_ids),
                "geomean_speedup": _geomean([e.speedup for e in feasible]),
                # Geomean of runtime / lower bound, minus one: a gap of 0 on one task does not zero it.
                "geomean_gap": _geomean([1.0 + e.gap for e in feasible]) - 1.0,
            }
        )
    rows.sort(key=lambda r: (-r["score"], -_nan_low(r["geomean_speedup"]), r["algorithm"], r["sources"]))
    return rows


def _nan_low(value: float) -> float:
    return -math.inf if math.isnan(value) else value


def _ratio(value: float, suffix: str, scale: float = 1.0, digits: int = 3) -> str:
    return "-" if math.isnan(value) else f"{scale * value:.{digits}f}{suffix}"


def _files(sources: tuple[str, ...]) -> str:
    return ", ".join(_code(name) for name in sources)


def _spread(entry: Entry) -> str:
    """The runtimes' span over seeds, or "-" for a single seed."""
    if entry.seeds < 2:
        return "-"
    return f"{_seconds(entry.runtime_min)}–{_seconds(entry.runtime_max)}"


def _meaning(suite: Suite) -> list[str]:
    """The paragraphs that say what each figure of the tables means."""
    n = len(suite.tasks)
    loosest = max(suite.tasks, key=lambda t: t.best_single_runtime / t.lower_bound)
    return [
        "What the figures mean:",
        "",
        "- **runtime**: the cost model's runtime (makespan of one step, seconds) of the entry's placement, "
        "re-evaluated from the submitted placement by `placement-gym leaderboard validate` before rendering.",
        "- **score**: per task, the best runtime known for the task / this runtime, in (0, 1]: 1 for the "
        f"best placement any submission of suite {suite.version} has reached on that task (any algorithm, "
        "seed or track), 0 for an infeasible placement (it does not fit in memory) or a task the entry "
        f"did not run. Overall, the mean over the {n} tasks, so that no single task can move an entry by "
        f"more than 1/{n}; entries are ranked by it. A better submission raises the bar for everyone on "
        "its task. The lower bound is not the reference because its distance to what is reachable differs "
        "from task to task, which would weigh tasks unequally.",
        "- **speedup**: the best single device's runtime / runtime. Its geomean is shown, but does not "
        "rank: one task where the best single device is slow would lift it on its own (on "
        f"`{loosest.task_id}` the best single device takes {_seconds(loosest.best_single_runtime)} s, "
        f"{loosest.best_single_runtime / loosest.lower_bound:.1f}x the lower bound).",
        "- **gap**: runtime / lower bound - 1, where the lower bound is the larger of the critical path on "
        "the fastest devices with free transfers and the total work spread evenly over all devices; no "
        "placement beats it.",
        "- **seeds**: submissions of one algorithm and budget with several seeds are one entry: per task "
        "the median seed's result is shown (runs sorted by infeasible, then runtime; the lower middle for "
        "an even count), with the number of seeds and the span of their runtimes.",
        "- **evaluations** and **wall (s)**: the evaluations of the task the algorithm made (counted by the "
        "harness on the agent's copy of the task, whatever the agent reports; `validate --rerun` "
        "re-counts them) and the wall-clock seconds it spent on the task.",
        "",
        "Speedup, gap and the reference runtimes come from the suite's frozen fingerprint; geomeans are over "
        "an entry's feasible per-task results.",
    ]


def render_markdown(submissions: list[tuple[str, dict]], suite: str | Suite = CURRENT_SUITE) -> str:
    """The README text for ``submissions`` (as `load_submissions` returns them). Checks nothing: use
    `render`, which validates first, to publish."""
    suite = get_suite(suite)
    n = len(suite.tasks)
    lines = [
        "# Leaderboard",
        "",
        f"Task suite **{suite.version}** ({n} tasks), cost-model track. Generated by "
        "`placement-gym leaderboard render` (which re-checks every submission first); do not edit by hand. "
        "Submit with `placement-gym leaderboard submit FILE` (it re-evaluates every placement first).",
        "",
        *[f"Suite {version} is retired: {why}" for version, why in RETIRED_SUITES.items()],
        "",
        *_meaning(suite),
        "",
        "## Overall",
        "",
    ]
    rows = overall_rows(submissions, suite)
    if rows:
        lines += _table(
            [
                "rank",
                "algorithm",
                "score",
                "seeds",
                "tasks",
                "infeasible",
                "geomean speedup",
                "geomean gap",
                "files",
            ],
            [
                [
                    str(i + 1),
                    markdown_text(r["algorithm"]),
                    f"{r['score']:.3f}",
                    str(r["seeds"]),
                    f"{r['tasks']}/{n}",
                    str(r["infeasible"]),
                    _ratio(r["geomean_speedup"], "x"),
                    _ratio(r["geomean_gap"], "%", 100, 1),
                    _files(r["sources"]),
                ]
                for i, r in enumerate(rows)
            ],
            [True, False, True, True, True, True, True, True, False],
        )
        lines += ["", f"![score per algorithm]({CHART_NAME})"]
    else:
        lines.append("No submissions yet.")
    lines += ["", "## Per task", ""]
    best_known = best_known_runtimes(submissions, suite)
    for task_id, entries in _entries(submissions, suite).items():
        frozen = suite.get(task_id)
        known = "" if math.isnan(best_known[task_id]) else f", best known {_seconds(best_known[task_id])} s"
        lines += [
            f"### `{task_id}`",
            "",
            f"Best single device {_seconds(frozen.best_single_runtime)} s, "
            f"lower bound {_seconds(frozen.lower_bound)} s{known}.",
            "",
        ]
        if not entries:
            lines += ["No submissions yet.", ""]
            continue
        lines += _table(
            [
                "rank",
                "algorithm",
                "runtime (s)",
                "score",
                "speedup",
                "gap to bound",
                "evaluations",
                "wall (s)",
                "feasible",
                "seeds",
                "runtime over seeds (s)",
            ],
            [
                [
                    str(i + 1),
                    markdown_text(e.algorithm),
                    _seconds(e.runtime),
                    f"{e.score:.3f}",
                    *_speedup_and_gap(e),
                    str(e.evaluations),
                    f"{e.wall_s:.2f}",
                    "yes" if e.feasible else "no",
                    str(e.seeds),
                    _spread(e),
                ]
                for i, e in enumerate(entries)
            ],
            [True, False, True, True, True, True, True, True, False, True, True],
        )
        lines.append("")
    lines += _generalisation_track(submissions, suite)
    lines += _real_track(submissions, suite)
    lines += _older_suites(submissions, suite)
    return "\n".join(lines).rstrip() + "\n"


def _generalisation_track(submissions: list[tuple[str, dict]], suite: Suite) -> list[str]:
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
    rows = overall_rows(submissions, suite, "generalisation", held_out)
    if not rows:
        return [*lines, "No submissions yet.", ""]
    lines += _table(
        [
            "rank",
            "algorithm",
            "score",
            "seeds",
            "held-out tasks",
            "infeasible",
            "geomean speedup",
            "geomean gap",
            "trained on",
            "files",
        ],
        [
            [
                str(i + 1),
                markdown_text(r["algorithm"]),
                f"{r['score']:.3f}",
                str(r["seeds"]),
                f"{r['tasks']}/{len(held_out)}",
                str(r["infeasible"]),
                _ratio(r["geomean_speedup"], "x"),
                _ratio(r["geomean_gap"], "%", 100, 1),
                f"{len(r['trained_on'])} tasks",
                _files(r["sources"]),
            ]
            for i, r in enumerate(rows)
        ],
        [True, False, True, True, True, True, True, True, True, False],
    )
    lines.append("")
    table_rows = []
    for task_id, entries in _entries(submissions, suite, "generalisation", held_out).items():
        for i, e in enumerate(entries):
            table_rows.append(
                [
                    f"`{task_id}`",
                    str(i + 1),
                    markdown_text(e.algorithm),
                    _seconds(e.runtime),
                    f"{e.score:.3f}",
                    *_speedup_and_gap(e),
                    str(e.evaluations),
                    f"{e.wall_s:.2f}",
                    "yes" if e.feasible else "no",
                    str(e.seeds),
                    _spread(e),
                ]
            )
    lines += _table(
        [
            "held-out task",
            "rank",
            "algorithm",
            "runtime (s)",
            "score",
            "speedup",
            "gap to bound",
            "evaluations",
            "wall (s)",
            "feasible",
            "seeds",
            "runtime over seeds (s)",
        ],
        table_rows,
        [False, True, False, True, True, True, True, True, True, False, True, True],
    )
    return [*lines, ""]


def _real_track(submissions: list[tuple[str, dict]], suite: Suite) -> list[str]:
    """The real-hardware track's table, only when such submissions exist: measured runtimes as
    reported, beside the cost model's."""
    rows = []
    for source, data in submissions:
        if data["suite"] != suite.version or _track(data) != "real":
            continue
        for task_id in sorted(data["results"]):
            result = data["results"][task_id]
            measured = result.get("measured_runtime")
            rows.append(
                [
                    markdown_text(data["algorithm"]),
                    _code(task_id),
                    _seconds(float(result["runtime"])),
                    "-" if measured is None else _seconds(float(measured)),
                    markdown_text(data.get("hardware") or "-"),
                    "yes" if result["trained_on_task"] else "no",
                    _code(source),
                ]
            )
    if not rows:
        return []
    rows.sort()
    lines = ["## Real-hardware track", ""]
    lines += _table(
        [
            "algorithm",
            "task",
            "cost-model runtime (s)",
            "measured runtime (s)",
            "hardware",
            "trained on task",
            "file",
        ],
        rows,
        [False, False, True, True, False, False, False],
    )
    return [*lines, ""]


def _older_suites(submissions: list[tuple[str, dict]], suite: Suite) -> list[str]:
    rows = sorted(
        [
            markdown_text(data["suite"]),
            markdown_text(data["algorithm"]),
            str(len(data["results"])),
            _code(source),
        ]
        for source, data in submissions
        if data["suite"] != suite.version
    )
    if not rows:
        return []
    return [
        "## Submissions for other suite versions",
        "",
        "Kept readable; their runtimes were computed under that suite version's cost model.",
        "",
        *_table(["suite", "algorithm", "tasks", "file"], rows, [False, False, True, False]),
        "",
    ]


def render_chart(
    submissions: list[tuple[str, dict]], path: str | Path, suite: str | Suite = CURRENT_SUITE
) -> bool:
    """Write a bar chart of the overall score per entry to ``path``; False when there is nothing."""
    rows = overall_rows(submissions, get_suite(suite))
    if not rows:
        return False
    matplotlib = require("matplotlib", "drawing the plot")
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = rows[::-1]  # best at the top of a horizontal bar chart
    figure, axes = plt.subplots(figsize=(7, 0.4 * len(rows) + 1.2))
    # "$" would start matplotlib's math text: labels are shown as written.
    axes.barh([r["algorithm"].replace("$", r"\$") for r in rows], [r["score"] for r in rows], color="#4c72b0")
    axes.set_xlim(0.0, 1.0)
    axes.set_xlabel("score: mean over tasks of best known runtime / runtime (0 if infeasible)")
    axes.set_title(f"placement-gym leaderboard, suite {get_suite(suite).version}")
    figure.tight_layout()
    # No "Software" metadata: the PNG must not change with the matplotlib version string.
    figure.savefig(path, dpi=100, metadata={"Software": None})
    plt.close(figure)
    return True


def render(directory: str | Path, check: bool = False, chart: bool = True) -> bool:
    """Validate every submission under ``directory/submissions`` (`checked_submissions`: raises
    `RenderRefused` naming each failing file, `SuiteMismatchError` when the cost model no longer
    reproduces the suite), then render the ``README.md`` of ``directory`` and, with ``chart``, the chart.

    With ``check=True`` nothing is written; returns whether the README is up to date. Otherwise writes
    and returns True."""
    directory = Path(directory)
    submissions = checked_submissions(directory / SUBMISSIONS_DIR)
    text = render_markdown(submissions)
    readme = directory / README_NAME
    if check:
        return readme.is_file() and readme.read_text() == text
    directory.mkdir(parents=True, exist_ok=True)
    readme.write_text(text)
    if chart:
        render_chart(submissions, directory / CHART_NAME)
    return True
