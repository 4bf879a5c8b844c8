"""The generalisation track v2 (suite gen-v2): what it holds out, what an entry may train on, its
pre-training field, placements as text, the harness's count of pre-training and the rendered page."""

from __future__ import annotations

import copy
import json
import math

import numpy as np
import pytest

from placement_gym.cost_model import simulate
from placement_gym.datasets import get_dataset
from placement_gym.evaluation.placements import placement_problems, placement_to_text
from placement_gym.leaderboard import evaluate, get_suite, validate_submission
from placement_gym.leaderboard.generalisation import (
    dataset_sample_task_ids,
    get_split,
    split_of_task,
    trained_on_problems,
)
from placement_gym.leaderboard.generalisation_page import render_generalisation_page
from placement_gym.leaderboard.harness import counted_pretraining
from placement_gym.leaderboard.submission import SubmissionError, check_header, check_result
from placement_gym.task.named import get_task, parse_task_id

DATASET = get_dataset("synthetic-v1")
GEN_V2 = "gen-v2"
GEN_V2_CLUSTERS = ("k80x4", "k40x4", "p100x4")
PRETRAINING = {"evaluations": 0, "wall_s": 0.0, "machine": "tests", "counted": "declared"}


def _graph_id(task_id: str) -> str:
    return task_id.split("/")[0].partition(":")[2]


# --- what the suite holds ---------------------------------------------------------------------------------

def test_the_frozen_suite_is_the_definition_100_test_graphs_on_three_clusters():
    suite = get_suite(GEN_V2)
    assert suite.task_ids == dataset_sample_task_ids(suite.spec.measure.dataset_sample)
    graphs = {_graph_id(t) for t in suite.task_ids}
    assert len(graphs) == 100 and len(suite.task_ids) == 300
    assert {t.split("/")[1] for t in suite.task_ids} == set(GEN_V2_CLUSTERS)
    # Every graph from the dataset's test splits, read from its definition, half of each.
    splits = {g: DATASET.split_of(*DATASET.locate(g)) for g in graphs}
    assert sorted(splits.values()).count("test-sizes") == 50
    assert sorted(splits.values()).count("test-families") == 50
    # Unseen sizes: bigger than any training graph of the family; unseen families: none in train.
    train_families = {DATASET.locate(g)[0].family for g in DATASET.ids("train")}
    for graph, split in splits.items():
        family = DATASET.locate(graph)[0].family
        assert (family in train_families) == (split == "test-sizes"), graph
    assert {split_of_task(t) for t in suite.task_ids} == {"test-sizes", "test-families"}
    # Each test family contributes, so that no family's score hides behind another's.
    assert {DATASET.locate(g)[0].family for g in graphs} == {"regal", "enas-conv", "enas-rnn"}


def test_every_test_graph_is_held_out_not_only_the_scored_ones():
    split = get_split(GEN_V2)
    scored = {_graph_id(t) for t in get_suite(GEN_V2).task_ids}
    unscored_test = next(g for g in DATASET.ids("test-families") if g not in scored)
    assert split.is_held_out(f"synthetic-v1:{unscored_test}/k80x2/train")
    assert not split.is_held_out(f"synthetic-v1:{DATASET.ids('train')[0]}/k80x4/train")
    assert not split.is_held_out("resnet50/k80x4/train")


@pytest.mark.parametrize("trained_on, allowed", [
    (["synthetic-v1:train"], True),
    (["synthetic-v1:train", "synthetic-v1:valid"], True),
    ([f"synthetic-v1:{DATASET.ids('train')[3]}"], True),
    ([f"synthetic-v1:{DATASET.ids('train')[3]}/k80x4/train"], True),
    (["inception_v3/k80x4/train"], True),
    (["synthetic-v1:test"], False),
    (["synthetic-v1:all"], False),
    (["synthetic-v1:test-sizes"], False),
    ([f"synthetic-v1:{DATASET.ids('test-sizes')[0]}"], False),
    ([f"synthetic-v1:{DATASET.ids('test-families')[7]}/p100x4/train"], False),
    (["synthetic-v1:no-such-graph"], False),
])
def test_what_an_entry_may_train_on(trained_on, allowed):
    problems = trained_on_problems({"suite": GEN_V2, "trained_on": trained_on})
    assert (not problems) == allowed, problems
    assert all("\n" not in p for p in problems)


# --- the submission fields ----------------------------------------------------------------------------------

def _header(**changes) -> dict:
    data = {"schema": 1, "suite": GEN_V2, "package_version": "0.1.0", "algorithm": "x", "authors": [],
            "description": "", "seed": 0, "results": {}, "track": "generalisation",
            "trained_on": ["synthetic-v1:train"], "pretraining": dict(PRETRAINING)}
    data.update(changes)
    return data


@pytest.mark.parametrize("pretraining, message", [
    (None, "required for suites gen-arch-v1, gen-v2"),
    ({"evaluations": 1, "wall_s": 1.0, "machine": "m"}, "needs exactly"),
    ({**PRETRAINING, "evaluations": -1}, "pretraining.evaluations"),
    ({**PRETRAINING, "wall_s": math.inf}, "pretraining.wall_s"),
    ({**PRETRAINING, "machine": "a\x1b[31m"}, "pretraining.machine"),
    ({**PRETRAINING, "counted": "trust me"}, "pretraining.counted"),
])
def test_pretraining_is_required_and_checked(pretraining, message):
    with pytest.raises(SubmissionError, match=message.replace(".", r"\.")):
        check_header(_header(pretraining=pretraining))
    check_header(_header())


