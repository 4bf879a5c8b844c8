"""The leaderboard: suite fingerprints, submissions, validation (each kind of tampering), the harness,
deterministic rendering and the `placement-gym leaderboard` commands."""

from __future__ import annotations

import copy
import dataclasses
import json
import math
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
from paths import ROOT

from placement_gym.cli import main
from placement_gym.cost_model import lower_bound, simulate, single_device
from placement_gym.evaluation.placements import round_robin_placement, single_placement
from placement_gym.leaderboard import (
    CURRENT_SUITE,
    SUITES,
    check_suite,
    evaluate,
    get_suite,
    load_submission,
    render,
    render_markdown,
    save_submission,
    validate_file,
    validate_submission,
)
from placement_gym.leaderboard.render import RenderRefused, suite_page
from placement_gym.task.named import parse_task_id

SMALL = ("cifar10_cnn/k80x2/train", "cifar10_resnet56/k80x2/train")
# The suite of these tests' submissions: v1's files write placements as {op name: device name}, which the
# tampering tests edit (the text placements of v2 and v3: tests/leaderboard/test_leaderboard_v2.py); its
# page is `suite_page(SUITE)`.
SUITE = "v1"
PAGE, CHART = suite_page(SUITE).page, suite_page(SUITE).chart
# Suite v0's tasks; v1 (the calibrated cost model) froze the same ones again.
SUITE_TASKS = {
    "cifar10_cnn/k80x2/train", "cifar10_resnet56/k80x2/train", "inception_v3/k80x4/train",
    "resnet50/p100x4/train", "rnnlm/k80x4/train", "gnmt4/k80x4/train", "gnmt4/k40x8/train",
    "bert_base/v100x8/train", "bert_large/k80x4/train", "bert_large/h100x8/train",
    "inception_v3/cpu-igpu/inference", "resnet50/cpu-igpu/inference", "bert_base/cpu-igpu/inference",
}


def mini_suite():
    return get_suite(SUITE).subset(SMALL)


def last_device_agent(task, seed, budget):
    """Every op on the last device (the CPU in these clusters): a simple, deterministic agent."""
    return single_placement(task, task.n_devices - 1)


@pytest.fixture(scope="module")
def submission() -> dict:
    return evaluate(lambda task, seed, budget: SimpleNamespace(placement=round_robin_placement(task),
                                                               evaluations=3),
                    mini_suite(), algorithm="round-robin", authors=["tests"], description="rr")


def reasons(data: dict, task_id: str = SMALL[0]) -> str:
    check = validate_submission(data)
    assert not check.ok
    (task,) = [t for t in check.tasks if t.task_id == task_id]
    assert not task.ok
    return "; ".join(task.reasons)


# --- suite -----------------------------------------------------------------------------------------

@pytest.mark.parametrize("version", ["v0", SUITE])
def test_suite_lists_the_benchmark_tasks_and_every_task_builds(version):
    suite = SUITES[version]
    assert set(suite.task_ids) == SUITE_TASKS and len(suite.task_ids) == len(SUITE_TASKS)
    for suite_task in suite.tasks:
        assert suite_task.task().id == suite_task.task_id


def test_suite_fingerprint_matches_the_current_cost_model():
    """Fails when the cost model or a graph changed a runtime: then add a new suite version."""
    assert check_suite(CURRENT_SUITE) == {}


def test_fingerprint_detects_a_changed_cost_model():
    frozen = SUITES[CURRENT_SUITE].get(SMALL[0])
    changed = dataclasses.replace(frozen, best_single_runtime=frozen.best_single_runtime * (1 + 1e-6))
    from placement_gym.leaderboard.suite import fingerprint_problems

    problems = fingerprint_problems(changed)
    assert len(problems) == 1 and "best single runtime" in problems[0]


def test_unknown_suite_and_task_are_clear_errors():
    with pytest.raises(ValueError, match=f"known: v0, .*{CURRENT_SUITE}"):
        get_suite("v99")
    with pytest.raises(ValueError, match=f"not in suite {CURRENT_SUITE}"):
        get_suite(CURRENT_SUITE).get("cifar10_cnn/k80x4/train")


# --- harness -----------------------------------------------------------------------------------------

