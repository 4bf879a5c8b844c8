"""Random plan problems and plans for the tests of `placement_gym.plans.space` and the plan agents."""

from __future__ import annotations

import numpy as np

from placement_gym.plans.dataset import plan_dataset_ids, plan_dataset_task
from placement_gym.plans.space import DIMENSION_NAMES, PlanTask


def random_dataset_task(rng: np.random.Generator) -> PlanTask:
    """A problem of plans-v1 drawn with ``rng``, on a new task."""
    ids = plan_dataset_ids()
    return plan_dataset_task(ids[int(rng.integers(len(ids)))])


def divisible_choice(task: PlanTask, rng: np.random.Generator | None = None) -> np.ndarray:
    """A choice made one dimension at a time within `PlanTask.choice_masks`: a value drawn with ``rng``,
    or the first allowed value without one. Its plan divides (that is what the masks promise)."""
    chosen: dict[str, int] = {}
    for k, name in enumerate(DIMENSION_NAMES):
        allowed = np.flatnonzero(task.choice_masks(chosen)[k])
        assert len(allowed), (name, chosen)
        chosen[name] = int(allowed[0] if rng is None else rng.choice(allowed))
    return np.array([chosen[name] for name in DIMENSION_NAMES], dtype=np.int64)
