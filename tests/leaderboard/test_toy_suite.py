"""A suite is data: a toy suite added as one JSON file, beside the committed suite files, is measured,
accepted, submitted to, validated, rendered and bounded through the same commands as every suite, with
no code naming it; the suite files are read as hostile input.

The toy suite's page, chart, curves folder and bounds file have names no committed suite uses, so a
code path that still derives one of them from a version (or knows the suites by name) fails here."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from baselines.registry import harness_agent
from placement_gym.cli import main
from placement_gym.leaderboard import evaluate, get_suite
from placement_gym.leaderboard.registry import (
    SUITE_FOLDER,
    load_registry,
    read_suite_file,
    suite_registry,
    use_suite_folder,
)
from placement_gym.leaderboard.submission import save_submission, submission_filename
from placement_gym.leaderboard.suite_measure import write_suite_file
from placement_gym.leaderboard.suite_spec import SuiteFileError

TOY = "toy-1"
TASK_ID = "cifar10_cnn/k80x2/train"  # 30 ops on a CPU and two K80 dies: measured in a blink
AGENT = "round-robin"  # a registered agent, so that its entry can be re-run and recorded
# Pages the test writes (tests/project/test_docs.py reads a name ending in the Markdown suffix as a citation).
MARKDOWN = ".md"
TOY_FILES = {"page": f"toy_board{MARKDOWN}", "chart": "toy_chart.png", "curves": "toy_curves/one",
             "bounds": "toy_bounds.json"}
# The one committed submission kept in the copied leaderboard folder: a file of another suite, which must
# validate beside the toy's.
KEPT = "v1-heft-seed0.json"


def _write(path: Path, data: dict) -> None:
    path.write_text(json.dumps(data, indent=1) + "\n", encoding="utf-8")


def _toy_spec(**changes) -> dict:
    spec = {"version": TOY, "description": "A toy suite: one small task.", "status": "draft",
            "track": "cost_model", "placement_format": "text", **TOY_FILES,
            "measure": {"new_tasks": [TASK_ID], "fitted_by": {TASK_ID: "heft"}}, "fill": ["classic"],
            "tasks": []}
    return {**spec, **changes}


@pytest.fixture
def suites(tmp_path):
    """A copy of the committed suite folder with the toy suite's file, measured and accepted: the file
    is written as a draft (its spec, no tasks), measured by the suite tool, then marked accepted."""
    folder = tmp_path / "suites"
    shutil.copytree(SUITE_FOLDER, folder)
    path = folder / f"{TOY}.json"
    _write(path, _toy_spec())
    with use_suite_folder(folder):
        assert TOY not in suite_registry().accepted(), "a draft is not accepted"
        measured = write_suite_file(path)
    assert measured.task_ids == (TASK_ID,)
    data = json.loads(path.read_text())
    _write(path, {**data, "status": "accepted"})
    return folder


@pytest.fixture
def board(tmp_path):
    """A leaderboard folder made by ``leaderboard init`` with one committed submission kept."""
    target = tmp_path / "board"
    assert main(["leaderboard", "init", str(target)]) == 0
    for path in (target / "submissions").glob("*.json"):
        if path.name != KEPT:
            path.unlink()
    return target


def test_a_toy_suite_is_measured_submitted_validated_rendered_and_bounded(suites, board, capsys):
    with use_suite_folder(suites) as registry:
        toy = get_suite(TOY)
        assert TOY in registry.accepted() and toy.spec.page == TOY_FILES["page"]
        # Its figures are the fingerprint of the task measured now: the same as a committed suite froze.
        assert toy.get(TASK_ID) == get_suite(registry.current().version).get(TASK_ID)

        submission = evaluate(harness_agent(AGENT), TOY, algorithm=AGENT)
        assert submission["suite"] == TOY and isinstance(submission["results"][TASK_ID]["placement"], str)
        path = save_submission(submission, board.parent / submission_filename(submission))
        assert main(["leaderboard", "submit", str(path), "--dir", str(board)]) == 0
        assert main(["leaderboard", "validate", "--dir", str(board)]) == 0
        assert "every file passed" in capsys.readouterr().out
        # Re-run and recorded, its budget is verified: it is ranked, and drawn in the chart.
        submitted = board / "submissions" / path.name
        assert main(["leaderboard", "validate", "--rerun", str(submitted), "--record",
                     "--dir", str(board)]) == 0

        assert main(["leaderboard", "bounds", "--suite", TOY, "--dir", str(board)]) == 0
        stored = json.loads((board / TOY_FILES["bounds"]).read_text())
        assert stored["suite"] == TOY and set(stored["tasks"]) == {TASK_ID}
        assert main(["leaderboard", "bounds", "--check", "--suite", TOY, "--dir", str(board)]) == 0

        assert main(["leaderboard", "render", "--suite", TOY, "--dir", str(board)]) == 0
        page = (board / TOY_FILES["page"]).read_text()
        assert page.startswith(f"# Leaderboard, suite {TOY}\n")
        assert f"`placement-gym leaderboard render --suite {TOY}`" in page
        assert f"### `{TASK_ID}`" in page and f"| 1 | {AGENT} |" in page
        assert (board / TOY_FILES["chart"]).read_bytes().startswith(b"\x89PNG")
        assert [p.name for p in (board / TOY_FILES["curves"]).iterdir()] == ["cifar10_cnn_k80x2_train.png"]
        assert main(["leaderboard", "render", "--check", "--suite", TOY, "--dir", str(board)]) == 0

        # The main page lists the accepted suite and links its page.
        assert main(["leaderboard", "render", "--no-chart", "--dir", str(board)]) == 0
        readme = (board / registry.current().spec.page).read_text()
        page_name = TOY_FILES["page"]
        assert f"Suite {TOY} (1 tasks) is accepted and ranked on its own page: [{page_name}]({page_name})." \
            in readme


def test_the_placement_format_and_the_track_come_from_the_file(suites, tmp_path):
    path = suites / f"{TOY}.json"
    data = json.loads(path.read_text())
    _write(path, {**data, "placement_format": "mapping"})
    with use_suite_folder(suites):
        submission = evaluate(lambda task, seed, budget: [0] * task.n_forward, TOY, algorithm="first-device")
    assert isinstance(submission["results"][TASK_ID]["placement"], dict)

    _write(path, {**data, "track": "generalisation", "chart": None, "curves": None, "bounds": None,
                  "page": None, "split": {"held_out_graphs": ["cifar10_cnn"]}})
    with use_suite_folder(suites):
        from placement_gym.leaderboard import validate_submission

        check = validate_submission(submission)
    assert not check.ok and f"suite {TOY} is the generalisation track's" in check.problems[0]


def test_a_retired_suite_is_refused_with_its_reason(suites):
    path = suites / f"{TOY}.json"
    data = json.loads(path.read_text())
    _write(path, {**data, "status": "retired", "retired_because": "the toy broke"})
    with use_suite_folder(suites):
        from placement_gym.leaderboard import validate_submission

        submission = evaluate(lambda task, seed, budget: [0] * task.n_forward, get_suite(TOY),
                              algorithm="first-device")
        check = validate_submission(submission)
    assert not check.ok and f"suite {TOY} is retired (the toy broke)" in check.problems[0]


# --- suite files are hostile input ------------------------------------------------------------------------

@pytest.mark.parametrize("change, words", [
    ({"pages": f"x{MARKDOWN}"}, "unknown field 'pages'"),
    ({"status": "frozen"}, "field 'status'"),
    ({"page": "../README.md"}, "field 'page'"),
    ({"curves": "/tmp/curves"}, "field 'curves'"),
    ({"bounds": "bounds.exe"}, "field 'bounds'"),
    ({"placement_format": "csv"}, "field 'placement_format'"),
    ({"measure": {"new_tasks": [TASK_ID], "fitted_by": {"other/k80x2/train": "heft"}}}, "measure.fitted_by"),
    ({"description": "two\nlines"}, "description"),
    ({"version": "other"}, "holds suite"),
])
def test_a_malformed_suite_file_is_refused_naming_the_field(tmp_path, change, words):
    path = tmp_path / f"{TOY}.json"
    _write(path, _toy_spec(**change))
    with pytest.raises(SuiteFileError, match=words.replace("(", r"\(").replace(".", r"\.")):
        read_suite_file(path)


def test_suites_that_contradict_each_other_are_no_registry(suites):
    path = suites / f"{TOY}.json"
    data = json.loads(path.read_text())
    _write(path, {**data, "status": "current"})
    with pytest.raises(SuiteFileError, match="both the current suite of the cost_model track"):
        load_registry(suites)
    _write(path, {**data, "page": suite_registry().current().spec.page})
    with pytest.raises(SuiteFileError, match="both claim"):
        load_registry(suites)
    _write(path, {**data, "measure": {"inherits": "v1", "new_tasks": [TASK_ID]}})
    with pytest.raises(SuiteFileError, match="does not start with its frozen tasks"):
        load_registry(suites)


def test_a_suite_file_is_never_read_through_a_link(suites, tmp_path):
    outside = tmp_path / "outside.json"
    (suites / f"{TOY}.json").rename(outside)
    os.symlink(outside, suites / f"{TOY}.json")
    with pytest.raises(SuiteFileError, match="link"):
        load_registry(suites)
