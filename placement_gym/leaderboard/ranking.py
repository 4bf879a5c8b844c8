"""Who ranks where: entries, scores, the median seed per task and the budget tracks.

Submissions of the same (suite, track, algorithm, budget) are one entry (`AlgorithmRuns`) whatever their
seeds: per task the median seed's result is shown (`median_run`), with the number of seeds and the span
of their runtimes. Entries are ranked by their score (`task_score`): per task, the best runtime known for
the task / the entry's runtime, in (0, 1], 0 when infeasible or not run; overall, the mean over the
track's tasks, so that no single task moves an entry's score by more than 1 / (number of tasks).

Budget tracks (`TRACK_BUDGETS`): the track of budget B compares, per algorithm, its entry with the
most evaluations that still keeps every run within B evaluations of every task (the evaluations the
harness measured, not the budget an entry declares): a heuristic that evaluates once is in every track,
anneal's 10,000-evaluation entry in the 10,000 and 100,000 tracks unless a larger one of its own fits.
"""

from __future__ import annotations

import json
import math
from collections import Counter
from dataclasses import dataclass

from placement_gym.leaderboard.submission import budget_label
from placement_gym.leaderboard.suite import Suite

TRACK_BUDGETS: tuple[int, ...] = (1_000, 10_000, 100_000)


@dataclass(frozen=True)
class Run:
    """One submission's result on one task; ``trace`` is its learning curve (`Task.trace`) when recorded."""

    source: str
    seed: int
    runtime: float
    feasible: bool
    evaluations: int
    wall_s: float
    trace: tuple[tuple[int, float], ...] | None = None


@dataclass(frozen=True)
class Entry:
    """One algorithm's shown result on one task (its median seed's), with the numbers the tables show.
    ``seeds`` counts the runs on the task; ``runtime_min`` and ``runtime_max`` span their runtimes;
    ``score`` is `task_score` of the shown result; ``budget`` the entry's declared budget as a label."""

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
    budget: str = "default"
    trace: tuple[tuple[int, float], ...] | None = None


@dataclass(frozen=True)
class AlgorithmRuns:
    """The submissions of one algorithm: same suite, track, algorithm name and budget, any seeds."""

    label: str
    sources: tuple[str, ...]
    submissions: tuple[dict, ...]
    algorithm: str = ""
    budget: int | None = None

    @property
    def max_evaluations(self) -> int:
        """The most evaluations any of its runs made of any task (0 when it has no result)."""
        return max((r["evaluations"] for d in self.submissions for r in d["results"].values()), default=0)


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


def geomean(values: list[float]) -> float:
    """The geometric mean of positive ``values`` (NaN for none)."""
    return math.exp(sum(math.log(v) for v in values) / len(values)) if values else float("nan")


