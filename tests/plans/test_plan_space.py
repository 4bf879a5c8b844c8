"""The plan space of a `PlanTask` (choices, masks), the plans-v1 dataset and the layer-price cache,
checked by enumeration."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from placement_gym.plans import Plan, evaluate_plan, plan_problems
from placement_gym.plans.dataset import HELD_OUT_SIZES, SPLITS, plan_dataset_ids, plan_dataset_task, split_of
from placement_gym.plans.space import DIMENSION_NAMES, DIMENSIONS, OPTION_COUNTS, PlanTask, plan_task
from tests.plans.plan_helpers import divisible_choice, random_dataset_task

DEGREES = ("tp", "pp", "cp", "vp", "ep", "microbatch_size", "schedule")


def degree_choices(task: PlanTask):
    """Every choice of the degree dimensions (the options at their first value)."""
    ranges = [range(OPTION_COUNTS[DIMENSION_NAMES.index(name)]) if name in DEGREES else [0]
              for name in DIMENSION_NAMES]
    for combo in itertools.product(*ranges):
        yield np.array(combo, dtype=np.int64)


@pytest.mark.parametrize("spec", [("gpt-22b", "dgx-a100", 4), ("mixtral-8x7b", "dgx-h100x2", 64),
                                  ("llama2-7b", "dgx-h100x4", 32)])
def test_value_masks_are_exactly_the_values_of_plans_that_divide(spec):
    """By enumeration of every degree choice: a value is allowed iff some choice using it has no
    divisibility problem (memory aside)."""
    task = plan_task(*spec)
    used = [np.zeros(n, dtype=bool) for n in OPTION_COUNTS]
    for choice in degree_choices(task):
        if not task.problems(choice):
            for k, index in enumerate(choice):
                if DIMENSION_NAMES[k] in DEGREES:
                    used[k][index] = True
    for name, mask, seen in zip(DIMENSION_NAMES, task.value_masks, used):
        if name in DEGREES:
            np.testing.assert_array_equal(mask, seen, err_msg=name)


def test_choice_masks_follow_the_choices_made():
    task = plan_task("llama2-70b", "dgx-h100x8", 128)
    rng = np.random.default_rng(0)
    for _ in range(30):
        choice = divisible_choice(task, rng)
        assert task.problems(choice) == [], task.plan_of(choice).describe()


def test_a_choice_encodes_its_plan_both_ways():
    task = plan_task("llama2-70b", "dgx-h100x8", 128)
    plan = Plan(tp=4, pp=4, vp=5, dp=4, global_batch=128, schedule="interleaved", sequence_parallel=True,
                zero=1, recompute="selective")
    assert task.plan_of(task.choice_of(plan)) == plan
    uneven = plan_task("llama3-405b", "dgx-h100x16", 128).plan_of(
        plan_task("llama3-405b", "dgx-h100x16", 128).choice_of(Plan(tp=8, pp=16, global_batch=128)))
    assert uneven.stage_layers == (8,) * 14 + (7,) * 2 and sum(uneven.stage_layers) == 126
    with pytest.raises(ValueError, match="one value index per dimension"):
        task.check_placement([0, 1])
    with pytest.raises(ValueError, match="tp index 9 is not one of 0..3"):
        task.check_placement([9] + [0] * (len(DIMENSIONS) - 1))


def test_evaluations_are_counted():
    task = plan_task("llama2-7b", "dgx-h100", 64)
    task.evaluate(task.choice_of(Plan(dp=8, global_batch=64)))
    task.evaluate(np.zeros(len(DIMENSIONS), dtype=np.int64))
    assert task.evaluations == 2


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 2**32 - 1))
def test_the_layer_cache_changes_no_price(seed):
    """Plans priced with `evaluate_plan`'s cache of layer prices equal those priced without, whatever
    was priced before them."""
    rng = np.random.default_rng(seed)
    task = random_dataset_task(rng)
    cache: dict = {}
    for _ in range(6):
        choice = np.array([rng.choice(np.flatnonzero(mask)) for mask in task.value_masks])
        plan = task.plan_of(choice)
        assert evaluate_plan(task.model, plan, task.mesh, cache) == evaluate_plan(task.model, plan, task.mesh)


def test_dataset_splits():
    ids = plan_dataset_ids()
    assert len(ids) == len(set(ids)) > 500
    by_split = {split: set(plan_dataset_ids(split)) for split in SPLITS}
    assert sum(len(s) for s in by_split.values()) == len(ids)
    assert all(plan_dataset_task(i).model.family == "moe" for i in by_split["test-families"])
    assert all(plan_dataset_task(i).model.name in HELD_OUT_SIZES for i in by_split["test-sizes"])
    for split in ("train", "validation", "test"):
        assert all(plan_dataset_task(i).model.family != "moe" and plan_dataset_task(i).model.name not in
                   HELD_OUT_SIZES for i in by_split[split])
    assert split_of("llama2-70b/dgx-h100x8/gb256") in ("train", "validation", "test")
    with pytest.raises(ValueError, match="not a problem of plans-v1"):
        plan_dataset_task("llama2-70b/dgx-h100x3/gb1")
    # every problem has a plan that divides: the first allowed value of each dimension in turn gives one
    for task_id in ids[::23]:
        task = plan_dataset_task(task_id)
        plan = task.plan_of(divisible_choice(task))
        assert plan_problems(plan, task.model, task.mesh) == [], task_id


def test_lower_bound_by_hand():
    """Llama-2 7B, 128 sequences of 4,096 on 8 H100 in bf16: per layer 4 x 4096^2 attention weights and
    3 x 4096 x 11008 MLP weights, 32 layers, a 32,000 x 4096 head; 6 FLOPs a weight a token, over 8 GPUs
    at 989 TFLOP/s x 0.64."""
    weights = 32 * (4 * 4096**2 + 3 * 4096 * 11008) + 32000 * 4096
    expected = 6 * weights * 128 * 4096 / (8 * 989e12 * 0.64)
    assert plan_task("llama2-7b", "dgx-h100", 128).lower_bound_s == pytest.approx(expected, rel=1e-12)


@settings(max_examples=30, deadline=None)
@given(seed=st.integers(0, 2**32 - 1))
def test_no_plan_beats_the_lower_bound(seed):
    rng = np.random.default_rng(seed)
    task = random_dataset_task(rng)
    for _ in range(8):
        result = task.evaluate(divisible_choice(task, rng))
        assert result.step_s >= task.lower_bound_s


@pytest.mark.parametrize("spec", [("gpt-22b", "dgx-a100", 4), ("llama2-7b", "dgx-h100x2", 64)])
def test_the_lower_bound_is_below_every_plan_by_enumeration(spec):
    """On small meshes: every choice of every dimension (the degrees and the options) priced, none
    beats the bound; the bound is at most a third below the best (it is not vacuous)."""
    task = plan_task(*spec)
    best = math.inf
    for choice in itertools.product(*(np.flatnonzero(mask) for mask in task.value_masks)):
        result = task.evaluate(np.array(choice))
        if result.feasible:
            best = min(best, result.step_s)
    assert task.lower_bound_s <= best < 1.5 * task.lower_bound_s
