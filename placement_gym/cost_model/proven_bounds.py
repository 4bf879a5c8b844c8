"""Proven lower bounds on the runtime of every feasible placement of a task, tighter than `lower_bound`.

`proven_bound(task)` computes several arguments, each a proof about the simulator's exact semantics
(`placement_gym.cost_model.fast`, docs/design.md): no placement that fits in memory has a runtime
below any of them, so none is below their maximum, which is the bound. Each argument's docstring
sketches its proof; docs/bounds.md collects them with a table of the suite's tasks.

Facts of the semantics the proofs use (names as in fast.py):

* (F1) A placement is per forward op; an op's backward and update ops run on its device (a *group*).
* (F2) Op ``o`` on device ``d`` takes ``duration[o, d] + transfer_sync[d] x (copies it sends + remote
  inputs it reads)`` >= ``duration[o, d]``; a device runs one op at a time; an op starts after every
  producer of its inputs has finished (a graph data input is on every device at time 0).
* (F3) A tensor read on another device ``e`` than its producer's ``d`` is sent once to ``e`` after the
  producer finishes, taking ``latency[d, e] + bytes / bandwidth[d, e]`` on link ``(d, e)``, which
  carries one transfer at a time; its reader starts after the copy arrived.
* (F4) An op starts at least ``dispatch_time[d]`` after its launch begins and after the copies it
  reads have arrived (launch waits for them); each host thread issues one launch at a time, for
  ``dispatch_time[d]`` each.
* (F5) Peak memory on ``d`` >= the static bytes of the groups on ``d`` + the bytes of the distinct
  non-static input and output tensors of any op on ``d`` (all are live while it runs). A placement
  over any device's capacity is infeasible and has no runtime that counts.

When no placement can be feasible by (F5) (some group fits on no device, or the static bytes fit no
fractional split), every argument is ``inf`` and so is the bound (``source`` says why).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numba
import numpy as np

from placement_gym.common.extras import require
from placement_gym.cost_model.bounds import longest_path
from placement_gym.task.cache import TaskCache

CRITICAL_PATH = "critical path"
WORK = "work / devices"
LOAD_LP = "load LP"
PLACED_PATH = "placement-aware path"
ENERGETIC = "energetic"
PHASES = "phases"
NO_FEASIBLE = "memory: no feasible placement"


@dataclass(frozen=True)
class Bound:
    """A proven lower bound (seconds) on the runtime of every feasible placement of a task.

    ``source``: the name of the argument that gives ``value`` (the largest); ``arguments``: every
    argument computed, name -> seconds."""

    value: float
    source: str
    arguments: dict[str, float] = field(default_factory=dict)


def working_set(task) -> np.ndarray:
    """Per task op: bytes of its distinct non-static input and output tensors, all live while it runs
    (fact F5): an output's buffer is allocated when the op starts and freed no earlier than its
    readers finish; an input's buffer (the producer's, a received copy, or a data input) is freed no
    earlier than the finish of its last local reader."""
    live = ~task.tensor_static & (task.tensor_bytes > 0)
    ws = np.zeros(task.n_ops)
    pointer = task.tensor_consumer_pointer
    for t in np.flatnonzero(live):
        ws[np.unique(task.tensor_consumers[pointer[t] : pointer[t + 1]])] += task.tensor_bytes[t]
        if task.tensor_producer[t] >= 0:
            ws[task.tensor_producer[t]] += task.tensor_bytes[t]
    return ws


def allowed_devices(task) -> np.ndarray:
    """Bool ``(n_forward, n_devices)``: whether a forward op's group may sit on a device at all.

    Proof (F1, F5): if group ``g`` is on ``d``, the peak on ``d`` is at least ``g``'s static bytes plus
    the working set of any op of ``g``; when that exceeds ``d``'s capacity every placement putting
    ``g`` on ``d`` is infeasible."""
    need = np.zeros(task.n_forward)
    np.maximum.at(need, task.op_forward, working_set(task))
    need += task.static_bytes
    return need[:, None] <= task.cluster.memory_capacity[None, :]


def critical_path(task) -> float:
    """Longest path with every op on its fastest device and free transfers.

    Proof (F2): along any dependency chain the ops run one after another, each for at least its
    fastest duration."""
    return float(
        longest_path(
            task.duration.min(axis=1),
            task.op_output_pointer,
            task.op_outputs,
            task.tensor_consumer_pointer,
            task.tensor_consumers,
        )
    )


def work_over_devices(task) -> float:
    """Total work, each op at its fastest duration, spread over all devices.

    Proof (F2): the devices together are busy for at least the sum of the op times, and at most
    ``n_devices x makespan``."""
    return float(task.duration.min(axis=1).sum() / task.n_devices)


# ---------------------------------------------------------------------------------------------------
# Placement-aware path: a dynamic programme over (op, device)


def distinct_predecessors(task) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Per task op, its distinct producers (CSR ``pointer, producer``) with the number of distinct
    tensors it reads from each and their total bytes."""
    pointer = task.tensor_consumer_pointer
    tensor = np.repeat(np.arange(task.n_tensors), np.diff(pointer))
    reader = task.tensor_consumers.astype(np.int64)
    producer = task.tensor_producer[tensor].astype(np.int64)
    keep = producer >= 0  # graph data inputs are on every device at time 0
    tensor, reader, producer = tensor[keep], reader[keep], producer[keep]
    pairs = np.unique(np.stack([reader, producer, tensor]), axis=1)  # distinct (reader, producer, tensor)
    reader, producer, tensor = pairs
    key = reader * task.n_ops + producer
    unique_key, first, counts = np.unique(key, return_index=True, return_counts=True)
    nbytes = np.add.reduceat(task.tensor_bytes[tensor], first) if len(first) else np.zeros(0)
    readers = unique_key // task.n_ops
    out = np.zeros(task.n_ops + 1, dtype=np.int64)
    np.cumsum(np.bincount(readers, minlength=task.n_ops), out=out[1:])
    return out, (unique_key % task.n_ops).astype(np.int64), counts.astype(np.float64), nbytes


