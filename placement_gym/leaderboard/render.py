"""Render the leaderboard: ``README.md`` (per-task rankings and an overall table) and a PNG chart.

Submissions of the same (suite, track, algorithm, budget) are one entry whatever their seeds: per task
the median seed's result is shown (`median_run`), with the number of seeds and the span of their
runtimes; the overall table is over those per-task results. The generalisation track has its own
tables, over the held-out tasks of the suite's split only (`generalisation`).

Rendering is deterministic: rows are sorted, floats have fixed formats, nothing depends on the clock,
so ``render --check`` can tell whether the committed README is stale. Speedups and gaps use the
suite's frozen fingerprint (best single-device runtime, lower bound), not a fresh simulation.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path

from placement_gym.leaderboard.generalisation import SPLITS, get_split
from placement_gym.leaderboard.submission import load_submission
from placement_gym.leaderboard.suite import CURRENT_SUITE, Suite, get_suite

README_NAME = "README.md"
CHART_NAME = "leaderboard.png"
SUBMISSIONS_DIR = "submissions"


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
    ``seeds`` counts the runs on the task; ``runtime_min`` and ``runtime_max`` span their runtimes."""

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


@dataclass(frozen=True)
class AlgorithmRuns:
    """The submissions of one algorithm: same suite, track, algorithm name and budget, any seeds."""

    label: str
    sources: tuple[str, ...]
    submissions: tuple[dict, ...]


def load_submissions(directory: str | Path) -> list[tuple[str, dict]]:
    """(file name, submission) for every ``*.json`` under ``directory``, sorted by file name."""
    paths = sorted(Path(directory).glob("*.json"))
    return [(path.name, load_submission(path)) for path in paths]


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


def group_submissions(submissions: list[tuple[str, dict]], suite: Suite,
                      track: str = "cost_model") -> list[AlgorithmRuns]:
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


def _entries(submissions: list[tuple[str, dict]], suite: Suite, track: str = "cost_model",
             task_ids: tuple[str, ...] | None = None) -> dict[str, list[Entry]]:
    """Per task id (default: every task of ``suite``), one entry per algorithm of ``track`` that ran
    the task: its median seed's result, ranked by (infeasible, runtime)."""
    task_ids = suite.task_ids if task_ids is None else task_ids
    by_task: dict[str, list[Entry]] = {t: [] for t in task_ids}
    for group in group_submissions(submissions, suite, track):
        runs: dict[str, list[Run]] = {}
        for source, data in zip(group.sources, group.submissions):
            for task_id, result in data["results"].items():
                if task_id in by_task:
                    runs.setdefault(task_id, []).append(Run(
                        source, int(data["seed"]), float(result["runtime"]), bool(result["feasible"]),
                        int(result["evaluations"]), float(result["wall_s"])))
        for task_id, task_runs in runs.items():
            frozen = suite.get(task_id)
            shown = median_run(task_runs)
            runtimes = [r.runtime for r in task_runs]
            by_task[task_id].append(Entry(
                group.label, shown.source, shown.runtime, shown.feasible,
                frozen.best_single_runtime / shown.runtime, shown.runtime / frozen.lower_bound - 1.0,
                shown.evaluations, shown.wall_s, len(task_runs), min(runtimes), max(runtimes),
            ))
    for entries in by_task.values():
        entries.sort(key=lambda e: (not e.feasible, e.runtime, e.algorithm, e.source))
    return by_task


def _table(columns: list[str], rows: list[list[str]], right: list[bool]) -> list[str]:
    lines = ["| " + " | ".join(columns) + " |",
             "|" + "|".join("---:" if r else "---" for r in right) + "|"]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return lines


