"""The parallel track: a suite of plan tasks is measured from its file, submitted to by plan agents through
the harness, validated by pricing every submitted plan again, rendered, re-run and recorded through the
same commands as every suite; forged plans, runtimes and claims are refused, one line each.

The suite here is a toy one of two small plan tasks, added beside the committed suite files, so that the
test holds whatever the committed parallel suite becomes."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from baselines.plans import megatron, plan_anneal, sweep
from placement_gym.cli import main
from placement_gym.leaderboard import evaluate, get_suite, validate_submission
from placement_gym.leaderboard.registry import SUITE_FOLDER, use_suite_folder
from placement_gym.leaderboard.submission import (
    SubmissionError,
    check_result,
    save_submission,
    submission_filename,
)
from placement_gym.leaderboard.suite import suite_mismatch
from placement_gym.leaderboard.suite_measure import write_suite_file
from placement_gym.plans import mesh as mesh_module
from placement_gym.plans.evaluate import evaluate_plan
from placement_gym.plans.plan import Plan
from placement_gym.plans.space import parse_plan_task_id, plan_task

TOY = "toy-parallel-1"
# Two plan tasks priced in milliseconds: a 1B model on one DGX H100, a 7B one on two DGX A100 nodes.
TASKS = ("llama3-1b/dgx-h100/gb16", "llama2-7b/dgx-a100x2/gb32+fp16")
MARKDOWN = ".md"  # (tests/project/test_docs.py reads a name ending in the Markdown suffix as a citation)
FILES = {"page": f"toy_plans{MARKDOWN}", "chart": "toy_plans.png", "curves": "toy_plan_curves"}


def _write(path: Path, data: dict) -> None:
    path.write_text(json.dumps(data, indent=1) + "\n", encoding="utf-8")


@pytest.fixture
def suites(tmp_path):
    """The committed suite folder with the toy parallel suite's file, measured (as a draft) and accepted."""
    folder = tmp_path / "suites"
    shutil.copytree(SUITE_FOLDER, folder)
    path = folder / f"{TOY}.json"
    _write(path, {"version": TOY, "description": "Two small plan tasks.", "status": "draft",
                  "track": "parallel", "placement_format": "plan", **FILES,
                  "measure": {"new_tasks": list(TASKS)}, "tasks": []})
    with use_suite_folder(folder):
        write_suite_file(path)
    _write(path, {**json.loads(path.read_text()), "status": "accepted"})
    return folder


@pytest.fixture
def board(tmp_path):
    target = tmp_path / "board"
    assert main(["leaderboard", "init", str(target)]) == 0
    for path in (target / "submissions").glob("*.json"):
        path.unlink()
    return target


def _entry(agent, budget=None, seed=0, algorithm=None):
    name = algorithm or agent.__name__.replace("_", "-")
    return evaluate(agent, TOY, budget, algorithm=name, seed=seed, track="parallel")


def test_a_plan_suite_freezes_the_rules_step_and_a_bound_below_every_plan(suites):
    with use_suite_folder(suites):
        suite = get_suite(TOY)
        assert suite.task_ids == TASKS and suite_mismatch(TOY) is None
        for task_id in TASKS:
            frozen, task = suite.get(task_id), parse_plan_task_id(task_id)
            # the reference is the rules' plan, priced by the plan model
            rules = megatron(task)
            assert frozen.best_single_runtime == rules.info["step_s"]
            # the bound is below the best of every uniform plan that divides (the sweep's enumeration)
            best = sweep(task).info["step_s"]
            assert frozen.lower_bound <= best <= frozen.best_single_runtime


