"""Forged records and bounds cannot buy a place (issue 62, points 1 and 2): each test builds a leaderboard
folder of a few committed v1 files, forges the real file (the records file, a bounds file, a submission)
and checks that `render` and `validate` refuse it with one line, writing nothing, or that the check
CI runs on it (`reruns --since`, `bounds --check --part`) fails."""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
from pathlib import Path

import pytest
from paths import ROOT

from placement_gym.cli import main
from placement_gym.common.progress import is_progress_line
from placement_gym.leaderboard.render import suite_page
from placement_gym.leaderboard.rerun_records import RerunRecord, sample_per_entry
from placement_gym.leaderboard.suite import get_suite
from placement_gym.leaderboard.task_bounds import cost_parts, stored_tasks

SUBMISSIONS = ROOT / "leaderboard" / "submissions"
SUITE = "v1"
PAGE = suite_page(SUITE).page
HEFT, BEST = "v1-heft-seed0.json", "v1-best-known-200k-seed0.json"
FORGED = "v1-heft-seed1.json"
SMALL_TASK = "cifar10_cnn/k80x2/train"
# A small task where the best-known portfolio beats heft: a re-run of heft cannot give the forged placement.
BEATEN_TASK = "cifar10_resnet56/k80x2/train"
RENDER = ["leaderboard", "render", "--no-chart", "--suite", SUITE, "--dir"]


def _record(board: Path, name: str, tasks: list[str]) -> None:
    """Add to the board's records file a record of ``name``'s present bytes naming ``tasks``."""
    path = board / "reruns.json"
    records = json.loads(path.read_text()) if path.exists() else {"schema": 1, "records": {}}
    raw = (board / "submissions" / name).read_bytes()
    records["records"][name] = {"sha256": hashlib.sha256(raw).hexdigest(), "tasks": tasks,
                                "platform": "GenuineIntel x86_64"}
    path.write_text(json.dumps(records, indent=1) + "\n")


@pytest.fixture
def board(tmp_path, capsys) -> Path:
    """heft (recorded on one task, so verified) and the best-known portfolio, rendered."""
    board = tmp_path / "board"
    (board / "submissions").mkdir(parents=True)
    shutil.copy(ROOT / "leaderboard" / "bounds_v1.json", board)
    for name in (HEFT, BEST):
        shutil.copy(SUBMISSIONS / name, board / "submissions")
    _record(board, HEFT, [SMALL_TASK])
    assert main([*RENDER, str(board)]) == 0
    capsys.readouterr()
    return board


def _forge_heft(board: Path, **header) -> Path:
    """The best placement of the board's files per task, relabelled heft seed 1 (1 evaluation a task)."""
    heft = json.loads((board / "submissions" / HEFT).read_text())
    forged = {**heft, "seed": 1, **header, "results": {}}
    for source in sorted((board / "submissions").glob("*.json")):
        for task_id, result in json.loads(source.read_text())["results"].items():
            held = forged["results"].get(task_id)
            if held is None or result["runtime"] < held["runtime"]:
                forged["results"][task_id] = {**result, "evaluations": 1, "trained_on_task": True,
                                              "wall_s": max(result["wall_s"], 1.0)}
    for result in forged["results"].values():
        result.pop("trace", None)
    path = board / "submissions" / FORGED
    path.write_text(json.dumps(forged, indent=1, sort_keys=True) + "\n")
    return path


def _refused(board: Path, capsys, words: str) -> None:
    """``render`` exits 1 with one line naming ``words`` and leaves the page as it was."""
    page = (board / PAGE).read_bytes()
    assert main([*RENDER, str(board)]) == 1
    err = [line for line in capsys.readouterr().err.strip().splitlines() if not is_progress_line(line)]
    assert len(err) == 1 and words in err[0], err
    assert (board / PAGE).read_bytes() == page


@pytest.mark.parametrize("task", ["no/such/task", "mixtral_8x7b/h100x8/inference+bf16"])
def test_a_record_naming_a_task_its_file_lacks_is_refused(board, capsys, task):
    """The attack of the issue: the best placements relabelled heft seed 1, recorded on a task the file
    does not hold. Without the refusal heft ranks first in every budget track with score 1.000."""
    _forge_heft(board)
    _record(board, FORGED, [task])
    _refused(board, capsys, f"names 1 task(s) the file does not hold (first '{task}')")


@pytest.mark.parametrize("header,words", [({"package_version": "9.9.9"}, "declares package_version"),
                                          ({"authors": ["someone else"]}, "declares authors"),
                                          ({"algorithm": "HEFT"}, "only in letter case")])
def test_a_file_that_joins_an_entry_with_other_declarations_is_refused(board, capsys, header, words):
    _forge_heft(board, **header)
    _refused(board, capsys, words)