def overall_rows(submissions: list[tuple[str, dict]], suite: Suite, track: str = "cost_model",
                 task_ids: tuple[str, ...] | None = None) -> list[dict]:
    """Per algorithm of ``track`` (one row for all its seeds): geomean speedup and gap over the per-task
    median-seed results that are feasible, on ``task_ids`` (default: every task of ``suite``)."""
    by_task = _entries(submissions, suite, track, task_ids)
    groups = {g.label: g for g in group_submissions(submissions, suite, track)}
    per_algorithm: dict[str, list[Entry]] = {}
    for entries in by_task.values():
        for entry in entries:
            per_algorithm.setdefault(entry.algorithm, []).append(entry)
    rows = []
    for label, entries in per_algorithm.items():
        feasible = [e for e in entries if e.feasible]
        rows.append({
            "algorithm": label, "sources": groups[label].sources,
            "seeds": len(groups[label].sources), "tasks": len(entries),
            "infeasible": len(entries) - len(feasible),
            "trained_on": sorted({t for d in groups[label].submissions for t in d.get("trained_on", [])}),
            "geomean_speedup": _geomean([e.speedup for e in feasible]),
            # Geomean of runtime / lower bound, minus one: a gap of 0 on one task does not zero it.
            "geomean_gap": _geomean([1.0 + e.gap for e in feasible]) - 1.0,
        })
    rows.sort(key=lambda r: (-r["tasks"] + r["infeasible"], -_nan_low(r["geomean_speedup"]),
                             r["algorithm"], r["sources"]))
    return rows


def _nan_low(value: float) -> float:
    return -math.inf if math.isnan(value) else value


def _files(sources: tuple[str, ...]) -> str:
    return ", ".join(f"`{name}`" for name in sources)


def _spread(entry: Entry) -> str:
    """The runtimes' span over seeds, or "-" for a single seed."""
    if entry.seeds < 2:
        return "-"
    return f"{_seconds(entry.runtime_min)}–{_seconds(entry.runtime_max)}"


def render_markdown(submissions: list[tuple[str, dict]], suite: str | Suite = CURRENT_SUITE) -> str:
    """The README text for ``submissions`` (as `load_submissions` returns them)."""
    suite = get_suite(suite)
    n = len(suite.tasks)
    lines = [
        "# Leaderboard",
        "",
        f"Task suite **{suite.version}** ({n} tasks), cost-model track. Generated by "
        "`placement-gym leaderboard render`; do not edit by hand. Submit with "
        "`placement-gym leaderboard submit FILE` (it re-evaluates every placement first).",
        "",
        "Speedup = best single device's runtime / runtime; gap = runtime / lower bound - 1 (both from "
        "the suite's frozen fingerprint). Submissions of one algorithm and budget with several seeds are "
        "one entry: per task the median seed's result is shown (runs sorted by infeasible, then runtime; "
        "the lower middle for an even count), with the number of seeds and the span of their runtimes. "
        "Overall geomeans are over an algorithm's feasible per-task results; algorithms are ranked by "
        "feasible tasks covered, then geomean speedup.",
        "",
        "## Overall",
        "",
    ]
    rows = overall_rows(submissions, suite)
    if rows:
        lines += _table(
            ["algorithm", "seeds", "tasks", "infeasible", "geomean speedup", "geomean gap", "files"],
            [[r["algorithm"], str(r["seeds"]), f"{r['tasks']}/{n}", str(r["infeasible"]),
              f"{r['geomean_speedup']:.3f}x", f"{100 * r['geomean_gap']:.1f}%", _files(r["sources"])]
             for r in rows],
            [False, True, True, True, True, True, False],
        )
        lines += ["", f"![geomean speedup per algorithm]({CHART_NAME})"]
    else:
        lines.append("No submissions yet.")
    lines += ["", "## Per task", ""]
    for task_id, entries in _entries(submissions, suite).items():
        frozen = suite.get(task_id)
        lines += [f"### `{task_id}`", "",
                  f"Best single device {_seconds(frozen.best_single_runtime)} s, "
                  f"lower bound {_seconds(frozen.lower_bound)} s.", ""]
        if not entries:
            lines += ["No submissions yet.", ""]
            continue
        lines += _table(
            ["rank", "algorithm", "runtime (s)", "speedup", "gap to bound", "evaluations", "wall (s)",
             "feasible", "seeds", "runtime over seeds (s)"],
            [[str(i + 1), e.algorithm, _seconds(e.runtime), *_speedup_and_gap(e),
              str(e.evaluations), f"{e.wall_s:.2f}", "yes" if e.feasible else "no", str(e.seeds), _spread(e)]
             for i, e in enumerate(entries)],
            [True, False, True, True, True, True, True, False, True, True],
        )
        lines.append("")
    lines += _generalisation_track(submissions, suite)
    lines += _real_track(submissions, suite)
    lines += _older_suites(submissions, suite)
    return "\n".join(lines).rstrip() + "\n"


