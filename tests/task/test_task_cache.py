"""Values derived from a task are kept by the module that derives them (`placement_gym.task.cache`), not
written into the task: computed once per task, dropped with the task, copied by
`Task.independent_copy` and isolated from the original."""

from __future__ import annotations

import copy
import dataclasses
import gc
import pickle
import re

import numpy as np
import pytest
from paths import ROOT

from placement_gym.cost_model import simulate, single_device
from placement_gym.task.cache import TaskCache, registered_caches
from placement_gym.task.compiled import Task
from placement_gym.task.named import parse_task_id

SMALL = "cifar10_cnn/k80x2/train"


@pytest.fixture()
def task() -> Task:
    return parse_task_id(SMALL).independent_copy(caches=False)


# Registered once, like a module's own; the tests use tasks of their own, so entries never collide.
CACHE: TaskCache = TaskCache("tests.test_task_cache")


@pytest.fixture()
def cache() -> TaskCache:
    return CACHE


def counting(value):
    calls = []

    def compute(task):
        calls.append(task)
        return value

    return compute, calls


def test_a_cached_value_is_computed_once_per_task(task, cache):
    compute, calls = counting(np.arange(3))
    first = cache.get(task, compute)
    assert cache.get(task, compute) is first and calls == [task]
    other = parse_task_id(SMALL).independent_copy(caches=False)
    cache.get(other, compute)
    assert len(calls) == 2 and cache.peek(task) is first


def test_an_entry_is_dropped_when_its_task_is_collected(cache):
    task = parse_task_id(SMALL).independent_copy(caches=False)
    before = len(cache)
    cache.get(task, lambda t: np.zeros(4))
    assert len(cache) == before + 1
    del task
    gc.collect()
    assert len(cache) == before


def test_independent_copy_copies_every_registered_cache_and_isolates_it(task, cache):
    cache.put(task, {"values": np.arange(4.0), "duration": task.duration})
    single_device(task)
    copied = task.independent_copy()
    entry = cache.peek(copied)
    assert entry is not cache.peek(task)
    np.testing.assert_array_equal(entry["values"], np.arange(4.0))
    # A cached value holding the task's arrays holds the copy's arrays (one deepcopy memo).
    assert entry["duration"] is copied.duration
    entry["values"][:] = -1
    cache.put(copied, "replaced")
    np.testing.assert_array_equal(cache.peek(task)["values"], np.arange(4.0))
    # The reference figures came along: reading them on the copy evaluates nothing.
    assert single_device(copied).runtime == single_device(task).runtime and copied.evaluations == 0
    assert cache.peek(task.independent_copy(caches=False)) is None


def test_a_deep_copy_keeps_copies_of_the_cached_values_and_shares_the_counter(task, cache):
    single_device(task)
    cache.put(task, np.arange(3))
    counted = task.evaluations
    copied = copy.deepcopy(task)
    assert single_device(copied).runtime == single_device(task).runtime and task.evaluations == counted
    assert cache.peek(copied) is not cache.peek(task)
    np.testing.assert_array_equal(cache.peek(copied), np.arange(3))
    simulate(copied, np.zeros(task.n_forward, dtype=np.int64))
    assert task.evaluations == counted + 1
    # Other derived tasks compute their values again.
    assert cache.peek(copy.copy(task)) is None and cache.peek(dataclasses.replace(task)) is None


def test_what_is_written_to_a_copy_s_simulator_arrays_never_reaches_the_original(task):
    placement = np.zeros(task.n_forward, dtype=np.int64)
    before = simulate(task, placement).runtime
    copied = task.independent_copy()
    arrays = registered_caches()["fast_arrays"]
    tampered = list(arrays.peek(copied))
    tampered[1] = tampered[1] * 0.5
    arrays.put(copied, tuple(tampered))
    assert simulate(copied, placement).runtime < before == simulate(task, placement).runtime


def test_a_task_has_no_cache_field_and_pickles_without_its_cached_values(task):
    assert "_cache" not in {f for f in vars(task)}
    single_device(task)
    restored = pickle.loads(pickle.dumps(task))
    assert registered_caches()["single_device"].peek(restored) is None
    assert single_device(restored).runtime == single_device(task).runtime
    assert repr(restored) == repr(task)


def test_names_are_unique():
    with pytest.raises(ValueError, match="exists already"):
        TaskCache("fast_arrays")


def test_no_module_writes_into_a_task_s_cache_any_more():
    pattern = re.compile(r"\._cache\b")
    offenders = [
        f"{path.relative_to(ROOT)}:{number}"
        for package in ("placement_gym", "baselines", "tests")
        for path in sorted((ROOT / package).rglob("*.py"))
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if pattern.search(line) and path.name != "test_task_cache.py"
    ]
    assert offenders == []
