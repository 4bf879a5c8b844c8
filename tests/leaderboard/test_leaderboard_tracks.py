"""Budget tracks, learning curves (the harness's traces) and the proven-bounds file of the leaderboard."""

from __future__ import annotations

import copy
import json
import math

import numpy as np
import pytest

from placement_gym.cost_model import simulate, simulate_batch
from placement_gym.leaderboard import CURRENT_SUITE, evaluate, get_suite, render_markdown
from placement_gym.leaderboard.ranking import budget_track, group_submissions
from placement_gym.leaderboard.submission import SubmissionError, budget_label, check_trace, thin_trace
from placement_gym.leaderboard.task_bounds import bounds_name, frozen_bounds, load_bounds, read_bounds
from placement_gym.task.named import parse_task_id

SUITE = get_suite(CURRENT_SUITE)
BOUNDS_NAME = bounds_name(SUITE)  # the current suite's bounds file, as its suite file names it
TASK = "cifar10_cnn/k80x2/train"


def random_agent(task, seed, budget):
    """Samples ``budget`` random placements in batches of 7 and returns the best feasible one."""
    rng = np.random.default_rng(seed)
    best, best_runtime = np.zeros(task.n_forward, dtype=np.int64), math.inf
    left = budget
    while left > 0:
        rows = rng.integers(0, task.n_devices, size=(min(7, left), task.n_forward))
        runtimes, feasible, _ = simulate_batch(task, rows)
        left -= len(rows)
        for row, runtime, ok in zip(rows, runtimes, feasible):
            if ok and runtime < best_runtime:
                best, best_runtime = row, runtime
    return best


def test_the_harness_records_the_best_runtime_so_far_of_every_evaluation():
    submission = evaluate(random_agent, SUITE.subset([TASK]), 40, algorithm="rand", seed=3)
    result = submission["results"][TASK]
    trace = result["trace"]
    check_trace(trace, result["evaluations"])
    # Replay the agent's evaluations by hand: the same seed draws the same rows.
    rng = np.random.default_rng(3)
    task = parse_task_id(TASK).independent_copy()
    runtimes = []
    for size in [7] * 5 + [5]:
        rows = rng.integers(0, task.n_devices, size=(size, task.n_forward))
        results = [simulate(task, row) for row in rows]
        runtimes += [r.runtime if r.feasible else math.inf for r in results]
    expected, best = [], math.inf
    for count, runtime in enumerate(runtimes, start=1):
        if runtime < best:
            best = runtime
            expected.append([count, runtime])
    assert trace == expected
    assert trace[-1][1] == result["runtime"]


def test_a_trace_keeps_the_last_improvement_per_fiftieth_of_a_decade():
    trace = [(n, 1.0 / n) for n in range(1, 100_001)]
    thinned = thin_trace(trace)
    assert len(thinned) <= 50 * 5 + 1 and thinned[-1] == [100_000, 1.0 / 100_000]
    check_trace(thinned, 100_000)
    counts = [n for n, _ in thinned]
    assert counts == sorted(counts) and len(set(counts)) == len(counts)


@pytest.mark.parametrize(
    "trace, why",
    [
        ([[0, 1.0]], "rise"),
        ([[1, 1.0], [1, 0.5]], "rise"),
        ([[1, 1.0], [5, 2.0]], "no improvement"),
        ([[1, 1.0], [50, 0.5]], "rise"),  # beyond the result's 40 evaluations
        ([[1, -1.0]], "runtime"),
        ([[1]], "pair"),
        ("up", "trace"),
    ],
)
def test_a_malformed_trace_is_refused_naming_the_rule(trace, why):
    with pytest.raises(SubmissionError, match=why):
        check_trace(trace, 40)


def fake(algorithm: str, budget: int | None, evaluations: int, runtime: float) -> tuple[str, dict]:
    data = {
        "schema": 1, "suite": CURRENT_SUITE, "package_version": "0", "algorithm": algorithm, "authors": ["t"],
        "description": "", "seed": 0, "budget": budget, "results": {
            TASK: {"graph_sha256": SUITE.get(TASK).graph_sha256, "placement": {}, "runtime": runtime,
                   "feasible": True, "evaluations": evaluations, "wall_s": 0.0, "trained_on_task": True},
        },
    }
    return f"{algorithm}-{budget_label(budget)}.json", data


def test_a_track_holds_per_algorithm_the_largest_entry_that_fits_by_measured_evaluations():
    board = [
        fake("search", 1_000, 1_000, 0.03),
        fake("search", 10_000, 10_000, 0.028),
        fake("search", 100_000, 100_000, 0.027),
        fake("heuristic", None, 1, 0.035),
        # Declares 1,000 but used more: measured evaluations decide.
        fake("liar", 1_000, 5_000, 0.02),
    ]
    groups = group_submissions(board, SUITE)
    shown = {b: {(g.algorithm, g.budget) for g in budget_track(groups, b)} for b in (1_000, 10_000, 100_000)}
    assert shown[1_000] == {("search", 1_000), ("heuristic", None)}
    assert shown[10_000] == {("search", 10_000), ("heuristic", None), ("liar", 1_000)}
    assert shown[100_000] == {("search", 100_000), ("heuristic", None), ("liar", 1_000)}
    text = render_markdown(board, SUITE)
    first_track = text.split("### At most 1,000 evaluations")[1].split("###")[0]
    assert "liar" not in first_track and "| search | 1k |" in first_track and "10k" not in first_track


