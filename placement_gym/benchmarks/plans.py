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
