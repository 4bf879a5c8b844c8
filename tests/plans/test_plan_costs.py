"""Parallel plans (placement_gym.plans): pipeline bubbles against the schedules' formulas, activation
memory against Korthikanti et al.'s, collectives against NCCL's bytes per rank, model sizes against
their papers, the calibration table, and refusals that are results."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from placement_gym.calibration.plans import compare_plans
from placement_gym.plans import (
    Group,
    Plan,
    collective_time,
    dgx_mesh,
    evaluate_plan,
    mesh_from_name,
    model_from_spec,
)
from placement_gym.plans.layer import layer_cost
from placement_gym.plans.models import TransformerModel
from placement_gym.plans.schedule import GPIPE, INTERLEAVED, ONE_F_ONE_B, simulate_pipeline

# ---------------------------------------------------------------------------------------------------
# Pipeline schedules on uniform stacks: Narayanan et al. 2021's bubbles and in-flight micro-batches


@settings(max_examples=60, deadline=None)
@given(
    pp=st.integers(1, 8),
    groups=st.integers(1, 6),
    vp=st.integers(1, 4),
    kind=st.sampled_from([GPIPE, ONE_F_ONE_B, INTERLEAVED]),
    forward=st.floats(0.1, 3.0),
    ratio=st.floats(0.5, 3.0),
)
def test_bubbles_are_the_schedules_formulas(pp, groups, vp, kind, forward, ratio):
    if kind != INTERLEAVED:
        vp = 1
    elif pp < 2 or vp < 2:
        return
    m = groups * pp  # the interleaved schedule needs a multiple of pp; the others take any
    f, b = forward / vp, forward * ratio / vp  # one virtual stage's share of a device's stage
    stages = pp * vp
    zero = np.zeros(stages)
    finish, busy, peak, _, _ = simulate_pipeline(
        pp, vp, m, kind, np.full(stages, f), np.full(stages, b), zero, zero, np.ones(stages)
    )
    ideal = m * vp * (f + b)
    bubble = (pp - 1) / (vp * m) if kind == INTERLEAVED else (pp - 1) / m
    assert finish.max() == pytest.approx(ideal * (1 + bubble), rel=1e-9)
    np.testing.assert_allclose(busy, ideal, rtol=1e-12)
    if kind == GPIPE:
        assert list(peak) == [m] * pp
    elif kind == ONE_F_ONE_B:
        assert list(peak) == [min(pp - s, m) for s in range(pp)]


def test_a_send_between_stages_delays_the_pipeline_by_its_hops():
    # GPipe on 3 stages, 1 micro-batch: forward through every stage and back, 2 hops each way.
    f, b, send = 1.0, 2.0, 0.25
    finish, *_ = simulate_pipeline(
        3, 1, 1, GPIPE, np.full(3, f), np.full(3, b), np.full(3, send), np.full(3, send), np.zeros(3)
    )
    assert finish[0] == pytest.approx(3 * f + 3 * b + 4 * send)


# ---------------------------------------------------------------------------------------------------
# Activation memory per layer: Korthikanti et al. 2022, section 4 (bytes; s sequence, b micro-batch,
# h hidden, a heads, t tensor degree), for their GPT (materialised attention, dropout)


GPT = TransformerModel("gpt", layers=2, hidden=1024, heads=16, seq=512, vocab=1000)


@pytest.mark.parametrize("t", [1, 2, 4, 8])
@pytest.mark.parametrize("b", [1, 3])
def test_activation_memory_per_layer_is_korthikanti_s(t, b):
    s, h, a = GPT.seq, GPT.hidden, GPT.heads
    sbh = s * b * h
    mesh = dgx_mesh("a100", 1)

    def kept(**options):
        plan = Plan(
            tp=t, dp=8 // t, global_batch=8 // t * b, microbatch_size=b, fused_attention=False, **options
        )
        return layer_cost(GPT, plan, mesh).kept

    if t == 1:
        assert kept() == pytest.approx(sbh * (34 + 5 * a * s / h))
        return
    assert kept() == pytest.approx(sbh * (10 + 24 / t + 5 * a * s / (h * t)))
    assert kept(sequence_parallel=True) == pytest.approx(sbh / t * (34 + 5 * a * s / h))
    assert kept(sequence_parallel=True, recompute="selective") == pytest.approx(34 * sbh / t)
    assert kept(sequence_parallel=True, recompute="full") == pytest.approx(2 * sbh / t)


def test_recomputing_one_more_layer_trades_its_kept_bytes_for_its_forward_pass():
    # Megatron's block method on a one-stage, one-micro-batch step: each more replayed layer keeps its
    # input (2 sbh/t with sequence parallelism) instead of everything (34 sbh/t and FlashAttention's
    # fp32 row statistics), and replays one layer's forward pass.
    mesh = dgx_mesh("h100", 1)
    s, h, a, t = GPT.seq, GPT.hidden, GPT.heads, 8
    model = TransformerModel("gpt", layers=6, hidden=h, heads=a, seq=s, vocab=1000)

    def priced(replayed: int):
        plan = Plan(tp=t, global_batch=1, sequence_parallel=True, recompute="full", recompute_layers=replayed)
        return evaluate_plan(model, plan, mesh)

    one_layer = layer_cost(model, Plan(tp=t, global_batch=1, sequence_parallel=True), mesh)
    for replayed in range(1, 6):
        fewer, more = priced(replayed), priced(replayed + 1)
        assert fewer.peak_memory_bytes - more.peak_memory_bytes == pytest.approx(
            34 * s * h / t + 4 * s * a / t - 2 * s * h / t)
        assert more.step_s - fewer.step_s == pytest.approx(one_layer.forward + one_layer.forward_comm)
    assert priced(6).step_s == priced(0).step_s  # every layer of the stage: full recomputation


def test_flash_attention_keeps_no_scores():
    mesh = dgx_mesh("h100", 1)
    plan = Plan(tp=8, global_batch=1, sequence_parallel=True)
    s, h, a, t = GPT.seq, GPT.hidden, GPT.heads, 8
    # selective recomputation's 34 sbh/t, plus the kernel's fp32 row statistics (4 bytes a head and token)
    assert layer_cost(GPT, plan, mesh).kept == pytest.approx(34 * s * h / t + 4 * s * a / t)


# ---------------------------------------------------------------------------------------------------
# Collectives: NCCL's bytes per rank over the group's bottleneck


def test_a_ring_all_gather_inside_a_node_by_hand():
    mesh = dgx_mesh("h100", 1)
    group = Group.of_ranks(range(8), mesh)
    buffer = 1e9
    expected = mesh.collective_launch + 7 * mesh.intra_latency + 7 / 8 * buffer / mesh.intra_busbw
    assert collective_time("all_gather", buffer, group) == pytest.approx(expected)
    assert collective_time("reduce_scatter", buffer, group) == pytest.approx(expected)


def test_an_all_reduce_across_nodes_runs_at_its_nics():
    mesh = dgx_mesh("h100", 4)
    buffer = 4e9
    one_a_node = Group.of_ranks([0, 8, 16, 24], mesh)  # the data-parallel group of TP8: a GPU a node
    moved = 2 * 3 / 4 * buffer / mesh.nic_busbw
    assert one_a_node.per_node == 1 and one_a_node.nodes == 4
    assert collective_time("all_reduce", buffer, one_a_node) == pytest.approx(
        mesh.collective_launch + 2 * 2 * mesh.inter_latency + moved
    )  # the tree's latency: 2 log2(4) hops
    whole = Group.of_ranks(range(32), mesh)  # 8 GPUs a node: 8 rails carry the ring between nodes
    assert whole.busbw("all_reduce") == pytest.approx(min(mesh.intra_allreduce_busbw, 8 * mesh.nic_busbw))


def test_all_to_all_crosses_nodes_through_each_gpu_s_nic():
    mesh = dgx_mesh("a100", 2)
    group = Group.of_ranks(range(16), mesh)
    buffer = 1.6e9
    inside, across = buffer * 7 / 16 / mesh.intra_busbw, buffer * 8 / 16 / mesh.nic_busbw
    assert collective_time("all_to_all", buffer, group) == pytest.approx(
        mesh.collective_launch + 15 * mesh.inter_latency + max(inside, across)
    )


def test_a_group_s_bottleneck_is_its_emptiest_node():
    mesh = dgx_mesh("h100", 2)
    uneven = Group.of_ranks([4, 8, 12], mesh)  # one GPU in node 0, two in node 1
    assert (uneven.per_node, uneven.nodes) == (1, 2)
    assert uneven.busbw("all_gather") == mesh.nic_busbw


def test_a_group_of_one_costs_nothing():
    assert collective_time("all_reduce", 1e9, Group.of_ranks([3], dgx_mesh("h100", 1))) == 0.0


# ---------------------------------------------------------------------------------------------------
# Models by configuration


@pytest.mark.parametrize(
    "name, total, active",
    [
        ("llama2-7b", 6.74e9, 6.74e9),  # Llama 2 paper: 7B (6.74B in its model card's count)
        ("llama2-70b", 68.98e9, 68.98e9),
        ("mixtral-8x7b", 46.7e9, 12.9e9),  # Jiang et al. 2024: 46.7B parameters, 12.9B active per token
        ("gpt3-175b", 174.6e9, 174.6e9),  # GPT-3's 175B counts biases and learned positions as well
    ],
)
def test_preset_sizes_are_their_papers(name, total, active):
    model = model_from_spec(name)
    assert model.parameters() == pytest.approx(total, rel=0.003)
    assert model.active_parameters() == pytest.approx(active, rel=0.003)


def test_model_flops_are_megatron_s_formula():
    # Narayanan et al. 2021, eq. 3: 72 B s l h^2 (1 + s / 6h + V / 12 l h) per batch of B sequences
    for spec in ("gpt3-175b", "gpt:layers=4,hidden=256,heads=4,seq=128,vocab=500"):
        m = model_from_spec(spec)
        s, n, h, v = m.seq, m.layers, m.hidden, m.vocab
        per_token = 72 * s * n * h * h * (1 + s / (6 * h) + v / (12 * n * h)) / s
        assert m.training_flops_per_token() == pytest.approx(per_token, rel=1e-12)


@pytest.mark.parametrize(
    "spec, message",
    [
        ("gpt2-xl", "unknown model 'gpt2-xl'"),
        ("gpt:layers=2,hidden=64", "give heads, seq, vocab"),
        ("llama:layers=2,hidden=60,heads=8,seq=16,vocab=10", "does not divide into 8 heads"),
        ("llama2-7b:depth=3", "model option 'depth=3'"),
        ("gpt:layers=99999,hidden=64,heads=1,seq=1,vocab=1", "layers must be an integer from 0 to 4,096"),
        ("llama:layers=1,hidden=64,heads=4,seq=8,vocab=8,experts=4", "experts and top_k are for moe"),
    ],
)
def test_bad_models_are_refused_by_name(spec, message):
    with pytest.raises(ValueError, match=None) as caught:
        model_from_spec(spec)
    assert message in str(caught.value)


# ---------------------------------------------------------------------------------------------------
# Plans: what does not divide or fit is a result with its reason


@pytest.mark.parametrize(
    "options, reason",
    [
        (dict(tp=3, dp=1), "tp x pp x dp x cp = 3 GPUs, the mesh has 8"),
        (dict(tp=8, dp=1, global_batch=3, microbatch_size=2), "not a multiple of dp x micro-batch size"),
        (dict(tp=1, pp=8, dp=1, vp=2, global_batch=8), "needs the interleaved schedule"),
        (dict(tp=1, pp=8, dp=1, vp=2, schedule="interleaved", global_batch=12), "a multiple of pp"),
        (dict(tp=1, dp=8, ep=2, global_batch=8), "has no experts"),
        (dict(tp=1, dp=8, sequence_parallel=True, global_batch=8), "needs tp >= 2"),
        (dict(tp=8, dp=1, precision="fp8"), "has no fp8 tensor cores"),
    (dict(tp=8, dp=1, global_batch=300_000), "at most 200,000 are simulated"),  # bounded before any array
    (dict(tp=8, dp=1, recompute_layers=2), "recompute_layers is for full recomputation"),
    (dict(tp=8, dp=1, stage_tp=(8, 8)), "stage_tp gives 2 tensor degrees for 1 pipeline stages"),
    (dict(tp=4, dp=2, global_batch=2, stage_tp=(3,)),
     "stage_tp 3 does not divide a stage's tp x dp = 8 GPUs"),
    (dict(tp=4, dp=2, global_batch=2, stage_tp=(2,)), "which does not divide a micro-batch's 2 sequences"),
    ],
)
def test_plans_that_cannot_run_are_results_with_their_reason(options, reason):
    result = evaluate_plan(model_from_spec("llama2-7b"), Plan(**options), mesh_from_name("dgx-a100"))
    assert not result.feasible and result.step_s == math.inf
    assert any(reason in problem for problem in result.problems), result.problems


def test_a_plan_out_of_memory_is_priced_and_infeasible():
    result = evaluate_plan(
        model_from_spec("llama2-7b"), Plan(dp=8, global_batch=8), mesh_from_name("dgx-h100")
    )
    assert not result.feasible and math.isfinite(result.step_s)
    assert result.peak_memory_bytes > 80e9 and "needs" in result.problems[0]
    # ZeRO-3 shards the 16 bytes a weight over the 8 ranks: the same step fits
    sharded = evaluate_plan(
        model_from_spec("llama2-7b"), Plan(dp=8, global_batch=8, zero=3), mesh_from_name("dgx-h100")
    )
    assert sharded.feasible and sharded.peak_memory_bytes < result.peak_memory_bytes - 80e9


def test_a_stage_tensor_degree_equal_everywhere_is_the_uniform_plan():
    model, mesh = model_from_spec("llama2-70b"), mesh_from_name("dgx-h100x8")
    uniform = Plan(tp=4, pp=4, dp=4, global_batch=128, vp=5, schedule="interleaved", sequence_parallel=True,
                   zero=1, precision="fp8")
    staged = Plan(**{**uniform.as_dict(), "stage_tp": (4, 4, 4, 4)})
    assert evaluate_plan(model, staged, mesh) == evaluate_plan(model, uniform, mesh)


def test_a_stage_with_less_tensor_parallelism_holds_more_of_the_weights():
    # TP8 on stage 0, TP2 (and DP4) on stage 1: a stage-1 rank holds 4x the layer weights of a stage-0 rank
    model, mesh = model_from_spec("llama2-7b"), mesh_from_name("dgx-h100x2")
    plan = Plan(tp=8, pp=2, dp=1, global_batch=4, microbatch_size=4, stage_tp=(8, 2))
    views = plan.stage_views()
    assert [(v.tp, v.dp, v.microbatch_size) for v in views] == [(8, 1, 4), (2, 4, 1)]
    dense = [layer_cost(model, view, mesh).dense for view in views]
    assert dense[1] == pytest.approx(4 * dense[0], rel=0.01)
    assert evaluate_plan(model, plan, mesh).feasible


def test_the_breakdown_sums_to_the_step():
    model = model_from_spec("llama2-70b")
    plan = Plan(
        tp=8, pp=4, dp=2, global_batch=64, vp=5, schedule="interleaved", sequence_parallel=True, zero=1
    )
    result = evaluate_plan(model, plan, mesh_from_name("dgx-h100x8"))
    assert sum(result.breakdown.values()) == pytest.approx(result.step_s, rel=1e-12)
    assert sum(result.memory.values()) == pytest.approx(result.peak_memory_bytes, rel=1e-12)
    assert result.tokens_per_s_per_gpu == pytest.approx(64 * model.seq / result.step_s / 64)


# ---------------------------------------------------------------------------------------------------
# The calibration table (docs/calibration.md, "Parallel plans")


def test_every_published_plan_row_is_within_its_tolerance():
    results = compare_plans()
    assert {r.row.role for r in results} == {"calibration", "held-out"}
    outside = [f"{r.row.id}: {r.error:+.1%}" for r in results if not r.within]
    assert not outside


# ---------------------------------------------------------------------------------------------------
# A plan's id: one formatter, one parser


@settings(max_examples=200, deadline=None)
@given(st.builds(
    Plan, tp=st.integers(1, 64), pp=st.integers(1, 64), dp=st.integers(1, 512),
    global_batch=st.integers(1, 4096), microbatch_size=st.integers(1, 8),
    schedule=st.sampled_from(["1f1b", "gpipe", "interleaved"]),
    vp=st.integers(1, 8), ep=st.integers(1, 8), cp=st.integers(1, 4), sequence_parallel=st.booleans(),
    zero=st.sampled_from([0, 1, 2, 3]), recompute=st.sampled_from(["none", "selective", "full"]),
    recompute_layers=st.integers(0, 50),
    precision=st.sampled_from(["bf16", "fp16", "fp8"]), fused_attention=st.booleans(),
    stage_layers=st.one_of(st.just(()), st.lists(st.integers(0, 20), min_size=1, max_size=6).map(tuple)),
    stage_tp=st.one_of(st.just(()), st.lists(st.integers(1, 16), min_size=1, max_size=6).map(tuple))))
def test_a_plan_s_suffix_reads_back_to_the_same_plan(plan):
    text = plan.suffix()
    assert Plan.from_suffix(text) == plan
    assert all(token and " " not in token for token in text.split("-"))


@pytest.mark.parametrize("text, message", [
    ("tp4-pp2-dp1-gb8-turbo", "plan token 'turbo'"),
    ("tp4-tp2-dp1-gb8", "repeats tp"),
    ("tp0-pp1-dp1-gb1", "tp must be an integer from 1 to 65,536"),
    ("tp-pp1", "plan token 'tp'"),
])
def test_a_bad_plan_suffix_is_refused_by_name(text, message):
    with pytest.raises(ValueError) as caught:
        Plan.from_suffix(text)
    assert message in str(caught.value)