def test_the_page_states_what_pre_trained_entries_spent_before_their_runs():
    name, placer = fake("placer", 1_000, 1_000, 0.03)
    placer["pretraining"] = {"evaluations": 12_345, "wall_s": 678.0, "machine": "a 2-core VM",
                             "counted": "declared"}
    board = [(name, placer), fake("search", 1_000, 1_000, 0.029)]
    section = render_markdown(board, SUITE).split("Pre-trained entries")[1].split("##")[0]
    assert "- placer: 12,345 evaluations, 678 s (declared; a 2-core VM)" in section
    assert "search" not in section
    assert "Pre-trained entries" not in render_markdown([fake("search", 1_000, 1_000, 0.029)], SUITE)


def test_the_bounds_file_raises_a_bound_and_names_its_argument(tmp_path):
    frozen = frozen_bounds(SUITE)
    higher = frozen[TASK].value * 1.01
    (tmp_path / BOUNDS_NAME).write_text(json.dumps({
        "suite": SUITE.version,
        "tasks": {TASK: {"bound": higher, "source": "lp", "arguments": {"lp": higher}},
                  # A stored bound below the frozen one changes nothing: the larger proof wins.
                  "resnet50/p100x4/train": {"bound": 1e-9, "source": "weak", "arguments": {"weak": 1e-9}}},
    }))
    bounds = load_bounds(tmp_path, SUITE)
    assert bounds[TASK].value == higher and bounds[TASK].source == "lp"
    assert bounds["resnet50/p100x4/train"] == frozen["resnet50/p100x4/train"]
    text = render_markdown([fake("heuristic", None, 1, 0.03)], SUITE, bounds)
    assert f"lower bound {higher:.6g} s (lp)" in text


@pytest.mark.parametrize("bad", [{"suite": "v1"}, {"suite": "v1", "tasks": {TASK: {"bound": -1, "source": "x",
                                                                                       "arguments": {}}}}])
def test_a_malformed_bounds_file_is_refused(tmp_path, bad):
    path = tmp_path / BOUNDS_NAME
    path.write_text(json.dumps(bad))
    with pytest.raises(ValueError, match="bounds"):
        read_bounds(path)


def test_a_check_on_a_sample_recomputes_those_tasks_only(tmp_path, capsys):
    """``bounds --check --tasks``: a made-up bound is named when its task is in the sample and not
    otherwise; a stored task the suite lacks is named either way; --tasks needs --check."""
    from placement_gym.cli import main
    from placement_gym.leaderboard.task_bounds import check_bounds, compute_bounds

    other = "cifar10_resnet56/k80x2/train"
    stored = compute_bounds(SUITE.subset([TASK, other]))
    stored["tasks"][other]["bound"] *= 2  # no code proves this
    (tmp_path / BOUNDS_NAME).write_text(json.dumps(stored))
    assert check_bounds(tmp_path, SUITE, task_ids=[TASK]) == []
    assert [p.split(":")[0] for p in check_bounds(tmp_path, SUITE, task_ids=[other])] == [other]
    arguments = ["leaderboard", "bounds", "--check", "--dir", str(tmp_path), "--tasks"]
    assert main([*arguments, TASK]) == 0 and "the bounds of 1 task(s)" in capsys.readouterr().out
    assert main([*arguments, f"{TASK},{other}"]) == 1 and other in capsys.readouterr().err
    stored["tasks"]["cifar10_cnn/k80x4/train"] = stored["tasks"][TASK]
    (tmp_path / BOUNDS_NAME).write_text(json.dumps(stored))
    assert check_bounds(tmp_path, SUITE, task_ids=[TASK]) == [
        f"cifar10_cnn/k80x4/train: not a task of suite {SUITE.version}"]
    with pytest.raises(ValueError, match="not in suite"):
        check_bounds(tmp_path, SUITE, task_ids=["cifar10_cnn/k80x4/train"])
    assert main(["leaderboard", "bounds", "--dir", str(tmp_path), "--tasks", TASK]) == 2  # a usage error
    assert "--tasks is an option of --check" in capsys.readouterr().err
    assert main([*arguments, " , "]) == 2 and "--tasks names no task" in capsys.readouterr().err
    assert json.loads((tmp_path / BOUNDS_NAME).read_text()) == stored  # nothing written


def test_rerun_compares_the_recorded_trace():
    from placement_gym.leaderboard.rerun import compare_results

    result = evaluate(random_agent, SUITE.subset([TASK]), 30, algorithm="rand")["results"][TASK]
    changed = copy.deepcopy(result)
    changed["trace"][0][1] *= 1.5
    assert compare_results(TASK, result, result, "in the file").ok
    assert "trace" in compare_results(TASK, changed, result, "in the file").reasons[0]
