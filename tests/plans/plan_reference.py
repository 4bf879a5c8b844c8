"""The reference of the plan cost model: every rank of a small mesh simulated on its own.

Deliberately plain, sharing only the priced pieces (an op's seconds and bytes kept, `layer_segments`,
`stage_ends`, the weights a rank holds) with `placement_gym.plans.evaluate`: each rank has its
coordinates (tensor innermost, then context, data, pipeline), its groups are the explicit lists of
member ranks, a collective's time comes from the members' nodes as counted here, a collective starts
when the last member reaches it, a forward pass waits for the same micro-batch on the rank of the same
coordinates one stage earlier (its send timed from the two ranks' nodes), and each rank runs its units
in the order of Megatron-LM's schedules as written out here. The fast model simulates one rank per
stage; this one all of them, so the two must agree wherever the ranks of a group really do the same
work.
"""

from __future__ import annotations

import math
from dataclasses import replace

from placement_gym.plans import Mesh, Plan, TransformerModel
from placement_gym.plans.evaluate import (
    BANDWIDTH_FRACTION,
    BUCKET_WEIGHTS,
    GRADIENT_BYTES,
    OPTIMIZER_BYTES,
    STATE_BYTES,
    WEIGHT_BYTES,
    stage_ends,
)
from placement_gym.plans.layer import ACTIVATION_BYTES, layer_cost, layer_segments


