"""Suite v3: v1's tasks with v1's frozen figures plus today's workloads in forms a heuristic fits in
memory (checked here by running that heuristic), the current suite (the README ranks it)."""

from __future__ import annotations

import numpy as np
import pytest

from placement_gym.cost_model import simulate
from placement_gym.evaluation.agents import run_installed_agent
from placement_gym.leaderboard import CURRENT_SUITE, SUITES, get_suite
from placement_gym.leaderboard.registry import suite_registry
from placement_gym.leaderboard.render import suite_page
from placement_gym.leaderboard.suite import fingerprint_problems
from placement_gym.leaderboard.task_bounds import bounds_name
from placement_gym.task.named import parse_task_id

V3 = "v3"
# The workloads v3 adds to v1's tasks, each fitted in memory by the expert heuristic (docs/leaderboard.md,
# "Suite v3"); the two it shares with v2 keep v2's figures.
V3_NEW_TASKS = (
    "llama2_70b/dgx-h100x4/train+bf16+rc+mb4",
    "mixtral_8x7b/h100x8/inference+bf16",
    "gnmt8/k40x8/train+mb4",
    "unrolled-v1:gnmt-tf-4/k40x8/inference",
)
V3_FITTED_BY = dict.fromkeys(V3_NEW_TASKS, "expert")

# On the 2-core development machine: the 103k-op graph's dataset ~15 s to build on first use and its
# expert ~100 s; the 36-device Llama-2 step ~2 s to build and its expert ~3 s.
_SLOW_TASKS = ("unrolled-v1:gnmt-tf-4/k40x8/inference",)


def test_v3_is_the_current_suite_and_v1_keeps_a_page_of_its_own():
    assert CURRENT_SUITE == V3 and suite_page(V3).page == "README.md" and bounds_name(V3) == "bounds.json"
    assert V3 in suite_registry().accepted() and get_suite(V3).spec.placement_format == "text"
    assert "v1" in suite_registry().accepted() and suite_page("v1").page == "suite_v1.md"
    assert bounds_name("v1") == "bounds_v1.json" and get_suite("v1").spec.placement_format == "mapping"


def test_v3_holds_every_v1_task_with_v1s_frozen_figures_and_v2s_shared_ones():
    v1, v2, v3 = SUITES["v1"], SUITES["v2"], SUITES[V3]
    assert v3.task_ids == v1.task_ids + V3_NEW_TASKS
    for task_id in v1.task_ids:
        assert v3.get(task_id) == v1.get(task_id), task_id
    for task_id in set(V3_NEW_TASKS) & set(v2.task_ids):
        assert v3.get(task_id) == v2.get(task_id), task_id
    shared = {"mixtral_8x7b/h100x8/inference+bf16", "gnmt8/k40x8/train+mb4"}
    assert set(V3_NEW_TASKS) & set(v2.task_ids) == shared
    measure = v3.spec.measure
    assert (measure.inherits, measure.new_tasks) == ("v1", V3_NEW_TASKS)
    assert dict(measure.fitted_by) == V3_FITTED_BY


def _tasks():
    return [pytest.param(t, marks=pytest.mark.slow) if t in _SLOW_TASKS else t for t in V3_NEW_TASKS]


@pytest.mark.parametrize("task_id", _tasks())
def test_the_new_tasks_reproduce_their_frozen_fingerprint(task_id):
    assert fingerprint_problems(SUITES[V3].get(task_id)) == []


@pytest.mark.parametrize("task_id", _tasks())
def test_a_heuristic_fits_every_new_task(task_id):
    """What `suite_measure.unfitted_tasks` checks when the suite is frozen: the named heuristic's placement
    fits every device's memory (v2's 70B step and 103k-op training step fit none of the suite's
    baselines)."""
    task = parse_task_id(task_id)
    result = simulate(task, run_installed_agent(task, V3_FITTED_BY[task_id]).placement)
    assert result.feasible
    assert (result.peak_memory <= task.cluster.memory_capacity).all()


# --- the fill's --from-suite: a v3 file starts from v1's results of the tasks the suites share ----------

_SHARED = "cifar10_cnn/k80x2/train"  # 30 ops, in v1 and v3 with the same frozen fingerprint


def _one_device(device):
    def agent(task, seed, budget):
        return np.full(task.n_forward, device, dtype=np.int64)

    return agent