@pytest.mark.slow
def test_validate_refuses_the_forged_record_the_joining_file_and_the_impossible_bound(board, capsys,
                                                                                     monkeypatch):
    """``validate --dir`` (which re-simulates every file) names each folder problem and exits 1, and
    ``reruns`` the forged record."""
    monkeypatch.setenv("COLUMNS", "1000")  # each reason on one line of the table
    path = _forge_heft(board, authors=["someone else"])
    _record(board, FORGED, ["no/such/task"])
    _forge_bound(board, 1e9)
    assert main(["leaderboard", "validate", "--dir", str(board)]) == 1
    out = capsys.readouterr().out
    assert "declares authors" in out and "'no/such/task'" in out and "it is no lower bound" in out
    assert main(["leaderboard", "reruns", "--dir", str(board)]) == 1
    assert "(first 'no/such/task')" in capsys.readouterr().err
    # A file given by name is judged against the entries of the folder it would join.
    outside = board.parent / "mine.json"
    shutil.move(path, outside)
    assert main(["leaderboard", "validate", str(outside), "--dir", str(board)]) == 1
    assert "declares authors" in capsys.readouterr().out


def _forge_bound(board: Path, value: float, task: str = SMALL_TASK) -> None:
    path = board / "bounds_v1.json"
    bounds = json.loads(path.read_text())
    bounds["tasks"][task]["bound"] = value
    path.write_text(json.dumps(bounds, indent=1, sort_keys=True) + "\n")


def test_a_stored_bound_above_a_feasible_runtime_is_refused(board, capsys):
    _forge_bound(board, 1e9)
    _refused(board, capsys, f"the lower bound of {SMALL_TASK} is 1e+09 s, above the")


@pytest.mark.slow
def test_a_bound_forged_low_fails_its_part_of_the_rotation(board, capsys):
    """A bound forged low passes render (no runtime refutes it) but not the recomputation of the part of
    the rotation that holds its task; the other parts pass."""
    _forge_bound(board, 0.003)
    suites = [get_suite(SUITE)]
    holding = next(k for k, part in enumerate(cost_parts(stored_tasks(board, suites), 3))
                   if SMALL_TASK in {t.task_id for t in part})
    check = ["leaderboard", "bounds", "--check", "--suite", SUITE, "--dir", str(board), "--part"]
    assert main([*check, f"{holding}/3"]) == 1
    assert f"{SMALL_TASK}: stored bound 0.003 s in bounds_v1.json" in capsys.readouterr().err
    assert main([*check, f"{(holding + 1) % 3}/3"]) == 0


def test_the_parts_of_the_bounds_rotation_cover_each_task_once_with_balanced_cost():
    tasks = get_suite(SUITE).tasks

    def cost(task) -> int:
        return len(task.task_id) ** 2

    parts = cost_parts(tasks, 3, cost)
    assert sorted(t.task_id for part in parts for t in part) == sorted(t.task_id for t in tasks)
    loads = [sum(cost(t) for t in part) for part in parts]
    assert max(loads) - min(loads) <= max(cost(t) for t in tasks)


def test_the_rerun_sample_is_drawn_by_its_seed_not_by_the_files():
    """Any file of an entry can be drawn, and which one depends on the seed alone: a submitter who
    changes a file's bytes (its hash) does not change the draw."""
    names = [f"v1-x-seed{k}.json" for k in range(3)]
    entries = {("cost_model", "x", "None"): names}

    def records(salt: str) -> dict:
        return {n: RerunRecord(hashlib.sha256((n + salt).encode()).hexdigest(), (SMALL_TASK,), "p")
                for n in names}

    draws = [sample_per_entry(entries, records(""), seed=seed) for seed in range(40)]
    assert {d[0] for d in draws} == set(names)
    assert draws == [sample_per_entry(entries, records("ground"), seed=seed) for seed in range(40)]


def _git(board: Path, *args: str) -> None:
    subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", *args], cwd=board, check=True,
                   capture_output=True)


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("git") is None, reason="needs git")
def test_a_new_record_is_rerun_on_every_task_it_names_before_it_counts(board, capsys):
    """A forged record that names a task the file holds passes render (nothing there can tell), but
    ``reruns --since BASE`` re-runs every new record whatever the sample draws, and fails on it."""
    _git(board, "init", "-q")
    _git(board, "add", ".")
    _git(board, "commit", "-q", "-m", "base")
    assert main(["leaderboard", "reruns", "--since", "HEAD", "--part", "0/1", "--dir", str(board)]) == 0
    assert "0 more new or changed since HEAD" in capsys.readouterr().out
    _forge_heft(board)
    _record(board, FORGED, [BEATEN_TASK])
    assert main(["leaderboard", "reruns", "--since", "HEAD", "--seed", "0", "--dir", str(board)]) == 1
    out, err = capsys.readouterr()
    assert "drawn with --seed 0" in out and f"{FORGED}: not reproduced on {BEATEN_TASK}" in err
    for since in ("no-such-revision", "--help"):
        assert main(["leaderboard", "reruns", f"--since={since}", "--dir", str(board)]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and "is no commit of this git checkout" in err[0]
    shutil.rmtree(board / ".git")
    assert main(["leaderboard", "reruns", "--since", "HEAD", "--dir", str(board)]) == 2
    assert "is not in a git checkout" in capsys.readouterr().err
