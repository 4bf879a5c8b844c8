"""Suite v2: v1's tasks with v1's frozen figures plus today's workloads, accepted and ranked on a page
of its own; its submissions write placements as text."""

from __future__ import annotations

import numpy as np
import pytest

from placement_gym.cost_model import simulate
from placement_gym.leaderboard import CURRENT_SUITE, SUITES, evaluate, get_suite, validate_submission
from placement_gym.leaderboard.registry import suite_registry
from placement_gym.leaderboard.render import suite_page
from placement_gym.leaderboard.suite import fingerprint_problems, suite_to_dict
from placement_gym.leaderboard.suite_measure import extend_suite
from placement_gym.leaderboard.validate import validate_file

V2 = "v2"
# The workloads v2 adds to v1's tasks (docs/leaderboard.md, "Suite v2").
V2_NEW_TASKS = (
    "llama2_70b/dgx-h100x4/train+bf16+mb4",
    "mixtral_8x7b/h100x8/inference+bf16",
    "gnmt8/k40x8/train+mb4",
    "unrolled-v1:gnmt-tf-4/k40x8/train",
)

SMALL_V1 = "cifar10_cnn/k80x2/train"  # 30 ops: built in a blink
BOUNDS_NAME = "bounds.json"  # the current suite's bounds file
SMALL_NEW = "mixtral_8x7b/h100x8/inference+bf16"  # the quickest new task to build and simulate (~0.3 s)


def test_v2_is_accepted_and_ranked_on_a_page_of_its_own():
    assert CURRENT_SUITE != V2 and suite_page(V2).page == "suite_v2.md"
    assert V2 in suite_registry().accepted() and get_suite(V2).spec.placement_format == "text"
    measure = get_suite(V2).spec.measure
    assert measure.inherits == "v1" and measure.new_tasks == V2_NEW_TASKS


def test_v2_holds_every_v1_task_with_v1s_frozen_figures():
    v1, v2 = SUITES["v1"], SUITES[V2]
    assert v2.task_ids == v1.task_ids + V2_NEW_TASKS
    for task_id in v1.task_ids:
        # Same graph, cluster and structure digests, same runtimes, probes and bound: exactly.
        assert v2.get(task_id) == v1.get(task_id), task_id
    assert len(set(v2.task_ids)) == len(v2.task_ids)


@pytest.mark.parametrize("task_id", V2_NEW_TASKS)
def test_the_frozen_figures_of_the_new_tasks_are_consistent(task_id):
    """From the file alone: the bound is below every runtime it bounds, the best single device is one of
    the single-device runtimes, and every probe reports a peak per device."""
    frozen = SUITES[V2].get(task_id)
    n_devices = len(frozen.single_device_runtimes)
    assert frozen.best_single_runtime in frozen.single_device_runtimes
    assert 0 < frozen.lower_bound <= min(frozen.single_device_runtimes)
    assert [p.name for p in frozen.probes] == ["round-robin", "scattered", "contiguous"]
    for probe in frozen.probes:
        assert frozen.lower_bound <= probe.runtime
        assert len(probe.peak_memory) == n_devices and min(probe.peak_memory) > 0


def test_extend_suite_keeps_the_base_figures_and_measures_the_new_tasks():
    """A one-task base extended by a v1 task measures that task to v1's frozen figures (frozen in
    another file, by another run)."""
    base = get_suite("v1").subset([SMALL_V1])
    added = "resnet50/cpu-igpu/inference"
    extended = extend_suite(base, "vtest", [added], "test")
    assert extended.version == "vtest" and extended.task_ids == (SMALL_V1, added)
    assert extended.get(SMALL_V1) is base.get(SMALL_V1)
    assert suite_to_dict(extended)["tasks"][1] == suite_to_dict(get_suite("v1").subset([added]))["tasks"][0]


def test_extend_suite_refuses_a_task_the_base_holds():
    with pytest.raises(ValueError, match="already in suite v1"):
        extend_suite("v1", "vtest", [SMALL_V1], "test")


# On the 2-core development machine: the 103k-op task ~3 s once built, and its dataset (unrolled-v1) ~15 s
# to build on first use; the 36-device Llama-2 step 1.7-3 s; the others 0.7-1.5 s.
_SLOW_TASKS = ("unrolled-v1:gnmt-tf-4/k40x8/train", "llama2_70b/dgx-h100x4/train+bf16+mb4")


