"""What is derived from a task once and kept beside it: `TaskCache`, one per module that computes it.

A `Task` is immutable and holds no cache of its own: the module that computes a value from a task (the
simulator's arrays in `cost_model/fast.py`, the reference figures in `cost_model/bounds.py`,
observations, fingerprints, the baselines' graphs) creates a ``TaskCache`` at import and keeps the
value there, keyed by the task object. An entry lives as long as its task: it is dropped when the
task is garbage-collected. A copy of a task made by `Task.independent_copy` or `copy.deepcopy` gets a
deep copy of every registered cache's entry (`copy_entries`); any other copy (`dataclasses.replace`,
`copy.copy`, a pickled task) starts without entries and computes them again when asked.

Entries are looked up by ``id(task)`` in a plain dict rather than through a
`weakref.WeakKeyDictionary`, which builds a weak reference on every lookup: the simulator fetches its
arrays on every call, and this keeps that fetch to one dict lookup. A weak reference per entry, with a
callback that removes it, keeps the id from outliving its task (the callback runs before the task's
memory, and so its id, can be reused).
"""

from __future__ import annotations

import copy
import weakref
from collections.abc import Callable
from typing import Any, Generic, TypeVar

Value = TypeVar("Value")

_REGISTRY: dict[str, TaskCache] = {}


class TaskCache(Generic[Value]):
    """Values computed from tasks, one per task, kept while the task lives. ``name`` (unique among
    the registered caches) says what is cached; ``cache.get(task, compute)`` returns the task's value,
    calling ``compute(task)`` the first time only. A cached value must not refer to its task, or the
    task is never collected."""

    def __init__(self, name: str) -> None:
        if name in _REGISTRY:
            raise ValueError(f"a task cache named {name!r} exists already")
        self.name = name
        self._entries: dict[int, tuple[weakref.ref, Value]] = {}
        _REGISTRY[name] = self

    def get(self, task: Any, compute: Callable[[Any], Value]) -> Value:
        """The cached value of ``task``, computed by ``compute(task)`` and kept if there is none yet."""
        entry = self._entries.get(id(task))
        if entry is not None:
            return entry[1]
        value = compute(task)
        self.put(task, value)
        return value

    def getter(self, compute: Callable[[Any], Value]) -> Callable[[Any], Value]:
        """A function ``task -> value`` doing what ``self.get(task, compute)`` does, in one call
        frame: for a hot path (the simulator fetches its arrays on every call)."""
        entries = self._entries
        put = self.put

        def get(task: Any) -> Value:
            entry = entries.get(id(task))
            if entry is not None:
                return entry[1]
            value = compute(task)
            put(task, value)
            return value

        return get

    def peek(self, task: Any) -> Value | None:
        """The cached value of ``task``, or None when there is none (nothing is computed)."""
        entry = self._entries.get(id(task))
        return None if entry is None else entry[1]

    def put(self, task: Any, value: Value) -> None:
        """Keep ``value`` as the cached value of ``task`` (replacing any)."""
        key = id(task)
        entry = self._entries.get(key)
        if entry is None:
            entries = self._entries
            reference = weakref.ref(task, lambda _dead, key=key: entries.pop(key, None))
        else:
            reference = entry[0]
        self._entries[key] = (reference, value)

    def __len__(self) -> int:
        return len(self._entries)

    def __repr__(self) -> str:
        return f"TaskCache({self.name!r}, {len(self)} tasks)"


def registered_caches() -> dict[str, TaskCache]:
    """Every `TaskCache` created so far by name (modules create theirs at import)."""
    return dict(_REGISTRY)


def copy_entries(source: Any, target: Any, memo: dict) -> None:
    """Give ``target`` a deep copy of every cached value of ``source``, in every registered cache.
    ``memo`` is the `copy.deepcopy` memo with which ``target`` was copied from ``source``, so that a
    cached value holding the task's own arrays holds the copy's arrays, not the original's."""
    for cache in _REGISTRY.values():
        entry = cache._entries.get(id(source))
        if entry is not None:
            cache.put(target, copy.deepcopy(entry[1], memo))
