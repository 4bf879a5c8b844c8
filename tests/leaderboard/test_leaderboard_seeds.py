"""Leaderboard rendering: several seeds of one algorithm are one entry (the median seed shown per task),
and entries are ranked by a per-task score that no single task can dominate."""

from __future__ import annotations

import math
import random

import pytest

from placement_gym.leaderboard import CURRENT_SUITE, get_suite, render_markdown
from placement_gym.leaderboard.ranking import Run, median_run, overall_rows, task_score

SUITE = get_suite(CURRENT_SUITE)
N_TASKS = len(SUITE.tasks)
TASK_A, TASK_B = "cifar10_cnn/k80x2/train", "cifar10_resnet56/k80x2/train"


def fake(algorithm: str, seed: int, results: dict, budget: int | None = 10_000,
         track: str = "cost_model") -> dict:
    """A schema-valid submission with made-up runtimes (rendering does not re-simulate).
    ``results``: task id -> runtime or (runtime, feasible); evaluations are 100 + seed, so that a row
    tells which seed it shows."""
    data = {
        "schema": 1, "suite": CURRENT_SUITE, "package_version": "0", "algorithm": algorithm, "authors": ["t"],
        "description": "", "seed": seed, "budget": budget, "track": track, "results": {},
    }
    for task_id, value in results.items():
        runtime, feasible = value if isinstance(value, tuple) else (value, True)
        data["results"][task_id] = {
            "graph_sha256": SUITE.get(task_id).graph_sha256, "placement": {}, "runtime": runtime,
            "feasible": feasible, "evaluations": 100 + seed, "wall_s": float(seed), "trained_on_task": False,
        }
    return data


def rows_of(text: str, task_id: str) -> list[list[str]]:
    """The cells of the ranking rows of ``task_id``'s per-task table."""
    section = text.split(f"### `{task_id}`")[1].split("###")[0].split("## ")[0]
    lines = [line for line in section.splitlines() if line.startswith("| ") and line[2].isdigit()]
    return [[cell.strip() for cell in line.strip("|").split("|")] for line in lines]


HEADER = ["rank", "algorithm", "budget", "runtime (s)", "score", "speedup", "gap to bound", "evaluations",
          "wall (s)", "feasible", "seeds", "runtime over seeds (s)"]


def cell(row: list[str], column: str) -> str:
    return row[HEADER.index(column)]


def seeds_board(runtimes: list, algorithm: str = "learner", task_id: str = TASK_A) -> list[tuple[str, dict]]:
    return [(f"{CURRENT_SUITE}-{algorithm}-seed{seed}.json", fake(algorithm, seed, {task_id: value}))
            for seed, value in enumerate(runtimes)]


def test_three_seeds_are_one_entry_showing_the_median():
    # seed 0: 0.03, seed 1: 0.05, seed 2: 0.02 -> sorted 0.02, 0.03, 0.05: the median is seed 0's.
    text = render_markdown(seeds_board([0.03, 0.05, 0.02]))
    (row,) = rows_of(text, TASK_A)
    assert cell(row, "algorithm") == "learner"
    assert float(cell(row, "runtime (s)")) == 0.03
    assert cell(row, "evaluations") == "100"  # seed 0's own numbers come with its runtime
    assert cell(row, "seeds") == "3" and cell(row, "runtime over seeds (s)") == "0.02–0.05"
    best_single = SUITE.get(TASK_A).best_single_runtime
    assert cell(row, "speedup") == f"{best_single / 0.03:.3f}x"


def test_even_count_shows_the_lower_middle():
    # sorted 0.01, 0.02, 0.03, 0.04: the lower middle is 0.02 (seed 3).
    text = render_markdown(seeds_board([0.04, 0.01, 0.03, 0.02]))
    (row,) = rows_of(text, TASK_A)
    assert float(cell(row, "runtime (s)")) == 0.02 and cell(row, "evaluations") == "103"
    assert cell(row, "seeds") == "4" and cell(row, "runtime over seeds (s)") == "0.01–0.04"