@pytest.mark.parametrize("task_id", [pytest.param(t, marks=pytest.mark.slow) if t in _SLOW_TASKS else t
                                     for t in V2_NEW_TASKS])
def test_the_new_tasks_reproduce_their_frozen_fingerprint(task_id):
    """v1's tasks are checked by test_leaderboard's suite test (v2 holds the same figures)."""
    assert fingerprint_problems(SUITES[V2].get(task_id)) == []


@pytest.mark.slow
def test_a_v2_submission_from_the_harness_writes_text_placements_and_validates(tmp_path):
    """Validation measures every task of v2 (its fingerprint), so this builds the 103k-op task too."""
    def round_robin(task, seed, budget):
        return np.arange(task.n_forward) % task.n_devices

    out = tmp_path / "v2-round-robin-seed0.json"
    submission = evaluate(round_robin, get_suite(V2).subset([SMALL_V1, SMALL_NEW]), algorithm="round-robin",
                          out=out)
    assert submission["suite"] == V2
    for task_id, result in submission["results"].items():
        task = SUITES[V2].get(task_id).task()
        assert isinstance(result["placement"], str) and len(result["placement"]) == task.n_forward
        assert result["runtime"] == simulate(task, np.arange(task.n_forward) % task.n_devices).runtime
    for check in (validate_submission(submission), validate_file(out)):
        assert check.ok, (check.problems, [t.reasons for t in check.tasks if not t.ok])
        assert [t.task_id for t in check.tasks] == sorted([SMALL_V1, SMALL_NEW])
    v1_submission = evaluate(round_robin, get_suite("v1").subset([SMALL_V1]), algorithm="round-robin")
    assert isinstance(v1_submission["results"][SMALL_V1]["placement"], dict)



def test_the_learned_fill_merges_a_v2_run_into_a_v2_file(tmp_path):
    from baselines.leaderboard_fill.learned import done_tasks, merge, submission_path

    def first_device(task, seed, budget):
        return np.zeros(task.n_forward, dtype=np.int64)

    part = evaluate(first_device, get_suite(V2).subset([SMALL_V1]), 200, algorithm="pg")
    path = merge(part, tmp_path)
    assert path.name == "v2-pg-200-seed0.json" == submission_path("pg", 0, 200, tmp_path, V2).name
    assert submission_path("pg", 0, 200, tmp_path).name == f"{CURRENT_SUITE}-pg-200-seed0.json"
    assert done_tasks("pg", 0, 200, tmp_path, V2) == {SMALL_V1}
    assert done_tasks("pg", 0, 200, tmp_path) == set()


@pytest.mark.parametrize("module", ["classic", "learned"])
def test_the_fill_scripts_refuse_a_suite_that_is_not_a_cost_model_suite(module, monkeypatch, capsys):
    import importlib

    main = importlib.import_module(f"baselines.leaderboard_fill.{module}").main
    monkeypatch.setattr("sys.argv", [module, "--suite", "gen-v2", "--no-render"])
    with pytest.raises(SystemExit) as raised:
        main()
    assert raised.value.code == 2 and "--suite must be one of v1, v2" in capsys.readouterr().err


# --- the page of suite v2 (render --suite v2) -------------------------------------------------------------


def _round_robin(task, seed, budget):
    return np.arange(task.n_forward) % task.n_devices


def _first_device(task, seed, budget):
    return np.zeros(task.n_forward, dtype=np.int64)


def test_each_suite_has_its_page_where_its_file_puts_it():
    from placement_gym.leaderboard.layout import default_suites, suite_page

    assert default_suites() == (CURRENT_SUITE, "gen-v2", "parallel-v1")  # what render draws without --suite
    assert suite_page(CURRENT_SUITE).page == "README.md"
    assert suite_page("v1").page == "suite_v1.md" and suite_page("v1").curves == "curves/v1"
    v2 = suite_page(V2)
    # v2 holds v1's task ids: its curves get a folder of their own, so that neither overwrites the other.
    assert (v2.page, v2.chart, v2.curves) == ("suite_v2.md", "leaderboard_v2.png", "curves/v2")
    assert v2.command == "placement-gym leaderboard render --suite v2"
    generalisation = suite_page("gen-v2")
    assert generalisation.page == "generalisation_v2.md"
    assert generalisation.chart is None and generalisation.curves is None
    with pytest.raises(ValueError, match="no page for suite v0"):
        suite_page("v0")


