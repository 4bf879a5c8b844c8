"""The plan cost model (one representative rank per stage) against its reference (every rank of a
small mesh simulated, tests/plans/plan_reference.py), on random models, meshes and plans."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from plan_reference import reference_step

from placement_gym.plans import Plan, TransformerModel, dgx_mesh, evaluate_plan
from placement_gym.plans.layer import group_of


def divisors(n: int) -> list[int]:
    return [k for k in range(1, n + 1) if n % k == 0]


@st.composite
def cases(draw, regular: bool):
    nodes = draw(st.sampled_from([1, 2, 3, 4]))
    mesh = dgx_mesh(draw(st.sampled_from(["h100", "a100"])), nodes)
    gpus = mesh.gpus
    family = draw(st.sampled_from(["gpt", "llama", "moe"]))
    heads = draw(st.sampled_from([8, 16]))
    experts = draw(st.sampled_from([4, 8])) if family == "moe" else 1
    model = TransformerModel(
        family,
        layers=draw(st.sampled_from([4, 8, 12])),
        hidden=64 * heads,
        heads=heads,
        seq=draw(st.sampled_from([256, 512])),
        vocab=1000,
        kv_heads=0 if family == "gpt" else draw(st.sampled_from([heads, heads // 4])),
        experts=experts,
        top_k=2 if family == "moe" else 1,
    )
    sizes = [2**k for k in range(6)] if regular else list(range(1, gpus + 1))
    tp = draw(st.sampled_from([x for x in sizes if gpus % x == 0 and heads % x == 0 and x <= 8]))
    pp = draw(st.sampled_from([x for x in sizes if (gpus // tp) % x == 0 and model.layers % x == 0]))
    dp = gpus // (tp * pp)
    schedule = draw(st.sampled_from(["1f1b", "gpipe", "interleaved"] if pp > 1 else ["1f1b"]))
    vp = 1
    if schedule == "interleaved":
        choices = [v for v in (2, 3) if model.layers % (pp * v) == 0]
        assume(choices)
        vp = draw(st.sampled_from(choices))
    microbatches = draw(
        st.sampled_from([pp, 2 * pp, 3]) if schedule != "interleaved" else st.sampled_from([pp, 2 * pp])
    )
    # Some stages trade data for tensor parallelism (a multiple of tp that keeps the micro-batch whole).
    kv = model.key_value_heads
    stage_choices = [tp * k for k in divisors(dp) if heads % (tp * k) == 0 and tp * k <= 8
                     and not (kv % (tp * k) and (tp * k) % kv)]
    stage_tp = tuple(draw(st.sampled_from(stage_choices)) for _ in range(pp)) if draw(st.booleans()) else ()
    stage_dps = [tp * dp // t for t in stage_tp] or [dp]
    ep = draw(st.sampled_from([e for e in divisors(min(stage_dps)) if experts % e == 0
                               and all(d % e == 0 for d in stage_dps)])) if family == "moe" else 1
    plan = Plan(
        tp=tp,
        pp=pp,
        dp=dp,
        vp=vp,
        schedule=schedule,
        ep=ep,
        global_batch=dp * microbatches,
        sequence_parallel=tp > 1 and draw(st.booleans()),
        zero=draw(st.sampled_from([0, 1, 2, 3])),
        recompute=(recompute := draw(st.sampled_from(["none", "selective", "full"]))),
        recompute_layers=draw(st.sampled_from([0, 1, 2])) if recompute == "full" else 0,
        precision=draw(st.sampled_from(["bf16", "fp8"] if mesh.gpu.architecture == "hopper" else ["bf16"])),
        fused_attention=draw(st.booleans()),
        stage_tp=stage_tp,
    )
    return model, plan, mesh


def uniform(plan: Plan, mesh) -> bool:
    """Whether every group of each kind lies the same way across nodes (powers of two on 8-GPU nodes)."""
    return (
        all(x & (x - 1) == 0 for x in (plan.tp, plan.pp, plan.dp, plan.ep))
        and mesh.nodes & (mesh.nodes - 1) == 0
    )


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.filter_too_much])
@given(cases(regular=True))
def test_one_rank_per_stage_is_every_rank_on_regular_layouts(case):
    model, plan, mesh = case
    assume(uniform(plan, mesh))
    fast = evaluate_plan(model, plan, mesh)
    assert not fast.problems or fast.problems[0].startswith("needs"), fast.problems
    reference = reference_step(model, plan, mesh)
    assert fast.step_s == pytest.approx(reference["step_s"], rel=1e-9)
    assert fast.peak_memory_bytes == pytest.approx(reference["peak_memory_bytes"], rel=1e-9)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.filter_too_much])
@given(cases(regular=False))
def test_on_uneven_layouts_the_slowest_group_bounds_every_rank(case):
    model, plan, mesh = case
    fast = evaluate_plan(model, plan, mesh)
    assume(not fast.problems or fast.problems[0].startswith("needs"))
    reference = reference_step(model, plan, mesh)
    assert fast.step_s >= reference["step_s"] * (1 - 1e-9)
    assert fast.peak_memory_bytes == pytest.approx(reference["peak_memory_bytes"], rel=1e-9)


def test_an_uneven_data_parallel_group_is_found():
    # TP4 x PP8 x DP3 on 12 nodes (Megatron-LM's GPT-3 175B run): the data-parallel group {0, 4, 8}
    # holds two GPUs of node 0 and one of node 1, whose single NIC carries the ring between them.
    plan = Plan(tp=4, pp=8, dp=3, global_batch=3)
    group = group_of("data", plan, dgx_mesh("h100", 12))
    assert (group.size, group.per_node, group.nodes) == (3, 1, 2)
