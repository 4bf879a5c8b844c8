"""A stopped leaderboard fill continues the run it was on (``--checkpoints``): the submission of a run
stopped and resumed is that of the run never stopped (placement, runtime, the evaluations the harness
counted and their trace), and agents that keep no checkpoint are refused."""

from __future__ import annotations

import importlib.util

import numpy as np
import pytest

from baselines.leaderboard_fill.learned import checkpoint_folder, main, run_one
from placement_gym.task.counter import EvaluationCounter
from tests.interrupt import stopped_after

TASK = "cifar10_cnn/k80x2/train"  # 30 ops, in suite v1


@pytest.mark.parametrize("agent, stop_at, budget", [
    ("placeto", 230, 300),
    ("hsdag", 230, 300),
    ("sb3-ppo", 400, 500),  # checkpoints every 5 rollouts of 64
    pytest.param("sb3-maskable-ppo", 900, 1000, marks=pytest.mark.skipif(  # rollouts of 128
        not importlib.util.find_spec("sb3_contrib"), reason="sb3-contrib is not installed")),
])
def test_a_stopped_run_resumes_to_the_submission_of_the_run_never_stopped(agent, stop_at, budget, tmp_path):
    import torch

    with stopped_after(agent, stop_at):
        run_one(agent, 1, TASK, budget, "v1", tmp_path)
    checkpoint = checkpoint_folder(tmp_path, "v1", agent, 1, budget, TASK) / "checkpoint.pt"
    saved = torch.load(checkpoint, weights_only=False)
    assert 0 < saved["evaluator"]["used"] < stop_at  # the resume starts from a checkpoint, not from 0

    resumed = run_one(agent, 1, TASK, budget, "v1", tmp_path)["results"][TASK]
    straight = run_one(agent, 1, TASK, budget, "v1")["results"][TASK]
    assert resumed.pop("wall_s") >= saved["wall_s"]
    straight.pop("wall_s")
    assert resumed == straight
    assert resumed["evaluations"] == budget and resumed["trace"]


def test_the_fill_removes_a_runs_checkpoint_once_its_result_is_kept(tmp_path, monkeypatch):
    from placement_gym.leaderboard import load_submission

    out, checkpoints = tmp_path / "out", tmp_path / "checkpoints"
    monkeypatch.setattr("sys.argv", [
        "learned", "--agents", "hsdag", "--seeds", "0", "--budget", "40", "--tasks", TASK, "--suite", "v1",
        "--out-dir", str(out), "--checkpoints", str(checkpoints), "--workers", "1", "--no-render"])
    main()
    (path,) = out.iterdir()
    assert load_submission(path)["results"][TASK]["evaluations"] == 40
    assert not checkpoint_folder(checkpoints, "v1", "hsdag", 0, 40, TASK).parent.exists()


def test_the_fill_refuses_checkpoints_for_an_agent_that_keeps_none(tmp_path, monkeypatch, capsys):
    agent, message = "anneal", "unknown learned agent 'anneal'"
    out, checkpoints = str(tmp_path / "out"), str(tmp_path / "ck")
    monkeypatch.setattr("sys.argv", ["learned", "--agents", agent, "--suite", "v1", "--no-render",
                                     "--out-dir", out, "--checkpoints", checkpoints])
    with pytest.raises(SystemExit) as raised:
        main()
    err = capsys.readouterr().err
    assert raised.value.code == 2 and f"--checkpoints: {message}" in err and "Traceback" not in err
    assert list(tmp_path.iterdir()) == []


def test_a_counter_resumed_from_what_a_stopped_run_counted_reads_as_one_run():
    """Hand case: 2 evaluations before the run, then a run of 4 (best so far 5, 3), stopped and
    resumed in a counter that counted 2 before its run too and 1 while rebuilding the run."""
    def counted(counter, runtimes, feasible):
        counter.add(len(runtimes), np.array(runtimes), np.array(feasible))

    whole = EvaluationCounter()
    whole.trace = []
    counted(whole, [9.0, 7.0], [True, True])
    counted(whole, [5.0, 6.0, 1.0, 3.0], [True, True, False, True])
    assert whole.trace == [(1, 9.0), (2, 7.0), (3, 5.0), (6, 3.0)] and whole.count == 6

    stopped = EvaluationCounter()
    stopped.trace = []
    counted(stopped, [9.0, 7.0], [True, True])
    counted(stopped, [5.0, 6.0, 1.0, 3.0], [True, True, False, True])
    saved = stopped.since(2)
    assert saved == {"count": 4, "best": 3.0, "trace": [(1, 5.0), (4, 3.0)]}

    again = EvaluationCounter()
    again.trace = []
    counted(again, [9.0, 7.0], [True, True])
    counted(again, [4.0], [True])  # counted again while the run was rebuilt: replaced by what was saved
    assert again.trace[-1] == (3, 4.0)
    again.resume(2, saved)
    assert (again.count, again.trace, again.best) == (whole.count, whole.trace, whole.best)
