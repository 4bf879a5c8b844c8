"""`pretrained-list` (baselines/learning/pretrained.py): the shipped checkpoint, the agent on the command
line, its budgets, and the pre-training's reproducibility."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys

import numpy as np
import pytest
from paths import ROOT

from baselines.learning.pretrained import (
    CHECKPOINT,
    N_WEIGHTS,
    PretrainConfig,
    PretrainedModel,
    learned_schedule,
    load_checkpoint,
    pretrain,
    training_tasks,
)
from baselines.registry import run_agent
from placement_gym.cost_model import simulate
from placement_gym.task.named import get_task, parse_task_id
from tests.finetuning import assert_finetuning_stays_in_budget_and_keeps_the_zero_shot
from tests.random_search import SEEDS, random_search_floor

# Held out from pre-training: a graph of synthetic-mini-v1's test-families split (ENAS recurrent cells,
# a family with no training graph) on a preset cluster.
HELD_OUT = "synthetic-mini-v1:enas-rnn-0"
TINY = PretrainConfig(dataset="synthetic-mini-v1", pool=4, max_ops=200, tasks_per_generation=2,
                      generations=2, population=4, clusters=("k80x2", "random-v1:train"))


def test_heft_weights_schedule_as_heft():
    """Hand case: upward rank as the only priority and no device penalty is HEFT's rule, so the
    placement is HEFT's, on a bundled graph and on a random cluster."""
    for graph, cluster in (("cifar10_cnn", "k80x4"), ("synthetic-mini-v1:regal-1", "random-v1:5")):
        task = get_task(graph, cluster)
        heft = run_agent(task, "heft")
        assert heft.info["memory_retries"] == 0  # so its placement is the first schedule's
        mine = learned_schedule(task, PretrainedModel.heft())
        assert np.array_equal(mine.placement(), heft.placement)


def test_checkpoint_loads_with_its_training_record():
    model, record = load_checkpoint()
    assert model.vector().shape == (N_WEIGHTS,) and np.all(np.isfinite(model.vector()))
    assert not np.allclose(model.vector(), PretrainedModel.heft().vector())  # it was trained
    assert record["evaluations"] > 0 and record["wall_s"] > 0 and record["machine"]
    assert record["config"]["dataset"] == "synthetic-v1"
    # The shipped file stays small enough for the repository.
    assert CHECKPOINT.stat().st_size < 20_000


def test_its_entries_declare_the_checkpoints_pretraining_and_no_other_agents_do():
    """The registry says which agent was pre-trained outside the harness; the fill writes it into the
    submission, read from the shipped checkpoint's own record."""
    from baselines.leaderboard_fill.learned import run_one
    from baselines.registry import declared_pretraining

    record = json.loads(CHECKPOINT.read_text())["training"]
    declared = {"evaluations": record["evaluations"], "wall_s": record["wall_s"],
                "machine": record["machine"], "counted": "declared"}
    assert declared_pretraining("pretrained-list") == declared
    assert declared_pretraining("anneal") is None and declared_pretraining("heft") is None
    for agent, expected in (("pretrained-list", declared), ("anneal", None)):
        submission = run_one(agent, 0, "cifar10_cnn/k80x2/train", 20, "v1")
        assert submission.get("pretraining") == expected, agent


@pytest.mark.parametrize("text", ["", "{}", '{"weights": [1, 2]}', "[1, 2, 3]"])
def test_a_malformed_checkpoint_is_a_one_line_error(tmp_path, text):
    path = tmp_path / "bad.json"
    path.write_text(text)
    with pytest.raises(ValueError, match="cannot load the pretrained-list checkpoint") as error:
        load_checkpoint(path)
    assert "\n" not in str(error.value)


def test_zero_shot_spends_one_evaluation():
    task = get_task(HELD_OUT, "k80x4")
    before = task.evaluations
    result = run_agent(task, "pretrained-list", 0, 1)
    assert result.evaluations == 1 == task.evaluations - before


def test_finetuning_stays_in_its_budget_and_keeps_the_zero_shot():
    task = get_task(HELD_OUT, "k40x4")
    assert_finetuning_stays_in_budget_and_keeps_the_zero_shot(task, "pretrained-list", zero_shot_budget=1)


@pytest.mark.parametrize("budget", [1, 100])
def test_pretrained_list_learns_beyond_random_search(budget):
    """On a held-out graph, the pre-trained placer at ``budget`` evaluations beats the best that
    random search finds with the same evaluations on any of `SEEDS`."""
    task = get_task(HELD_OUT, "p100x4")
    floor = random_search_floor(task, budget, SEEDS)
    for seed in SEEDS:
        result = simulate(task, run_agent(task, "pretrained-list", seed, budget).placement)
        assert result.feasible and result.runtime < floor, (seed, result.runtime, floor)


