"""The planners after the field's (`baselines.plan_planners`: alpa, galvatron, plan-move-bandit) against
DP cases derived by hand, every plan of the space each one searches enumerated and priced, and the
Megatron-LM rules' plan."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from baselines.plan_planners import (
    ALPA_RECOMPUTE,
    GALVATRON_RECOMPUTE,
    StageConfig,
    StageProfiler,
    alpa,
    alpa_dp,
    alpa_stages,
    configurations,
    galvatron,
    galvatron_stages,
    plan_move_bandit,
)
from baselines.plans import megatron
from placement_gym.evaluation.agents import AgentResult, lookup_plan_agent, plan_agents
from placement_gym.plans.collectives import collective_time
from placement_gym.plans.dataset import plan_dataset_task
from placement_gym.plans.evaluate import evaluate_plan, stage_costs, stage_ends
from placement_gym.plans.plan import Plan
from placement_gym.plans.space import plan_task

INF = math.inf
# Four layers as wide as Llama 3 405B's (3.2B weights each, 51 GB of weights and Adam state unsharded):
# on 8 or 16 GPUs, memory rules out about a sixth of the plans, so the DPs' memory bound is exercised.
FOUR_LAYERS = "llama:layers=4,hidden=16384,heads=128,kv_heads=8,ffn=53248,seq=4096,vocab=32000"
# Sixteen of them: 16 bytes a weight over 8 GPUs is 102 GB a GPU, more than an H100 holds.
SIXTEEN_LAYERS = FOUR_LAYERS.replace("layers=4", "layers=16")
PLANNERS = [alpa, galvatron, plan_move_bandit]


def compositions(total: int, parts: int):
    """Every tuple of ``parts`` positive integers summing to ``total``."""
    for cuts in itertools.combinations(range(1, total), parts - 1):
        bounds = (0, *cuts, total)
        yield tuple(b - a for a, b in zip(bounds, bounds[1:]))


def stage_mesh(task, pp: int, s: int):
    """The figures stage ``s`` of ``pp`` runs at: on a mixed mesh, those of the GPUs of its ranks."""
    if not task.mesh.parts:
        return task.mesh
    gpus = task.mesh.gpus
    return task.mesh.figures((s * gpus // pp, (s + 1) * gpus // pp))


def hand_estimate(task, plan: Plan) -> float:
    """Alpa's pipeline latency of ``plan`` (a dense model, 1F1B): the stages' micro-batch latencies summed
    plus (micro-batches - 1) x the largest, each stage's latency by hand from the plan model's price of
    one of its layers and of the ends: layers x (forward + backward + their tensor collectives), the
    replayed layers' recomputation, the embedding on the first stage and the head and loss on the last;
    under ZeRO-3, the forward no shorter than gathering the stage's bf16 weights and the backward no
    shorter than gathering them and reduce-scattering their gradients."""
    model, pp = task.model, plan.pp
    latencies = []
    for s, (view, n) in enumerate(zip(plan.stage_views(), plan.layers_of_stages(model.layers))):
        mesh = stage_mesh(task, pp, s)
        costs = stage_costs(model, view, mesh)
        layer, ends = costs.layer, stage_ends(model, view, mesh)
        replayed = min(n, plan.recompute_layers) if plan.recompute_layers else n
        forward = n * (layer.forward + layer.forward_comm)
        backward = (n * (layer.backward + layer.backward_comm)
                    + replayed * (layer.recompute + layer.recompute_comm))
        weights = n * layer.dense
        if s == 0:
            forward, backward = forward + ends.first_forward, backward + ends.first_backward
            weights += model.vocab * model.hidden / view.tp
        if s == pp - 1:
            forward, backward = forward + ends.last_forward, backward + ends.last_backward
            weights += model.vocab * model.hidden / view.tp  # Llama's head is not the embedding
        if plan.zero == 3:
            gather = collective_time("all_gather", 2 * weights, costs.data)
            scatter = collective_time("reduce_scatter", 2 * weights, costs.data)
            forward, backward = max(forward, gather), max(backward, gather + scatter)
        latencies.append(forward + backward)
    return sum(latencies) + (plan.microbatches - 1) * max(latencies)


def stage_plan_by_hand(task, config: StageConfig, split, degrees, recompute: str, recompute_layers: int = 0):
    """The plan whose stages hold ``split`` layers at tensor degrees ``degrees``: the largest degree the
    plan's, its data degree what that leaves of a stage's GPUs, the micro-batch size what gives
    ``config.sequences`` over it."""
    top = max(degrees)
    dp = task.mesh.gpus // config.pp // top
    return Plan(tp=top, pp=config.pp, dp=dp, global_batch=task.global_batch,
                microbatch_size=config.sequences // dp,
                sequence_parallel=config.sequence_parallel and top > 1,
                zero=config.zero, recompute=recompute, recompute_layers=recompute_layers,
                precision=task.precision, stage_layers=tuple(split), stage_tp=tuple(degrees))


def alpa_space(task, profiler, config):
    """Every plan Alpa's DP chooses among for ``config``: each split of the layers, each tensor degree a
    stage."""
    for split in compositions(task.model.layers, config.pp):
        for degrees in itertools.product(profiler.degrees(config), repeat=config.pp):
            yield stage_plan_by_hand(task, config, split, degrees, config.recompute)


def galvatron_space(task, profiler, config):
    """Every plan Galvatron's search chooses among for ``config``: the even split (the remainder on the
    first stages), each tensor degree a stage, and every count of checkpointed layers (0: none; all of a
    stage's: every layer) or selective recomputation."""
    share, left = divmod(task.model.layers, config.pp)
    split = [share + (s < left) for s in range(config.pp)]
    modes = [("selective", 0)] if config.recompute == "selective" else (
        [("none", 0)] + [("full", k) for k in range(1, max(split))] + [("full", 0)])
    for (recompute, k), degrees in itertools.product(modes, itertools.product(profiler.degrees(config),
                                                                             repeat=config.pp)):
        yield stage_plan_by_hand(task, config, split, degrees, recompute, k)


# --- Alpa's DP by hand ------------------------------------------------------------------------------


def test_alpa_dp_by_hand():
    """Two stages, three layers, one option: stage 0 takes 0.5 s for one layer and 2 s for two; stage 1
    3 s and 3.5 s. Splits (1, 2): latencies 0.5 + 3.5 = 4, largest 3.5; (2, 1): 2 + 3 = 5, largest 3.
    With one micro-batch the estimate is the sum: (1, 2) at 4. With five: (1, 2) 4 + 4 x 3.5 = 18,
    (2, 1) 5 + 4 x 3 = 17: (2, 1). Three layers on stage 0 or none on one are not splits."""
    cost = np.array([[[INF, 0.5, 2.0, 9.0]], [[INF, 3.0, 3.5, 9.0]]])
    assert alpa_dp(cost, 1) == (4.0, [1, 2], [0, 0])
    assert alpa_dp(cost, 5) == (17.0, [2, 1], [0, 0])
    # memory: stage 0 cannot hold two layers: only (1, 2) is left, at 4 + 4 x 3.5 = 18
    tight = cost.copy()
    tight[0, 0, 2:] = INF
    assert alpa_dp(tight, 5) == (18.0, [1, 2], [0, 0])
    # a second option for stage 1 (a tensor degree) at 2.5 s for two layers: (1, 2) with it is
    # 0.5 + 2.5 = 3, largest 2.5: 3 + 4 x 2.5 = 13, the best; stage 0 keeps option 0 (its option 1: 99)
    two = np.concatenate([cost, [[[INF, 99.0, 99.0, 99.0]], [[INF, 9.0, 2.5, 9.0]]]], axis=1)
    assert alpa_dp(two, 5) == (13.0, [1, 2], [0, 1])
    assert alpa_dp(np.full((2, 1, 4), INF), 5) is None


def test_stage_degrees_by_hand():
    """Four layers of 128 heads (8 key/value heads) on 8 H100 at a global batch of 16: a stage of two
    pipeline stages has 4 GPUs; with 4 sequences a micro-batch, tensor degrees 1, 2, 4 leave data degrees
    4, 2, 1, each dividing 4; with 2 sequences, 4 does not divide by data degree 4: only 2 and 4. One
    stage of 8 GPUs with 1 sequence: only tensor degree 8 (data degree 1)."""
    profiler = StageProfiler(plan_task(FOUR_LAYERS, "dgx-h100", 16))
    assert profiler.degrees(StageConfig(2, 4, False, "none", 0)) == (1, 2, 4)
    assert profiler.degrees(StageConfig(2, 2, False, "none", 0)) == (2, 4)
    assert profiler.degrees(StageConfig(1, 1, False, "none", 0)) == (8,)


# --- every plan of the space, enumerated ------------------------------------------------------------


def check_against_enumeration(task, method, recomputes, space, keep=lambda config: True) -> dict:
    """For each configuration of ``task`` that ``keep`` keeps, price every plan of ``space`` and check that
    ``method``'s candidate has the least hand estimate of those that fit (`evaluate_plan`), that it fits and
    that it is None exactly where none fits. Returns the counts and the fastest plan that fits."""
    profiler = StageProfiler(task)
    layers: dict = {}
    counts = {"configurations": 0, "plans": 0, "fitting": 0, "best": (INF, None)}
    for config in configurations(task, profiler, recomputes):
        if not keep(config):
            continue
        counts["configurations"] += 1
        least = INF
        for plan in space(task, profiler, config):
            result = evaluate_plan(task.model, plan, task.mesh, layers)
            assert math.isfinite(result.step_s), (plan.suffix(), result.problems)  # it divides
            counts["plans"] += 1
            if result.feasible:
                counts["fitting"] += 1
                least = min(least, hand_estimate(task, plan))
                counts["best"] = min(counts["best"], (result.step_s, plan.suffix()))
        found = method(profiler, config)
        if least == INF:
            assert found is None, config
            continue
        assert found is not None, config
        assert found.estimate == pytest.approx(least, rel=1e-12), config
        assert hand_estimate(task, found.plan) == pytest.approx(least, rel=1e-12), config
        assert evaluate_plan(task.model, found.plan, task.mesh).feasible, found.plan.suffix()
    assert counts["fitting"] < counts["plans"], "memory should rule some plans out"
    return counts


def test_alpa_dp_is_the_least_estimate_of_every_split_and_degree_per_stage():
    """A fast subset: the two- and four-stage pipelines at 4 sequences a micro-batch."""
    task = plan_task(FOUR_LAYERS, "dgx-h100", 16)
    counts = check_against_enumeration(task, alpa_stages, ALPA_RECOMPUTE, alpa_space,
                                       lambda c: c.pp > 1 and c.sequences == 4)
    assert counts["configurations"] >= 20 and counts["plans"] > 300


def test_galvatron_is_the_least_estimate_of_every_degree_per_stage_and_checkpointed_count():
    task = plan_task(FOUR_LAYERS, "dgx-h100", 16)
    counts = check_against_enumeration(task, galvatron_stages, GALVATRON_RECOMPUTE, galvatron_space,
                                       lambda c: c.pp > 1 and c.sequences == 4)
    assert counts["configurations"] >= 10 and counts["plans"] > 200


@pytest.mark.slow
@pytest.mark.parametrize("mesh, batch", [("dgx-h100", 16), ("dgx-a100+dgx-h100", 8)])
@pytest.mark.parametrize("agent, method, recomputes, space", [
    (alpa, alpa_stages, ALPA_RECOMPUTE, alpa_space),
    (galvatron, galvatron_stages, GALVATRON_RECOMPUTE, galvatron_space)], ids=["alpa", "galvatron"])
def test_the_planners_against_every_plan_of_their_space(mesh, batch, agent, method, recomputes, space):
    """Every configuration, every plan of it priced (2,000-5,000 plans). Each configuration's candidate
    has the least estimate of the plans that fit; the agent prices every candidate (the budget allows) and
    answers the fastest. The DPs minimise Alpa's estimate, which leaves out the sends between stages, the
    data-parallel gradient reduction and the optimizer step, so the answer may trail the fastest plan of
    the space by what those add; the test allows 2% (measured 2026-12-07: 0.0% on both meshes, the same
    step), and on the mixed mesh the fastest plan splits the layers unevenly."""
    counts = check_against_enumeration(plan_task(FOUR_LAYERS, mesh, batch), method, recomputes, space)
    task = plan_task(FOUR_LAYERS, mesh, batch)
    result = agent(task)
    assert result.evaluations == result.info["candidates"] == task.evaluations
    best_step, best_plan = counts["best"]
    assert result.info["step_s"] <= best_step * 1.02, (result.info["plan"], best_plan)


# --- budgets, seeds, answers ------------------------------------------------------------------------


@pytest.mark.parametrize("agent", PLANNERS)
def test_the_planners_keep_their_budget_are_seeded_and_answer_what_the_task_takes(agent):
    first = agent(task := plan_task(FOUR_LAYERS, "dgx-h100", 16), seed=3, budget=12)
    assert first.evaluations == task.evaluations <= 12
    checked = AgentResult.checked(task, first)
    assert math.isfinite(first.info["step_s"])
    assert task.evaluate(checked.placement).step_s == first.info["step_s"]
    again = agent(plan_task(FOUR_LAYERS, "dgx-h100", 16), seed=3, budget=12)
    assert again.info["step_s"] == first.info["step_s"] and again.evaluations == first.evaluations
    if isinstance(first.placement, Plan):
        assert again.placement == first.placement
    else:
        np.testing.assert_array_equal(again.placement, first.placement)
    one = agent(task := plan_task(FOUR_LAYERS, "dgx-h100", 16), budget=1)
    assert one.evaluations == task.evaluations == 1


@pytest.mark.parametrize("agent", [alpa, galvatron])
def test_without_a_budget_the_planners_price_every_candidate(agent):
    task = plan_task(FOUR_LAYERS, "dgx-h100", 16)
    result = agent(task)
    assert result.evaluations == task.evaluations == result.info["candidates"]
    assert result.info["candidates"] <= result.info["configurations"]
    assert result.info["stage_profiles"] > 0


def test_the_move_bandit_starts_from_the_rules_and_never_ends_worse():
    """Its first evaluation is the rules' plan (one here), so its best is no slower; where every plan within
    reach is priced it stops before its budget."""
    task = plan_task("llama2-70b", "dgx-h100x8", 128)
    rules = megatron(plan_task("llama2-70b", "dgx-h100x8", 128))
    result = plan_move_bandit(task, seed=1, budget=100)
    assert result.evaluations == task.evaluations == 100
    assert result.info["step_s"] <= rules.info["step_s"]
    assert sum(result.info["pulls"].values()) <= 100 - rules.evaluations
    other = plan_move_bandit(plan_task("llama2-70b", "dgx-h100x8", 128), seed=2, budget=100)
    assert other.info["pulls"] != result.info["pulls"]  # the seed draws the moves
    small = plan_task(FOUR_LAYERS, "dgx-h100", 16)
    exhausted = plan_move_bandit(small, budget=100_000)
    assert exhausted.evaluations == small.evaluations < 100_000


def test_where_nothing_fits_the_planners_answer_the_plan_that_comes_closest():
    """`SIXTEEN_LAYERS` on one node: no plan fits. No agent raises; each answers
    a plan the task takes, priced infeasible; alpa and galvatron find no configuration that fits by their
    stage figures and answer the rules' plan."""
    for agent in PLANNERS:
        task = plan_task(SIXTEEN_LAYERS, "dgx-h100", 16)
        result = AgentResult.checked(task, agent(task, budget=20))
        assert result.info["step_s"] == INF and 0 < task.evaluations <= 20
        assert not task.evaluate(result.placement).feasible
        if agent is not plan_move_bandit:
            assert result.info["fallback"] == "megatron" and result.info["candidates"] == 0


def test_the_planners_are_found_through_the_entry_point():
    assert {"alpa", "galvatron", "plan-move-bandit"} <= set(plan_agents())
    task = plan_task(FOUR_LAYERS, "dgx-h100", 16)
    result = AgentResult.checked(task, lookup_plan_agent("alpa")(task, 0, 4))
    assert isinstance(result.placement, Plan) and result.evaluations == 4


# --- against the rules on problems of the dataset ---------------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize("problem", [
    pytest.param(("llama2-70b", "dgx-h100x8", 128), id="llama2-70b/dgx-h100x8/gb128"),
    "gpt-310b/dgx-h100x32/gb256",
    "mixtral-8x22b/dgx-h100x8/gb16",
    "mixtral-8x1b/dgx-a100x2+dgx-h100x2/gb128",
])
def test_alpa_and_galvatron_against_the_rules(problem):
    """Alpa and Galvatron run 1F1B without interleaving; the rules interleave where the layers and
    micro-batches allow, which shrinks the bubble by the virtual stages. Each planner's step is within 10%
    of the rules' (measured 2026-12-07: alpa 0.767x, 1.056x, 0.867x, 0.595x of the rules' step; galvatron
    0.767x, 0.957x, 0.867x, 0.917x). Over 79 problems of the dataset (every 15th) the worst was 1.32x
    (gpt-310b/dgx-h100x16/gb32: 16 stages and 32 micro-batches, where the rules' six virtual stages
    shrink a large bubble; their plan without interleaving takes what alpa's takes)."""

    def fresh():
        return plan_task(*problem) if isinstance(problem, tuple) else plan_dataset_task(problem)

    rules = megatron(fresh()).info["step_s"]
    for agent in (alpa, galvatron):
        result = agent(fresh())
        assert result.info["step_s"] <= 1.10 * rules, (agent.__name__, result.info["plan"], rules)