def median_run(runs: list[Run]) -> Run:
    """The median seed's run: runs sorted by (infeasible, runtime), ties by seed then file name; the
    middle one, the lower middle for an even count (so that of two seeds the better one is shown)."""
    if not runs:
        raise ValueError("median_run needs at least one run")
    ordered = sorted(runs, key=lambda r: (not r.feasible, r.runtime, r.seed, r.source))
    return ordered[(len(ordered) - 1) // 2]


def submission_track(data: dict) -> str:
    """The track a submission is in (``cost_model`` when it names none)."""
    return data.get("track", "cost_model")


def group_submissions(
    submissions: list[tuple[str, dict]], suite: Suite, track: str | None = None
) -> list[AlgorithmRuns]:
    """The submissions of ``suite``'s version and ``track`` (None: `ranked_track`), one group per
    (algorithm, budget), sorted by algorithm then budget. A group's label is its algorithm name, with the
    budget (`budget_label`) added when the same name comes with several budgets."""
    track = ranked_track(suite) if track is None else track
    groups: dict[tuple[str, str], list[tuple[str, dict]]] = {}
    for source, data in submissions:
        if data["suite"] != suite.version or submission_track(data) != track:
            continue
        # The budget as text: None (the agent's default) and numbers are then one sortable kind.
        groups.setdefault((data["algorithm"], json.dumps(data.get("budget"))), []).append((source, data))
    names = Counter(algorithm for algorithm, _ in groups)  # a count per name: linear in the groups
    result = []
    ordered = sorted(groups.items(), key=lambda item: (item[0][0], _budget_order(json.loads(item[0][1]))))
    for (algorithm, budget_text), members in ordered:
        members.sort(key=lambda member: member[0])
        budget = json.loads(budget_text)
        label = algorithm if names[algorithm] == 1 else f"{algorithm} ({budget_label(budget)})"
        result.append(
            AlgorithmRuns(
                label, tuple(s for s, _ in members), tuple(d for _, d in members), algorithm, budget
            )
        )
    return result


def ranked_track(suite: Suite) -> str:
    """The track a suite's budget tables rank: ``parallel`` for a parallel-plan suite, else
    ``cost_model`` (a cost-model suite's other tracks have sections of their own)."""
    return "parallel" if suite.spec.track == "parallel" else "cost_model"


def _budget_order(budget: int | None) -> float:
    return -1.0 if budget is None else float(budget)


def budget_track(groups: list[AlgorithmRuns], budget: int) -> list[AlgorithmRuns]:
    """The entries of the track of ``budget`` evaluations (module docstring): per algorithm, its group
    with the most measured evaluations among those whose every run stays within ``budget``."""
    chosen: dict[str, AlgorithmRuns] = {}
    for group in groups:
        if group.max_evaluations > budget:
            continue
        held = chosen.get(group.algorithm)
        if held is None or (group.max_evaluations, _budget_order(group.budget)) > (
            held.max_evaluations,
            _budget_order(held.budget),
        ):
            chosen[group.algorithm] = group
    return [chosen[name] for name in sorted(chosen)]


def entries(
    submissions: list[tuple[str, dict]],
    suite: Suite,
    groups: list[AlgorithmRuns],
    task_ids: tuple[str, ...] | None = None,
    lower_bounds: dict[str, float] | None = None,
) -> dict[str, list[Entry]]:
    """Per task id (default: every task of ``suite``), one entry per group of ``groups`` that ran the
    task: its median seed's result, ranked by (infeasible, runtime). The gap is to ``lower_bounds``
    (default: the suite's frozen lower bound)."""
    task_ids = suite.task_ids if task_ids is None else task_ids
    best_known = best_known_runtimes(submissions, suite)
    by_task: dict[str, list[Entry]] = {t: [] for t in task_ids}
    for group in groups:
        runs: dict[str, list[Run]] = {}
        for source, data in zip(group.sources, group.submissions):
            for task_id, result in data["results"].items():
                if task_id in by_task:
                    trace = result.get("trace")
                    runs.setdefault(task_id, []).append(
                        Run(
                            source,
                            int(data["seed"]),
                            float(result["runtime"]),
                            bool(result["feasible"]),
                            int(result["evaluations"]),
                            float(result["wall_s"]),
                            None if trace is None else tuple((int(n), float(r)) for n, r in trace),
                        )
                    )
        for task_id, task_runs in runs.items():
            frozen = suite.get(task_id)
            bound = frozen.lower_bound if lower_bounds is None else lower_bounds[task_id]
            shown_run = median_run(task_runs)
            runtimes = [r.runtime for r in task_runs]
            by_task[task_id].append(
                Entry(
                    group.label,
                    shown_run.source,
                    shown_run.runtime,
                    shown_run.feasible,
                    frozen.best_single_runtime / shown_run.runtime,
                    shown_run.runtime / bound - 1.0,
                    shown_run.evaluations,
                    shown_run.wall_s,
                    len(task_runs),
                    min(runtimes),
                    max(runtimes),
                    task_score(best_known[task_id], shown_run.runtime, shown_run.feasible),
                    budget_label(group.budget),
                    shown_run.trace,
                )
            )
    for task_entries in by_task.values():
        task_entries.sort(key=lambda e: (not e.feasible, e.runtime, e.algorithm, e.source))
    return by_task


def overall_rows(
    submissions: list[tuple[str, dict]],
    suite: Suite,
    track: str | None = None,
    task_ids: tuple[str, ...] | None = None,
    groups: list[AlgorithmRuns] | None = None,
    lower_bounds: dict[str, float] | None = None,
) -> list[dict]:
    """Per group (default: every group of ``track``, None: `ranked_track`; one row for all its seeds),
    ranked best first, over
    ``task_ids`` (default: every task of ``suite``): ``score``, the mean of `task_score` over all those
    tasks (a task it did not run counts 0), then geomean speedup and gap over its feasible per-task
    median-seed results. Ties on the score go by geomean speedup, then name."""
    task_ids = suite.task_ids if task_ids is None else task_ids
    groups = group_submissions(submissions, suite, track) if groups is None else groups
    by_task = entries(submissions, suite, groups, task_ids, lower_bounds)
    by_label = {g.label: g for g in groups}
    per_algorithm: dict[str, list[Entry]] = {}
    for task_entries in by_task.values():
        for entry in task_entries:
            per_algorithm.setdefault(entry.algorithm, []).append(entry)
    rows = []
    for label, algorithm_entries in per_algorithm.items():
        feasible = [e for e in algorithm_entries if e.feasible]
        group = by_label[label]
        rows.append(
            {
                "algorithm": label,
                "name": group.algorithm,
                "budget": budget_label(group.budget),
                "max_evaluations": group.max_evaluations,
                "sources": group.sources,
                "seeds": len(group.sources),
                "tasks": len(algorithm_entries),
                "infeasible": len(algorithm_entries) - len(feasible),
                "trained_on": sorted({t for d in group.submissions for t in d.get("trained_on", [])}),
                "score": sum(e.score for e in algorithm_entries) / len(task_ids),
                "geomean_speedup": geomean([e.speedup for e in feasible]),
                # Geomean of runtime / lower bound, minus one: a gap of 0 on one task does not zero it.
                "geomean_gap": geomean([1.0 + e.gap for e in feasible]) - 1.0,
            }
        )
    rows.sort(key=lambda r: (-r["score"], -_nan_low(r["geomean_speedup"]), r["algorithm"], r["sources"]))
    return rows


def _nan_low(value: float) -> float:
    return -math.inf if math.isnan(value) else value


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
