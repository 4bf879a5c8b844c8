"""The suite fingerprint covers the whole cost model: a change to compute, link latency, link bandwidth,
memory capacity or activation accounting, made where the figure comes from, is caught; a change outside
the cost model is not; and `placement-gym leaderboard validate` then exits 3 with one line instead of
blaming each submission."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import numpy as np
import pytest

import placement_gym.task.named as tasks_module
from placement_gym.cli import main
from placement_gym.common.progress import is_progress_line
from placement_gym.cost_model import simulate
from placement_gym.evaluation.placements import single_placement
from placement_gym.leaderboard import (
    CURRENT_SUITE,
    SUITES,
    evaluate,
    get_suite,
    save_submission,
    validate_submission,
)
from placement_gym.leaderboard.registry import SUITE_FOLDER
from placement_gym.leaderboard.suite import (
    fingerprint_problems,
    probe_placements,
    suite_from_dict,
    suite_mismatch,
    suite_to_dict,
)

TASK_ID = "cifar10_cnn/k80x2/train"  # 30 ops, a CPU and two K80 dies: rebuilt in a blink
INFERENCE_ID = "resnet50/cpu-igpu/inference"


def _scaled(field: str, factor: float):
    return lambda cluster: dataclasses.replace(cluster, **{field: getattr(cluster, field) * factor})


def _one_op_flops(graph):
    """The costliest op does 1% more FLOPs (as if its op-cost formula changed)."""
    flops = graph.flops.copy()
    flops[np.argmax(flops)] *= 1.01
    return dataclasses.replace(graph, flops=flops)


def _activations_kept_to_the_end(graph):
    """Every activation is kept until the end of the step (as if its last use were miscounted): memory
    changes, no runtime does."""
    return dataclasses.replace(graph, tensor_is_output=graph.tensor_is_output | ~graph.tensor_is_parameter)


@pytest.fixture
def perturb(monkeypatch):
    """Apply a change where the cost model reads its figures: the clusters (``cluster``: Cluster ->
    Cluster) or the graphs (``graph``: OpGraph -> OpGraph) that `placement_gym.task.named` compiles into
    tasks, with the task cache emptied before and after."""
    def apply(cluster=None, graph=None) -> None:
        if cluster is not None:
            load_cluster = tasks_module.load_cluster
            monkeypatch.setattr(tasks_module, "load_cluster", lambda name: cluster(load_cluster(name)))
        if graph is not None:
            load_graph = tasks_module.load_graph
            monkeypatch.setattr(tasks_module, "load_graph", lambda name: graph(load_graph(name)))
        tasks_module._cached_task.cache_clear()

    yield apply
    monkeypatch.undo()
    tasks_module._cached_task.cache_clear()


PERTURBATIONS = {
    # name: (cluster change, graph change, a words of the problem that must be reported)
    "device peak FLOP/s": (_scaled("peak_flops", 1.01), None, "runtime with every op on"),
    "one op's FLOPs": (None, _one_op_flops, "runtime with every op on"),
    "link latency x3": (_scaled("link_latency", 3.0), None, "probe runtime"),
    "link bandwidth / 2": (_scaled("link_bandwidth", 0.5), None, "probe runtime"),
    "memory capacity x2": (_scaled("memory_capacity", 2.0), None, "cluster figures changed"),
    "activations kept to the end": (None, _activations_kept_to_the_end, "probe peak memory"),
}


@pytest.mark.parametrize("name", list(PERTURBATIONS))
@pytest.mark.parametrize("task_id", [TASK_ID, INFERENCE_ID])
def test_each_change_to_the_cost_model_is_caught(perturb, name, task_id):
    cluster, graph, expected = PERTURBATIONS[name]
    assert fingerprint_problems(SUITES[CURRENT_SUITE].get(task_id)) == [], "test premise: the suite matches"
    perturb(cluster=cluster, graph=graph)
    problems = fingerprint_problems(SUITES[CURRENT_SUITE].get(task_id))
    assert problems, f"{name} went unnoticed"
    assert any(expected in problem for problem in problems), problems


def test_a_change_outside_the_cost_model_is_not_a_mismatch(perturb):
    perturb(cluster=lambda cluster: dataclasses.replace(cluster, description="reworded"))
    assert fingerprint_problems(SUITES[CURRENT_SUITE].get(TASK_ID)) == []


def test_the_mismatch_is_one_line_naming_the_suite(perturb):
    assert suite_mismatch(CURRENT_SUITE) is None
    perturb(cluster=_scaled("link_latency", 3.0))
    line = suite_mismatch(CURRENT_SUITE)
    assert line is not None and "\n" not in line
    assert line.startswith(f"suite {CURRENT_SUITE} does not match this cost model")
    assert "bump the suite" in line


# --- the command line -----------------------------------------------------------------------------------

def _board(tmp_path: Path) -> Path:
    """A leaderboard folder with one valid submission (made before any change to the cost model)."""
    data = evaluate(lambda task, seed, budget: single_placement(task, task.n_devices - 1),
                    get_suite(CURRENT_SUITE).subset([TASK_ID]), algorithm="last-device")
    save_submission(data, tmp_path / "board" / "submissions" / f"{CURRENT_SUITE}-last-device-seed0.json")
    return tmp_path / "board"


def test_validate_exits_3_with_one_line_when_the_cost_model_changed(perturb, tmp_path, capsys):
    board = _board(tmp_path)
    assert main(["leaderboard", "validate", "--dir", str(board)]) == 0
    capsys.readouterr()
    perturb(cluster=_scaled("link_latency", 3.0))
    assert main(["leaderboard", "validate", "--dir", str(board)]) == 3
    out, err = capsys.readouterr()
    assert "✗" not in out and "✓" not in out, "no submission is blamed (or passed)"
    (line,) = [line for line in err.strip().splitlines() if not is_progress_line(line)]
    assert f"suite {CURRENT_SUITE} does not match this cost model" in line and "bump the suite" in line
    # render and submit stop the same way, writing nothing.
    assert main(["leaderboard", "render", "--dir", str(board)]) == 3
    assert not (board / "README.md").exists()
    file = next((board / "submissions").glob("*.json"))
    assert main(["leaderboard", "submit", str(file), "--dir", str(tmp_path / "other")]) == 3
    capsys.readouterr()


def test_a_submission_error_stays_exit_1(tmp_path, capsys):
    board = _board(tmp_path)
    file = next((board / "submissions").glob("*.json"))
    data = json.loads(file.read_text())
    data["results"][TASK_ID]["runtime"] *= 2
    file.write_text(json.dumps(data))
    assert main(["leaderboard", "validate", "--dir", str(board)]) == 1
    assert "claimed runtime" in capsys.readouterr().out


def test_a_submission_of_a_superseded_suite_is_refused(perturb, tmp_path):
    """Once a later suite is current and the older one retired (its suite file says so), the older
    one's files are no longer accepted (they move to retired/), whatever the cost model still
    reproduces."""
    import shutil

    from placement_gym.leaderboard.registry import use_suite_folder

    data = evaluate(lambda task, seed, budget: single_placement(task, 0),
                    get_suite(CURRENT_SUITE).subset([TASK_ID]), algorithm="old")
    perturb(cluster=_scaled("link_latency", 3.0))
    with pytest.raises(RuntimeError, match=f"suite {CURRENT_SUITE} does not match"):
        validate_submission(data)
    # As if a later suite had superseded it: a copy of the suite files where it is retired and v2 current.
    folder = tmp_path / "suites"
    shutil.copytree(SUITE_FOLDER, folder)
    for version, change in ((CURRENT_SUITE, {"status": "retired", "retired_because": "superseded"}),
                            ("v2", {"status": "current"})):
        path = folder / f"{version}.json"
        path.write_text(json.dumps({**json.loads(path.read_text()), **change}))
    with use_suite_folder(folder):
        check = validate_submission(data)
    assert not check.ok and check.tasks == []
    assert check.problems[0].startswith(f"suite {CURRENT_SUITE} is retired (superseded); accepted suites: "
                                        "v1, v2, gen-arch-v1, gen-v2")


def test_a_submission_of_the_retired_suite_v0_is_refused_and_never_submitted(tmp_path, capsys):
    """Issue 23, point 8: a v0 file gets exit 1 from validate naming the retired suite and retired/,
    submit does not copy it, and render neither lists nor ranks it."""
    assert CURRENT_SUITE != "v0" and suite_mismatch("v0") is not None, "test premise: v0 is retired"
    data = evaluate(lambda task, seed, budget: single_placement(task, task.n_devices - 1),
                    get_suite("v0").subset([TASK_ID]), algorithm="old-last-device")
    assert data["suite"] == "v0"
    check = validate_submission(data)
    assert not check.ok and check.tasks == []
    assert "suite v0 is retired" in check.problems[0] and "retired/" in check.problems[0]
    file = save_submission(data, tmp_path / "mine" / "v0-old-last-device-seed0.json")
    assert main(["leaderboard", "validate", str(file)]) == 1
    assert "suite v0 is retired" in capsys.readouterr().out
    board = _board(tmp_path)
    before = sorted(p.name for p in (board / "submissions").iterdir())
    assert main(["leaderboard", "submit", str(file), "--dir", str(board)]) == 1
    assert sorted(p.name for p in (board / "submissions").iterdir()) == before


# --- the probes and the frozen text ----------------------------------------------------------------------

def test_scattered_probe_is_splitmix64():
    from placement_gym.leaderboard.suite import splitmix64

    # SplitMix64's published first output from state 0 (Steele, Lea and Flood 2014; Vigna's reference C).
    assert int(splitmix64(np.array([0]))[0]) == 0xE220A8397B1DCDAF


@pytest.mark.parametrize("task_id", SUITES[CURRENT_SUITE].task_ids)
def test_every_probe_uses_every_device_and_sends_tensors(task_id):
    task = SUITES[CURRENT_SUITE].get(task_id).task()
    for name, placement in probe_placements(task).items():
        assert set(placement.tolist()) == set(range(task.n_devices)), name
        schedule = simulate(task, placement, schedule=True).schedule
        assert len(schedule.transfer_tensor) > 0, f"{name} probe crosses no device boundary"


def test_the_frozen_files_round_trip_and_are_named_by_their_version():
    for version, suite in SUITES.items():
        path = SUITE_FOLDER / f"{version}.json"
        assert suite_from_dict(json.loads(json.dumps(suite_to_dict(suite)))) == suite
        assert json.loads(path.read_text()) == json.loads(json.dumps(suite_to_dict(suite)))
    assert set(SUITES) == {p.stem for p in SUITE_FOLDER.glob("*.json")} >= {"v0", CURRENT_SUITE}