def test_a_curve_file_name_has_no_colon():
    from placement_gym.leaderboard.curves import curve_file_name

    # v2's 103k-op task comes from a dataset (``name:graph``); Windows allows no colon in a file name.
    assert curve_file_name("unrolled-v1:gnmt-tf-4/k40x8/train") == "unrolled-v1_gnmt-tf-4_k40x8_train.png"
    assert curve_file_name(SMALL_V1) == "cifar10_cnn_k80x2_train.png"  # v1's names as they were


def test_the_v2_page_ranks_v2_submissions_and_the_v1_page_v1_submissions():
    from placement_gym.leaderboard import render_markdown

    v2_entry = evaluate(_round_robin, get_suite(V2).subset([SMALL_V1, SMALL_NEW]), algorithm="rr-on-v2")
    v1_entry = evaluate(_first_device, get_suite("v1").subset([SMALL_V1]), algorithm="first-on-v1")
    submissions = [("v2-rr.json", v2_entry), ("v1-first.json", v1_entry)]
    page = render_markdown(submissions, V2)
    v1_page = render_markdown(submissions, "v1")
    assert page.startswith("# Leaderboard, suite v2\n")
    assert "`placement-gym leaderboard render --suite v2`" in page
    assert "rr-on-v2" in page and "first-on-v1" not in page
    assert "first-on-v1" in v1_page and "rr-on-v2" not in v1_page
    assert v1_page.startswith("# Leaderboard, suite v1\n")
    # A task of v2 alone is listed, with its frozen best single device, and its curves are under curves/v2.
    section = page.split(f"### `{SMALL_NEW}`")[1].split("\n### ")[0]
    frozen = SUITES[V2].get(SMALL_NEW)
    assert f"Best single device {frozen.best_single_runtime:.6g} s" in section
    task = frozen.task()
    runtime = simulate(task, _round_robin(task, 0, None)).runtime
    # The only entry on the task is its best known runtime.
    assert f"best known {runtime:.6g} s" in section
    assert f"](curves/v2/{SMALL_NEW.replace('/', '_')}.png)" in section
    assert f"### `{SMALL_NEW}`" not in v1_page


@pytest.mark.slow
def test_render_suite_v2_writes_its_page_and_leaves_the_readme_alone(tmp_path, capsys, monkeypatch):
    """Validation measures every task of v2 (its fingerprint), so this builds the 103k-op task too."""
    from placement_gym.cli import main

    board = tmp_path / "board"
    evaluate(_round_robin, get_suite(V2).subset([SMALL_V1, SMALL_NEW]), algorithm="round-robin",
             out=board / "submissions" / "v2-round-robin-seed0.json")
    arguments = ["leaderboard", "render", "--suite", V2, "--dir", str(board)]
    assert main([*arguments, "--check"]) == 1  # no page yet
    assert main(arguments) == 0
    page = (board / "suite_v2.md").read_text(encoding="utf-8")
    # No re-run recorded (reruns.json), so its budget is unverified: listed apart, in no track and no chart.
    assert "round-robin" in page.split("### Unverified budgets")[1].split("## ")[0]
    assert not (board / "leaderboard_v2.png").exists()
    curves = {path.relative_to(board).as_posix() for path in (board / "curves").rglob("*.png")}
    assert curves == {f"curves/v2/{task_id.replace('/', '_')}.png" for task_id in (SMALL_V1, SMALL_NEW)}
    assert not (board / "README.md").exists()
    assert main([*arguments, "--check"]) == 0
    assert main(["leaderboard", "render", "--check", "--dir", str(board)]) == 1  # no README was written
    capsys.readouterr()
    # Several suites in one call: the file is validated once, and the stale page is the one named.
    import importlib

    # (where render's loading validates each file)
    loading_module = importlib.import_module("placement_gym.leaderboard.loading")

    validated = []
    monkeypatch.setattr(loading_module, "validate_submission",
                        lambda data, source: validated.append(source) or validate_submission(data, source))
    both = ["leaderboard", "render", "--check", "--suite", "v1", "--suite", V2, "--dir", str(board)]
    assert main(both) == 1 and len(validated) == 1
    stale = capsys.readouterr().err
    assert "suite_v1.md" in stale and "--suite v1" in stale and "suite_v2.md" not in stale
    assert main(both[:2] + both[3:]) == 0 and main(both) == 0  # written for both, then up to date
    capsys.readouterr()


