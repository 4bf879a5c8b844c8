"""The every-rank oracle of a tensor-parallel task: every rank of every group simulated on its own GPU
of the whole cluster, the test of the representative rank that `Step.tensor_parallel` simulates.

The rank graph (what `make_task` compiles for one rank) is copied once per rank: rank r's copy of an op
reads rank r's copies of its inputs and runs on GPU r of the group its op is placed on. A collective's
copy on rank r also waits for every other rank's copy of its input (a zero-byte token from each peer's
producer, over an intra-group link of no latency, so that the wait is the only thing it adds),
and takes what the rank task's collective op takes on its group (the collective formulas are tested by
hand elsewhere; this oracle tests the simulation of one rank for all). Written
apart from the pass: the expanded graph is compiled by `make_task` with one device per op on the whole
cluster, so transfers between groups go over every rank's own link, and memory is counted on every GPU.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from placement_gym.cluster.cluster import Cluster
from placement_gym.cluster.tensor_groups import tensor_groups
from placement_gym.graph.opgraph import OpGraph
from placement_gym.task.compiled import Task, make_task
from placement_gym.task.passes.tensor_parallel import COLLECTIVE_TIMES
from placement_gym.task.step import Step


def every_rank_task(graph: OpGraph, cluster: Cluster, step: Step) -> tuple[Task, Task]:
    """``(task, expanded)``: the tensor-parallel task of ``step`` and its every-rank task on the whole
    ``cluster`` (one device per op), whose op ``i T + r`` is rank r's copy of the rank graph's op i."""
    task = make_task(graph, cluster, step)
    rank, t = task.graph, step.tensor_parallel
    n_tensors = rank.n_tensors
    names, producers, sizes, parameter, output = [], [], [], [], []
    for x in range(n_tensors):
        p = int(rank.tensor_producer[x])
        for r in range(t):
            names.append(f"{rank.tensor_names[x]}@{r}")
            producers.append(-1 if p < 0 else p * t + r)
            sizes.append(rank.tensor_bytes[x])
            parameter.append(rank.tensor_is_parameter[x])
            output.append(rank.tensor_is_output[x])
    edge_tensor, edge_dst = [], []
    for x, op in zip(rank.edge_tensor.tolist(), rank.edge_dst.tolist()):
        for r in range(t):
            edge_tensor.append(x * t + r)
            edge_dst.append(op * t + r)
        p = int(rank.tensor_producer[x])
        if rank.op_types[op] in COLLECTIVE_TIMES and p >= 0:
            for r in range(t):
                for peer in range(t):
                    if peer != r:
                        names.append(f"{rank.tensor_names[x]}@{peer}->{r}")
                        producers.append(p * t + peer)
                        sizes.append(0.0)
                        parameter.append(False)
                        output.append(False)
                        edge_tensor.append(len(names) - 1)
                        edge_dst.append(op * t + r)
    expanded = OpGraph(
        name=f"{rank.name}-every-rank",
        op_names=tuple(f"{name}@{r}" for name in rank.op_names for r in range(t)),
        op_types=tuple(kind for kind in rank.op_types for _ in range(t)),
        category=np.repeat(rank.category, t),
        flops=np.repeat(rank.flops, t),
        bytes_accessed=np.repeat(rank.bytes_accessed, t),
        param_bytes=np.repeat(rank.param_bytes, t),
        tensor_names=tuple(names),
        tensor_producer=np.array(producers),
        tensor_bytes=np.array(sizes),
        tensor_is_parameter=np.array(parameter, dtype=bool),
        tensor_is_output=np.array(output, dtype=bool),
        edge_tensor=np.array(edge_tensor),
        edge_dst=np.array(edge_dst),
    )
    groups = tensor_groups(cluster, t)
    group_of = np.full(cluster.n_devices, -1)
    for g, members in enumerate(groups.members):
        group_of[members] = g
    # The tokens between the ranks of a group arrive when they are sent: no latency, below the range a
    # cluster file may state, so set past the check (the oracle's own links; the collectives' times are
    # the rank task's).
    same_group = (group_of[:, None] == group_of[None, :]) & (group_of[:, None] >= 0)
    latency = np.where(same_group, 0.0, cluster.link_latency)
    latency.setflags(write=False)
    oracle_cluster = dataclasses.replace(cluster)
    object.__setattr__(oracle_cluster, "link_latency", latency)
    whole = make_task(expanded, oracle_cluster, dataclasses.replace(step, tensor_parallel=1))
    # A collective's copy on a GPU takes what the rank task's collective takes on that GPU's group.
    rank_op = {key: op for op, key in enumerate(zip(task.op_forward.tolist(), task.op_kind.tolist(),
                                                    task.op_microbatch.tolist()))}
    duration = whole.duration.copy()
    keys = zip(whole.op_forward.tolist(), whole.op_kind.tolist(), whole.op_microbatch.tolist())
    for op, (f, kind, microbatch) in enumerate(keys):
        if expanded.op_types[f] in COLLECTIVE_TIMES:
            duration[op] = task.duration[rank_op[f // t, kind, microbatch]][group_of]
    duration.setflags(write=False)
    return task, dataclasses.replace(whole, duration=duration)


def every_rank_placement(task: Task, placement: np.ndarray) -> np.ndarray:
    """The every-rank task's placement of a placement of ``task`` over its groups: rank r's copy of an
    op on GPU r of its op's group."""
    members = tensor_groups(task.source_cluster, task.step.tensor_parallel).members
    return members[np.asarray(placement)].reshape(-1)
