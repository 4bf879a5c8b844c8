"""Balanced k-way partition of a graph's forward ops with few bytes crossing parts (HMETIS-style, in
numpy and Python; no METIS dependency): the algorithm behind the ``groups=k`` grouping.

`partition_labels` gives one part label per op, `contiguous_labels` the plain topological split it is
never worse than, `op_weight` the work each op adds to its part's balance. Labels here are raw;
`placement_gym.task.groups` checks ``k`` and the seed, renumbers the labels and wraps them in Groupings.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import numba
import numpy as np

from placement_gym.graph.opgraph import OpGraph

# Partition balance: every part's weight within this fraction of the mean part weight (where single
# ops allow it); each bisection level gets its share so that the levels compound to this.
PARTITION_IMBALANCE = 0.10
_FM_MAX_PASSES = 8  # Fiduccia-Mattheyses passes per bisection (each stops early once one gains nothing)
_FM_BLOCKED_SCAN = 8  # heap entries an FM step looks past when the best moves break the balance
_REFINE_MAX_PASSES = 8
_PARTITION_TRIALS = 3  # recursive bisections with different tie-break keys


def op_weight(graph: OpGraph) -> np.ndarray:
    """Work of each op for balancing a partition, unit-free: its share of the graph's FLOPs plus its
    share of the bytes accessed plus its share of the op count (1/n, standing in for the per-op launch
    overhead so that free ops still weigh something). FLOPs and bytes are the two terms of the cost
    model's op time (compute- or memory-bound); shares make them comparable without picking a device."""
    n = graph.n_ops
    weight = np.full(n, 1.0 / n)
    for values in (graph.flops, graph.bytes_accessed):
        total = float(values.sum())
        if total > 0:
            weight += values / total
    return weight


def _contiguous_cuts(cumulative: np.ndarray, targets: np.ndarray, k: int) -> np.ndarray:
    """Split points 0 < b_1 < ... < b_{k-1} < n of ops in order (ops ``b_{j-1}..b_j - 1`` form part
    j), each where the cumulative weight is nearest its target, clamped so every part gets an op."""
    n = len(cumulative)
    cuts = np.empty(k - 1, dtype=np.int64)
    previous = 0
    for j, target in enumerate(targets.tolist(), start=1):
        b = int(np.searchsorted(cumulative, target))  # cumulative[b-1] < target <= cumulative[b]
        if 0 < b < n and abs(cumulative[b - 1] - target) <= abs(cumulative[b] - target):
            b -= 1
        cuts[j - 1] = min(max(b + 1, previous + 1, j), n - k + j)
        previous = cuts[j - 1]
    return cuts


def contiguous_labels(graph: OpGraph, k: int) -> np.ndarray:
    """Labels (int64 ``(n_ops,)``, ``0..k-1`` in op order) of ``k`` contiguous ranges of the
    topological order with about equal `op_weight`; ``1 <= k <= n_ops``."""
    cumulative = np.cumsum(op_weight(graph))
    cuts = _contiguous_cuts(cumulative, cumulative[-1] * np.arange(1, k) / k, k)
    starts = np.zeros(graph.n_ops, dtype=np.int64)
    starts[cuts] = 1
    return np.cumsum(starts)