def test_plan_entries_are_priced_again_rendered_rerun_and_recorded(suites, board, capsys):
    with use_suite_folder(suites):
        for agent, budget in ((megatron, None), (plan_anneal, 50)):
            submission = _entry(agent, budget)
            for task_id, result in submission["results"].items():
                task = parse_plan_task_id(task_id)
                plan = Plan.from_suffix(result["placement"])
                assert plan.gpus == task.mesh.gpus and plan.global_batch == task.global_batch
                assert result["runtime"] == evaluate_plan(task.model, plan, task.mesh).step_s
                assert result["evaluations"] <= (budget or 8) and result["trace"][-1][1] == result["runtime"]
            path = save_submission(submission, board / "submissions" / submission_filename(submission))
            rerun = ["leaderboard", "validate", "--rerun", str(path), "--record", "--dir", str(board)]
            assert main(rerun) == 0
        assert main(["leaderboard", "validate", "--dir", str(board)]) == 0
        assert "every file passed" in capsys.readouterr().out
        assert main(["leaderboard", "render", "--suite", TOY, "--dir", str(board)]) == 0
        page = (board / FILES["page"]).read_text()
        assert page.startswith(f"# Parallel plans, suite {TOY}\n")
        anneal = json.loads((board / "submissions" / f"{TOY}-plan-anneal-50-seed0.json").read_text())
        for task_id in TASKS:
            assert f"### `{task_id}`" in page and f"`{anneal['results'][task_id]['placement']}`" in page
        # both entries verified by their records: ranked in the budget tracks, and drawn
        assert "| 1 | plan-anneal | 50 |" in page or "| 2 | plan-anneal | 50 |" in page
        assert (board / FILES["chart"]).read_bytes().startswith(b"\x89PNG")
        assert len(list((board / FILES["curves"]).iterdir())) == len(TASKS)
        assert main(["leaderboard", "render", "--check", "--suite", TOY, "--dir", str(board)]) == 0


def test_the_page_computes_mfu_from_the_repriced_step(suites):
    from placement_gym.leaderboard.parallel_page import mfu

    task = plan_task("llama3-1b", "dgx-h100", 16)
    step = 2.0
    # by hand: the model's FLOPs a token x tokens / (GPUs x H100's dense bf16 peak x step)
    flops = task.model.training_flops_per_token() * 16 * task.model.seq
    assert mfu(task, step) == pytest.approx(flops / (8 * 989e12 * step), rel=1e-3)
    # a mixed mesh's GPUs each at their own peak: 8 A100 at 312 and 8 H100 at 989 TFLOP/s
    mixed = plan_task("llama3-1b", "dgx-a100+dgx-h100", 16)
    assert mfu(mixed, step) == pytest.approx(flops / ((8 * 312e12 + 8 * 989e12) * step), rel=1e-3)


def _forged(submission: dict, task_id: str, **changes) -> dict:
    results = {**submission["results"], task_id: {**submission["results"][task_id], **changes}}
    return {**submission, "results": results}


def test_forged_plans_and_claims_are_refused_one_line_each(suites):
    with use_suite_folder(suites):
        honest = _entry(megatron)
        assert validate_submission(honest).ok
        task_id = TASKS[0]
        plan = Plan.from_suffix(honest["results"][task_id]["placement"])
        other = Plan(tp=2, pp=1, dp=4, global_batch=16, zero=1)  # another real plan of the task
        assert other != plan
        cases = {
            "claimed runtime": _forged(honest, task_id, placement=other.suffix()),
            "has GPUs": _forged(honest, task_id, placement=Plan(tp=2, dp=2, global_batch=16).suffix()),
            "cannot run": _forged(honest, task_id, placement=Plan(tp=8, dp=1, global_batch=16, vp=2,
                                                                  schedule="interleaved").suffix()),
            "not an op mapping": _forged(honest, task_id, placement={"op": "gpu0"}),
            "claimed infeasible": _forged(honest, task_id, feasible=False),
            "plan token": _forged(honest, task_id, placement="tp2-warp9"),
        }
        for words, forged in cases.items():
            check = validate_submission(forged)
            reasons = [r for t in check.tasks for r in t.reasons] + check.problems
            assert not check.ok and any(words in r for r in reasons), (words, reasons)
            assert all("\n" not in r for r in reasons)
        # a plan that does not fit is a result, infeasible, not an error: 7B weights and Adam state unsharded
        # (16 bytes a weight, 112 GB) on 80 GB A100s
        huge = Plan(tp=1, pp=1, dp=16, global_batch=32, recompute="none", precision="fp16")
        task = parse_plan_task_id(TASKS[1])
        priced = evaluate_plan(task.model, huge, task.mesh)
        assert not priced.feasible
        result = {**honest["results"][TASKS[1]], "placement": huge.suffix(), "runtime": priced.step_s,
                  "feasible": False}
        result.pop("trace")
        check = validate_submission({**honest, "results": {**honest["results"], TASKS[1]: result}})
        verdict = next(t for t in check.tasks if t.task_id == TASKS[1])
        assert verdict.ok and verdict.runtime == priced.step_s and verdict.feasible is False
        # the track must match the suite's, both ways
        assert "parallel track's" in validate_submission({**honest, "track": "cost_model"}).problems[0]
        v3 = {**honest, "suite": "v3"}
        assert "not a parallel-plan suite" in validate_submission(v3).problems[0]


