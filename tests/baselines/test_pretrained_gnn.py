"""`pretrained-gnn` (baselines/learning/pretrained_gnn.py): its layouts and contention-free makespan
against HEFT's own, the critic on any graph and cluster, budgets, the shipped checkpoint, and the
pre-training's reproducibility."""

from __future__ import annotations

import math
import subprocess
import sys

import numpy as np
import pytest
import torch
from paths import ROOT

from baselines.learning.pretrained_gnn import (
    CHECKPOINT,
    LAYOUT_FEATURES,
    THRESHOLDS,
    PlacementCritic,
    PretrainConfig,
    candidates,
    choose,
    critic_inputs,
    fixed_makespan,
    load_checkpoint,
    main,
    pretraining_tasks,
)
from baselines.registry import run_agent
from baselines.scheduling import heft_schedule, op_memory
from placement_gym.cost_model import simulate
from placement_gym.datasets import get_dataset
from placement_gym.task.named import get_task
from tests.finetuning import assert_finetuning_stays_in_budget_and_keeps_the_zero_shot
from tests.random_search import SEEDS, random_search_floor

# A T5 graph: architectures-v1's test-families split, a family no training task holds.
HELD_OUT = "architectures-v1:t5-0"


def _untrained(seed: int = 0) -> PlacementCritic:
    torch.manual_seed(seed)
    return PlacementCritic(hidden=8, rounds=2).eval()


@pytest.mark.parametrize("graph, cluster", [
    ("cifar10_cnn", "k80x4"), ("synthetic-mini-v1:regal-1", "random-v1:5"), (HELD_OUT, "h100x8")])
def test_fixed_makespan_of_heft_placement_is_hefts_own(graph, cluster):
    """Replaying HEFT's devices in HEFT's order with insertion gives HEFT's own makespan exactly; any
    other placement's is a real schedule of the same ops (at least the critical path on its devices)."""
    task = get_task(graph, cluster)
    schedule = heft_schedule(task)
    assert fixed_makespan(task, schedule.placement()) == schedule.makespan
    single = np.zeros(task.n_forward, dtype=np.int64)
    assert math.isclose(fixed_makespan(task, single), float(task.duration[:, 0].sum()), rel_tol=1e-9)


def test_layouts_are_placements_and_the_memory_safe_one_keeps_its_margin():
    task = get_task(HELD_OUT, "k80x4")
    layouts = candidates(task)
    assert {"heft", "heft-memory-safe", "heft-fastest-1", "heft-fastest-2", "pretrained-list"} <= set(layouts)
    for name, placement in layouts.items():
        assert placement.shape == (task.n_forward,) and placement.min() >= 0
        assert placement.max() < task.n_devices, name
    assert len(np.unique(layouts["heft-fastest-1"])) == 1
    estimate = np.bincount(layouts["heft-memory-safe"], weights=op_memory(task), minlength=task.n_devices)
    assert np.all(estimate <= 0.7 * task.cluster.memory_capacity + 1e-6)


def test_one_critic_scores_layouts_of_any_graph_on_any_cluster():
    critic = _untrained()
    for graph, cluster in (("cifar10_cnn", "k80x2"), ("cifar10_cnn", "h100x8"), (HELD_OUT, "random-v1:7")):
        task = get_task(graph, cluster)
        layouts = list(candidates(task).values())
        inputs = critic_inputs(task, layouts)
        assert inputs.layouts.shape == (len(layouts), len(LAYOUT_FEATURES))
        with torch.no_grad():
            predicted = critic(inputs)
        assert predicted.shape == (len(layouts),) and torch.isfinite(predicted).all()


def test_an_unreachable_threshold_keeps_hefts_layout():
    task = get_task("cifar10_cnn", "k80x4")
    name, placement, predicted = choose(task, _untrained(), threshold=float("inf"))
    assert name == "heft" and np.array_equal(placement, heft_schedule(task).placement())
    assert set(predicted) == set(candidates(task))


def test_zero_shot_spends_one_evaluation_and_retries_only_without_a_budget():
    task = get_task(HELD_OUT, "k80x4")
    before = task.evaluations
    one = run_agent(task, "pretrained-gnn", 0, 1)
    assert one.evaluations == 1 == task.evaluations - before
    retries = run_agent(task, "pretrained-gnn", 0, None)
    assert 1 <= retries.evaluations <= 7


def test_finetuning_stays_in_its_budget_and_keeps_the_zero_shot():
    task = get_task(HELD_OUT, "h100x8")
    assert_finetuning_stays_in_budget_and_keeps_the_zero_shot(task, "pretrained-gnn", zero_shot_budget=None)


def test_zero_shot_beats_random_search_at_one_evaluation_on_a_held_out_family():
    task = get_task(HELD_OUT, "h100x8")
    floor = random_search_floor(task, 1, SEEDS)
    mine = simulate(task, run_agent(task, "pretrained-gnn", 0, 1).placement)
    assert mine.feasible and mine.runtime < floor


def test_checkpoint_loads_with_its_training_record():
    model = load_checkpoint()
    record = model.record
    assert record["evaluations"] > 0 and record["wall_s"] > 0 and record["machine"]
    assert record["config"]["dataset"] == "architectures-v1"
    assert model.threshold in THRESHOLDS
    assert CHECKPOINT.stat().st_size < 200_000