def test_infeasible_runs_sort_after_feasible_ones():
    # An infeasible run is worse than any feasible one, whatever its runtime: sorted 0.03, 0.05, 0.01*.
    text = render_markdown(seeds_board([(0.01, False), 0.05, 0.03]))
    (row,) = rows_of(text, TASK_A)
    assert float(cell(row, "runtime (s)")) == 0.05 and cell(row, "feasible") == "yes"
    # Two of three infeasible: the median is infeasible and says so.
    text = render_markdown(seeds_board([(0.01, False), 0.05, (0.02, False)]))
    (row,) = rows_of(text, TASK_A)
    assert float(cell(row, "runtime (s)")) == 0.01 and cell(row, "feasible") == "no"


def test_ties_are_broken_by_seed_and_the_text_is_deterministic():
    # seeds 0 and 1 tie at 0.03: order seed 0, seed 1, seed 2 (0.04): the median is seed 1's run.
    board = seeds_board([0.03, 0.03, 0.04])
    text = render_markdown(board)
    (row,) = rows_of(text, TASK_A)
    assert float(cell(row, "runtime (s)")) == 0.03 and cell(row, "evaluations") == "101"
    shuffled = list(board)
    random.Random(0).shuffle(shuffled)
    assert render_markdown(shuffled) == text


def test_median_run_directly():
    runs = [Run("c", 2, 1.0, True, 0, 0.0), Run("a", 0, 3.0, True, 0, 0.0), Run("b", 1, 2.0, True, 0, 0.0)]
    assert median_run(runs).seed == 1
    assert median_run(runs[:2]).seed == 2  # lower middle of two: the better
    assert median_run(runs[:1]).seed == 2
    with pytest.raises(ValueError, match="at least one run"):
        median_run([])


def test_overall_is_over_per_task_medians():
    a = [0.03, 0.05, 0.02]  # median 0.03
    b = [0.07, 0.06, 0.09]  # median 0.07
    board = [(f"s{seed}.json", fake("learner", seed, {TASK_A: a[seed], TASK_B: b[seed]}))
             for seed in range(3)]
    (row,) = overall_rows(board, SUITE)
    speedups = [SUITE.get(TASK_A).best_single_runtime / 0.03, SUITE.get(TASK_B).best_single_runtime / 0.07]
    assert row["seeds"] == 3 and row["tasks"] == 2 and row["infeasible"] == 0
    assert math.isclose(row["geomean_speedup"], math.sqrt(speedups[0] * speedups[1]), rel_tol=1e-12)
    gaps = [0.03 / SUITE.get(TASK_A).lower_bound, 0.07 / SUITE.get(TASK_B).lower_bound]
    assert math.isclose(row["geomean_gap"], math.sqrt(gaps[0] * gaps[1]) - 1, rel_tol=1e-12)
    # The score's reference is the best run of any seed (0.02 and 0.06), not the best median; tasks not
    # run count 0 among the suite's tasks.
    score = (0.02 / 0.03 + 0.06 / 0.07) / N_TASKS
    assert math.isclose(row["score"], score, rel_tol=1e-12)
    overall = render_markdown(board).split("## Overall")[1].split("## Per task")[0]
    geomean = math.sqrt(speedups[0] * speedups[1])
    assert f"| 1 | learner | 10k | {score:.3f} | 3 | 2/{N_TASKS} | 0 | {geomean:.3f}x |" in overall
    assert "`s0.json`, `s1.json`, `s2.json`" in overall


def test_a_seed_missing_a_task_counts_only_the_seeds_that_ran_it():
    board = [("s0.json", fake("learner", 0, {TASK_A: 0.03, TASK_B: 0.07})),
             ("s1.json", fake("learner", 1, {TASK_A: 0.05}))]
    text = render_markdown(board)
    (row_a,) = rows_of(text, TASK_A)
    (row_b,) = rows_of(text, TASK_B)
    assert cell(row_a, "seeds") == "2" and float(cell(row_a, "runtime (s)")) == 0.03
    assert cell(row_b, "seeds") == "1" and cell(row_b, "runtime over seeds (s)") == "-"