@dataclass(frozen=True)
class _Hypergraph:
    """The partition's view of a graph: op weights, and one net per op-produced tensor with bytes
    (pins: its producer and its distinct readers), as Python lists for the move loops."""

    weight: np.ndarray
    net_pins: list[list[int]]
    net_bytes: list[float]
    node_nets: list[list[int]]

    @cached_property
    def flat(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """The nets' pins and each node's nets as flat arrays with start offsets (``pins[pin_start[j]:
        pin_start[j + 1]]``), and the nets' bytes: what `_fm_bisect` restricts to its ops with numpy."""
        pin_start = np.zeros(len(self.net_pins) + 1, dtype=np.int64)
        pin_start[1:] = np.cumsum([len(pins) for pins in self.net_pins])
        net_start = np.zeros(len(self.node_nets) + 1, dtype=np.int64)
        net_start[1:] = np.cumsum([len(nets) for nets in self.node_nets])
        return (np.array([p for pins in self.net_pins for p in pins], dtype=np.int64), pin_start,
                np.array([j for nets in self.node_nets for j in nets], dtype=np.int64), net_start,
                np.array(self.net_bytes, dtype=np.float64))

    @staticmethod
    def of(graph: OpGraph) -> _Hypergraph:
        pins: dict[int, list[int]] = {}
        producer = graph.tensor_producer
        for t, d in zip(graph.edge_tensor.tolist(), graph.edge_dst.tolist()):
            if producer[t] >= 0 and graph.tensor_bytes[t] > 0:
                pins.setdefault(t, [int(producer[t])]).append(d)
        tensors = sorted(pins)
        net_pins = [pins[t] for t in tensors]
        node_nets: list[list[int]] = [[] for _ in range(graph.n_ops)]
        for j, net in enumerate(net_pins):
            for p in net:  # pins are distinct: one edge per (tensor, reader), no self-reads
                node_nets[p].append(j)
        return _Hypergraph(
            op_weight(graph), net_pins, [float(graph.tensor_bytes[t]) for t in tensors], node_nets
        )

    def volume(self, labels: np.ndarray) -> float:
        """Communication bytes of ``labels`` (same value as
        `placement_gym.task.groups.communication_bytes`)."""
        group = labels.tolist()
        return float(
            sum(b * (len({group[p] for p in pins}) - 1) for pins, b in zip(self.net_pins, self.net_bytes))
        )


@numba.njit(cache=True)
def _before(a: float, b: float, v: int, c: float, d: float, u: int) -> bool:
    """(a, b, v) < (c, d, u), as Python orders tuples."""
    return a < c or (a == c and (b < d or (b == d and v < u)))


@numba.njit(cache=True)
def _heap_push(keys, items, size, a, b, v):
    """Push (a, b, v) on the binary min-heap ``keys[:size]`` (columns a, b) / ``items[:size]`` (v),
    growing the arrays when full; the arrays and the new size."""
    if size == len(items):
        grown_keys = np.empty((2 * len(items), 2))
        grown_items = np.empty(2 * len(items), dtype=np.int64)
        grown_keys[:size] = keys[:size]
        grown_items[:size] = items[:size]
        keys, items = grown_keys, grown_items
    i = size
    while i > 0:
        parent = (i - 1) // 2
        if not _before(a, b, v, keys[parent, 0], keys[parent, 1], items[parent]):
            break
        keys[i, 0], keys[i, 1], items[i] = keys[parent, 0], keys[parent, 1], items[parent]
        i = parent
    keys[i, 0], keys[i, 1], items[i] = a, b, v
    return keys, items, size + 1


@numba.njit(cache=True)
def _heap_pop(keys, items, size):
    """Remove the least entry of the heap (its entry is ``keys[0]``, ``items[0]`` before the call); the
    new size."""
    size -= 1
    a, b, v = keys[size, 0], keys[size, 1], items[size]
    i = 0
    while True:
        child = 2 * i + 1
        if child >= size:
            break
        if child + 1 < size and _before(keys[child + 1, 0], keys[child + 1, 1], items[child + 1],
                                        keys[child, 0], keys[child, 1], items[child]):
            child += 1
        if not _before(keys[child, 0], keys[child, 1], items[child], a, b, v):
            break
        keys[i, 0], keys[i, 1], items[i] = keys[child, 0], keys[child, 1], items[child]
        i = child
    if size > 0:
        keys[i, 0], keys[i, 1], items[i] = a, b, v
    return size


@numba.njit(cache=True)
def _fm_passes(side, net_pins, net_start, my_nets, my_start, costs, weight, tie, left, target, allowed,
               slack, min_left, min_right, max_passes, blocked_scan):
    """The Fiduccia-Mattheyses passes of `_fm_bisect` on ``side`` (0 or 1 per op, changed in place),
    with nets and each op's nets as flat arrays (``net_pins[net_start[j]:net_start[j + 1]]``). Each
    side's heap orders ops by (-gain, tie-break, op), the order in which any heap of those tuples pops
    them, so the moves do not depend on how the heap is built."""
    m = len(side)
    n_nets = len(costs)
    count = np.zeros((n_nets, 2), dtype=np.int64)
    gain = np.zeros(m)
    locked = np.zeros(m, dtype=np.bool_)
    stamp = np.zeros(m, dtype=np.int64)
    changed = np.empty(m, dtype=np.int64)
    moves = np.empty(m, dtype=np.int64)
    capacity = max(16, m)
    keys0, items0 = np.empty((capacity, 2)), np.empty(capacity, dtype=np.int64)
    keys1, items1 = np.empty((capacity, 2)), np.empty(capacity, dtype=np.int64)
    held_keys = np.empty((blocked_scan, 2))
    held_items = np.empty(blocked_scan, dtype=np.int64)
    tick = 0
    for _ in range(max_passes):
        count[:] = 0
        for j in range(n_nets):
            for q in range(net_start[j], net_start[j + 1]):
                count[j, side[net_pins[q]]] += 1
        size0 = 0
        size1 = 0
        n_left = 0
        for v in range(m):
            s = side[v]
            g = 0.0
            for q in range(my_start[v], my_start[v + 1]):
                j = my_nets[q]
                g += costs[j] * ((1 if count[j, s] == 1 else 0) - (1 if count[j, 1 - s] == 0 else 0))
            gain[v] = g
            if s == 0:
                n_left += 1
                keys0, items0, size0 = _heap_push(keys0, items0, size0, -g, tie[v], v)
            else:
                keys1, items1, size1 = _heap_push(keys1, items1, size1, -g, tie[v], v)
        locked[:] = False
        sizes = np.array([n_left, m - n_left])
        minimum = np.array([min_left, min_right])
        n_moves = 0
        running, best, best_at, best_left = 0.0, 0.0, 0, left
        while True:
            have = False
            chosen_g, chosen_t, chosen = 0.0, 0.0, -1
            for s in range(2):
                if sizes[s] <= minimum[s]:
                    continue
                keys, items, size = (keys0, items0, size0) if s == 0 else (keys1, items1, size1)
                n_held = 0
                while size > 0:
                    g, t, v = keys[0, 0], keys[0, 1], items[0]
                    if locked[v] or -g != gain[v]:
                        size = _heap_pop(keys, items, size)  # stale entry
                        continue
                    moved = left - weight[v] if s == 0 else left + weight[v]
                    if abs(moved - target) <= slack:
                        if not have or g < chosen_g or (g == chosen_g and t < chosen_t):
                            have, chosen_g, chosen_t, chosen = True, g, t, v
                        break
                    held_keys[n_held, 0], held_keys[n_held, 1], held_items[n_held] = g, t, v
                    n_held += 1
                    size = _heap_pop(keys, items, size)
                    if n_held >= blocked_scan:
                        break
                for i in range(n_held):
                    keys, items, size = _heap_push(keys, items, size, held_keys[i, 0], held_keys[i, 1],
                                                   held_items[i])
                if s == 0:
                    keys0, items0, size0 = keys, items, size
                else:
                    keys1, items1, size1 = keys, items, size
            if not have:
                break
            v = chosen
            s = side[v]
            to = 1 - s
            running += gain[v]
            locked[v] = True
            tick += 1
            n_changed = 0
            for q in range(my_start[v], my_start[v + 1]):  # the classic FM gain updates
                j = my_nets[q]
                cost = costs[j]
                if count[j, to] <= 1:
                    for r in range(net_start[j], net_start[j + 1]):
                        p = net_pins[r]
                        if not locked[p] and (count[j, to] == 0 or side[p] == to):
                            gain[p] += cost if count[j, to] == 0 else -cost
                            if stamp[p] != tick:
                                stamp[p] = tick
                                changed[n_changed] = p
                                n_changed += 1
                count[j, s] -= 1
                count[j, to] += 1
                if count[j, s] <= 1:
                    for r in range(net_start[j], net_start[j + 1]):
                        p = net_pins[r]
                        if not locked[p] and (count[j, s] == 0 or side[p] == s):
                            gain[p] += -cost if count[j, s] == 0 else cost
                            if stamp[p] != tick:
                                stamp[p] = tick
                                changed[n_changed] = p
                                n_changed += 1
            side[v] = to
            sizes[s] -= 1
            sizes[to] += 1
            left = left - weight[v] if s == 0 else left + weight[v]
            moves[n_moves] = v
            n_moves += 1
            for i in range(n_changed):
                p = changed[i]
                if side[p] == 0:
                    keys0, items0, size0 = _heap_push(keys0, items0, size0, -gain[p], tie[p], p)
                else:
                    keys1, items1, size1 = _heap_push(keys1, items1, size1, -gain[p], tie[p], p)
            if running > best and abs(left - target) <= allowed:
                best, best_at, best_left = running, n_moves, left
        for i in range(best_at, n_moves):  # undo the moves after the best prefix
            side[moves[i]] = 1 - side[moves[i]]
        left = best_left
        if best <= 0:
            break


def _fm_bisect(
    h: _Hypergraph, ops: list[int], k_left: int, k_right: int, imbalance: float,
    tiebreak: np.ndarray | list[float],
) -> tuple[list[int], list[int]]:
    """Split ``ops`` (increasing) into a left side for ``k_left`` groups and a right one for
    ``k_right``: the contiguous split at the weight fraction ``k_left / (k_left + k_right)``, refined
    by Fiduccia-Mattheyses passes over the nets restricted to ``ops``. Each pass moves ops one
    at a time, best gain first (ties: lower ``tiebreak``), each at most once, and keeps the best
    prefix of its moves that leaves the left side's weight within ``imbalance`` of its target (or no
    further off than the contiguous split, when one heavy op makes that impossible); in between the
    sides may drift by one more op. Each side keeps at least as many ops as groups it must hold.
    Passes stop when one gains nothing."""
    m = len(ops)
    ops_array = np.asarray(ops, dtype=np.int64)
    w = h.weight[ops_array]
    total = float(w.sum())
    target = total * k_left / (k_left + k_right)
    cumulative = np.cumsum(w)
    cut = min(max(int(_contiguous_cuts(cumulative, np.array([target]), 2)[0]), k_left), m - k_right)
    side = np.zeros(m, dtype=np.int64)
    side[cut:] = 1
    # The nets restricted to ``ops``: in order of first use (ops in order, each op's nets in order),
    # each with its pins among ``ops`` (local indices, in the net's order), kept when it has two.
    all_pins, pin_start, all_nets, net_start, all_bytes = h.flat
    local = np.full(len(h.weight), -1, dtype=np.int64)
    local[ops_array] = np.arange(m)
    touched = all_nets[_ranges(net_start[ops_array], net_start[ops_array + 1])]
    first_nets, first_at = np.unique(touched, return_index=True)
    nets = first_nets[np.argsort(first_at, kind="stable")]
    pins = local[all_pins[_ranges(pin_start[nets], pin_start[nets + 1])]]
    which = np.repeat(np.arange(len(nets)), pin_start[nets + 1] - pin_start[nets])
    inside = pins >= 0
    n_inside = np.bincount(which[inside], minlength=len(nets))
    kept = n_inside >= 2
    pins = pins[inside & kept[which]]
    costs = all_bytes[nets[kept]]
    starts = np.zeros(int(kept.sum()) + 1, dtype=np.int64)
    starts[1:] = np.cumsum(n_inside[kept])
    net_of_pin = np.repeat(np.arange(len(costs)), n_inside[kept])
    by_op = np.argsort(pins, kind="stable")  # each op's nets in net order
    my_start = np.zeros(m + 1, dtype=np.int64)
    my_start[1:] = np.cumsum(np.bincount(pins, minlength=m))
    left = float(cumulative[cut - 1])
    # A prefix of moves may end (and be kept) only within ``allowed``; during a pass the sides may
    # drift by one op more, as in Fiduccia and Mattheyses' rule, so that ops can swap sides even when
    # a single op is heavier than the tolerance.
    allowed = max(imbalance * min(target, total - target), abs(left - target))
    slack = allowed + float(w.max())
    if len(costs):
        _fm_passes(side, pins, starts, net_of_pin[by_op], my_start, costs, np.ascontiguousarray(w),
                   np.asarray(tiebreak, dtype=np.float64)[ops_array], left, target, allowed, slack,
                   k_left, k_right, _FM_MAX_PASSES, _FM_BLOCKED_SCAN)
    return ops_array[side == 0].tolist(), ops_array[side == 1].tolist()


def _ranges(starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """The indices ``starts[0]..ends[0]-1``, then ``starts[1]..ends[1]-1``, ... in one array."""
    lengths = ends - starts
    offsets = np.cumsum(lengths) - lengths
    return np.repeat(starts - offsets, lengths) + np.arange(int(lengths.sum()))


def _recursive_bisection(h: _Hypergraph, k: int, tiebreak: list[float]) -> np.ndarray:
    """Labels of the recursive FM bisection: k -> floor(k/2) + ceil(k/2) groups, each level allowed
    its share of `PARTITION_IMBALANCE` so that the levels compound to about it."""
    n = len(h.weight)
    levels = max(1, int(np.ceil(np.log2(k))))
    imbalance = (1.0 + PARTITION_IMBALANCE) ** (1.0 / levels) - 1.0
    labels = np.zeros(n, dtype=np.int64)
    keys = np.asarray(tiebreak, dtype=np.float64)  # once, not per bisection
    stack: list[tuple[list[int], int, int]] = [(list(range(n)), k, 0)]
    while stack:
        ops, parts, first_label = stack.pop()
        if parts == 1:
            labels[ops] = first_label
            continue
        k_left = parts // 2
        left, right = _fm_bisect(h, ops, k_left, parts - k_left, imbalance, keys)
        stack.append((right, parts - k_left, first_label + k_left))
        stack.append((left, k_left, first_label))
    return labels


def _refine(h: _Hypergraph, labels: np.ndarray, k: int) -> np.ndarray:
    """Greedy k-way refinement: visit ops in order and move each to the group that most reduces the
    communication bytes, if that group's weight stays within `PARTITION_IMBALANCE` of the mean and
    the op's group keeps an op; repeat until a pass moves nothing. Only strict gains: it terminates
    and never increases the bytes."""
    labels = labels.copy()
    group = labels.tolist()
    part_weight = np.bincount(labels, weights=h.weight, minlength=k).tolist()
    part_size = np.bincount(labels, minlength=k).tolist()
    limit = (1.0 + PARTITION_IMBALANCE) * float(h.weight.sum()) / k
    count: list[dict[int, int]] = []
    for pins in h.net_pins:
        c: dict[int, int] = {}
        for p in pins:
            c[group[p]] = c.get(group[p], 0) + 1
        count.append(c)
    weight = h.weight.tolist()
    for _ in range(_REFINE_MAX_PASSES):
        moved = False
        for v, my_nets in enumerate(h.node_nets):
            a = group[v]
            if part_size[a] == 1 or not my_nets:
                continue
            # gain(v -> b) = bytes of nets v alone holds in a - bytes of v's nets with no pin in b
            alone, present, total = 0.0, {}, 0.0
            for j in my_nets:
                c, cost = count[j], h.net_bytes[j]
                total += cost
                if c[a] == 1:
                    alone += cost
                for b in c:
                    if b != a:
                        present[b] = present.get(b, 0.0) + cost
            best_gain, best_group = 0.0, -1
            for b in sorted(present):
                gain = alone - total + present[b]
                if gain > best_gain and part_weight[b] + weight[v] <= limit:
                    best_gain, best_group = gain, b
            if best_group < 0:
                continue
            for j in my_nets:
                c = count[j]
                c[a] -= 1
                if c[a] == 0:
                    del c[a]
                c[best_group] = c.get(best_group, 0) + 1
            group[v] = best_group
            part_weight[a] -= weight[v]
            part_weight[best_group] += weight[v]
            part_size[a] -= 1
            part_size[best_group] += 1
            moved = True
        if not moved:
            break
    return np.array(group, dtype=np.int64)


def partition_labels(graph: OpGraph, k: int, seed: int) -> np.ndarray:
    """Labels (int64 ``(n_ops,)``, exactly ``k`` distinct values, not renumbered) of a balanced
    ``k``-way partition that keeps few bytes crossing parts; ``1 <= k <= n_ops``, ``seed`` an int.

    Objective: the communication bytes (`placement_gym.task.groups.communication_bytes`), each op-produced
    tensor counted once per other part that reads it: the transfers the cost model makes with every
    part on its own device (the hypergraph "connectivity - 1" cut). A plain edge cut, such as
    networkx's ``kernighan_lin_bisection`` minimises, overcounts a tensor with several readers in one
    part (gnmt4's shared weights have 19); that function also balances op counts, not work, so it is
    not used. Balance: `op_weight` (FLOPs, bytes and op-count shares); each part within about
    `PARTITION_IMBALANCE` of the mean weight where single heavy ops allow it.

    Method: candidates are the contiguous topological split (`contiguous_labels`) and
    `_PARTITION_TRIALS` recursive bisections (each bisection starts from the contiguous split of its
    ops and is refined by Fiduccia-Mattheyses passes; the trials differ in the seeded random keys that
    break gain ties). Each candidate gets a greedy k-way refinement (`_refine`) and the one with the
    fewest bytes wins (ties: the earlier), so the result is never worse than the contiguous split.
    Deterministic for (graph, k, seed).
    """
    h = _Hypergraph.of(graph)
    rng = np.random.default_rng(seed)
    candidates = [contiguous_labels(graph, k)]
    if k > 1:
        candidates += [
            _recursive_bisection(h, k, rng.random(graph.n_ops).tolist()) for _ in range(_PARTITION_TRIALS)
        ]
    best, best_volume = candidates[0], np.inf
    for labels in candidates:
        refined = _refine(h, labels, k)
        volume = h.volume(refined)
        if volume < best_volume:
            best, best_volume = refined, volume
    return best
