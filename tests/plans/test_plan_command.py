"""`placement-gym plan` as a user runs it (a subprocess, from a folder outside the checkout), and
`placement-gym bench --plans`'s JSON."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from paths import ROOT

from placement_gym.plans import MODEL_PRESETS, Plan, evaluate_plan, mesh_from_name, model_from_spec

KEYS = {"step_s", "tokens_per_s_per_gpu", "mfu", "peak_memory_bytes", "feasible", "breakdown"}


def plan_cli(tmp_path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "placement_gym", "plan", *args], cwd=tmp_path,
                          capture_output=True, text=True, timeout=300)


def test_plan_prices_a_configuration_given_on_the_command_line(tmp_path):
    spec = "gpt:layers=8,hidden=2048,heads=16,seq=2048,vocab=51200"
    done = plan_cli(tmp_path, "--model", spec, "--cluster", "dgx-a100x2", "--tp", "4", "--pp", "2",
                    "--global-batch", "16", "--sequence-parallel", "--recompute", "selective", "--json")
    assert done.returncode == 0, done.stderr
    got = json.loads(done.stdout)
    assert KEYS <= set(got) and got["feasible"] is True
    assert set(got["breakdown"]) == {"compute", "communication", "bubble", "optimizer"}
    # the same plan from Python: the command line is the API
    plan = Plan(tp=4, pp=2, dp=2, global_batch=16, sequence_parallel=True, recompute="selective")
    assert got["step_s"] == evaluate_plan(model_from_spec(spec), plan, mesh_from_name("dgx-a100x2")).step_s
    assert got["id"] == f"{spec}/dgx-a100x2/tp4-pp2-dp2-gb16-sp-rcselective"


@pytest.mark.slow
def test_plan_runs_every_named_preset(tmp_path):
    for name in MODEL_PRESETS:
        done = plan_cli(tmp_path, "--model", name, "--cluster", "dgx-h100x128", "--tp", "8", "--pp", "8",
                        "--zero", "1", "--sequence-parallel", "--recompute", "full", "--global-batch", "256",
                        "--json")
        got = json.loads(done.stdout)
        assert done.returncode in (0, 1) and KEYS <= set(got), (name, done.stderr)
        # a preset whose layers do not divide into 8 stages is refused with that reason, not a crash
        assert got["feasible"] or got["problems"], name


@pytest.mark.parametrize("args, message", [
    (["--model", "gpt5"], "unknown model 'gpt5'"),
    (["--model", "llama2-7b", "--cluster", "tpu-v5"], "unknown mesh 'tpu-v5'"),
    (["--model", "llama2-7b", "--cluster", "dgx-h100x2048"], "1 to 1,024"),
    (["--model", "llama2-7b", "--tp", "3"], "does not divide the mesh's 8 GPUs"),
])
def test_bad_input_is_one_line(tmp_path, args, message):
    done = plan_cli(tmp_path, *args)
    assert done.returncode == 2 and message in done.stderr and len(done.stderr.strip().splitlines()) == 1


def test_a_plan_that_cannot_run_says_why_and_exits_1(tmp_path):
    done = plan_cli(tmp_path, "--model", "llama2-7b", "--tp", "8", "--precision", "fp8",
                    "--cluster", "dgx-a100")
    assert done.returncode == 1 and "has no fp8 tensor cores" in done.stdout


@pytest.mark.slow
def test_bench_plans_json(tmp_path):
    done = subprocess.run([sys.executable, "-m", "placement_gym", "bench", "--plans", "--repeats", "1",
                           "--seconds", "0.05", "--json"], cwd=tmp_path, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr
    rows = json.loads(done.stdout)["rows"]
    assert rows[0]["name"] == "gpt3-175b-512" and rows[0]["target_s"] == 1e-3
    assert all(row["seconds_per_plan"] > 0 and row["step_s"] > 0 for row in rows)


def test_the_layout_example_ranks_what_the_api_prices(tmp_path):
    example = ROOT / "examples" / "parallel_plans.py"
    spec = "llama:layers=8,hidden=1024,heads=16,kv_heads=4,seq=2048,vocab=32000"
    done = subprocess.run([sys.executable, str(example), "--model", spec, "--mesh", "dgx-a100x2",
                           "--global-batch", "32", "--top", "3"], cwd=tmp_path, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    rows = [line.split() for line in done.stdout.splitlines() if line.startswith("tp")]
    steps = [float(row[1]) for row in rows]
    assert len(rows) == 3 and steps == sorted(steps)
    # each printed step is the API's price of the printed plan id
    for row in rows:
        plan = Plan.from_suffix(row[0])
        priced = evaluate_plan(model_from_spec(spec), plan, mesh_from_name("dgx-a100x2"))
        assert f"{priced.step_s:.3f}" == row[1] and priced.feasible
    assert "layouts fit" in done.stdout.splitlines()[-1]


def test_plan_search_finds_and_prices_a_plan(tmp_path):
    """``plan --search`` from a folder outside the checkout: the agent's plan, priced as ``plan`` prices
    any plan, and the search's own count; an unknown agent is one line."""
    from placement_gym.plans.space import plan_task

    done = plan_cli(tmp_path, "--model", "llama2-7b", "--cluster", "dgx-h100x2", "--global-batch", "64",
                    "--search", "megatron", "--json")
    assert done.returncode == 0, done.stderr
    got = json.loads(done.stdout)
    assert got["search"] == {"agent": "megatron", "evaluations": 1, "task": "llama2-7b/dgx-h100x2/gb64"}
    task = plan_task("llama2-7b", "dgx-h100x2", 64)
    plan = Plan(**got["plan"])
    assert got["step_s"] == evaluate_plan(task.model, plan, task.mesh).step_s and got["feasible"]
    done = plan_cli(tmp_path, "--model", "llama2-7b", "--search", "metis")
    assert done.returncode == 2 and "unknown plan agent 'metis'; allowed: megatron, sweep" in done.stderr


@pytest.mark.slow
def test_bench_plan_sweep_json(tmp_path):
    done = subprocess.run([sys.executable, "-m", "placement_gym", "bench", "--plan-sweep", "--json"],
                          cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    rows = json.loads(done.stdout)["rows"]
    assert [row["task"] for row in rows] == ["llama2-70b/dgx-h100x128/gb1024", "gpt3-175b/dgx-a100x8/gb64"]
    for row in rows:
        assert row["priced"] > 1000 and row["skipped"] >= 0 and row["step_s"] > 0
        assert row["plans_per_s"] == pytest.approx((row["priced"] + row["skipped"]) / row["seconds"])
