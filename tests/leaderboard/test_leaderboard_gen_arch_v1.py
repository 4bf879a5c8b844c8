"""The generalisation track on real models (suite gen-arch-v1): drawn from architectures-v1's test splits
only, what an entry may state it trained on (another dataset's training split, as pretrained-list's
checkpoint does, but no test split of any dataset), its tasks rebuilt from its dataset sample, and a
committed entry whose placement was edited caught by re-simulation."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from baselines.leaderboard_fill.generalisation_v2 import (
    LEARNED,
    PRETRAINED,
    checkpoint_training,
    device_counts,
)
from placement_gym.datasets import get_dataset
from placement_gym.datasets.clusters import cluster_ids
from placement_gym.leaderboard import get_suite, validate_submission
from placement_gym.leaderboard.generalisation import (
    dataset_sample_task_ids,
    get_split,
    graph_of,
    trained_on_problems,
)
from placement_gym.leaderboard.suite import measure_suite_task, task_of_id

SUITE = "gen-arch-v1"
DATASET = get_dataset("architectures-v1")
SUBMISSIONS = Path(__file__).resolve().parents[2] / "leaderboard" / "submissions"
# Two small tasks, one per split, on the two clusters that are not K80 presets (9 and 12 devices).
SMALL = ("architectures-v1:whisper-0/h100x8/train", "architectures-v1:unet-96/random-v1:1000/train")


def _split_and_family(graph: str) -> tuple[str, str]:
    spec, k = DATASET.locate(graph.partition(":")[2])
    return DATASET.split_of(spec, k), spec.family


# --- what the suite holds -----------------------------------------------------------------------------------

def test_the_suite_holds_only_test_split_graphs_of_architectures_v1():
    suite = get_suite(SUITE)
    assert suite.spec.status == "accepted" and suite.spec.track == "generalisation"
    graphs = list(dict.fromkeys(graph_of(t) for t in suite.task_ids))
    assert len(graphs) == 24 and len(suite.task_ids) == 72
    where = {g: _split_and_family(g) for g in graphs}
    # No train or valid graph: every graph of a test split, 12 of each.
    assert [split for split, _ in where.values()].count("test-families") == 12
    assert [split for split, _ in where.values()].count("test-sizes") == 12
    # Unseen families: T5 and Whisper, which no training split holds; unseen sizes: one graph of each
    # training family, at a size its training graphs never have.
    train_families = {DATASET.locate(g)[0].family for g in DATASET.ids("train")}
    assert {f for s, f in where.values() if s == "test-families"} == {"t5", "whisper"}
    assert not {"t5", "whisper"} & train_families
    assert sorted(f for s, f in where.values() if s == "test-sizes") == sorted(train_families)
    # Clusters of 5, 9 and 12 devices; the random one is of random-v1's test split, trained on by none.
    assert {t.split("/")[1] for t in suite.task_ids} == {"k80x4", "h100x8", "random-v1:1000"}
    assert "random-v1:1000" in cluster_ids("test")
    assert device_counts(suite.spec.measure.dataset_sample) == [5, 9, 12]
    # So the GNN placers with one output per device, which the fill refuses on such a suite, are absent.
    files = SUBMISSIONS.glob(f"{SUITE}-*.json")
    algorithms = {p.name.removeprefix(f"{SUITE}-").split("-seed")[0] for p in files}
    assert not {a for a in algorithms if a.startswith(LEARNED)}


def test_the_tasks_are_rebuilt_from_the_dataset_sample():
    suite = get_suite(SUITE)
    assert suite.task_ids == dataset_sample_task_ids(suite.spec.measure.dataset_sample)
    # The frozen figures of two tasks (a dataset graph on a preset and on a random-v1 cluster), measured
    # again from their ids alone.
    for task_id in SMALL:
        assert measure_suite_task(task_of_id(task_id)) == suite.get(task_id)


def test_every_test_graph_is_held_out_not_only_the_scored_ones():
    split = get_split(SUITE)
    scored = {graph_of(t) for t in get_suite(SUITE).task_ids}
    unscored = [f"architectures-v1:{g}" for g in DATASET.ids("test") if f"architectures-v1:{g}" not in scored]
    assert len(unscored) == 178 - 24
    assert all(split.is_held_out_graph(g) for g in unscored)
    assert not split.is_held_out(f"architectures-v1:{DATASET.ids('train')[0]}/h100x8/train")


# --- what an entry may train on -----------------------------------------------------------------------------

TEST_GRAPH = DATASET.ids("test-families")[3]  # t5-3: a test graph the suite does not score


@pytest.mark.parametrize("trained_on, allowed", [
    (["architectures-v1:train", "architectures-v1:valid"], True),
    ([f"architectures-v1:{DATASET.ids('train')[5]}/random-v1:7/train"], True),
    # Outside architectures-v1: pretrained-list's checkpoint, trained on synthetic graphs.
    (["synthetic-v1:train"], True),
    (["bert_large/k80x4/train"], True),
    (["architectures-v1:test"], False),
    (["architectures-v1:test-families"], False),
    (["architectures-v1:test-sizes"], False),
    (["architectures-v1:all"], False),
    ([f"architectures-v1:{TEST_GRAPH}"], False),
    ([f"architectures-v1:{TEST_GRAPH}/k40x4/train"], False),
    # gen-v2's held-out split, named whole or by a graph: a test split of any dataset is refused.
    (["synthetic-v1:test"], False),
    (["synthetic-v1:test-families"], False),
    ([f"synthetic-v1:{get_dataset('synthetic-v1').ids('test-sizes')[0]}"], False),
    ([f"synthetic-v1:{get_dataset('synthetic-v1').ids('test-families')[0]}/k80x4/train"], False),
    ([f"synthetic-v1:{get_dataset('synthetic-v1').ids('train')[0]}/k80x4/train"], True),
    # A dataset with architectures-v1's families (T5 and Whisper among them) may hold its test graphs.
    (["architectures-mini-v1:train"], False),
])
def test_what_an_entry_may_train_on(trained_on, allowed):
    problems = trained_on_problems({"suite": SUITE, "trained_on": trained_on})
    assert (not problems) == allowed, problems
    assert all("\n" not in p for p in problems)


def test_a_pretrained_agent_states_what_its_own_checkpoint_trained_on():
    """The fill takes ``trained_on`` from the agent's checkpoint record, not from the suite."""
    for name in PRETRAINED:
        trained_on, sentence = checkpoint_training(name)
        assert not trained_on_problems({"suite": SUITE, "trained_on": trained_on}), name
        assert all(entry in sentence for entry in trained_on)
    committed = json.loads((SUBMISSIONS / f"{SUITE}-pretrained-list-1-seed0.json").read_text())
    assert committed["trained_on"] == checkpoint_training("pretrained-list")[0] == ["synthetic-v1:train"]
    assert committed["pretraining"]["counted"] == "declared"