def test_harness_round_trip_validates(submission, tmp_path):
    assert set(submission["results"]) == set(SMALL)
    assert submission["suite"] == SUITE and submission["algorithm"] == "round-robin"
    for task_id, result in submission["results"].items():
        task = parse_task_id(task_id)
        expected = round_robin_placement(task)
        names = task.cluster.device_names
        assert [result["placement"][op] for op in task.graph.op_names] == [names[d] for d in expected]
        assert result["runtime"] == simulate(task, expected).runtime
        # How evaluations are counted is tests/leaderboard/test_leaderboard_budgets.py's subject.
        assert result["trained_on_task"] is False
    path = save_submission(submission, tmp_path / "s.json")
    assert load_submission(path) == json.loads(json.dumps(submission))
    check = validate_file(path)
    assert check.ok, check
    assert [t.task_id for t in check.tasks] == sorted(SMALL)


def test_harness_takes_a_bare_array_and_marks_trained_on(tmp_path):
    data = evaluate(last_device_agent, mini_suite(), algorithm="cpu", trained_on=[SMALL[1]],
                    out=tmp_path / "x.json")
    assert (tmp_path / "x.json").is_file()
    assert data["results"][SMALL[1]]["trained_on_task"] is True
    assert validate_submission(data).ok


def test_harness_rejects_an_agent_that_changes_the_task():
    shared = parse_task_id(SMALL[0])
    original = shared.duration

    def cheating_agent(task, seed, budget):
        # The arrays are read-only, but an agent can still swap one of the cached task that every user
        # of the id shares, reached by name.
        object.__setattr__(parse_task_id(task.id), "duration", original * 0.5)
        return single_placement(task, 0)

    try:
        with pytest.raises(RuntimeError, match="modified task"):
            evaluate(cheating_agent, mini_suite(), algorithm="cheat")
    finally:
        object.__setattr__(shared, "duration", original)
    assert evaluate(last_device_agent, mini_suite(), algorithm="honest")["results"]


def test_harness_rejects_a_bad_placement():
    with pytest.raises(ValueError, match="out of range"):
        evaluate(lambda task, seed, budget: np.full(task.n_forward, 99), mini_suite(), algorithm="bad")


# --- validation: each kind of tampering ----------------------------------------------------------------

def test_unknown_task_is_rejected(submission):
    data = copy.deepcopy(submission)
    data["results"]["cifar10_cnn/k80x4/train"] = data["results"].pop(SMALL[0])
    assert "unknown task" in reasons(data, "cifar10_cnn/k80x4/train")


def test_missing_op_is_rejected(submission):
    data = copy.deepcopy(submission)
    placement = data["results"][SMALL[0]]["placement"]
    placement.pop(sorted(placement)[0])
    assert "missing" in reasons(data)


def test_unknown_op_is_rejected(submission):
    data = copy.deepcopy(submission)
    data["results"][SMALL[0]]["placement"]["no_such_op"] = "gpu0"
    assert "unknown op names: 'no_such_op'" in reasons(data)


def test_device_not_in_cluster_is_rejected(submission):
    data = copy.deepcopy(submission)
    placement = data["results"][SMALL[0]]["placement"]
    placement[sorted(placement)[0]] = "tpu7"
    assert "devices not in cluster" in reasons(data) and "tpu7" in reasons(data)


def test_graph_sha256_mismatch_is_rejected(submission):
    data = copy.deepcopy(submission)
    data["results"][SMALL[0]]["graph_sha256"] = "0" * 64
    assert "graph sha256 mismatch" in reasons(data)


def test_runtime_off_by_more_than_tolerance_is_rejected(submission):
    data = copy.deepcopy(submission)
    data["results"][SMALL[0]]["runtime"] *= 1 + 1e-5
    assert "claimed runtime" in reasons(data)
    close = copy.deepcopy(submission)
    close["results"][SMALL[0]]["runtime"] *= 1 + 1e-8  # float printing noise is allowed
    assert validate_submission(close).ok


def test_infeasible_placement_claimed_feasible_is_rejected(submission):
    # bert_large on one K80 (12 GB) does not fit in memory: a single-device placement is infeasible.
    task_id = "bert_large/k80x4/train"
    task = parse_task_id(task_id)
    gpu = list(task.cluster.device_kinds).index("gpu")
    placement = single_placement(task, gpu)
    result = simulate(task, placement)
    assert not result.feasible, "test premise: this placement must run out of memory"
    data = copy.deepcopy(submission)
    data["results"][task_id] = {
        "graph_sha256": task.graph.sha256, "runtime": result.runtime, "feasible": True,
        "placement": dict(zip(task.graph.op_names, [task.cluster.device_names[gpu]] * task.n_forward)),
        "evaluations": 1, "wall_s": 0.1, "trained_on_task": True,
    }
    assert "infeasible" in reasons(data, task_id)
    data["results"][task_id]["feasible"] = False  # honestly claimed infeasible: accepted
    assert validate_submission(data).ok


