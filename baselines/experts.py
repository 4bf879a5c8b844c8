"""Human-expert placements, as the papers describe their "human expert" baselines.

Which layout applies is decided per graph (`expert_layout`):

* ``single-gpu`` for CNNs (Inception-V3, ResNets, the CIFAR-10 CNN): the whole model on the fastest
  GPU, the expert baseline of Mirhoseini et al. (ICML 2017) for Inception-V3 and of Spotlight
  (Gao et al., ICML 2018) for the CIFAR-10 CNN;
* ``lstm-layers`` for LSTM models (rnnlm, gnmt*): one LSTM layer per GPU (layer i on GPU i mod the
  number of GPUs, in order of first appearance), the embedding with the first layer that reads it,
  attention and softmax on the last GPU: the GNMT layout of Wu et al. 2016 that Mirhoseini et al.
  2017 use as the NMT/RNNLM expert;
* ``gpipe`` for Transformers (bert_*) and whenever the single fastest GPU is out of memory: a
  contiguous split of the layers over the GPUs balanced by compute (GPipe, Huang et al. 2019),
  without GPipe's micro-batch pipelining, which the cost model does not simulate (one step, one
  batch), so the split pays its transfers without overlap;
* unknown (user) graphs: the better of ``single-gpu`` and ``gpipe``.

Layers are found from the graph's structure, since exported op names carry no module names: a
Transformer layer ends at every second LayerNormalization (post-LN BERT: the embedding norm, then
two per layer); an LSTM layer is the set of weight-sharing Gemms (co-location groups) that feed the
gate Split of a cell. When a family's layers are not found, the layout falls back to a contiguous
topological split balanced by compute.
"""

from __future__ import annotations

import numpy as np

from baselines.registry import register
from baselines.scheduling import gpu_pool, memory_aware, op_memory
from placement_gym.cost_model import simulate, single_device
from placement_gym.evaluation.agents import AgentResult
from placement_gym.task.compiled import Task
from placement_gym.task.groups import colocation_grouping

LAYOUTS: tuple[str, ...] = ("single-gpu", "lstm-layers", "gpipe", "best-of")
# Graph-name prefixes of the bundled families and the layout their papers' experts used.
_FAMILY_LAYOUT: tuple[tuple[str, str], ...] = (
    ("inception", "single-gpu"),
    ("resnet", "single-gpu"),
    ("cifar10", "single-gpu"),
    ("rnnlm", "lstm-layers"),
    ("gnmt", "lstm-layers"),
    ("bert", "gpipe"),
)


def expert_layout(task: Task) -> str:
    """The expert layout for the task's graph (see the module docstring)."""
    name = task.graph.name.lower()
    for prefix, layout in _FAMILY_LAYOUT:
        if name.startswith(prefix):
            return layout
    return "best-of"


def _successor_ops(graph) -> tuple[np.ndarray, np.ndarray]:
    """(pointer, ops): the op-to-op predecessors of every forward op, CSR by consumer."""
    src = graph.edge_src.astype(np.int64)
    keep = src >= 0
    producer, consumer = src[keep], graph.edge_dst[keep].astype(np.int64)
    order = np.lexsort((producer, consumer))
    pointer = np.zeros(graph.n_ops + 1, dtype=np.int64)
    np.cumsum(np.bincount(consumer, minlength=graph.n_ops), out=pointer[1:])
    return pointer, producer[order]


def transformer_boundaries(task: Task) -> np.ndarray | None:
    """Ops after which a Transformer layer ends: every second LayerNormalization (post-LN: the
    embedding norm, then an attention norm and an output norm per layer). None when absent."""
    norms = np.flatnonzero(np.array(task.graph.op_types) == "LayerNormalization")
    if len(norms) < 3:
        return None
    return norms[::2]