@numba.njit(cache=True)
def _placed_path_kernel(
    duration, allowed, op_forward, pred_pointer, pred_op, pred_count, pred_bytes, latency, bandwidth, sync,
    dispatch,
):
    """Lower bounds ``start[o, d]`` and ``finish[o, d]`` of op ``o`` if placed on ``d`` (inf: not
    allowed). See `placement_aware_path` for the argument."""
    n, m = duration.shape
    start = np.full((n, m), np.inf)
    finish = np.full((n, m), np.inf)
    k_max = 0
    for c in range(n):
        k_max = max(k_max, pred_pointer[c + 1] - pred_pointer[c])
    arrive = np.empty(k_max)
    release = np.empty(k_max)
    process = np.empty(k_max)
    done = np.empty(k_max)
    count = np.empty(k_max)
    for c in range(n):
        first = pred_pointer[c]
        k = pred_pointer[c + 1] - first
        for d in range(m):
            if not allowed[c, d]:
                continue
            for i in range(k):
                j = first + i
                p = pred_op[j]
                count[i] = pred_count[j]
                release[i] = start[p, d]
                process[i] = duration[p, d]
                done[i] = finish[p, d]
                best = np.inf
                if op_forward[p] != op_forward[c]:  # one group is on one device (F1)
                    for e in range(m):
                        if e != d and finish[p, e] < np.inf:
                            v = (
                                finish[p, e]
                                + sync[e] * pred_count[j]
                                + pred_count[j] * latency[e, d]
                                + pred_bytes[j] / bandwidth[e, d]
                            )
                            if v < best:
                                best = v
                arrive[i] = best + dispatch[d]
            order = np.argsort(release[:k])
            best_start = np.inf
            best_finish = np.inf
            # Candidate theta = the latest arrival among the remote producers: -1 stands for none
            # remote; the producers arriving later than theta must be local.
            for cand in range(-1, k):
                theta = 0.0
                extra = 0.0
                if cand >= 0:
                    if arrive[cand] == np.inf:
                        continue
                    theta = arrive[cand]
                    extra = sync[d] * count[cand]
                clock = 0.0
                latest = 0.0
                ok = True
                for idx in range(k):
                    i = order[idx]
                    if cand >= 0 and arrive[i] <= theta:
                        continue
                    if release[i] == np.inf:
                        ok = False
                        break
                    clock = max(clock, release[i]) + process[i]
                    latest = max(latest, done[i])
                if not ok:
                    continue
                s = max(max(theta, dispatch[d]), max(clock, latest))
                if s < best_start:
                    best_start = s
                if s + extra < best_finish:
                    best_finish = s + extra
            start[c, d] = best_start
            finish[c, d] = best_finish + duration[c, d]
    return start, finish


