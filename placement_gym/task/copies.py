"""How a task is copied: a deep copy is derived from its task (it shares the evaluation counter and
takes deep copies of the cached values); an independent copy shares nothing (`independent_copy`).
Any other copy (`dataclasses.replace`, `copy.copy`) shares the counter and computes its cached values
again (`placement_gym.task.cache`)."""

from __future__ import annotations

import copy
from typing import TypeVar

import numpy as np

from placement_gym.task.cache import copy_entries
from placement_gym.task.counter import EvaluationCounter

Copied = TypeVar("Copied")


def deep_copy(task: Copied, memo: dict, caches: bool = True) -> Copied:
    """A deep copy of ``task`` (a `Task`) made with ``memo`` (`copy.deepcopy`'s): its attributes deep
    copied (the evaluation counter is not: `EvaluationCounter` copies to itself) and, with ``caches``,
    its entry in every registered `TaskCache` deep-copied for the copy with the same memo, so that a
    cached value holding the task's arrays gets the copy's arrays."""
    copied = object.__new__(type(task))
    memo[id(task)] = copied
    vars(copied).update(copy.deepcopy(vars(task), memo))
    if caches:
        copy_entries(task, copied, memo)
    return copied


def independent_copy(task: Copied, caches: bool = True) -> Copied:
    """A copy of ``task`` (a `Task`) that shares nothing with it: every array of the task, its graph and
    its cluster copied (read-only where the original is), its entry in every registered `TaskCache`
    deep-copied (``caches=False``: none, to be rebuilt from the copied arrays) and a new evaluation
    counter at 0."""
    copied = deep_copy(task, {id(task.evaluation_counter): EvaluationCounter()}, caches)
    pairs = [(task, copied), (task.graph, copied.graph), (task.cluster, copied.cluster)]
    if task.made_from is not None:
        pairs += zip(task.made_from, copied.made_from)
    for original, duplicate in pairs:
        for name, value in vars(original).items():
            if isinstance(value, np.ndarray) and not value.flags.writeable:
                getattr(duplicate, name).setflags(write=False)
    return copied