@pytest.mark.parametrize("content", [b"", b"{}", b"not a checkpoint", None])
def test_a_malformed_checkpoint_is_a_one_line_error(tmp_path, content):
    path = tmp_path / "bad.pt"
    if content is None:  # a torch file of the wrong shape
        torch.save({"agent": "pretrained-gnn", "state": {}, "threshold": 0.1,
                    "training": {"config": {"hidden": 8, "rounds": 1}}}, path)
    else:
        path.write_bytes(content)
    with pytest.raises(ValueError, match="cannot load the pretrained-gnn checkpoint") as error:
        load_checkpoint(path)
    assert "\n" not in str(error.value)


def test_training_and_selection_tasks_are_disjoint_train_split_graphs():
    pool, valid = pretraining_tasks(PretrainConfig(pool=20, valid=10), 0)
    dataset = get_dataset("architectures-v1")
    train = {f"architectures-v1:{g}" for g in dataset.ids("train")}
    graphs = [t.split("/")[0] for t in pool + valid]
    assert set(graphs) <= train
    assert not {t.split("/")[0] for t in pool} & {t.split("/")[0] for t in valid}
    assert len(pool) == 20 and len(valid) == 10


def _pretrain_cli(out, *extra: str, seed: int = 3) -> None:
    tiny = [*extra, "--pool", "3", "--valid", "2", "--max-ops", "300", "--search-budget", "60",
            "--epochs", "2", "--hidden", "8", "--rounds", "1", "--clusters", "k80x4,random-v1:train",
            "--seed", str(seed)]
    command = [sys.executable, "-m", "baselines.learning.pretrained_gnn", *tiny, "--out", str(out)]
    done = subprocess.run(command,
                          capture_output=True, text=True, cwd=ROOT, timeout=600)
    assert done.returncode == 0, done.stderr


@pytest.mark.slow
def test_pretraining_is_reproducible_bit_for_bit(tmp_path):
    """The one command that rebuilds a checkpoint, run twice: the same network, choices and counts."""
    _pretrain_cli(tmp_path / "a.pt")
    _pretrain_cli(tmp_path / "b.pt")
    first, second = load_checkpoint(tmp_path / "a.pt"), load_checkpoint(tmp_path / "b.pt")
    for name, value in first.critic.state_dict().items():
        assert torch.equal(value, second.critic.state_dict()[name]), name
    assert first.threshold == second.threshold
    same = ("evaluations", "squared_error", "selection", "config")
    assert {k: first.record[k] for k in same} == {k: second.record[k] for k in same}
    assert first.record["evaluations"] >= 3 * 60
    assert first.record["squared_error"][-1] < first.record["squared_error"][0]  # it fitted its targets


# In one process: torch runs a parallel operation first (as a placement by the critic does), then two
# pre-trainings; each prints a digest of its weights and the thread count it leaves.
_PRETRAIN_TWICE = """
import hashlib, torch
from baselines.learning.pretrained_gnn import PretrainConfig, pretrain
x = torch.randn(512, 512)
(x @ x).sum()
print(torch.get_num_threads())
config = PretrainConfig(pool=4, valid=2, max_ops=300, search_budget=60, epochs=2)
for _ in range(2):
    model = pretrain(config, 0)
    weights = b"".join(v.numpy().tobytes() for v in model.critic.state_dict().values())
    print(hashlib.sha256(weights).hexdigest(), torch.get_num_threads())
"""


def test_pretraining_in_one_process_does_not_depend_on_what_ran_before():
    """The first pre-training of a process that has run torch gives the weights of the next (and of a
    fresh process's), and leaves the caller's thread count as it was."""
    done = subprocess.run([sys.executable, "-c", _PRETRAIN_TWICE], capture_output=True, text=True, cwd=ROOT,
                          timeout=600)
    assert done.returncode == 0, done.stderr
    before, *runs = done.stdout.splitlines()[-3:]
    (first, threads), (second, threads_after) = (line.split() for line in runs)
    assert first == second
    assert threads == threads_after == before


@pytest.mark.slow
def test_pretraining_on_ray_gives_the_serial_model_bit_for_bit(tmp_path):
    pytest.importorskip("ray")
    _pretrain_cli(tmp_path / "serial.pt")
    _pretrain_cli(tmp_path / "ray.pt", "--ray", "--workers", "2")
    serial, on_ray = load_checkpoint(tmp_path / "serial.pt"), load_checkpoint(tmp_path / "ray.pt")
    for name, value in serial.critic.state_dict().items():
        assert torch.equal(value, on_ray.critic.state_dict()[name]), name
    assert serial.record["evaluations"] == on_ray.record["evaluations"]
    assert serial.record["selection"] == on_ray.record["selection"]


@pytest.mark.parametrize("argv, words", [
    (["--pool", "0"], "positive"),
    (["--workers", "2"], "add --ray"),
    (["--ray", "--workers", "0"], "workers must be a positive integer"),
    (["--clusters", ","], "at least one cluster"),
    (["--dataset", "no-such-dataset"], "no-such-dataset"),
])
def test_pretraining_cli_refuses_bad_options_in_one_line(argv, words, tmp_path, capsys):
    with pytest.raises(SystemExit) as stop:
        main([*argv, "--out", str(tmp_path / "x.pt")])
    error = capsys.readouterr().err
    assert stop.value.code == 2 and words in error.splitlines()[-1]
    assert "Traceback" not in error and not (tmp_path / "x.pt").exists()
