"""How long pricing a parallel plan takes (`run_plans_bench`, `PlanBenchRow`): `evaluate_plan` of named
plans, timed in-process on one core once the model is built."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from placement_gym.benchmarks.rows import BenchmarkRow
from placement_gym.plans import Plan, evaluate_plan, mesh_from_name, model_from_spec

# name -> (model, mesh, plan). The first is the target's: GPT-3 175B on 512 H100, TP4 PP8 with 6
# virtual stages, DP16, 64 micro-batches.
BENCH_PLANS: dict[str, tuple[str, str, Plan]] = {
    "gpt3-175b-512": ("gpt3-175b", "dgx-h100x64",
                      Plan(tp=4, pp=8, vp=6, dp=16, global_batch=1024, schedule="interleaved",
                           sequence_parallel=True, zero=1)),
    "llama2-70b-64": ("llama2-70b", "dgx-h100x8", Plan(tp=4, pp=4, vp=5, dp=4, global_batch=128,
                                                       schedule="interleaved", sequence_parallel=True, zero=1,
                                                       precision="fp8")),
    "mixtral-8x7b-64": ("mixtral-8x7b", "dgx-h100x8", Plan(pp=4, dp=16, ep=8, global_batch=256, zero=1)),
    # 126 layers over 16 stages: the first and last hold 7, as Llama 3's report balances its embedding
    # and head stages.
    "llama3-405b-8192": ("llama3-405b", "dgx-h100x1024",
                         Plan(tp=8, pp=16, dp=64, global_batch=2048, sequence_parallel=True, zero=1,
                              stage_layers=(7,) + (8,) * 14 + (7,))),
}
# Seconds one plan may take on one core of an idle 2-core machine (GPT-3 175B's row).
PLAN_TARGET_S = 1e-3


@dataclass(frozen=True)
class PlanBenchRow(BenchmarkRow):
    """One plan of `BENCH_PLANS`: ``seconds_per_plan`` (median over ``repeats`` rounds of as many
    evaluations as fill ``seconds``), the plan's ``step_s`` and ``virtual_stages`` x ``microbatches``
    (the units its schedule simulates), and the ``target_s`` (None where the plan has none)."""

    name: str
    model: str
    mesh: str
    plan: str
    units: int
    step_s: float
    seconds_per_plan: float
    target_s: float | None


def run_plans_bench(repeats: int = 5, seconds: float = 0.5,
                    progress: Callable[[int, int, str], None] | None = None) -> list[PlanBenchRow]:
    """Time every plan of `BENCH_PLANS` (the model, mesh and numba kernel built and warmed first)."""
    rows = []
    for i, (name, (model_name, mesh_name, plan)) in enumerate(BENCH_PLANS.items()):
        if progress is not None:
            progress(i, len(BENCH_PLANS), name)
        model, mesh = model_from_spec(model_name), mesh_from_name(mesh_name)
        result = evaluate_plan(model, plan, mesh)
        start = time.perf_counter()
        evaluate_plan(model, plan, mesh)
        once = max(time.perf_counter() - start, 1e-7)
        count = max(1, int(seconds / once))
        rounds = []
        for _ in range(repeats):
            start = time.perf_counter()
            for _ in range(count):
                evaluate_plan(model, plan, mesh)
            rounds.append((time.perf_counter() - start) / count)
        rows.append(PlanBenchRow(name, model_name, mesh_name, plan.describe(),
                                 plan.virtual_stages * plan.microbatches * 2, result.step_s,
                                 float(np.median(rounds)), PLAN_TARGET_S if i == 0 else None))
    return rows


# name -> (model, mesh, global batch): the sweeps `placement-gym bench --plan-sweep` times. The first is
# the target's (Llama-2 70B on 1,024 H100); the second is the case Calculon's own search was timed on
# here (GPT-3 175B on 64 A100, global batch 64: 728 configurations a second, REFERENCE).
SWEEPS: dict[str, tuple[str, str, int]] = {
    "llama2-70b-1024": ("llama2-70b", "dgx-h100x128", 1024),
    "gpt3-175b-64": ("gpt3-175b", "dgx-a100x8", 64),
}
# The sweep's targets on an idle 2-core machine: at most this many seconds, and at least five times the
# configurations a second Calculon's search reaches on the same machine.
SWEEP_TARGET_S = 60.0
CALCULON_PLANS_PER_S = 728.0
SWEEP_TARGET_PLANS_PER_S = 5 * CALCULON_PLANS_PER_S


@dataclass(frozen=True)
class SweepBenchRow(BenchmarkRow):
    """One sweep of `SWEEPS`: the plans it ``priced`` and ``skipped`` (their weights and state alone do not
    fit), its wall ``seconds`` and ``plans_per_s`` (priced and skipped), the ``workers`` that priced them,
    the ``best`` plan's description and ``step_s``."""

    name: str
    task: str
    priced: int
    skipped: int
    seconds: float
    plans_per_s: float
    workers: int
    best: str
    step_s: float


def run_sweep_bench(agent: Callable, progress: Callable[[int, int, str], None] | None = None
                    ) -> list[SweepBenchRow]:
    """Run the plan agent ``agent`` (the sweep: `placement_gym.evaluation.agents.lookup_plan_agent`) on
    every problem of `SWEEPS`, each on a new task."""
    from placement_gym.plans.space import plan_task

    rows = []
    for i, (name, (model, mesh, batch)) in enumerate(SWEEPS.items()):
        if progress is not None:
            progress(i, len(SWEEPS), name)
        task = plan_task(model, mesh, batch)
        start = time.perf_counter()
        result = agent(task, 0, None)
        seconds = time.perf_counter() - start
        info = result.info
        skipped = int(info.get("skipped", 0))
        rows.append(SweepBenchRow(name, task.id, result.evaluations, skipped, seconds,
                                  (result.evaluations + skipped) / seconds, int(info.get("workers", 1)),
                                  task.plan_of(result.placement).describe(), float(info["step_s"])))
    return rows
