"""A pipelined step's modelled runtime against a stage-by-stage GPipe estimate.

Each graph is cut into contiguous stages of equal op counts, one per GPU of the cluster (in order),
and run as a ``train_step`` of M micro-batches. A stage's time T_s is the sum of its forward and
backward ops' durations for one micro-batch on its GPU (transfers, syncs and updates left out); the
GPipe estimate is sum(T_s) + (M - 1) max(T_s), a fill-drain pipeline whose stages each run one
micro-batch at a time; "no overlap" is M sum(T_s). Run: ``python experiments/pipeline_stages/run.py``
(results in docs/cost_model.md, "Pipelined steps").
"""

from __future__ import annotations

import numpy as np

import placement_gym as pg
from placement_gym.cost_model import simulate

CASES = (("resnet50", "k80x4", 4), ("bert_base", "v100x8", 4))


def main() -> None:
    for graph, cluster, m in CASES:
        task = pg.get_task(graph, cluster, "train_step", microbatches=m)
        gpus = [d for d, name in enumerate(task.cluster.device_names) if name.startswith("gpu")]
        n, p = task.n_forward, len(gpus)
        # contiguous stages of equal op counts, stage s on the s-th GPU
        placement = np.asarray(gpus, dtype=np.int64)[np.arange(n) * p // n]
        runtime = simulate(task, placement).runtime
        device = placement[task.op_forward]
        first = task.op_microbatch == 0  # micro-batch 0's forward and backward ops
        times = task.duration[np.arange(task.n_ops), device]
        stage = np.array([times[first & (device == d)].sum() for d in gpus])
        gpipe = stage.sum() + (m - 1) * stage.max()
        print(f"{graph}/{cluster}, M = {m}, {p} stages: modelled {runtime * 1e3:.0f} ms, "
              f"GPipe estimate {gpipe * 1e3:.0f} ms, no overlap {m * stage.sum() * 1e3:.0f} ms")


if __name__ == "__main__":
    main()