@pytest.mark.parametrize("graph", ["synthetic-mini-v1:enas-rnn-0", "synthetic-mini-v1:enas-rnn-1"])
def test_pretraining_learned_past_its_heft_start_on_a_held_out_family(graph):
    """Training starts from HEFT's weights; on graphs of a family no training graph belongs to
    (recurrent cells, whose copies HEFT's contention-free model underrates), the trained weights'
    one evaluation beats HEFT and m-ETF on every preset 5-device cluster of the generalisation track."""
    for cluster in ("k80x4", "k40x4", "p100x4"):
        task = get_task(graph, cluster)
        mine = simulate(task, run_agent(task, "pretrained-list", 0, 1).placement)
        assert mine.feasible
        for baseline in ("heft", "m-etf"):
            theirs = simulate(task, run_agent(task, baseline).placement)
            assert mine.runtime < theirs.runtime, (cluster, baseline)


def _cli(*args: str) -> dict:
    done = subprocess.run([sys.executable, "-m", "placement_gym", *args], capture_output=True, text=True,
                          cwd=ROOT, timeout=600)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


@pytest.mark.slow
def test_cli_places_a_bundled_graph_and_a_users_onnx_file(tmp_path):
    report = _cli("evaluate", "--agent", "pretrained-list", "--graph", "inception_v3", "--cluster", "k80x4",
                  "--json")
    assert report["task"] == "inception_v3/k80x4/train" and report["feasible"]
    own = tmp_path / "my_model.onnx"
    shutil.copy(ROOT / "graphs" / "rnnlm.onnx", own)
    report = _cli("evaluate", "--agent", "pretrained-list", "--graph", str(own), "--cluster", "p100x4",
                  "--budget", "1", "--json")
    assert report["evaluations"] == 1 and report["feasible"]
    agents = {row["name"]: row for row in _cli("agents", "--json")}
    assert agents["pretrained-list"]["kind"] == "pretrained"


def test_pretraining_is_reproducible_bit_for_bit():
    first, record = pretrain(TINY, seed=3)
    again, record_again = pretrain(TINY, seed=3)
    other, _ = pretrain(TINY, seed=4)
    assert first.vector().tobytes() == again.vector().tobytes()
    assert record["loss_history"] == record_again["loss_history"]
    assert record["evaluations"] == record_again["evaluations"] > 0
    assert first.vector().tobytes() != other.vector().tobytes()


@pytest.mark.slow
def test_pretraining_on_ray_gives_the_serial_model_bit_for_bit():
    ray = pytest.importorskip("ray")
    serial, record = pretrain(TINY, seed=3)
    on_ray, ray_record = pretrain(TINY, seed=3, backend="ray", workers=2)
    assert on_ray.vector().tobytes() == serial.vector().tobytes()
    assert ray_record["loss_history"] == record["loss_history"]
    assert ray_record["backend"] == "ray" and ray_record["workers"] == 2
    assert not ray.is_initialized()  # the instance it started is shut down


@pytest.mark.parametrize(("argv", "words"), [
    (["--workers", "2"], "add --ray"),
    (["--address", "auto"], "add --ray"),
    (["--ray", "--workers", "0"], "workers must be a positive integer"),
    (["--clusters", " , "], "--clusters needs at least one cluster"),
    (["--max-ops", "0"], "--max-ops a positive number"),
    (["--dataset", "nope-v1", "--generations", "1"], "nope-v1"),
])
def test_pretraining_cli_refuses_bad_options_in_one_line(argv, words, tmp_path):
    done = subprocess.run([sys.executable, "-m", "baselines.learning.pretrained", *argv,
                           "--out", str(tmp_path / "model.json")],
                          capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr[-2000:]
    assert words in done.stderr.strip().splitlines()[-1]
    assert not (tmp_path / "model.json").exists()


def test_training_tasks_come_from_the_train_splits_only():
    from placement_gym.datasets import get_dataset

    train = set(get_dataset("synthetic-mini-v1").ids("train"))
    for task_id in training_tasks(TINY, seed=0):
        graph, cluster, _ = task_id.split("/")
        assert graph.split(":")[1] in train
        assert cluster == "k80x2" or int(cluster.split(":")[1]) < 1000
        assert parse_task_id(task_id).graph.n_ops <= TINY.max_ops


def test_training_tasks_of_the_real_architectures_come_from_their_train_split():
    from placement_gym.datasets import get_dataset

    config = PretrainConfig(dataset="architectures-v1", pool=12, max_ops=300,
                            clusters=("h100x8", "random-v1:train"))
    dataset = get_dataset("architectures-v1")
    train = set(dataset.ids("train"))
    tasks = training_tasks(config, seed=0)
    assert len(tasks) == 12
    for task_id in tasks:
        graph, cluster, _ = task_id.split("/")
        assert graph.startswith("architectures-v1:") and graph.split(":")[1] in train
        assert not graph.split(":")[1].startswith(("t5", "whisper"))  # the held-out families
        assert cluster == "h100x8" or int(cluster.split(":")[1]) < 1000
        assert parse_task_id(task_id).graph.n_ops <= 300
