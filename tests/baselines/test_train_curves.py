"""`placement-gym train`: the search agents train too (their placements unchanged), the curve PNG
draws the reference runtimes, the run ends with its speedup, and --tensorboard logs the curve."""

from __future__ import annotations

import csv
import json
import math
from pathlib import Path

import numpy as np
import pytest

from baselines.learning import train
from baselines.learning.outputs import BEST_SINGLE, HEFT, LOWER_BOUND, curve_figure, references
from baselines.provider import provider
from baselines.registry import get_agent
from baselines.search import anneal, cem
from placement_gym.cli import main
from placement_gym.cost_model import lower_bound, simulate, single_device
from placement_gym.evaluation.budget import Budget
from placement_gym.evaluation.evaluator import CostModelEvaluator
from placement_gym.evaluation.placements import placement_from_dict
from placement_gym.task.named import get_task

GRAPH, CLUSTER = "cifar10_cnn", "k80x2"
TASK_ARGS = ["--graph", GRAPH, "--cluster", CLUSTER]


def run_json(capsys, *argv: str) -> dict:
    assert main([*argv, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


@pytest.mark.parametrize(("agent", "budget"), [("anneal", 300), ("cem", 200)])
def test_a_search_agent_trains_to_the_placement_of_a_plain_run(capsys, tmp_path, agent, budget):
    common = [*TASK_ARGS, "--agent", agent, "--seed", "3", "--budget", str(budget)]
    plain = run_json(capsys, "evaluate", *common)
    trained = run_json(capsys, "train", *common, "--out", str(tmp_path / "run"))
    task = get_task(GRAPH, CLUSTER)
    assert placement_from_dict(task, trained["best_placement"]).tolist() == [
        task.cluster.device_index(plain["placement"][op]) for op in task.graph.op_names]
    assert trained["best_runtime"] == plain["runtime"]
    assert trained["evaluations"] == plain["evaluations"]
    with open(tmp_path / "run" / "curve.csv") as handle:
        rows = list(csv.DictReader(handle))
    # every evaluation the search made itself is a row; the start agents' own come before the first
    numbers = [int(row["evaluation"]) for row in rows]
    assert numbers == list(range(numbers[0], plain["evaluations"] + 1)) and numbers[0] > 1
    best = [float(row["best_runtime_s"]) for row in rows]
    assert best == sorted(best, reverse=True) and best[-1] == plain["runtime"]
    assert (tmp_path / "run" / "curve.png").is_file() and not (tmp_path / "run" / "checkpoint.pt").exists()


@pytest.mark.parametrize("search", [anneal, cem])
def test_a_search_spends_a_given_budget_as_a_plain_run_and_its_curve_is_read_from_it(search):
    task = get_task(GRAPH, CLUSTER)
    budget = Budget(task, 150)
    seen: list[tuple[int, int]] = []
    budget.watch(lambda spent, new: seen.append((spent.used, new)))
    watched = search(task, seed=1, budget=budget)
    plain = search(task, seed=1, budget=150)
    assert np.array_equal(watched.placement, plain.placement)
    assert watched.info == plain.info and watched.evaluations == plain.evaluations == budget.used
    # the batches add up: each reports the count after it, the last one the search's total
    assert seen[-1][0] == plain.evaluations
    assert all(later - earlier == size for (earlier, _), (later, size) in zip(seen, seen[1:]))
    # the curve: one row per evaluation the search made itself, numbered after the start agents' own,
    # its last best the result's runtime, recomputed here from the rows' runtimes
    numbers = [row[0] for row in budget.curve]
    assert numbers == list(range(numbers[0], plain.evaluations + 1)) and numbers[0] > 1
    feasible = [runtime for _, runtime, ok, _ in budget.curve if ok]
    assert budget.curve[-1][3] == min(feasible) == plain.info["runtime"]
    with pytest.raises(ValueError, match="evaluator= goes to the Budget"):
        search(task, seed=1, budget=Budget(task, 150), evaluator=CostModelEvaluator(task))


def test_the_search_agents_are_trainable_and_resume_is_refused(capsys, tmp_path):
    assert {"anneal", "cem", "pg"} <= set(provider.trainable())
    line_args = ["train", "--agent", "cem", *TASK_ARGS, "--out", str(tmp_path), "--resume"]
    assert main(line_args) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--resume is for learned agents: cem is a search" in err[0]


def test_references_are_the_best_single_device_heft_and_the_bound():
    task = get_task(GRAPH, CLUSTER)
    found = references(task)
    heft = get_agent("heft")(task, seed=0, budget=None).placement
    assert found == {BEST_SINGLE: single_device(task).runtime, HEFT: simulate(task, heft).runtime,
                     LOWER_BOUND: lower_bound(task)}


@pytest.mark.parametrize("agent", ["pg", "cem"])
def test_the_references_count_no_evaluation_on_the_run_s_task(agent, tmp_path):
    # The reference lines (HEFT's placement simulated among them) are not part of the run: the task
    # counts what it counts without an output folder (cem's repeated placements are not simulated again).
    counted = []
    single_device(get_task(GRAPH, CLUSTER))  # its first computation counts, once per task
    for out_dir in (None, tmp_path):
        task = get_task(GRAPH, CLUSTER)
        before = task.evaluations
        result = train(agent, task, 20, seed=0, out_dir=out_dir, progress=False)
        counted.append(task.evaluations - before)
    assert set(result.references) == {BEST_SINGLE, HEFT, LOWER_BOUND}
    assert counted[1] == counted[0] and 0 < counted[0] <= result.evaluations == 20


def test_the_curve_png_draws_the_references_as_labelled_lines():
    pytest.importorskip("matplotlib")
    found = {BEST_SINGLE: 0.030, HEFT: 0.027, LOWER_BOUND: 0.020}
    curve = [(1, 0.05, True, 0.05), (2, 0.04, True, 0.04), (3, 0.06, False, 0.04)]
    axes = curve_figure(curve, found, "t").axes[0]
    labels = [text.get_text() for text in axes.get_legend().get_texts()]
    assert labels == ["sampled placement", "best feasible so far", "best single device (30.00 ms)",
                      "HEFT (27.00 ms)", "simple lower bound (20.00 ms)"]
    flat = [line.get_ydata() for line in axes.get_lines()[1:]]
    assert [list(y) for y in flat] == [[30.0, 30.0], [27.0, 27.0], [20.0, 20.0]]


def test_train_prints_the_speedup_over_the_best_single_device(capsys, tmp_path):
    assert main(["train", "--agent", "anneal", *TASK_ARGS, "--budget", "120", "--quiet",
                 "--out", str(tmp_path)]) == 0
    last = capsys.readouterr().out.strip().splitlines()[-1]
    single = single_device(get_task(GRAPH, CLUSTER)).runtime
    best = json.loads((tmp_path / "best_placement.json").read_text())["runtime"]
    assert last == (f"speedup over the best single device: {single / best:.3f}x "
                    f"(best single device {single * 1e3:,.2f} ms)")


def test_train_json_carries_the_references_and_the_speedup(capsys, tmp_path):
    summary = run_json(capsys, "train", "--agent", "cem", *TASK_ARGS, "--budget", "60",
                       "--out", str(tmp_path))
    assert set(summary["references"]) == {BEST_SINGLE, HEFT, LOWER_BOUND}
    assert summary["speedup"] == summary["references"][BEST_SINGLE] / summary["best_runtime"]


def _scalars(folder: Path) -> dict[str, list[tuple[int, float]]]:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    (run,) = [p for p in folder.iterdir() if p.is_dir()]
    events = EventAccumulator(str(run))
    events.Reload()
    return {tag: [(e.step, e.value) for e in events.Scalars(tag)] for tag in events.Tags()["scalars"]}


def test_tensorboard_logs_the_curve_of_a_learned_agent(capsys, tmp_path):
    pytest.importorskip("torch")
    pytest.importorskip("tensorboard")
    board = tmp_path / "tb"
    summary = run_json(capsys, "train", "--agent", "pg", *TASK_ARGS, "--budget", "64",
                       "--out", str(tmp_path / "run"), "--tensorboard", str(board))
    assert [p.name for p in board.iterdir()] == ["pg-cifar10_cnn-k80x2-train-s0"]
    scalars = _scalars(board)
    assert {"runtime/best_ms", "runtime/sampled_mean_ms", "train/mean_reward", "train/loss",
            "progress/evaluations", "reference/best_single_device_ms", "reference/HEFT_ms",
            "reference/simple_lower_bound_ms"} <= set(scalars)
    best = scalars["runtime/best_ms"]
    assert best[-1] == (64, pytest.approx(summary["best_runtime"] * 1e3))
    assert [v for _, v in best] == sorted((v for _, v in best), reverse=True)
    updates = scalars["progress/evaluations"]
    assert [step for step, _ in updates] == list(range(1, summary["iterations"] + 1))
    assert updates[-1][1] == 64
    single = scalars["reference/best_single_device_ms"]
    assert [v for _, v in single] == [pytest.approx(summary["references"][BEST_SINGLE] * 1e3)] * 2


def test_tensorboard_logs_a_search_too(tmp_path):
    pytest.importorskip("tensorboard")
    task = get_task(GRAPH, CLUSTER)
    result = train("cem", task, 100, seed=0, progress=False, tensorboard=tmp_path)
    scalars = _scalars(tmp_path)
    assert scalars["runtime/best_ms"][-1] == (result.evaluations, pytest.approx(result.best_runtime * 1e3))
    assert not any(tag.startswith("train/") for tag in scalars)  # a search has no loss nor reward
    assert math.isclose(result.speedup, single_device(task).runtime / result.best_runtime)


def test_without_outputs_a_run_computes_no_references():
    # The leaderboard's runs train without an output folder: they spend nothing on reference lines.
    result = train("cem", get_task(GRAPH, CLUSTER), 40, seed=0, progress=False)
    assert result.references == {} and result.speedup is None