# --- a committed entry, re-simulated ------------------------------------------------------------------------

def test_a_committed_entry_validates_and_an_edited_placement_is_caught():
    data = json.loads((SUBMISSIONS / f"{SUITE}-heft-seed0.json").read_text())
    assert set(data["results"]) == set(get_suite(SUITE).task_ids)
    # Two of its 72 results, so that the check stays quick; validation takes a file of fewer tasks.
    data["results"] = {t: data["results"][t] for t in SMALL}
    check = validate_submission(data)
    assert check.ok, check.problems + [r for t in check.tasks for r in t.reasons]
    tampered = copy.deepcopy(data)
    text = tampered["results"][SMALL[0]]["placement"]
    # Half the ops moved to the host CPU (device 0), the claimed runtime kept.
    tampered["results"][SMALL[0]]["placement"] = "0" * (len(text) // 2) + text[len(text) // 2:]
    assert tampered["results"][SMALL[0]]["placement"] != text
    check = validate_submission(tampered)
    reasons = {t.task_id: " ".join(t.reasons) for t in check.tasks}
    assert not check.ok and "claimed runtime" in reasons[SMALL[0]] and not reasons[SMALL[1]]


def test_at_100_evaluations_the_searches_leave_out_the_tasks_they_cannot_start():
    """On five K80 tasks the constructive heuristics' memory retries alone take over 100 evaluations:
    the fill leaves those tasks out of the 100-evaluation files (scored 0), and nothing else."""
    cannot_start = {f"architectures-v1:{g}/k80x4/train"
                    for g in ("efficientnet-40", "gpt2-96", "llama-64", "moe-36", "gnmt-24")}
    every = set(get_suite(SUITE).task_ids)
    for name in ("anneal", "move-bandit", "pretrained-list"):
        for seed in (0, 1, 2):
            data = json.loads((SUBMISSIONS / f"{SUITE}-{name}-100-seed{seed}.json").read_text())
            assert set(data["results"]) == every - cannot_start, (name, seed)
            assert max(r["evaluations"] for r in data["results"].values()) <= 100
            full = json.loads((SUBMISSIONS / f"{SUITE}-{name}-1k-seed{seed}.json").read_text())
            assert set(full["results"]) == every
