"""The real executor's plan of a step: every job once, on its device, after what it waits for, in the
cost model's order, and runnable to the end (no device waits for a unit that waits for it)."""

from __future__ import annotations

import numpy as np
import pytest

from placement_gym import get_task
from placement_gym.cost_model.fast import simulate
from placement_gym.real.step_plan import plan_step
from placement_gym.task.passes.step_graph import OP_KINDS

UPDATE = OP_KINDS.index("update")
FORMS = {
    "inference": {"objective": "inference"},
    "train": {"objective": "train_step"},
    "microbatches": {"objective": "train_step", "microbatches": 3},
    "recompute": {"objective": "train_step", "recompute": True},
    "both": {"objective": "train_step", "microbatches": 2, "recompute": True},
}


def _waits_for(task) -> list[set[int]]:
    """Per task op, the ops it waits for, read from the task's tensors."""
    deps: list[set[int]] = [set() for _ in range(task.n_ops)]
    for t, producer in enumerate(task.tensor_producer.tolist()):
        if producer < 0:
            continue
        start, stop = task.tensor_consumer_pointer[t], task.tensor_consumer_pointer[t + 1]
        for consumer in task.tensor_consumers[start:stop].tolist():
            if consumer != producer:
                deps[consumer].add(producer)
    return deps


@pytest.mark.parametrize("form", list(FORMS))
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_plan_keeps_the_task_s_order_and_runs_to_the_end(form, seed):
    task = get_task("cifar10_cnn", "k80x4", **FORMS[form])
    rng = np.random.default_rng(seed)
    placement = rng.integers(0, 3, task.graph.n_ops) if seed else np.zeros(task.graph.n_ops, dtype=int)
    plan = plan_step(task, placement)
    device_of = placement[task.op_forward]
    position = {}
    for d, units in plan.units.items():
        for u, unit in enumerate(units):
            for i, j in enumerate(unit.jobs):
                assert j not in position
                assert device_of[j] == d
                position[j] = (d, u, i)
                assert plan.job_unit[j] == (d, u)
    assert sorted(position) == list(range(task.n_ops))
    deps = _waits_for(task)
    for j, needs in enumerate(deps):
        d, u, i = position[j]
        for p in needs:
            pd, pu, pi = position[p]
            if pd == d:
                assert (pu, pi) < (u, i)
            else:
                assert any(p in plan.units[d][k].waits for k in range(u + 1))
                assert plan.units[pd][pu].signals
    # every job but the updates in the cost model's order; an update never earlier than there
    schedule = simulate(task.independent_copy(), placement, schedule=True).schedule
    for units in plan.units.values():
        jobs = [j for unit in units for j in unit.jobs]
        model_order = sorted(jobs, key=lambda j: (schedule.op_start[j], j))
        assert [j for j in jobs if task.op_kind[j] != UPDATE] == [
            j for j in model_order if task.op_kind[j] != UPDATE]
        for j in jobs:
            if task.op_kind[j] == UPDATE:
                assert jobs.index(j) >= model_order.index(j)
    # run the plan as the devices would: a unit starts once every unit it waits for has ended
    done_units: set[tuple[int, int]] = set()
    next_unit = {d: 0 for d in plan.units}
    progress = True
    while progress:
        progress = False
        for d, units in plan.units.items():
            while next_unit[d] < len(units) and all(
                    plan.job_unit[p] in done_units for p in units[next_unit[d]].waits):
                done_units.add((d, next_unit[d]))
                next_unit[d] += 1
                progress = True
    assert all(next_unit[d] == len(units) for d, units in plan.units.items())


@pytest.mark.parametrize("form", ["train", "recompute", "both"])
def test_blocks_of_a_backward_unit_cover_its_ops_and_link_one_device(form):
    task = get_task("cifar10_cnn", "k80x4", **FORMS[form])
    placement = np.random.default_rng(5).integers(0, 2, task.graph.n_ops)
    plan = plan_step(task, placement)
    for d, units in plan.units.items():
        for unit in units:
            if unit.kind != "backward":
                assert unit.blocks == ()
                continue
            ops = sorted(int(task.op_forward[j]) for j in unit.jobs)
            assert sorted(f for block in unit.blocks for f in block) == ops
            for block in unit.blocks:
                ids = {plan.block[(f, unit.microbatch)] for f in block}
                assert len(ids) == 1 and all(placement[f] == d for f in block)
    # a one-device train step is one forward unit and one backward unit of one block
    whole = plan_step(task, np.zeros(task.graph.n_ops, dtype=int)) if form == "train" else None
    if whole is not None:
        kinds = [unit.kind for unit in whole.units[0]]
        assert kinds == ["forward", "backward", "update"]
        assert len(whole.units[0][1].blocks) == 1