def lstm_units(task: Task) -> tuple[np.ndarray, list[int], list[int]] | None:
    """Per forward op a unit label, the LSTM layer units in order of first appearance, and the
    embedding units; None when the graph has no LSTM cells.

    Units start as the co-location groups of ops that own or read parameters. A cell is an op of
    type Split (the gate split); the weight groups of the Gemm/MatMul ops feeding it (through at
    most two ops, the gate Add) are one LSTM layer (input and recurrent projections). Every other op
    joins the unit of its latest predecessor (highest index), so a cell's gate arithmetic follows
    its layer and attention arithmetic follows the attention projections."""
    g = task.graph
    types = np.array(g.op_types)
    splits = np.flatnonzero(types == "Split")
    if len(splits) == 0:
        return None
    groups = colocation_grouping(g).group_of_op
    reads_param = np.zeros(g.n_ops, dtype=bool)
    reads_param[g.edge_dst[g.tensor_is_parameter[g.edge_tensor]]] = True
    weighted = (g.param_bytes > 0) | reads_param
    pred_pointer, preds = _successor_ops(g)
    # Union the weight groups that feed one cell's Split.
    parent = {int(x): int(x) for x in np.unique(groups[weighted])}

    def find(x: int) -> int:
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    layer_groups: set[int] = set()
    for split in splits.tolist():
        frontier, feeding = [split], []
        for _ in range(3):
            nxt = []
            for op in frontier:
                for p in preds[pred_pointer[op] : pred_pointer[op + 1]].tolist():
                    (feeding if weighted[p] else nxt).append(p)
            frontier = nxt
        roots = sorted({find(int(groups[p])) for p in feeding})
        for r in roots[1:]:
            parent[find(r)] = find(roots[0])
        layer_groups.update(roots[:1])
    if not layer_groups:
        return None
    unit = np.full(g.n_ops, -1, dtype=np.int64)
    for op in range(g.n_ops):
        if weighted[op]:
            unit[op] = find(int(groups[op]))
        else:
            p = preds[pred_pointer[op] : pred_pointer[op + 1]]
            unit[op] = unit[p.max()] if len(p) else -1
    # Ops with no predecessor op (reading graph inputs only) join their first consumer's unit later.
    first_op = {}
    for op, u in enumerate(unit.tolist()):
        first_op.setdefault(u, op)
    layers = sorted({find(r) for r in layer_groups}, key=lambda u: first_op.get(u, g.n_ops))
    layers = [u for u in layers if u in first_op]
    gathers = np.flatnonzero(weighted & (types == "Gather"))
    embeddings = sorted({int(unit[op]) for op in gathers} - set(layers))
    return unit, layers, embeddings


def lstm_placement(task: Task) -> np.ndarray | None:
    """The GNMT layout (see the module docstring), or None when no LSTM layers are found."""
    found = lstm_units(task)
    if found is None:
        return None
    unit, layers, embeddings = found
    g = task.graph
    pool = gpu_pool(task)
    device_of_unit = {u: int(pool[i % len(pool)]) for i, u in enumerate(layers)}
    last = int(pool[-1])
    pred_pointer, preds = _successor_ops(g)
    # The first layer reading an embedding: the layer unit of the earliest op fed (directly or
    # through non-layer ops) by the embedding.
    for e in embeddings:
        members = set(np.flatnonzero(unit == e).tolist())
        target = None
        for op in range(g.n_ops):
            if unit[op] in device_of_unit and any(
                p in members for p in preds[pred_pointer[op] : pred_pointer[op + 1]].tolist()
            ):
                target = device_of_unit[int(unit[op])]
                break
        device_of_unit[e] = target if target is not None else int(pool[0])
    placement = np.array([device_of_unit.get(int(u), last) for u in unit], dtype=np.int64)
    # Ops with no predecessor op (unit -1) go with their first consumer.
    for op in np.flatnonzero(unit < 0)[::-1].tolist():
        consumers = g.edge_dst[np.isin(g.edge_tensor, np.flatnonzero(g.tensor_producer == op))]
        if len(consumers):
            placement[op] = placement[int(consumers.min())]
    return placement