def _generalisation_track(submissions: list[tuple[str, dict]], suite: Suite) -> list[str]:
    """The generalisation track: the split, an overall table and a per-held-out-task table (suites
    without a split: only a table of their entries' files, if any)."""
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
        "one that trained on a held-out graph or that lists a training task's result.",
        "",
    ]
    rows = overall_rows(submissions, suite, "generalisation", held_out)
    if not rows:
        return [*lines, "No submissions yet.", ""]
    lines += _table(
        ["algorithm", "seeds", "held-out tasks", "infeasible", "geomean speedup", "geomean gap",
         "trained on", "files"],
        [[r["algorithm"], str(r["seeds"]), f"{r['tasks']}/{len(held_out)}", str(r["infeasible"]),
          f"{r['geomean_speedup']:.3f}x", f"{100 * r['geomean_gap']:.1f}%",
          f"{len(r['trained_on'])} tasks", _files(r["sources"])] for r in rows],
        [False, True, True, True, True, True, True, False],
    )
    lines.append("")
    table_rows = []
    for task_id, entries in _entries(submissions, suite, "generalisation", held_out).items():
        for i, e in enumerate(entries):
            table_rows.append([f"`{task_id}`", str(i + 1), e.algorithm, _seconds(e.runtime),
                               *_speedup_and_gap(e), str(e.evaluations),
                               f"{e.wall_s:.2f}", "yes" if e.feasible else "no", str(e.seeds), _spread(e)])
    lines += _table(
        ["held-out task", "rank", "algorithm", "runtime (s)", "speedup", "gap to bound", "evaluations",
         "wall (s)", "feasible", "seeds", "runtime over seeds (s)"],
        table_rows, [False, True, False, True, True, True, True, True, False, True, True],
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
            rows.append([data["algorithm"], f"`{task_id}`", _seconds(float(result["runtime"])),
                         "-" if measured is None else _seconds(float(measured)),
                         str(data.get("hardware") or "-"),
                         "yes" if result["trained_on_task"] else "no", f"`{source}`"])
    if not rows:
        return []
    rows.sort()
    lines = ["## Real-hardware track", ""]
    lines += _table(["algorithm", "task", "cost-model runtime (s)", "measured runtime (s)",
                     "hardware", "trained on task", "file"], rows,
                    [False, False, True, True, False, False, False])
    return [*lines, ""]


def _older_suites(submissions: list[tuple[str, dict]], suite: Suite) -> list[str]:
    rows = sorted([data["suite"], data["algorithm"], str(len(data["results"])), f"`{source}`"]
                  for source, data in submissions if data["suite"] != suite.version)
    if not rows:
        return []
    return ["## Submissions for other suite versions", "",
            "Kept readable; their runtimes were computed under that suite version's cost model.", "",
            *_table(["suite", "algorithm", "tasks", "file"], rows, [False, False, True, False]), ""]


def render_chart(submissions: list[tuple[str, dict]], path: str | Path,
                 suite: str | Suite = CURRENT_SUITE) -> bool:
    """Write a bar chart of geomean speedup per submission to ``path``; False when there is nothing."""
    rows = [r for r in overall_rows(submissions, get_suite(suite)) if not math.isnan(r["geomean_speedup"])]
    if not rows:
        return False
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = rows[::-1]  # best at the top of a horizontal bar chart
    figure, axes = plt.subplots(figsize=(7, 0.4 * len(rows) + 1.2))
    axes.barh([r["algorithm"] for r in rows], [r["geomean_speedup"] for r in rows], color="#4c72b0")
    axes.axvline(1.0, color="black", linewidth=0.8)
    axes.set_xlabel("geomean speedup over the best single device (feasible tasks)")
    axes.set_title(f"placement-gym leaderboard, suite {get_suite(suite).version}")
    figure.tight_layout()
    # No "Software" metadata: the PNG must not change with the matplotlib version string.
    figure.savefig(path, dpi=100, metadata={"Software": None})
    plt.close(figure)
    return True


def render(directory: str | Path, check: bool = False, chart: bool = True) -> bool:
    """Render ``directory/README.md`` (and the chart) from ``directory/submissions/*.json``.

    With ``check=True`` nothing is written; returns whether the README is up to date. Otherwise writes
    and returns True."""
    directory = Path(directory)
    submissions = load_submissions(directory / SUBMISSIONS_DIR)
    text = render_markdown(submissions)
    readme = directory / README_NAME
    if check:
        return readme.is_file() and readme.read_text() == text
    directory.mkdir(parents=True, exist_ok=True)
    readme.write_text(text)
    if chart:
        render_chart(submissions, directory / CHART_NAME)
    return True