def test_carry_over_copies_a_shared_tasks_result_that_then_validates(tmp_path):
    from baselines.leaderboard_fill.learned import carry_over, done_tasks, merge, submission_path
    from placement_gym.leaderboard import evaluate, get_suite, load_submission
    from placement_gym.leaderboard.validate import validate_file

    source, out = tmp_path / "source", tmp_path / "out"
    v1_file = merge(evaluate(_one_device(1), get_suite("v1").subset([_SHARED]), 200, algorithm="pg"), source)
    # A fill of other tasks (--tasks) copies nothing.
    assert carry_over("pg", 0, 200, out, V3, ["v1", "v2"], source, task_ids=["rnnlm/k80x4/train"]) == 0
    assert not submission_path("pg", 0, 200, out, V3).exists()
    assert carry_over("pg", 0, 200, out, V3, ["v1", "v2"], source) == 1
    target = submission_path("pg", 0, 200, out, V3)
    copied = load_submission(target)
    assert copied["suite"] == V3 and copied["budget"] == 200 and copied["algorithm"] == "pg"
    assert copied["results"] == load_submission(v1_file)["results"]
    check = validate_file(target)
    assert check.ok and [t.task_id for t in check.tasks] == [_SHARED], check.problems
    assert done_tasks("pg", 0, 200, out, V3) == {_SHARED}
    # Nothing more to copy, and a seed or budget with no earlier file copies nothing.
    assert carry_over("pg", 0, 200, out, V3, ["v1"], source) == 0
    assert carry_over("pg", 1, 200, out, V3, ["v1"], source) == 0
    assert carry_over("pg", 0, 1000, out, V3, ["v1"], source) == 0
    assert not submission_path("pg", 1, 200, out, V3).exists()


def test_carry_over_keeps_the_results_a_file_holds(tmp_path):
    from baselines.leaderboard_fill.learned import carry_over, merge
    from placement_gym.leaderboard import evaluate, get_suite, load_submission

    source, out = tmp_path / "source", tmp_path / "out"
    merge(evaluate(_one_device(1), get_suite("v1").subset([_SHARED]), 200, algorithm="pg"), source)
    own = merge(evaluate(_one_device(0), get_suite(V3).subset([_SHARED]), 200, algorithm="pg"), out)
    before = load_submission(own)["results"]
    assert carry_over("pg", 0, 200, out, V3, ["v1"], source) == 0
    assert load_submission(own)["results"] == before


def test_carry_over_skips_a_task_whose_fingerprint_changed(tmp_path, monkeypatch):
    import dataclasses

    import placement_gym.leaderboard as leaderboard
    from baselines.leaderboard_fill.learned import carry_over, merge, submission_path
    from placement_gym.leaderboard import evaluate, get_suite

    source, out = tmp_path / "source", tmp_path / "out"
    merge(evaluate(_one_device(1), get_suite("v1").subset([_SHARED]), 200, algorithm="pg"), source)
    v1 = get_suite("v1")
    moved = dataclasses.replace(v1.get(_SHARED), best_single_runtime=v1.get(_SHARED).best_single_runtime * 2)
    changed_v1 = dataclasses.replace(v1, tasks=tuple(moved if t.task_id == _SHARED else t for t in v1.tasks))
    monkeypatch.setattr(leaderboard, "get_suite",
                        lambda version: changed_v1 if version == "v1" else get_suite(version))
    assert carry_over("pg", 0, 200, out, V3, ["v1"], source) == 0
    assert not submission_path("pg", 0, 200, out, V3).exists()


@pytest.mark.parametrize("bad", ["v3", "gen-v2", "v9"])
def test_the_fill_refuses_a_from_suite_it_cannot_copy_from(bad, monkeypatch, capsys):
    from baselines.leaderboard_fill.learned import main

    monkeypatch.setattr("sys.argv", ["learned", "--suite", V3, "--from-suite", f"v1,{bad}", "--no-render"])
    with pytest.raises(SystemExit) as raised:
        main()
    assert raised.value.code == 2 and "--from-suite takes suites of this fill other than --suite (v3)" in \
        capsys.readouterr().err


@pytest.mark.parametrize("args, message", [
    (["--agents", "2"], "--agents: unknown agent '2'"),
    (["--agents", "pg,hsdga"], "--agents: unknown agent 'hsdga'; did you mean 'hsdag'?"),
    (["--seeds", "0,x"], "--seeds takes comma-separated whole numbers, got '0,x'"),
    (["--budget", "0"], "--budget must be >= 1 evaluation, got 0"),
    (["--tasks", "gnmt9/k40x8/train"], "--tasks: task 'gnmt9/k40x8/train' is not in suite v3"),
])
def test_the_fill_refuses_bad_agents_seeds_budgets_and_tasks_before_it_runs(args, message, tmp_path,
                                                                             monkeypatch, capsys):
    from baselines.leaderboard_fill.learned import main

    monkeypatch.setattr("sys.argv", ["learned", "--suite", V3, "--out-dir", str(tmp_path), "--no-render",
                                     *args])
    with pytest.raises(SystemExit) as raised:
        main()
    err = capsys.readouterr().err
    assert raised.value.code == 2 and message in err and "Traceback" not in err
    assert list(tmp_path.iterdir()) == []  # nothing run, nothing written