def test_a_plan_id_is_bounded_text(suites):
    result = {"graph_sha256": "0" * 64, "runtime": 1.0, "feasible": True, "evaluations": 1, "wall_s": 0.1,
              "trained_on_task": True}
    check_result({**result, "placement": "tp8-pp4-vp5-dp2-gb128-sp-zero1-layers3.3.2"})
    for bad in ("tp8--pp4", "tp8-pp4-" + "x" * 2000, "TP8-pp4", "tp8 pp4", "-tp8"):
        with pytest.raises(SubmissionError, match="plan's id") as error:
            check_result({**result, "placement": bad})
        assert "\n" not in str(error.value)


def test_a_changed_mesh_figure_breaks_the_suite_it_prices(suites, monkeypatch):
    """The frozen figures move with the plan model: a slower NIC on the H100 node changes the mesh digest
    and the steps, and every submission of the suite waits for a new suite version."""
    with use_suite_folder(suites):
        assert suite_mismatch(TOY) is None
        real = mesh_module.dgx_mesh

        def slower_nics(generation, nodes):
            mesh = real(generation, nodes)
            if generation != "h100":
                return mesh
            return type(mesh)(**{**mesh.__dict__, "nic_busbw": mesh.nic_busbw / 2})

        monkeypatch.setattr(mesh_module, "dgx_mesh", slower_nics)
        message = suite_mismatch(TOY)
        assert message is not None and "llama3-1b/dgx-h100/gb16" in message
        assert "mesh figures changed" in message


def test_a_split_holds_out_models_for_the_generalisation_track(suites, board):
    """With a split naming held-out models, generalisation entries are scored on those models' tasks only
    and may not have trained on any of their problems."""
    path = suites / f"{TOY}.json"
    _write(path, {**json.loads(path.read_text()), "split": {"held_out_graphs": ["llama2-7b"]}})
    with use_suite_folder(suites):
        trained = ["llama3-1b/dgx-h100/gb16", "gpt-1.7b/dgx-h100x2/gb64"]
        entry = evaluate(megatron, TOY, algorithm="rules-zero-shot", track="generalisation",
                         trained_on=trained)
        assert list(entry["results"]) == [TASKS[1]]  # the held-out model's task only
        assert validate_submission(entry).ok
        leaked = {**entry, "trained_on": [*trained, "llama2-7b/dgx-h100x8/gb64"]}
        assert any("held-out" in p for p in validate_submission(leaked).problems)
        beyond = {**entry, "results": {**entry["results"], TASKS[0]: _entry(megatron)["results"][TASKS[0]]}}
        reasons = [r for t in validate_submission(beyond).tasks for r in t.reasons]
        assert any("not a held-out task" in r for r in reasons)
        save_submission(entry, board / "submissions" / submission_filename(entry))
        assert main(["leaderboard", "render", "--suite", TOY, "--no-chart", "--dir", str(board)]) == 0
        page = (board / FILES["page"]).read_text()
        assert "## Generalisation: held-out models" in page and "rules-zero-shot" in page


def test_a_plan_task_listed_as_trained_on_is_marked_so(suites):
    """An entry that trained on a task beforehand (its ``trained_on``) is marked so on that task even where
    its scored run priced nothing there, as a placement entry is; validation agrees."""
    with use_suite_folder(suites):
        given = Plan(tp=1, pp=1, dp=8, global_batch=16, zero=1, recompute="full")

        def fixed(task, seed, budget):  # answers without pricing anything
            return given if task.id == TASKS[0] else megatron(task).placement

        entry = evaluate(fixed, TOY, algorithm="fixed", track="parallel", trained_on=[TASKS[0]])
        first = entry["results"][TASKS[0]]
        assert first["evaluations"] == 0 and first["trained_on_task"] is True
        assert validate_submission(entry).ok
