"""The leaderboard commands report progress on stderr (a line at least every few seconds when stderr is
not a terminal) and leave stdout as it was; render's closing line names everything it wrote."""

from __future__ import annotations

import io
import json
import shutil
import time
from pathlib import Path
from types import SimpleNamespace

import pytest
from paths import ROOT

import placement_gym.common.progress as progress_module
from placement_gym.cli import main
from placement_gym.common.progress import Progress, is_progress_line
from placement_gym.evaluation.placements import round_robin_placement, single_placement
from placement_gym.leaderboard import evaluate, save_submission
from placement_gym.leaderboard.render import suite_page
from placement_gym.leaderboard.rerun_records import write_record
from placement_gym.leaderboard.suite import get_suite

SUITE = "v1"
SMALL = ("cifar10_cnn/k80x2/train", "cifar10_resnet56/k80x2/train")
LAYOUT = suite_page(SUITE)


def _entry(algorithm: str, place) -> dict:
    return evaluate(lambda task, seed, budget: SimpleNamespace(placement=place(task), evaluations=3),
                    get_suite(SUITE).subset(SMALL), algorithm=algorithm, authors=["tests"], description="t")


@pytest.fixture()
def board(tmp_path: Path) -> Path:
    """Two submissions, the first recorded as re-run (so that the page has a chart), and v1's bounds."""
    folder = tmp_path / "board"
    first = save_submission(_entry("round-robin", round_robin_placement), folder / "submissions" / "a.json")
    save_submission(_entry("last-device", lambda task: single_placement(task, task.n_devices - 1)),
                    folder / "submissions" / "b.json")
    write_record(folder, "a.json", Path(first).read_bytes(), SMALL)
    shutil.copy(ROOT / "leaderboard" / "bounds_v1.json", folder)
    return folder


def _run(capsys, monkeypatch, interval: float, *args: str) -> tuple[int, str, list[str]]:
    """(exit code, stdout, stderr's progress lines) of ``placement-gym ARGS`` with lines every
    ``interval`` seconds (0: at every step)."""
    monkeypatch.setattr(progress_module, "INTERVAL_S", interval)
    capsys.readouterr()
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, [line for line in err.splitlines() if is_progress_line(line)]


@pytest.mark.parametrize("json_output", [[], ["--json"]])
def test_validate_reports_each_file_on_stderr_and_keeps_stdout(board, capsys, monkeypatch, json_output):
    command = ["leaderboard", "validate", "--dir", str(board), *json_output]
    code, quiet_out, _ = _run(capsys, monkeypatch, 1e9, *command)
    assert code == 0
    code, out, lines = _run(capsys, monkeypatch, 0, *command)
    assert code == 0 and out == quiet_out
    if json_output:
        assert [check["file"] for check in json.loads(out)] == [str(board / "submissions" / name)
                                                                  for name in ("a.json", "b.json")]
    assert any("validating submissions: 1/2 (b.json)" in line for line in lines), lines


def test_render_names_the_pages_chart_and_curves_it_wrote(board, capsys, monkeypatch):
    render = ["leaderboard", "render", "--suite", SUITE, "--dir", str(board)]
    code, out, lines = _run(capsys, monkeypatch, 0, *render)
    curves = sorted((board / LAYOUT.curves).glob("*.png"))
    assert code == 0 and (board / LAYOUT.chart).is_file() and curves
    (closing,) = out.splitlines()
    assert str(board / LAYOUT.page) in closing and str(board / LAYOUT.chart) in closing
    assert f"{len(curves)} curves under {board / LAYOUT.curves}" in closing, closing
    stages = " ".join(lines)
    assert "validating submissions" in stages and "learning curves" in stages and "writing" in stages

    code, quiet_out, _ = _run(capsys, monkeypatch, 1e9, *render, "--check")
    assert code == 0
    code, out, lines = _run(capsys, monkeypatch, 0, *render, "--check")
    assert code == 0 and out == quiet_out and f"{len(curves)} curves" in out
    assert any("comparing" in line for line in lines), lines


def test_bounds_check_names_the_task_under_way(board, capsys, monkeypatch):
    code, _, lines = _run(capsys, monkeypatch, 0, "leaderboard", "bounds", "--check", "--suite", SUITE,
                          "--tasks", SMALL[0], "--dir", str(board))
    assert code == 0 and any(SMALL[0] in line and "0/1" in line for line in lines), lines


def test_a_fast_command_writes_no_progress_and_a_long_step_is_not_silent():
    stream = io.StringIO()
    with Progress(stream, interval=1e9) as progress:
        progress("stage", 0, 2, "first")
        progress("stage", 1, 2, "second")
    assert stream.getvalue() == ""
    stream = io.StringIO()
    with Progress(stream, interval=0.01) as progress:
        progress("one long step", 0, 1, "it")
        deadline = time.monotonic() + 30
        while not stream.getvalue() and time.monotonic() < deadline:  # the thread writes, not the calls
            time.sleep(0.01)
    assert is_progress_line(stream.getvalue()) and "one long step: 0/1 (it)" in stream.getvalue()