def test_a_placement_as_text_reads_back_and_refuses_what_is_not_one():
    task = get_task("synthetic-v1:enas-rnn-2", "k80x4", "train_step")
    placement = np.random.default_rng(0).integers(0, task.n_devices, task.n_forward)
    text = placement_to_text(task, placement)
    assert len(text) == task.n_forward and set(text) <= set("01234")
    back, reasons = placement_problems(task, text)
    assert reasons == [] and np.array_equal(back, placement)
    assert placement_problems(task, text[:-1])[0] is None
    # "5" is a digit of the alphabet but no device of a 5-device cluster.
    array, reasons = placement_problems(task, text[:10] + "5" + text[11:])
    assert array is None and "op 10" in reasons[0]
    result = {"graph_sha256": "x", "runtime": 1.0, "feasible": True, "evaluations": 0, "wall_s": 0.0,
              "trained_on_task": False}
    check_result({**result, "placement": text})
    for bad in ("0A1", "0 1", "", "０1"):
        with pytest.raises(SubmissionError, match="placement"):
            check_result({**result, "placement": bad})


def test_the_harness_counts_the_pretraining_it_runs():
    tasks = [get_task(f"synthetic-v1:{g}", "k80x4", "train_step") for g in DATASET.ids("train")[:3]]
    before = [t.evaluations for t in tasks]

    def train(copies):
        for k, task in enumerate(copies):  # k + 2 simulations of task k: 2 + 3 + 4 = 9 evaluations
            for _ in range(k + 2):
                simulate(task, np.zeros(task.n_forward, dtype=np.int64))
        return "model"

    model, pretraining = counted_pretraining(train, tasks)
    assert model == "model"
    assert pretraining["evaluations"] == 9 and pretraining["counted"] == "harness"
    assert pretraining["wall_s"] >= 0 and pretraining["machine"]
    assert [t.evaluations for t in tasks] == before  # the given tasks were copied, not used


# --- a whole submission through the harness, validation and the page ------------------------------------

TASKS = ("synthetic-v1:regal-5/k80x4/train", "synthetic-v1:enas-rnn-0/k40x4/train")


def _entry(name: str, agent) -> dict:
    suite = get_suite(GEN_V2).subset(TASKS)
    return evaluate(agent, suite, 1, algorithm=name, description="", trained_on=["synthetic-v1:train"],
                    track="generalisation", pretraining=PRETRAINING)


@pytest.fixture(scope="module")
def entries() -> dict[str, dict]:
    def on_device(index):
        return lambda task, seed, budget: np.full(task.n_forward, index, dtype=np.int64)

    return {"on-gpu0": _entry("on-gpu0", on_device(1)), "on-cpu": _entry("on-cpu", on_device(0))}


@pytest.mark.slow
def test_an_entry_validates_and_a_tampered_placement_is_caught(entries):
    data = entries["on-gpu0"]
    assert isinstance(data["results"][TASKS[0]]["placement"], str)
    check = validate_submission(data)
    assert check.ok, check.problems + [r for t in check.tasks for r in t.reasons]
    tampered = copy.deepcopy(data)
    text = tampered["results"][TASKS[0]]["placement"]
    tampered["results"][TASKS[0]]["placement"] = "2" * (len(text) // 2) + text[len(text) // 2:]
    check = validate_submission(tampered)
    assert not check.ok and "claimed runtime" in " ".join(check.tasks[1].reasons + check.tasks[0].reasons)
    wrong_track = {**copy.deepcopy(data), "track": "cost_model"}
    assert "generalisation track" in validate_submission(wrong_track).problems[0]
    leaked = {**copy.deepcopy(data), "trained_on": ["synthetic-v1:test"]}
    assert not validate_submission(leaked).ok


@pytest.mark.slow
def test_the_page_scores_each_split_from_the_best_known(entries):
    submissions = [(f"gen-v2-{name}-seed0.json", data) for name, data in entries.items()]
    page = render_generalisation_page(submissions, GEN_V2)
    runtimes = {name: {t: simulate(parse_task_id(t), np.full(parse_task_id(t).n_forward, d)).runtime
                       for t in TASKS} for name, d in (("on-gpu0", 1), ("on-cpu", 0))}
    best = {t: min(r[t] for r in runtimes.values()) for t in TASKS}
    # TASKS[0] is an unseen size, TASKS[1] an unseen family; each split's score is over its 150 tasks.
    for name in runtimes:
        sizes = best[TASKS[0]] / runtimes[name][TASKS[0]] / 150
        families = best[TASKS[1]] / runtimes[name][TASKS[1]] / 150
        overall = (sizes + families) / 2
        row = next(line for line in page.splitlines() if f"| {name} |" in line)
        cells = [c.strip() for c in row.split("|")[1:-1]]
        assert cells[3:6] == [f"{overall:.3f}", f"{sizes:.3f}", f"{families:.3f}"], row
    assert json.dumps(page)  # plain text
