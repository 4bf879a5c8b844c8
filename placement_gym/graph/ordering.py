"""Stable topological order of a graph given as dependency lists (Kahn's algorithm with file order
breaking ties), shared by the importer and the parameter analysis of an ONNX file."""

from __future__ import annotations

import heapq
from collections.abc import Iterable, Sequence


def stable_topological_order(deps: Sequence[Iterable[int]]) -> list[int]:
    """Nodes ``0..n-1`` in a topological order of ``deps`` (node i depends on each node in
    ``deps[i]``): among ready nodes, the lowest index goes first. Nodes on or behind a cycle are left
    out, so a result shorter than ``n`` means the graph has a cycle."""
    deps = [set(d) for d in deps]
    if all(j < i for i, d in enumerate(deps) for j in d):
        # Already in order (as exporters write files): Kahn's walk, lowest ready index first, finds
        # node i ready when nodes 0..i-1 are placed, so the result is file order.
        return list(range(len(deps)))
    users: list[list[int]] = [[] for _ in deps]
    for i, d in enumerate(deps):
        for j in d:
            users[j].append(i)
    indegree = [len(d) for d in deps]
    ready = [i for i, k in enumerate(indegree) if k == 0]
    heapq.heapify(ready)
    order: list[int] = []
    while ready:
        i = heapq.heappop(ready)
        order.append(i)
        for u in users[i]:
            indegree[u] -= 1
            if indegree[u] == 0:
                heapq.heappush(ready, u)
    return order
