"""The generalisation track: the suite's split, validation of what an entry trained on and where it
reports results, and its own tables in the rendered leaderboard."""

from __future__ import annotations

import copy

import pytest

from placement_gym.evaluation.placements import single_placement
from placement_gym.leaderboard import (
    SPLITS,
    check_schema,
    evaluate,
    get_suite,
    render_markdown,
    validate_submission,
)
from placement_gym.leaderboard.generalisation import get_split, graph_of
from placement_gym.leaderboard.submission import SubmissionError

SUITE = "v1"  # the cost-model suite with a split of its task ids (gen-v2 is a suite of its own)
SPLIT = get_split(SUITE)
HELD_OUT = "cifar10_resnet56/k80x2/train"  # the cheapest held-out task
TRAINING = "cifar10_cnn/k80x2/train"


def last_device_agent(task, seed, budget):
    return single_placement(task, task.n_devices - 1)


@pytest.fixture(scope="module")
def entry() -> dict:
    return evaluate(last_device_agent, get_suite(SUITE).subset([HELD_OUT]), algorithm="zero-shot-cpu",
                    track="generalisation", trained_on=[TRAINING], authors=["tests"])


# --- the split ------------------------------------------------------------------------------------------

def test_split_partitions_the_suite_by_graph():
    suite = get_suite(SUITE)
    held, train = set(SPLIT.held_out_tasks()), set(SPLIT.training_tasks())
    assert held and train and not held & train and held | train == set(suite.task_ids)
    assert {graph_of(t) for t in held} == set(SPLIT.held_out_graphs)
    assert not {graph_of(t) for t in train} & set(SPLIT.held_out_graphs)


def test_held_out_tasks_span_clusters_families_and_device_counts_seen_in_training():
    suite = get_suite(SUITE)
    held = SPLIT.held_out_tasks()
    assert len({t.split("/")[1] for t in held}) >= 3, "held-out tasks should span several clusters"
    assert len(SPLIT.held_out_graphs) >= 3
    training_sizes = {suite.get(t).task().n_devices for t in SPLIT.training_tasks()}
    for task_id in held:
        assert suite.get(task_id).task().n_devices in training_sizes, task_id


def test_unknown_split_and_bad_task_id_are_clear_errors():
    with pytest.raises(ValueError, match="no generalisation split"):
        get_split("v99")
    with pytest.raises(ValueError, match="graph/cluster/objective"):
        graph_of("resnet50")
    assert set(SPLITS) == {"v0", "v1", "gen-v2", "gen-arch-v1", "parallel-v1"}


def test_the_v1_split_holds_out_the_same_graphs_and_tasks_as_v0():
    """v1 froze v0's tasks again under the calibrated cost model; the split (graph names) is the same."""
    v0 = get_split("v0")
    assert SPLIT.suite == SUITE and SPLIT.held_out_graphs == v0.held_out_graphs
    assert SPLIT.held_out_tasks() == v0.held_out_tasks() and SPLIT.training_tasks() == v0.training_tasks()


# --- validation -----------------------------------------------------------------------------------------

def test_a_valid_generalisation_submission_validates(entry):
    assert entry["track"] == "generalisation" and entry["trained_on"] == [TRAINING]
    check = validate_submission(entry)
    assert check.ok, (check.problems, check.tasks)


def test_training_on_a_held_out_graph_is_rejected(entry):
    data = copy.deepcopy(entry)
    data["trained_on"] = [TRAINING, "resnet50/p100x4/train"]
    check = validate_submission(data)
    assert not check.ok
    assert any("held-out graph" in p and "resnet50/p100x4/train" in p for p in check.problems)
    # The split is by graph: the same graph on a cluster outside the suite leaks it too.
    data["trained_on"] = ["cifar10_resnet56/k80x4/train"]
    assert any("held-out graph" in p for p in validate_submission(data).problems)
    data["trained_on"] = ["not-a-task-id"]
    assert any("graph/cluster/objective" in p for p in validate_submission(data).problems)


def test_results_on_a_training_task_are_rejected(entry):
    other = evaluate(last_device_agent, get_suite(SUITE).subset([TRAINING]), algorithm="x")
    data = copy.deepcopy(entry)
    data["results"][TRAINING] = other["results"][TRAINING]
    check = validate_submission(data)
    verdict = {t.task_id: t for t in check.tasks}
    assert not check.ok and verdict[HELD_OUT].ok and not verdict[TRAINING].ok
    assert "not a held-out task" in verdict[TRAINING].reasons[0]