def test_schema_problems_are_reported_not_raised(submission, tmp_path):
    data = copy.deepcopy(submission)
    del data["algorithm"]
    check = validate_submission(data)
    assert not check.ok and "missing field 'algorithm'" in check.problems[0]
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    check = validate_file(bad)
    assert not check.ok and "not valid JSON" in check.problems[0]
    old = copy.deepcopy(submission)
    old["suite"] = "v99"
    assert "unknown suite version" in validate_submission(old).problems[0]


# --- rendering -----------------------------------------------------------------------------------------

def make_board(tmp_path: Path, submission: dict) -> Path:
    board = tmp_path / "board"
    save_submission(submission, board / "submissions" / "a.json")
    other = evaluate(last_device_agent, mini_suite(), algorithm="last-device")
    save_submission(other, board / "submissions" / "b.json")
    return board


def test_render_is_deterministic_and_ranks_by_runtime(submission, tmp_path):
    board = make_board(tmp_path, submission)
    render(board, chart=False, suite=SUITE)
    first = (board / PAGE).read_bytes()
    render(board, chart=False, suite=SUITE)
    assert (board / PAGE).read_bytes() == first
    text = first.decode()
    # Per task, the faster of the two submissions is ranked first.
    for task_id in SMALL:
        section = text.split(f"### `{task_id}`")[1].split("###")[0]
        rows = [line for line in section.splitlines() if line.startswith("| 1 ") or line.startswith("| 2 ")]
        runtimes = [float(row.split("|")[4]) for row in rows]
        assert len(rows) == 2 and runtimes == sorted(runtimes)


def test_render_shows_no_speedup_for_an_infeasible_placement(submission):
    data = copy.deepcopy(submission)
    data["results"][SMALL[0]]["feasible"] = False
    section = render_markdown([("a.json", data)], SUITE).split(f"### `{SMALL[0]}`")[1].split("###")[0]
    row = next(line for line in section.splitlines() if line.startswith("| 1 "))
    cells = [c.strip() for c in row.strip("|").split("|")]
    assert cells[4:7] == ["0.000", "-", "-"] and cells[9] == "no"


def test_render_speedup_and_gap_use_best_single_and_lower_bound(submission):
    text = render_markdown([("a.json", submission)], SUITE)
    task_id = SMALL[0]
    task = parse_task_id(task_id)
    runtime = submission["results"][task_id]["runtime"]
    speedup = single_device(task).runtime / runtime
    gap = runtime / lower_bound(task) - 1
    section = text.split(f"### `{task_id}`")[1]
    assert f"{speedup:.3f}x" in section and f"{100 * gap:.1f}%" in section
    speedups = [single_device(parse_task_id(t)).runtime / submission["results"][t]["runtime"] for t in SMALL]
    geomean = math.sqrt(math.prod(speedups))
    overall = text.split("## Overall")[1].split("## Per task")[0]
    # The only entry is the best known on both tasks: score 1 on each, over 2 of 13 tasks.
    assert f"| 1 | round-robin | default | {2 / 13:.3f} | 1 | 2/13 | 0 | {geomean:.3f}x |" in overall


def test_render_shows_other_tracks_and_never_other_suites(submission):
    real = copy.deepcopy(submission)
    real.update(track="real", hardware="2x K80", algorithm="measured")
    real["results"][SMALL[0]]["measured_runtime"] = 0.5
    old = copy.deepcopy(submission)
    old.update(suite="v-old", algorithm="ancient")
    text = render_markdown([("a.json", submission), ("r.json", real), ("o.json", old)], SUITE)
    assert "## Real-hardware track" in text and "2x K80" in text and "| 0.5 |" in text
    # The generalisation track always states its split; without entries it says so.
    assert "No submissions yet." in text.split("## Generalisation track")[1].split("##")[0]
    assert "ancient" not in text  # validation refuses another suite's file; rendering never lists it