def test_the_v2_page_takes_the_stored_bounds_of_v1s_tasks_as_v1_froze_them(tmp_path):
    """A bound proven for a task holds for the same task (same frozen fingerprint) in another suite;
    one stored for a task whose frozen figures differ is not taken."""
    import dataclasses
    import json

    from placement_gym.leaderboard.suite import Suite
    from placement_gym.leaderboard.task_bounds import FROZEN_SOURCE, load_bounds

    frozen = SUITES["v1"].get(SMALL_V1).lower_bound
    stored = {"bound": frozen * 1.5, "source": "lp", "arguments": {"lp": frozen * 1.5}}
    (tmp_path / "bounds.json").write_text(json.dumps({"suite": "v1", "tasks": {SMALL_V1: stored}}))
    bounds = load_bounds(tmp_path, SUITES[V2])
    assert (bounds[SMALL_V1].value, bounds[SMALL_V1].source) == (frozen * 1.5, "lp")
    assert bounds[SMALL_NEW].source == FROZEN_SOURCE
    changed = dataclasses.replace(SUITES[V2].get(SMALL_V1), best_single_runtime=1.0)
    other = Suite("vtest", (changed,))
    assert load_bounds(tmp_path, other)[SMALL_V1].source == FROZEN_SOURCE


@pytest.mark.slow
def test_a_suites_own_bounds_file_is_written_read_and_checked_beside_the_current_suites(tmp_path):
    """``bounds_v2.json`` holds v2's bounds next to the current suite's ``bounds.json``: the v2 page
    takes a new task's bound from the first and a v1 task's from either; writing v2's leaves v1's file
    alone, and a tampered v2 bound is named by the check."""
    import json

    from placement_gym.leaderboard.task_bounds import (
        FROZEN_SOURCE,
        bounds_name,
        check_bounds,
        load_bounds,
        write_bounds,
    )

    assert bounds_name(CURRENT_SUITE) == BOUNDS_NAME and bounds_name(V2) == "bounds_v2.json"
    frozen_v1 = SUITES["v1"].get(SMALL_V1).lower_bound
    frozen_new = SUITES[V2].get(SMALL_NEW).lower_bound
    v1_bound = {"bound": frozen_v1 * 1.5, "source": "lp", "arguments": {}}
    v1_file = {"suite": "v1", "tasks": {SMALL_V1: v1_bound}}
    (tmp_path / BOUNDS_NAME).write_text(json.dumps(v1_file))
    v2_file = {"suite": V2, "tasks": {SMALL_NEW: {"bound": frozen_new * 2, "source": "lp", "arguments": {}}}}
    (tmp_path / "bounds_v2.json").write_text(json.dumps(v2_file))
    bounds = load_bounds(tmp_path, SUITES[V2])
    assert bounds[SMALL_V1].value == frozen_v1 * 1.5
    assert bounds[SMALL_NEW].value == frozen_new * 2
    # A bound twice the frozen one for the mixture of experts is made up: the check recomputes and names it.
    small = SUITES[V2].subset([SMALL_NEW])
    assert [p.split(":")[0] for p in check_bounds(tmp_path, small)] == [SMALL_NEW]
    written = write_bounds(tmp_path, small)
    assert written.name == "bounds_v2.json"
    assert json.loads((tmp_path / BOUNDS_NAME).read_text()) == v1_file
    assert check_bounds(tmp_path, small) == []
    assert load_bounds(tmp_path, small)[SMALL_NEW].value >= frozen_new
    assert load_bounds(tmp_path, SUITES["v1"].subset([SMALL_V1]))[SMALL_V1].source != FROZEN_SOURCE