def test_different_budgets_or_algorithms_are_separate_entries():
    board = [("a.json", fake("learner", 0, {TASK_A: 0.03}, budget=100)),
             ("b.json", fake("learner", 0, {TASK_A: 0.02}, budget=200)),
             ("c.json", fake("other", 0, {TASK_A: 0.04}, budget=100))]
    rows = rows_of(render_markdown(board), TASK_A)
    assert [cell(r, "algorithm") for r in rows] == ["learner (200)", "learner (100)", "other"]
    assert all(cell(r, "seeds") == "1" for r in rows)


def test_single_seed_algorithms_keep_their_numbers():
    board = [("h.json", fake("heuristic", 0, {TASK_A: 0.025}, budget=None))]
    (row,) = rows_of(render_markdown(board), TASK_A)
    assert float(cell(row, "runtime (s)")) == 0.025 and cell(row, "evaluations") == "100"
    assert cell(row, "seeds") == "1" and cell(row, "runtime over seeds (s)") == "-"


# --- the ranking score --------------------------------------------------------------------------------------

def test_score_per_task_is_best_known_over_runtime_and_zero_when_infeasible():
    board = [("a.json", fake("fast", 0, {TASK_A: 0.02})), ("b.json", fake("slow", 0, {TASK_A: 0.04})),
             ("c.json", fake("oom", 0, {TASK_A: (0.01, False)}))]
    rows = rows_of(render_markdown(board), TASK_A)
    assert [(cell(r, "algorithm"), cell(r, "score")) for r in rows] == [
        ("fast", "1.000"), ("slow", "0.500"), ("oom", "0.000")]
    assert "best known 0.02 s" in render_markdown(board)  # the infeasible 0.01 is no reference
    assert task_score(0.02, 0.04, True) == 0.5 and task_score(0.02, 0.01, False) == 0.0


def test_one_task_cannot_lift_an_entry_above_one_better_on_every_other_task():
    # The headline case: on bert_large/k80x4 the best single device is the CPU (no GPU holds the model),
    # so a placement there has a huge speedup. "steady" is 10% faster than "one-trick" on every
    # other task; "one-trick" is 10x faster than "steady" on bert_large/k80x4 only.
    big = "bert_large/k80x4/train"
    steady, one_trick = {}, {}
    for suite_task in SUITE.tasks:
        single = suite_task.best_single_runtime
        if suite_task.task_id == big:
            steady[big], one_trick[big] = single, single / 10
        else:
            steady[suite_task.task_id], one_trick[suite_task.task_id] = single / 1.5, single / 1.5 * 1.1
    board = [("s.json", fake("steady", 0, steady)), ("o.json", fake("one-trick", 0, one_trick))]
    rows = overall_rows(board, SUITE)
    by_name = {r["algorithm"]: r for r in rows}
    assert by_name["one-trick"]["geomean_speedup"] > by_name["steady"]["geomean_speedup"], (
        "test premise: the geomean speedup alone would rank one-trick first")
    assert [r["algorithm"] for r in rows] == ["steady", "one-trick"]
    assert math.isclose(by_name["steady"]["score"], (N_TASKS - 1 + 0.1) / N_TASKS, rel_tol=1e-12)
    assert math.isclose(by_name["one-trick"]["score"], ((N_TASKS - 1) / 1.1 + 1) / N_TASKS, rel_tol=1e-12)


def test_no_task_moves_a_score_by_more_than_one_over_the_number_of_tasks():
    rng = random.Random(0)
    for _ in range(30):
        board = [(f"{name}.json", fake(name, 0, {t.task_id: (rng.uniform(0.5, 2) * t.best_single_runtime,
                                                           rng.random() > 0.1) for t in SUITE.tasks}))
                 for name in ("a", "b", "c")]
        before = {r["algorithm"]: r["score"] for r in overall_rows(board, SUITE)}
        assert all(0.0 <= score <= 1.0 for score in before.values())
        # Any change to one entry's runtime on one task, however large, moves its own score by <= 1/N_TASKS.
        task_id = rng.choice(SUITE.task_ids)
        board[0][1]["results"][task_id]["runtime"] *= 10 ** rng.uniform(-6, 6)
        board[0][1]["results"][task_id]["feasible"] = True
        after = {r["algorithm"]: r["score"] for r in overall_rows(board, SUITE)}
        assert abs(after["a"] - before["a"]) <= 1 / len(SUITE.tasks) + 1e-12