def _placed_path_arrays(task, allowed_groups: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    pointer, producer, count, nbytes = distinct_predecessors(task)
    c = task.cluster
    bandwidth = np.where(np.eye(task.n_devices, dtype=bool), np.inf, c.link_bandwidth)
    return _placed_path_kernel(
        task.duration,
        np.ascontiguousarray(allowed_groups[task.op_forward]),
        np.ascontiguousarray(task.op_forward, dtype=np.int64),
        pointer,
        producer,
        count,
        nbytes,
        np.ascontiguousarray(c.link_latency, dtype=np.float64),
        np.ascontiguousarray(bandwidth, dtype=np.float64),
        np.ascontiguousarray(c.transfer_sync, dtype=np.float64),
        np.ascontiguousarray(c.dispatch_time, dtype=np.float64),
    )


def placement_aware_path(task, allowed_groups: np.ndarray | None = None) -> float:
    """A critical path that charges, at every op, the cheapest way its inputs can reach it.

    For op ``c`` on device ``d`` the programme keeps lower bounds ``S[c, d]`` on its start and
    ``F[c, d]`` on its finish over all feasible placements with ``c`` on ``d``. Each producer ``p``
    of ``c`` is either on ``d`` (local) or elsewhere (remote). A remote ``p`` on ``e`` delivers no
    earlier than ``F[p, e] + sync[e] x n + n x latency[e, d] + bytes / bandwidth[e, d]`` (its finish
    includes the sync of the ``n`` copies it sends to ``d`` (F2); the ``n`` tensors it sends to ``d``
    share the link one at a time (F3)), and ``c`` starts ``dispatch[d]`` after that arrival at the
    earliest (F4): ``arrive_p`` is the minimum over ``e != d``. Local producers run one at a time on
    ``d`` before ``c``, each no earlier than ``S[p, d]`` and for at least ``duration[p, d]``: their
    last finish is at least the single-machine makespan with release dates (Jackson: in order of
    release), and at least every ``F[p, d]``. For the true split (L local, R remote) let theta be the
    latest arrival in R: every producer arriving later is in L, so the split with L = {arrive > theta}
    gives no more; minimising over theta (and R empty) gives ``S[c, d]``. If R is not empty, ``c``
    reads at least one copy and pays ``sync[d]`` per tensor received (F2). Producers in ``c``'s own
    group are local (F1); a device excluded by memory (`allowed_devices`) has ``S = F = inf``.
    Induction over the topological order proves ``start >= S`` and ``finish >= F`` in the schedule of
    any feasible placement; every op's finish is at most the makespan, and a group's ops share one
    device, so the makespan is at least ``max over groups of min over d of max over its ops of F``.
    """
    allowed_groups = allowed_devices(task) if allowed_groups is None else allowed_groups
    if not allowed_groups.any(axis=1).all():
        return float("inf")
    _, finish = _placed_path_arrays(task, allowed_groups)
    per_group = np.full((task.n_forward, task.n_devices), -np.inf)
    np.maximum.at(per_group, task.op_forward, finish)
    return float(per_group.min(axis=1).max())


# ---------------------------------------------------------------------------------------------------
# Energetic reasoning over windows


@numba.njit(cache=True)
def _window_overload(makespan, head, tail, process, weight, size, grid):
    """Whether some window [t1, t2] of ``grid`` (t1 < t2) must hold more weighted work than the devices
    can do in it, if the makespan were ``makespan``. Device classes ``k`` (columns of ``head`` and
    ``process``; ``head = inf``: the op cannot sit there) have ``size[k]`` devices; each row of
    ``weight`` is one test (a weight per class)."""
    n, n_classes = head.shape
    n_tests = weight.shape[0]
    g = grid.shape[0]
    demand = np.empty(n_tests)
    capacity = np.empty(n_tests)
    for a in range(g):
        t1 = grid[a]
        for b in range(a + 1, g):
            t2 = grid[b]
            width = t2 - t1
            if width <= 0.0:
                continue
            for i in range(n_tests):
                demand[i] = 0.0
                capacity[i] = 0.0
                for k in range(n_classes):
                    capacity[i] += weight[i, k] * size[k] * width
            for o in range(n):
                for i in range(n_tests):
                    least = np.inf
                    for k in range(n_classes):
                        if head[o, k] == np.inf:
                            continue
                        p = process[o, k]
                        left = head[o, k] + p - t1  # run as early as possible: part after t1
                        right = t2 - (makespan - tail[o] - p)  # as late as possible: part before t2
                        part = max(0.0, min(min(width, p), min(left, right)))
                        least = min(least, weight[i, k] * part)
                    demand[i] += least
            for i in range(n_tests):
                if demand[i] > capacity[i]:
                    return True
    return False


def _device_classes(task, allowed_ops: np.ndarray) -> np.ndarray:
    """Class index per device: devices with the same op durations and the same memory exclusions."""
    keys: dict[bytes, int] = {}
    out = np.empty(task.n_devices, dtype=np.int64)
    for d in range(task.n_devices):
        key = task.duration[:, d].tobytes() + allowed_ops[:, d].tobytes()
        out[d] = keys.setdefault(key, len(keys))
    return out


def energetic(task, start: np.ndarray, weights: np.ndarray | None = None, grid_points: int = 40) -> float:
    """Energetic reasoning: the largest makespan ``C`` found (by bisection) for which some time window
    must receive more work than the devices can do in it (0 when none is found).

    Proof: ``start[o, d]`` is a lower bound on op ``o``'s start if placed on ``d`` in any feasible
    placement's schedule (`placement_aware_path`; ``inf``: excluded), ``tail[o]`` (the longest chain
    of fastest durations after ``o``) one on the time from its finish to the makespan (F2). With
    makespan ``<= C``, op ``o`` on ``d`` runs inside ``[start[o, d], C - tail]`` for at least
    ``p = duration[o, d]`` (sync only lengthens it, which increases every term below), so inside a
    window ``[t1, t2]`` it runs for at least ``m[o, d] = min(t2 - t1, p, start + p - t1,
    t2 - (C - tail - p))`` (when positive). Device ``d`` is busy at most ``t2 - t1`` in the window; for
    any weights ``w[d] >= 0``, ``sum_d w[d] x busy[d] <= (t2 - t1) x sum_d w[d]``, and the left side is
    at least ``sum_o min_d w[d] x m[o, d]``. If that exceeds the right side, no schedule of makespan
    ``<= C`` exists: ``C`` is a lower bound. Weightings tested: all ones, and each device's
    speed relative to the fastest (work at fastest durations / work on it), which stops a slow CPU from
    counting as a whole device, and ``weights`` (per device) when given (`proven_bound` passes the load
    LP's multipliers, the best weights for the whole horizon). Devices with the same durations and
    exclusions form one class (one column, weighted by the mean of its devices' weights). Windows are
    taken on a grid (any window is a valid test); the bisection keeps the largest failing ``C`` it
    met, so the result is a proof even where the grid makes the test non-monotone in ``C``."""
    fastest = task.duration.min(axis=1)
    tail = critical_tails(task, fastest)
    classes = _device_classes(task, np.isfinite(start))
    n_classes = int(classes.max()) + 1
    member = [np.flatnonzero(classes == k) for k in range(n_classes)]
    head = np.stack([start[:, m].min(axis=1) for m in member], axis=1)
    process = np.stack([task.duration[:, m[0]] for m in member], axis=1)
    size = np.array([len(m) for m in member], dtype=np.float64)
    speed = fastest.sum() / process.sum(axis=0)
    rows = [np.ones(n_classes), speed]
    if weights is not None and np.all(weights >= 0) and weights.sum() > 0:
        rows.append(np.array([weights[m].mean() for m in member]))  # any weights >= 0 are valid
    weight = np.stack(rows)
    earliest = head.min(axis=1)

    def fails(makespan: float) -> bool:
        ends = np.concatenate([_spread(earliest, grid_points), _spread(makespan - tail, grid_points)])
        grid = np.unique(ends)
        return bool(_window_overload(makespan, head, tail, process, weight, size, grid))

    low = 0.0  # no makespan below zero: the trivial bound, kept when no window fails
    high = float(np.max(earliest + fastest + tail) + process.max(axis=1).sum())  # passes every window
    while fails(high):
        low, high = high, 2.0 * high
    for _ in range(40):
        middle = 0.5 * (low + high)
        if fails(middle):
            low = middle  # a makespan that fails the test is a lower bound: keep the largest found
        else:
            high = middle
    return low


def _spread(values: np.ndarray, k: int) -> np.ndarray:
    """At most ``k`` of the distinct ``values``, evenly spaced in sorted order (the smallest and the
    largest included): window ends that are actual heads and deadlines."""
    distinct = np.unique(values)
    if len(distinct) <= k:
        return distinct
    return distinct[np.linspace(0, len(distinct) - 1, k).round().astype(np.int64)]


@numba.njit(cache=True)
def _tails_kernel(fastest, output_pointer, outputs, consumer_pointer, consumers):
    n = fastest.shape[0]
    tail = np.zeros(n)
    for op in range(n - 1, -1, -1):  # reverse topological order
        best = 0.0
        for k in range(output_pointer[op], output_pointer[op + 1]):
            t = outputs[k]
            for j in range(consumer_pointer[t], consumer_pointer[t + 1]):
                c = consumers[j]
                v = fastest[c] + tail[c]
                if v > best:
                    best = v
        tail[op] = best
    return tail


def critical_tails(task, fastest: np.ndarray) -> np.ndarray:
    """Per task op, the longest path from its end to the end of the step when every op takes its
    ``fastest`` time and no tensor is sent (a tail no placement can shorten)."""
    return _tails_kernel(
        fastest, task.op_output_pointer, task.op_outputs, task.tensor_consumer_pointer, task.tensor_consumers
    )


# ---------------------------------------------------------------------------------------------------
# Phases: a chain of ops splits the schedule into intervals that hold known sets of ops


@numba.njit(cache=True)
def _closure_kernel(pred_pointer, pred_op, n, descendants):
    """Bitsets (``n x words`` uint64) of every op's ancestors, or with ``descendants`` of every op's
    descendants; ops in topological order."""
    words = (n + 63) // 64
    bits = np.zeros((n, words), dtype=np.uint64)
    one = np.uint64(1)
    for k in range(n):
        c = n - 1 - k if descendants else k
        for j in range(pred_pointer[c], pred_pointer[c + 1]):
            p = pred_op[j]
            # the edge p -> c: c's ancestors take p's and p; p's descendants take c's and c
            near, far = (p, c) if descendants else (c, p)
            for w in range(words):
                bits[near, w] |= bits[far, w]
            bits[near, far >> 6] |= one << np.uint64(far & 63)
    return bits


@numba.njit(cache=True)
def _set_sums(bits, share):
    """``out[v, k] = sum of share[k, o] over the ops o in bitset row v``."""
    n, words = bits.shape
    k_rows = share.shape[0]
    out = np.zeros((n, k_rows))
    one = np.uint64(1)
    for v in range(n):
        for w in range(words):
            word = bits[v, w]
            if word == 0:
                continue
            for b in range(64):
                if word & (one << np.uint64(b)):
                    o = w * 64 + b
                    for k in range(k_rows):
                        out[v, k] += share[k, o]
    return out


def _bits_to_dense(bits: np.ndarray, n: int) -> np.ndarray:
    dense = np.unpackbits(bits.astype("<u8").view(np.uint8), axis=1, bitorder="little")
    return dense[:, :n].astype(np.float64)


def phases(
    task,
    start: np.ndarray,
    weights: np.ndarray | None = None,
    allowed_groups: np.ndarray | None = None,
    max_chain_ops: int = 160,
) -> float:
    """Phases along a chain of ops: the intervals between the ops of a dependency chain each hold a
    known set of ops, whose work the devices must do inside that interval.

    Proof: for an op ``v``, every ancestor (an op with a dependency path to ``v``) finishes before
    ``v`` starts, and every descendant starts after ``v`` finishes (F2, transitively). For ops
    ``u -> ... -> v`` of one chain, the ops that are both descendants of ``u`` and ancestors of ``v``
    run inside ``[finish u, start v]``. Inside an interval of length ``L`` device ``d`` is busy at
    most ``L``, so for weights ``w[d] >= 0`` the set ``X`` that must run there needs ``L >=
    sum_{o in X} min_d w[d] duration[o, d] / sum_d w[d]`` (an op on ``d`` runs at least
    ``duration[o, d]``; devices `allowed_devices` excludes are skipped). A dynamic programme over
    candidate chain ops ``v`` (in topological order) keeps ``B[v]``, a lower bound on ``v``'s start:
    the largest of the placement-aware start bound ``min_d start[v, d]``, the ancestors' work bound,
    and, for every candidate ``u`` that is an ancestor of ``v``, ``B[u] + p_u + W(desc u and anc
    v)`` (``p_u``: ``u``'s fastest allowed duration). The makespan is at least ``B[v] + p_v +
    max(tail_v, W(desc v))`` for every ``v`` (``tail``: longest chain of fastest durations after
    ``v``). Weights tried: ones, speed, and ``weights`` (the load LP's multipliers) when given.
    Candidates: every op for the single split, the ops of near-critical chains (fastest head + p +
    tail >= 90% of the critical path, at most ``max_chain_ops`` spread evenly in topological order)
    for the chain; any choice is valid."""
    allowed_groups = allowed_devices(task) if allowed_groups is None else allowed_groups
    allowed = allowed_groups[task.op_forward]
    n = task.n_ops
    duration = np.where(allowed, task.duration, np.inf)
    fastest = duration.min(axis=1)
    rows = [np.ones(task.n_devices), task.duration.min(axis=1).sum() / task.duration.sum(axis=0)]
    if weights is not None and np.all(weights >= 0) and weights.sum() > 0:
        rows.append(np.asarray(weights, dtype=np.float64))
    share = np.stack([np.where(allowed, w * task.duration, np.inf).min(axis=1) / w.sum() for w in rows])
    pointer, producer, _, _ = distinct_predecessors(task)
    anc = _closure_kernel(pointer, producer, n, False)
    desc = _closure_kernel(pointer, producer, n, True)
    before = _set_sums(anc, share).max(axis=1)
    after = _set_sums(desc, share).max(axis=1)
    tail = critical_tails(task, fastest)
    head = start.min(axis=1)
    best_start = np.maximum(head, before)
    # the chain: near-critical ops
    fastest_head = _heads(task, fastest)
    length = fastest_head + fastest + tail
    chain = np.flatnonzero(length >= 0.9 * length.max())
    if len(chain) > max_chain_ops:
        chain = chain[np.linspace(0, len(chain) - 1, max_chain_ops).round().astype(np.int64)]
    anc_dense = _bits_to_dense(anc[chain], n)  # (k, n)
    desc_dense = _bits_to_dense(desc[chain], n)
    # between[i, j, r] = sum of share[r] over desc(chain[i]) and anc(chain[j])
    between = np.einsum("in,jn,rn->ijr", desc_dense, anc_dense, share, optimize=True).max(axis=2)
    is_anc = anc_dense[:, chain].T > 0  # is_anc[i, j]: chain[i] is an ancestor of chain[j]
    chain_start = best_start[chain].copy()
    for j in range(len(chain)):
        for i in np.flatnonzero(is_anc[:, j]):
            chain_start[j] = max(chain_start[j], chain_start[i] + fastest[chain[i]] + between[i, j])
    best_start[chain] = chain_start
    return float(np.max(best_start + fastest + np.maximum(tail, after)))


def _heads(task, fastest: np.ndarray) -> np.ndarray:
    pointer, producer, _, _ = distinct_predecessors(task)
    return _heads_kernel(fastest, pointer, producer)


@numba.njit(cache=True)
def _heads_kernel(fastest, pointer, producer):
    n = fastest.shape[0]
    head = np.zeros(n)
    for c in range(n):
        for j in range(pointer[c], pointer[c + 1]):
            p = producer[j]
            v = head[p] + fastest[p]
            if v > head[c]:
                head[c] = v
    return head


# ---------------------------------------------------------------------------------------------------
# Load LP: fractional placement on unrelated devices with memory and host dispatch


def load_lp(task, allowed_groups: np.ndarray | None = None) -> float:
    """The optimum of a linear relaxation of the devices' loads, certified by its dual (`_load_lp`)."""
    return _load_lp(task, allowed_groups)[0]


def _load_lp(task, allowed_groups: np.ndarray | None = None) -> tuple[float, np.ndarray | None]:
    """The optimum of a linear relaxation of the devices' loads, certified by its dual.

    Variables ``x[g, d] >= 0`` (the share of group ``g`` on device ``d``; 0 where `allowed_devices`
    excludes it), ``sum_d x[g, d] = 1``, and the makespan ``C``:

    * load: ``C >= sum_g x[g, d] x work[g, d]`` per device (``work``: the group's op durations on
      ``d``; a device runs one op at a time, F2);
    * memory: ``sum_g x[g, d] x static[g] <= capacity[d]`` (static bytes always count in the peak, F5);
    * dispatch: ``C >= sum_{g, d on h} x[g, d] x ops[g] x dispatch[d] / threads[h] + min duration`` per
      host (its threads issue every launch of its devices one at a time each, F4; the op launched
      last then still runs).

    Every feasible placement is an integral point of these constraints with ``C`` its runtime, so the
    LP optimum is at most any feasible runtime. The value returned is not the solver's objective but
    the Lagrangian dual function at the solver's (rescaled, sign-corrected) multipliers, computed
    here in float: weak duality makes it a lower bound of the LP optimum whatever the solver's
    tolerances. ``inf`` when the LP is infeasible (no fractional split fits in memory). Solver:
    OR-Tools GLOP (deterministic). Also returns the load multipliers per device (None when infeasible).
    """
    pywraplp = require("ortools.linear_solver.pywraplp", "the load LP bound (proven_bound(lp=True))")
    allowed_groups = allowed_devices(task) if allowed_groups is None else allowed_groups
    if not allowed_groups.any(axis=1).all():
        return float("inf"), None
    c = task.cluster
    n_groups, n_dev = task.n_forward, task.n_devices
    work = np.zeros((n_groups, n_dev))
    np.add.at(work, task.op_forward, task.duration)
    n_ops = np.bincount(task.op_forward, minlength=n_groups).astype(np.float64)
    static = np.asarray(task.static_bytes, dtype=np.float64)
    capacity = np.asarray(c.memory_capacity, dtype=np.float64)
    host = np.asarray(c.device_host, dtype=np.int64)
    threads = np.asarray(c.host_dispatch_threads, dtype=np.float64)
    dispatch = np.asarray(c.dispatch_time, dtype=np.float64)
    shortest = float(task.duration.min())
    # Scaled rows (times in units of the work bound, memory as a share of capacity) keep GLOP's
    # tolerances meaningful; the certificate below is computed in the same scaled units.
    unit = float(task.duration.min(axis=1).sum() / n_dev) or 1.0
    work_s = work / unit
    dispatch_s = n_ops[:, None] * (dispatch / threads[host])[None, :] / unit  # (groups, devices)
    static_s = static[:, None] / capacity[None, :]
    use_memory = bool(static.max(initial=0.0) > 0.0)
    hosts = np.unique(host) if dispatch.max(initial=0.0) > 0.0 else np.zeros(0, dtype=np.int64)

    solver = pywraplp.Solver.CreateSolver("GLOP")
    makespan = solver.NumVar(0.0, solver.infinity(), "C")
    x = {}
    for g, d in zip(*np.nonzero(allowed_groups), strict=True):
        x[g, d] = solver.NumVar(0.0, 1.0, f"x{g}_{d}")
    by_group: list[list] = [[] for _ in range(n_groups)]
    by_device: list[list] = [[] for _ in range(n_dev)]
    for (g, d), var in x.items():
        by_group[g].append(var)
        by_device[d].append((g, var))
    for g in range(n_groups):
        solver.Add(solver.Sum(by_group[g]) == 1.0)
    load_rows, memory_rows, host_rows = [], [], []
    for d in range(n_dev):
        load_rows.append(solver.Add(solver.Sum([work_s[g, d] * v for g, v in by_device[d]]) <= makespan))
        if use_memory:
            memory_rows.append(solver.Add(solver.Sum([static_s[g, d] * v for g, v in by_device[d]]) <= 1.0))
    for h in hosts:
        terms = [dispatch_s[g, d] * v for d in np.flatnonzero(host == h) for g, v in by_device[d]]
        host_rows.append(solver.Add(solver.Sum(terms) + shortest / unit <= makespan))
    solver.Minimize(makespan)
    status = solver.Solve()
    if status == pywraplp.Solver.INFEASIBLE:
        return float("inf"), None
    if status not in (pywraplp.Solver.OPTIMAL, pywraplp.Solver.FEASIBLE):
        raise RuntimeError(f"load LP of task {task.id}: GLOP ended with status {status}")
    load = np.array([abs(r.dual_value()) for r in load_rows])
    memory = np.array([abs(r.dual_value()) for r in memory_rows]) if use_memory else np.zeros(n_dev)
    per_host = np.zeros(len(threads))
    per_host[hosts] = [abs(r.dual_value()) for r in host_rows]
    value = _load_dual(
        allowed_groups, work_s, static_s, dispatch_s, host, load, memory, per_host, shortest / unit
    )
    return unit * value, load


def _load_dual(allowed, work, static, dispatch, host, load, memory, per_host, shortest) -> float:
    """The Lagrangian dual function of the (scaled) load LP at multipliers ``load`` (per device),
    ``memory`` (per device) and ``per_host`` (>= 0), normalised so that the makespan's coefficient
    vanishes: ``(sum_g min_{d allowed} cost[g, d] - sum_d memory[d] + sum_h per_host[h] x shortest) /
    (sum load + sum per_host)`` with ``cost = load x work + memory x static + per_host[host] x
    dispatch``. A valid lower bound of the LP for any such multipliers (weak duality)."""
    total = load.sum() + per_host.sum()
    if not total > 0.0:
        return 0.0
    cost = load[None, :] * work + memory[None, :] * static + per_host[host][None, :] * dispatch
    cost = np.where(allowed, cost, np.inf)
    return float((cost.min(axis=1).sum() - memory.sum() + per_host.sum() * shortest) / total)


# ---------------------------------------------------------------------------------------------------


def proven_bound(
    task, *, lp: bool = True, energetic_windows: bool = True, phase_chain: bool = True
) -> Bound:
    """The largest of the proven lower bounds on the runtime of ``task``'s feasible placements (module
    docstring): critical path, work / devices, placement-aware path, energetic reasoning, phases
    along a chain (`phases`) and (with ``lp``, which needs OR-Tools) the load LP. ``value`` is
    ``inf`` (source `NO_FEASIBLE`) when no placement can fit in memory.
    Deterministic: same task, same numbers. This is the *proven lower bound* the leaderboard shows,
    at least `placement_gym.cost_model.lower_bound` (the simple one the envs report). With every
    argument (the default) it is computed once per task and kept (`TaskCache`): it takes up to
    about 12 s on the largest bundled tasks."""
    if lp and energetic_windows and phase_chain:
        return _PROVEN.get(task, _full_bound)
    return _proven_bound(task, lp=lp, energetic_windows=energetic_windows, phase_chain=phase_chain)


def _full_bound(task) -> Bound:
    return _proven_bound(task, lp=True, energetic_windows=True, phase_chain=True)


def _proven_bound(task, *, lp: bool, energetic_windows: bool, phase_chain: bool) -> Bound:
    allowed = allowed_devices(task)
    if not allowed.any(axis=1).all():
        group = int(np.flatnonzero(~allowed.any(axis=1))[0])
        return Bound(float("inf"), f"{NO_FEASIBLE} (op {task.graph.op_names[group]!r} fits on no device)",
                     {})
    arguments = {CRITICAL_PATH: critical_path(task), WORK: work_over_devices(task)}
    start, finish = _placed_path_arrays(task, allowed)
    per_group = np.full((task.n_forward, task.n_devices), -np.inf)
    np.maximum.at(per_group, task.op_forward, finish)
    arguments[PLACED_PATH] = float(per_group.min(axis=1).max())
    multipliers = None
    if lp:
        arguments[LOAD_LP], multipliers = _load_lp(task, allowed)
        if arguments[LOAD_LP] == np.inf:
            return Bound(float("inf"), f"{NO_FEASIBLE} (the static bytes fit no split)", arguments)
    if energetic_windows:
        arguments[ENERGETIC] = energetic(task, start, multipliers)
    if phase_chain:
        arguments[PHASES] = phases(task, start, multipliers, allowed)
    order = (CRITICAL_PATH, WORK, PLACED_PATH, ENERGETIC, PHASES, LOAD_LP)
    arguments = {name: arguments[name] for name in order if name in arguments}
    source = max(arguments, key=lambda name: arguments[name])
    return Bound(arguments[source], source, arguments)


# A cached Bound is frozen but holds a dict: callers read it and must not change it.
_PROVEN: TaskCache[Bound] = TaskCache("proven_bound")