def collective_seconds(mesh: Mesh, operation: str, buffer: float, members: list[int]) -> float:
    """NCCL's bytes per rank over the bottleneck of the member ranks' links (docs/cost_model.md)."""
    n = len(members)
    if n <= 1 or buffer <= 0:
        return 0.0
    per_node_counts: dict[int, int] = {}
    for rank in members:
        per_node_counts[rank // mesh.gpus_per_node] = per_node_counts.get(rank // mesh.gpus_per_node, 0) + 1
    nodes, per_node = len(per_node_counts), min(per_node_counts.values())  # the emptiest node's NICs
    hop = mesh.inter_latency if nodes > 1 else mesh.intra_latency
    if operation == "send_recv":
        return hop + buffer / (mesh.nic_p2p if nodes > 1 else mesh.intra_p2p)
    if operation == "all_to_all":
        return (
            mesh.collective_launch
            + (n - 1) * hop
            + max(
                buffer * (per_node - 1) / n / mesh.intra_busbw, buffer * (n - per_node) / n / mesh.nic_busbw
            )
        )
    intra = mesh.intra_allreduce_busbw if operation == "all_reduce" else mesh.intra_busbw
    busbw = intra if nodes == 1 else min(intra, per_node * mesh.nic_busbw)
    if operation == "all_reduce":
        ring = 2 * (n - 1) * hop
        if nodes > 1:
            ring = min(
                ring,
                2 * (math.ceil(math.log2(nodes)) * mesh.inter_latency + (per_node - 1) * mesh.intra_latency),
            )
        return mesh.collective_launch + ring + 2 * (n - 1) / n * buffer / busbw
    return mesh.collective_launch + (n - 1) * hop + (n - 1) / n * buffer / busbw


def schedule_order(pp: int, vp: int, m: int, schedule: str, stage: int) -> list[tuple[str, int, int]]:
    """The units ('F' or 'B', chunk, micro-batch) device ``stage`` runs, in Megatron-LM's order."""
    total = m * vp

    def unit(kind: str, k: int) -> tuple[str, int, int]:
        if schedule == "interleaved":
            chunk = (k % (pp * vp)) // pp
            return kind, (vp - 1 - chunk) if kind == "B" else chunk, (k // (pp * vp)) * pp + k % pp
        return kind, 0, k

    if schedule == "gpipe":
        return [unit("F", k) for k in range(total)] + [unit("B", k) for k in range(total)]
    if schedule == "1f1b":
        warmup = min(pp - stage - 1, m)
    else:
        warmup = min((pp - stage - 1) * 2 + (vp - 1) * pp, total)
    order = [unit("F", k) for k in range(warmup)]
    for k in range(total - warmup):
        order += [unit("F", warmup + k), unit("B", k)]
    return order + [unit("B", k) for k in range(total - warmup, total)]


def reference_step(model: TransformerModel, plan: Plan, mesh: Mesh) -> dict:
    """Every rank simulated: the step (the slowest rank's), each stage's pipeline finish and the peak
    memory of the fullest rank. A stage's ranks are laid out by its own plan (`Plan.stage_views`: its
    tensor degree, the data degree it leaves); a rank receives, from the ranks of the neighbouring stage
    that hold its sequences, its own share of each micro-batch's activations (or their gradients)."""
    c, p, v, m = plan.cp, plan.pp, plan.vp, plan.microbatches
    views = plan.stage_views()
    per_stage = views[0].tp * c * views[0].dp  # every stage has as many GPUs
    ranks = per_stage * p
    coordinates: dict[int, tuple[int, int, int, int]] = {}
    for r in range(ranks):
        s, local = divmod(r, per_stage)
        t = views[s].tp
        coordinates[r] = (local % t, (local // t) % c, local // (t * c), s)
    rank_of = {coordinate: r for r, coordinate in coordinates.items()}

    def members(rank: int, kind: str) -> list[int]:
        ti, ci, di, s = coordinates[rank]
        t, d = views[s].tp, views[s].dp
        if kind == "tensor":
            return [rank_of[(x, ci, di, s)] for x in range(t)]
        if kind == "context":
            return [rank_of[(ti, x, di, s)] for x in range(c)]
        if kind == "data":
            return [rank_of[(ti, ci, x, s)] for x in range(d)]
        start = di - di % plan.ep  # expert groups: consecutive data-parallel ranks
        if kind == "expert":
            return [rank_of[(ti, ci, x, s)] for x in range(start, start + plan.ep)]
        return [rank_of[(ti, ci, x, s)] for x in range(di % plan.ep, d, plan.ep)]  # expert_data

    segments = [layer_segments(model, view, mesh) for view in views]
    costs = [layer_cost(model, view, mesh) for view in views]
    keeping = [
        layer_cost(model, replace(view, recompute="none", recompute_layers=0), mesh).kept for view in views
    ]
    layers = plan.layers_of_stages(model.layers)
    last_virtual = p * v - 1
    first_ends, last_ends = (
        stage_ends(model, views[0], mesh),
        stage_ends(model, views[last_virtual % p], mesh),
    )

    def message(stage: int) -> float:
        """Bytes a rank of ``stage`` receives per micro-batch: its share of the sequences, its sequence
        slice under sequence parallelism."""
        view = views[stage]
        return (
            ACTIVATION_BYTES
            * model.hidden
            * view.microbatch_size
            * model.seq
            / c
            / (view.tp if view.sequence_parallel else 1)
        )

    def sources(rank: int, stage: int) -> list[int]:
        """The ranks of ``stage`` that hold sequences ``rank`` needs (the same context chunk)."""
        _, ci, di, own = coordinates[rank]
        need = range(di * views[own].microbatch_size, (di + 1) * views[own].microbatch_size)
        size = views[stage].microbatch_size
        return [
            other
            for other, (_, cj, dj, sj) in coordinates.items()
            if sj == stage and cj == ci and any(dj * size <= q < (dj + 1) * size for q in need)
        ]

    # A unit is a list of ("compute", seconds) and ("comm", operation, buffer, group kind) per layer.
    def unit_work(virtual: int, kind: str) -> list[tuple]:
        s = virtual % p
        work: list[tuple] = []
        if kind == "F" and virtual == 0:
            work.append(("compute", first_ends.first_forward))
        for index in range(layers[virtual]):
            replays = not plan.recompute_layers or index < plan.recompute_layers
            parts = ["forward"] if kind == "F" else (["recompute", "backward"] if replays else ["backward"])
            for part in parts:
                for segment in segments[s][part]:
                    work.append(
                        ("comm", segment.operation, segment.buffer, segment.group)
                        if segment.operation
                        else ("compute", segment.seconds)
                    )
        if virtual == last_virtual:
            work.append(("compute", last_ends.last_forward if kind == "F" else last_ends.last_backward))
        if kind == "B" and virtual == 0:
            work.append(("compute", first_ends.first_backward))
        return work

    weights = [layers[k] * (costs[k % p].dense + costs[k % p].expert) for k in range(p * v)]
    expert_weights = [layers[k] * costs[k % p].expert for k in range(p * v)]
    weights[0] += model.vocab * model.hidden / views[0].tp
    if not model.tied_embeddings or p * v > 1:
        weights[-1] += model.vocab * model.hidden / views[last_virtual % p].tp

    def expert_group_of(rank: int) -> list[int]:
        return members(rank, "expert_data") if plan.ep > 1 else members(rank, "data")

    def zero3_seconds(rank: int, virtual: int, kind: str) -> float:
        """A ZeRO-3 unit's gathers (and, backward, gradient reduce-scatters) on ``rank``: dense weights
        over its data group, expert weights over its expert-data group."""
        total = 0.0
        for operation, size in (("all_gather", WEIGHT_BYTES), ("reduce_scatter", GRADIENT_BYTES))[
            : 1 if kind == "F" else 2
        ]:
            total += collective_seconds(
                mesh, operation, size * (weights[virtual] - expert_weights[virtual]), members(rank, "data")
            )
            total += collective_seconds(
                mesh, operation, size * expert_weights[virtual], expert_group_of(rank)
            )
        return total

    def kept_of(virtual: int) -> float:
        """Bytes a micro-batch keeps on ``virtual``: its first recompute_layers layers (all, for 0) keep
        their inputs only."""
        s = virtual % p
        replays = min(layers[virtual], plan.recompute_layers or layers[virtual])
        return replays * costs[s].kept + (layers[virtual] - replays) * keeping[s]

    def arrival(rank: int, key_kind: str, virtual: int, micro: int) -> float | None:
        """When what ``rank`` needs from ``virtual`` (its forward output or its input's gradient) has
        arrived, or None while a source has not finished: the last source's finish, then the rank's
        share over its port, across nodes if any source lies in another node."""
        senders = sources(rank, virtual % p)
        if any((x, key_kind, virtual, micro) not in done for x in senders):
            return None
        nodes = {x // mesh.gpus_per_node for x in senders} | {rank // mesh.gpus_per_node}
        pair = [rank, rank] if len(nodes) == 1 else [rank, rank + mesh.gpus_per_node * ranks]
        share = message(coordinates[rank][3])
        return max(done[(x, key_kind, virtual, micro)] for x in senders) + collective_seconds(
            mesh, "send_recv", share, pair
        )

    orders = {r: schedule_order(p, v, m, plan.schedule, coordinates[r][3]) for r in range(ranks)}
    position = dict.fromkeys(range(ranks), 0)
    clock = dict.fromkeys(range(ranks), 0.0)
    done: dict[tuple[int, str, int, int], float] = {}  # (rank, kind, virtual stage, micro-batch) -> finish
    alive = dict.fromkeys(range(ranks), 0.0)
    peak = dict.fromkeys(range(ranks), 0.0)
    first_forward = dict.fromkeys(range(ranks), None)
    last_backward = dict.fromkeys(range(ranks), 0.0)

    # Run stage by stage, each stage's ranks together (they meet at every collective), a unit when every
    # rank of the stage has what it needs.
    stage_ranks = {s: [r for r in range(ranks) if coordinates[r][3] == s] for s in range(p)}
    remaining = sum(len(order) for order in orders.values())
    while remaining:
        progressed = False
        for s in range(p):
            group_ranks = stage_ranks[s]
            while position[group_ranks[0]] < len(orders[group_ranks[0]]):
                kind, chunk, micro = orders[group_ranks[0]][position[group_ranks[0]]]
                virtual = chunk * p + s
                starts = {}
                for r in group_ranks:
                    ready = 0.0
                    if kind == "F" and virtual > 0:
                        ready = arrival(r, "F", virtual - 1, micro)
                        if ready is None:
                            break
                    if kind == "B":
                        ready = done[(r, "F", virtual, micro)]
                        if virtual < last_virtual:
                            back = arrival(r, "B", virtual + 1, micro)
                            if back is None:
                                break
                            ready = max(ready, back)
                    starts[r] = max(clock[r], ready)
                else:
                    busy_before = dict(starts)
                    now = dict(starts)
                    for item in unit_work(virtual, kind):
                        if item[0] == "compute":
                            for r in group_ranks:
                                now[r] += item[1]
                        else:
                            _, operation, buffer, kind_of_group = item
                            # every member starts when the last of its group arrives
                            after = {}
                            for r in group_ranks:
                                group = members(r, kind_of_group)
                                begin = max(now[x] for x in group)
                                after[r] = begin + collective_seconds(mesh, operation, buffer, group)
                            now.update(after)
                    for r in group_ranks:
                        if plan.zero == 3:
                            now[r] = max(now[r], busy_before[r] + zero3_seconds(r, virtual, kind))
                        clock[r] = now[r]
                        done[(r, kind, virtual, micro)] = now[r]
                        if kind == "F":
                            alive[r] += kept_of(virtual)
                            peak[r] = max(peak[r], alive[r])
                            if first_forward[r] is None:
                                first_forward[r] = now[r] - busy_before[r]
                        else:
                            alive[r] -= kept_of(virtual)
                            if micro == m - 1 or (plan.schedule == "interleaved" and micro >= m - p):
                                last_backward[r] += now[r] - busy_before[r]
                        position[r] += 1
                        remaining -= 1
                    progressed = True
                    continue
                break
        assert progressed, "deadlock"

    steps, memory = {}, {}
    for r in range(ranks):
        s = coordinates[r][3]
        view, cost = views[s], costs[s]
        d = view.dp
        mine = [k for k in range(p * v) if k % p == s]
        experts = sum(expert_weights[k] for k in mine)
        dense = sum(weights[k] for k in mine) - experts
        exposed = 0.0
        if plan.zero < 3:
            operation = "reduce_scatter" if plan.zero else "all_reduce"
            reduce = collective_seconds(mesh, operation, GRADIENT_BYTES * dense, members(r, "data"))
            reduce += collective_seconds(mesh, operation, GRADIENT_BYTES * experts, expert_group_of(r))
            gather = 0.0
            if plan.zero:
                gather = collective_seconds(mesh, "all_gather", WEIGHT_BYTES * dense, members(r, "data"))
                gather += collective_seconds(mesh, "all_gather", WEIGHT_BYTES * experts, expert_group_of(r))
            buckets = max(1.0, (dense + experts) / BUCKET_WEIGHTS)
            exposed = max(reduce - last_backward[r], reduce / buckets) + max(
                gather - first_forward[r], gather / buckets
            )
        shard = dense / (d if plan.zero else 1) + experts / ((d // plan.ep) if plan.zero else 1)
        optimizer = shard * OPTIMIZER_BYTES / (mesh.gpu.memory_bandwidth * BANDWIDTH_FRACTION)
        steps[r] = clock[r] + exposed + optimizer

        def static(w: float, group: int) -> float:
            full = WEIGHT_BYTES + GRADIENT_BYTES + STATE_BYTES
            return {
                0: w * full,
                1: w * (WEIGHT_BYTES + GRADIENT_BYTES + STATE_BYTES / group),
                2: w * (WEIGHT_BYTES + (GRADIENT_BYTES + STATE_BYTES) / group),
                3: w * full / group,
            }[plan.zero]

        logits = last_ends.logits_bytes if s == last_virtual % p else 0.0
        gathered = 2 * WEIGHT_BYTES * (cost.dense + cost.expert) if plan.zero == 3 and d > 1 else 0.0
        memory[r] = (
            static(dense, d) + static(experts, d // plan.ep) + peak[r] + cost.transient + logits + gathered
        )
    return {
        "step_s": max(steps.values()),
        "finish": [max(clock[r] for r in stage_ranks[s]) for s in range(p)],
        "peak_memory_bytes": max(memory.values()),
    }