def gpipe_placement(
    task: Task, boundaries: np.ndarray | None = None, capacity: np.ndarray | None = None
) -> np.ndarray:
    """GPipe-style split (Huang et al. 2019): the ops in topological order cut into at most one
    contiguous stage per GPU, only after ops in ``boundaries`` (layer ends; default: anywhere),
    minimising the largest stage's compute (forward + backward + update time on the GPU) subject
    to each stage's `op_memory` fitting its device's ``capacity`` (default: the cluster's). When
    the GPUs cannot hold the model, the other devices (host memory) take the last stages, as an
    expert offloading to the CPU would; when nothing fits, the memory limit is dropped (the result
    is then scored as infeasible)."""
    gpus = gpu_pool(task)
    others = np.setdiff1d(np.arange(task.n_devices), gpus)
    n = task.n_forward
    cuts = np.arange(n) if boundaries is None else np.unique(np.append(boundaries, n - 1))
    cuts = cuts[(cuts >= 0) & (cuts < n)]
    cuts = np.unique(np.append(cuts, n - 1))
    starts = np.concatenate([[0], cuts[:-1] + 1])
    per_op = task.duration[:, gpus].mean(axis=1)
    work = np.add.reduceat(np.bincount(task.op_forward, weights=per_op, minlength=n), starts)
    memory = np.add.reduceat(op_memory(task), starts)
    limits = np.array(task.cluster.memory_capacity if capacity is None else capacity, float)
    pool = gpus

    def pack(limit: float, use_memory: bool) -> np.ndarray | None:
        stage = np.zeros(len(starts), dtype=np.int64)
        s, load, used = 0, 0.0, 0.0
        for u in range(len(starts)):
            fits = load + work[u] <= limit and (not use_memory or used + memory[u] <= limits[pool[s]])
            if not fits and load > 0:
                s, load, used = s + 1, 0.0, 0.0
                if s >= len(pool):
                    return None
            stage[u], load, used = s, load + work[u], used + memory[u]
        return stage

    for pool, use_memory in ((gpus, True), (np.concatenate([gpus, others]), True), (gpus, False)):
        low, high = work.max(), work.sum()
        best = pack(high, use_memory)
        if best is None:
            continue
        for _ in range(60):  # bisection on the largest stage's work
            middle = (low + high) / 2
            stage = pack(middle, use_memory)
            if stage is None:
                low = middle
            else:
                best, high = stage, middle
        lengths = np.diff(np.append(starts, n))
        return pool[np.repeat(best, lengths)].astype(np.int64)
    raise AssertionError("unreachable: packing without memory limits always fits")


def _fastest_gpu(task: Task) -> tuple[int, bool]:
    """The fastest GPU whose memory holds the whole task (or the fastest GPU, infeasible)."""
    single = single_device(task)
    pool = gpu_pool(task)
    feasible = pool[single.feasible[pool]]
    choices = feasible if len(feasible) else pool
    return int(choices[np.argmin(single.runtimes[choices])]), bool(len(feasible))


@register("expert", "human-expert layouts of the papers (single GPU, GNMT layers per GPU, GPipe split)")
def expert(task: Task, seed: int = 0, budget: int | None = None) -> AgentResult:
    """The human expert's placement (see the module docstring). ``info["layout"]`` names the layout
    used. Evaluations: the single-device runs (one per device) when the single GPU is considered,
    plus one `simulate` per other layout compared or checked for memory. Deterministic."""
    layout = expert_layout(task)
    evaluations = 0
    if layout in ("single-gpu", "best-of"):
        device, fits = _fastest_gpu(task)
        evaluations += task.n_devices
        single = np.full(task.n_forward, device, dtype=np.int64)
        if layout == "single-gpu" and fits:
            return AgentResult(single, evaluations, {"layout": "single-gpu"})
    if layout == "lstm-layers":
        placement = lstm_placement(task)
        if placement is not None:
            evaluations += 1
            if simulate(task, placement).feasible:
                return AgentResult(placement, evaluations, {"layout": "lstm-layers"})
    boundaries = transformer_boundaries(task) if layout == "gpipe" else None
    gpipe = memory_aware(task, lambda capacity: (gpipe_placement(task, boundaries, capacity), {}))
    evaluations += gpipe.evaluations
    info = {"layout": "gpipe", "stage_boundaries": "layers" if boundaries is not None else "ops",
            "memory_retries": gpipe.info["memory_retries"]}
    if layout == "best-of":
        single_result = simulate(task, single)
        evaluations += 1
        if (not single_result.feasible, single_result.runtime) <= (
            not simulate(task, gpipe.placement).feasible, gpipe.info["simulated_runtime"]
        ):
            return AgentResult(single, evaluations, {"layout": "single-gpu"})
    return AgentResult(gpipe.placement, evaluations, info)


__all__ = ["LAYOUTS", "expert", "expert_layout", "gpipe_placement", "lstm_placement", "lstm_units",
           "transformer_boundaries"]
