"""The sections of a cost-model suite's page for its other tracks: the generalisation track (entries
scored on the held-out tasks of the suite's split only) and the real-hardware track (measured runtimes
as reported, beside the cost model's, never ranked)."""

from __future__ import annotations

from placement_gym.leaderboard.generalisation import get_split
from placement_gym.leaderboard.markdown import code_span, markdown_table, markdown_text
from placement_gym.leaderboard.ranking import entries, group_submissions, overall_rows, submission_track
from placement_gym.leaderboard.suite import Suite
from placement_gym.leaderboard.tables import (
    ENTRY_COLUMNS,
    ENTRY_RIGHT,
    entry_cells,
    overall_table,
    seconds_cell,
)


def generalisation_section(
    submissions: list[tuple[str, dict]], suite: Suite, lower_bounds: dict[str, float]
) -> list[str]:
    """The generalisation track: the split, an overall table and a per-held-out-task table (suites
    without a split: nothing)."""
    if not suite.spec.has_split:
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
    return [*lines, *held_out_tables(submissions, suite, held_out, lower_bounds)]


def held_out_tables(
    submissions: list[tuple[str, dict]], suite: Suite, held_out: tuple[str, ...],
    lower_bounds: dict[str, float], plans: dict[tuple[str, str], str] | None = None,
) -> list[str]:
    """The generalisation entries' overall table over the ``held_out`` tasks and their per-task table
    (with a column of each entry's plan, ``plans`` by (file, task id), where given); a line saying there
    are none otherwise."""
    groups = group_submissions(submissions, suite, "generalisation")
    rows = overall_rows(submissions, suite, "generalisation", held_out, groups, lower_bounds)
    if not rows:
        return ["No submissions yet.", ""]
    lines = [*overall_table(rows, len(held_out), "held-out tasks", trained_on=True), ""]
    table_rows = [
        [f"`{task_id}`", str(i + 1), *entry_cells(e),
         *([] if plans is None else [f"`{plans[(e.source, task_id)]}`"])]
        for task_id, task_entries in entries(submissions, suite, groups, held_out, lower_bounds).items()
        for i, e in enumerate(task_entries)
    ]
    extra = [] if plans is None else ["plan"]
    lines += markdown_table(["held-out task", "rank", *ENTRY_COLUMNS, *extra], table_rows,
                            [False, True, *ENTRY_RIGHT, *(False for _ in extra)])
    return [*lines, ""]


def real_hardware_section(submissions: list[tuple[str, dict]], suite: Suite) -> list[str]:
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
                    seconds_cell(float(result["runtime"])),
                    "-" if measured is None else seconds_cell(float(measured)),
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