def test_render_chart_writes_a_png(submission, tmp_path, capsys):
    """The chart shows the budget tracks, so it needs an entry whose budget is verified: a.json
    (round-robin) re-run and recorded."""
    board = make_board(tmp_path, submission)
    assert main(["leaderboard", "validate", "--rerun", str(board / "submissions" / "a.json"), "--record",
                 "--dir", str(board)]) == 0
    render(board, suite=SUITE)
    assert (board / CHART).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_render_refuses_a_tampered_submission(submission, tmp_path, capsys):
    board = make_board(tmp_path, submission)
    task_id = SMALL[0]
    below_bound = copy.deepcopy(submission)  # a runtime edited below the lower bound: rank 1, negative gap
    below_bound["results"][task_id]["runtime"] = SUITES[SUITE].get(task_id).lower_bound / 2
    save_submission(below_bound, board / "submissions" / "c.json")
    for command in (["render"], ["render", "--check"], ["render", "--no-chart"]):
        assert main(["leaderboard", *command, "--suite", SUITE, "--dir", str(board)]) == 1
        out, err = capsys.readouterr()
        assert "c.json" in err and "claimed runtime" in err and "c.json" in out
        assert not (board / PAGE).exists() and not (board / CHART).exists()
    moved = copy.deepcopy(submission)  # an edited placement: its claimed runtime is no longer its own
    placement = moved["results"][task_id]["placement"]
    op = sorted(placement)[0]
    placement[op] = next(d for d in parse_task_id(task_id).cluster.device_names if d != placement[op])
    save_submission(moved, board / "submissions" / "c.json")
    with pytest.raises(RenderRefused) as refused:
        render(board, suite=SUITE)
    assert [c.source for c in refused.value.checks] == [str(board / "submissions" / "c.json")]
    (board / "submissions" / "c.json").unlink()
    assert render(board, suite=SUITE) and (board / PAGE).is_file()


def test_entries_trained_on_their_task_with_zero_evaluations_validate_and_render(submission, tmp_path):
    """Trained on the task outside the scored run (listed in ``trained_on``): 0 evaluations of it are
    counted, and the entry says it trained on the task; without the listing that claim is refused."""
    data = copy.deepcopy(submission)
    for result in data["results"].values():
        result.update(trained_on_task=True, evaluations=0)
    assert "listed in 'trained_on'" in reasons(data, SMALL[0])
    data["trained_on"] = sorted(data["results"])
    assert validate_submission(data).ok
    board = tmp_path / "board"
    save_submission(data, board / "submissions" / "a.json")
    assert render(board, chart=False, suite=SUITE)
    assert "| 1 | round-robin |" in (board / PAGE).read_text()


# --- command line ---------------------------------------------------------------------------------------

def test_cli_validate_submit_render_check(submission, tmp_path, capsys):
    board = tmp_path / "board"
    good = save_submission(submission, tmp_path / "good.json")
    tampered_data = copy.deepcopy(submission)
    tampered_data["results"][SMALL[0]]["runtime"] *= 2
    tampered = save_submission(tampered_data, tmp_path / "tampered.json")

    assert main(["leaderboard", "validate", str(good), "--dir", str(board), "--all"]) == 0
    assert "✓" in capsys.readouterr().out
    assert main(["leaderboard", "validate", str(tampered), "--json", "--dir", str(board)]) == 1
    (report,) = json.loads(capsys.readouterr().out)
    assert not report["ok"] and any("claimed runtime" in r for t in report["tasks"] for r in t["reasons"])

    assert main(["leaderboard", "submit", str(tampered), "--dir", str(board)]) == 1
    assert not (board / "submissions").exists()
    assert main(["leaderboard", "submit", str(good), "--dir", str(board)]) == 0
    assert len(list((board / "submissions").glob("*.json"))) == 1
    assert main(["leaderboard", "submit", str(good), "--dir", str(board)]) == 1  # exists, no --force

    # No page yet, then rendered and up to date (--no-chart: the pages alone are checked).
    assert main(["leaderboard", "render", "--check", "--suite", SUITE, "--dir", str(board)]) == 1
    assert main(["leaderboard", "render", "--no-chart", "--suite", SUITE, "--dir", str(board)]) == 0
    assert main(["leaderboard", "render", "--check", "--no-chart", "--suite", SUITE, "--dir", str(board)]) \
        == 0
    save_submission(evaluate(last_device_agent, mini_suite(), algorithm="late"),
                    board / "submissions" / "late.json")
    assert main(["leaderboard", "render", "--check", "--suite", SUITE, "--dir", str(board)]) == 1  # stale now
    capsys.readouterr()


# Slow (over a minute); CI runs the same checks on every run besides (.ci/run: validate and render --check).
@pytest.mark.slow
def test_committed_leaderboard_is_valid_and_up_to_date():
    board = ROOT / "leaderboard"
    if not list((board / "submissions").glob("*.json")):
        pytest.skip("no committed submissions")
    assert render(board, check=True), "run 'placement-gym leaderboard render'"
    for path in sorted((board / "submissions").glob("*.json")):
        check = validate_file(path)
        assert check.ok, (path.name, check.problems, [t for t in check.tasks if not t.ok])
