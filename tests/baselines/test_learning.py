"""The training machinery of the learned agents: budgets, checkpoints, outputs, the train command."""

from __future__ import annotations

import json

import numpy as np
import pytest

from baselines.learning import train
from placement_gym.cli import main
from placement_gym.cost_model import simulate
from placement_gym.evaluation.budget import Budget, BudgetExhausted
from placement_gym.task.named import get_task

pytest.importorskip("torch")


@pytest.fixture(scope="module")
def task():
    return get_task("cifar10_cnn", "k80x2", "train_step")


def test_evaluator_refuses_to_go_over_budget_and_tracks_the_best(task):
    evaluator = Budget(task, limit=5)
    placements = np.random.default_rng(0).integers(0, task.n_devices, (4, task.n_forward))
    runtimes, feasible = evaluator.evaluate(placements)
    with pytest.raises(BudgetExhausted):
        evaluator.evaluate(placements[:2])
    assert evaluator.used == 4 and evaluator.remaining == 1
    best = int(np.argmin(np.where(feasible, runtimes, np.inf)))
    assert evaluator.best_runtime == simulate(task, placements[best]).runtime
    np.testing.assert_array_equal(evaluator.best_placement, placements[best])
    evaluator.evaluate(placements[0])
    assert evaluator.used == 5 and [row[0] for row in evaluator.curve] == [1, 2, 3, 4, 5]
    with pytest.raises(ValueError, match="positive"):
        Budget(task, limit=0)


@pytest.mark.parametrize("budget", [1, 130])
def test_budget_is_spent_exactly(task, budget):
    result = train("random-search", task, budget, seed=3, progress=False, batch=64)
    assert result.evaluations == budget and len(result.curve) == budget


def test_same_seed_same_run_and_clear_resume_errors(task, tmp_path):
    first = train("random-search", task, 100, seed=5, out_dir=tmp_path, progress=False, batch=32)
    assert {"checkpoint", "curve_csv", "best_placement"} <= set(first.files)
    longer = train("random-search", task, 100, seed=5, out_dir=tmp_path / "other", progress=False, batch=32)
    assert longer.curve == first.curve
    with pytest.raises(ValueError, match="nothing to resume"):
        train("random-search", task, 100, seed=5, out_dir=tmp_path / "empty", resume=True, progress=False)
    with pytest.raises(ValueError, match="seed"):
        train("random-search", task, 100, seed=6, out_dir=tmp_path, resume=True, progress=False, batch=32)


def test_checkpoint_round_trip_matches_one_long_run(task, tmp_path):
    train("random-search", task, 64, seed=2, out_dir=tmp_path, progress=False, batch=32)
    resumed = train(
        "random-search", task, 128, seed=2, out_dir=tmp_path, resume=True, progress=False, batch=32
    )
    straight = train("random-search", task, 128, seed=2, progress=False, batch=32)
    assert resumed.curve == straight.curve
    assert resumed.best_runtime == straight.best_runtime


def test_train_command_writes_outputs_and_json(tmp_path, capsys):
    out = tmp_path / "run"
    code = main(
        [
            "train",
            "--agent",
            "random-search",
            "--graph",
            "cifar10_cnn",
            "--cluster",
            "k80x2",
            "--budget",
            "50",
            "--out",
            str(out),
            "--json",
        ]
    )
    assert code == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["evaluations"] == 50
    assert {"best_runtime", "evaluations", "best_placement", "wall_s"} <= set(summary)
    saved = json.loads((out / "best_placement.json").read_text())
    assert saved["placement"] == summary["best_placement"]
    assert (out / "curve.csv").read_text().count("\n") == 51


@pytest.mark.parametrize(
    "argv, message",
    [
        (["train", "--agent", "nope"], "unknown learned agent"),
        (["train", "--agent", "random-search", "--budget", "0"], "budget"),
        (["train", "--agent", "random-search", "--evaluator", "real"], "--evaluator real needs"),
    ],
)
def test_train_command_bad_arguments(argv, message, capsys):
    assert main(argv) == 2
    error = capsys.readouterr().err.strip()
    assert message in error and len(error.splitlines()) == 1


def test_an_env_evaluates_through_a_budgeted_evaluator(task):
    import gymnasium as gym

    env = gym.make("DevicePlacement-v0", graph="cifar10_cnn", cluster="k80x2", render_mode="ansi")
    evaluator = Budget(task, limit=2)
    env.unwrapped.evaluator = evaluator
    env.reset(seed=0)
    action = np.zeros(task.n_forward, dtype=np.int64)
    _, _, _, _, info = env.step(action)
    env.render()  # rendering is not an evaluation an agent pays for
    assert evaluator.used == 1 and env.unwrapped.evaluations == 1
    assert evaluator.best_runtime == info["runtime"] == simulate(task, action).runtime
    env.reset()
    env.step(action)
    env.reset()
    with pytest.raises(BudgetExhausted):
        env.step(action)
