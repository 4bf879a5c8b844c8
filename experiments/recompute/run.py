"""Activation recomputation against keeping every activation: one device and the GPipe expert's stages.

    python experiments/recompute/run.py

For each training step: the fastest GPU alone (runtime, peak memory) with and without
``recompute=True``, and for the Llama-2 70B step on four DGX H100 nodes the GPipe expert's placement
(found on the task with recomputation) under both. Modelled figures: deterministic, any machine.
"""

from __future__ import annotations

import numpy as np

import placement_gym as pg
from baselines.experts import expert
from placement_gym.cost_model import simulate

ONE_DEVICE = [
    ("inception_v3", "k80x4", "fp32", 1),
    ("gnmt4", "k80x4", "fp32", 1),
    ("bert_large", "h100x8", "bf16", 1),
    ("llama2_7b", "h100x8", "bf16", 1),
]


def row(task_id: str, result, gpus: np.ndarray) -> str:
    peak = result.peak_memory[gpus].max() / 1e9
    return f"| {task_id} | {result.runtime * 1e3:,.1f} | {peak:,.1f} | {'yes' if result.feasible else 'no'} |"


def main() -> None:
    print("| task | runtime (ms) | largest GPU peak (GB) | fits |")
    print("|---|---:|---:|---|")
    for graph, cluster, precision, m in ONE_DEVICE:
        for recompute in (False, True):
            task = pg.get_task(graph, cluster, "train_step", precision=precision, microbatches=m,
                               recompute=recompute)
            gpus = np.flatnonzero(np.array(task.cluster.device_kinds) == "gpu")
            placement = np.full(task.n_forward, gpus[0])
            print(row(task.id + " (one GPU)", simulate(task, placement), gpus))
    graph = pg.load_graph("llama2_70b")
    tasks = {rc: pg.get_task(graph, "dgx-h100x4", "train_step", precision="bf16", microbatches=4,
                             recompute=rc) for rc in (False, True)}
    found = expert(tasks[True])
    gpus = np.flatnonzero(np.array(tasks[True].cluster.device_kinds) == "gpu")
    for rc in (False, True):
        print(row(tasks[rc].id + " (expert's stages)", simulate(tasks[rc], found.placement), gpus))


if __name__ == "__main__":
    main()