def test_a_held_out_task_evaluated_during_the_run_is_accepted(entry):
    # The harness marks a task the entry evaluated while placing it (zero-shot samples, fine-tuning)
    # trained_on_task; the track allows that. Training on the held-out graph beforehand is rejected.
    data = copy.deepcopy(entry)
    data["results"][HELD_OUT].update(trained_on_task=True, evaluations=1016, wall_s=1.0)
    assert validate_submission(data).ok
    data["trained_on"] = [HELD_OUT]
    assert any("held-out graph" in p for p in validate_submission(data).problems)


def test_a_generalisation_submission_must_state_trained_on(entry):
    data = copy.deepcopy(entry)
    del data["trained_on"]
    with pytest.raises(SubmissionError, match="must state 'trained_on'"):
        check_schema(data)
    data["trained_on"] = "cifar10_cnn/k80x2/train"
    with pytest.raises(SubmissionError, match="list of task ids"):
        check_schema(data)
    assert "trained_on" in validate_submission(data).problems[0]


# --- rendering ------------------------------------------------------------------------------------------

def test_render_shows_the_track_on_held_out_tasks_only(entry):
    data = copy.deepcopy(entry)
    # A result on a training task is ignored by the tables (validation rejects the file anyway).
    other = evaluate(last_device_agent, get_suite(SUITE).subset([TRAINING]), algorithm="x")
    data["results"][TRAINING] = other["results"][TRAINING]
    text = render_markdown([("g.json", data)], SUITE)
    track = text.split("## Generalisation track")[1]
    # The entry is the only one, so the best known on its one task of the 6 held out: score 1/6.
    assert f"| 1 | zero-shot-cpu | default | {1 / 6:.3f} | 1 | 1/6 | 0 |" in track and "1 tasks" in track
    runtime = data["results"][HELD_OUT]["runtime"]
    assert f"| `{HELD_OUT}` | 1 | zero-shot-cpu | default | {runtime:.6g} | 1.000 |" in track
    assert f"| `{TRAINING}` |" not in track
    frozen = get_suite(SUITE).get(HELD_OUT)
    assert f"{frozen.best_single_runtime / runtime:.3f}x" in track
    # Not part of the cost-model track.
    assert "zero-shot-cpu" not in text.split("## Generalisation track")[0]
    for graph in SPLIT.held_out_graphs:
        assert f"`{graph}`" in track.split("\n\n")[1]


# --- the helpers baselines/leaderboard_fill/generalisation.py uses ---------------------------------------

def test_train_on_tasks_then_place_held_out_counts_held_out_evaluations():
    pytest.importorskip("torch")
    from baselines.learning.generalize import place_held_out, train_on_tasks
    from placement_gym.cost_model import simulate

    suite = get_suite(SUITE)
    model, evaluators = train_on_tasks("hsdag", [suite.get(TRAINING).task()], 32, seed=0, batch=16, hidden=8)
    assert [e.used for e in evaluators] == [32]
    task = suite.get(HELD_OUT).task()
    evaluator, zero_shot, placement = place_held_out(model, task, zero_shot_samples=4, finetune_budget=8)
    assert zero_shot["evaluations"] == 4 and evaluator.used == 12
    assert simulate(task, placement).runtime == zero_shot["best_runtime"]
    assert evaluator.best_runtime <= zero_shot["best_runtime"]
    with pytest.raises(ValueError, match="same number of devices"):
        train_on_tasks("hsdag", [suite.get(TRAINING).task(), suite.get("rnnlm/k80x4/train").task()], 8)


def test_harness_runs_only_held_out_tasks_on_the_generalisation_track():
    small = get_suite(SUITE).subset([TRAINING, HELD_OUT])
    data = evaluate(last_device_agent, small, algorithm="g", track="generalisation", trained_on=[TRAINING])
    assert list(data["results"]) == [HELD_OUT] and validate_submission(data).ok
    with pytest.raises(ValueError, match="needs trained_on"):
        evaluate(last_device_agent, small, algorithm="g", track="generalisation")
    with pytest.raises(ValueError, match="no held-out task"):
        evaluate(last_device_agent, get_suite(SUITE).subset([TRAINING]), algorithm="g",
                 track="generalisation", trained_on=[TRAINING])
