"""Which multi-node clusters hold an LLM's mixed-precision training step: the arithmetic and the model.

Mixed-precision Adam keeps 16 bytes per parameter (bf16 weights and gradients, an fp32 master copy and
two fp32 moments), so Llama-2 70B needs about 1.1 TB and GPT-3 175B about 2.8 TB before activations,
while a DGX H100 node has 8 x 80 GB = 640 GB of GPU memory. For each graph and cluster this prints
that arithmetic next to what the cost model says of a GPU-only pipeline placement: the forward ops in
topological order cut into one contiguous stage per GPU, stages balanced by static bytes (backward
and update ops follow their forward op).

    python examples/llm_memory_fit.py
    python examples/llm_memory_fit.py --graph llama2_70b --clusters h100x8,dgx-h100x4 --microbatches 4
"""

from __future__ import annotations

import argparse

import numpy as np

import placement_gym as pg
from placement_gym.cost_model import simulate


def gpu_pipeline(task: pg.Task) -> np.ndarray:
    """One contiguous stage per GPU over the topological order, cut where the static bytes (plus one
    byte per op, so that ops without parameters spread too) reach each GPU's equal share."""
    gpus = np.array([i for i, kind in enumerate(task.cluster.device_kinds) if kind == "gpu"])
    weight = task.static_bytes + 1.0
    share = np.cumsum(weight) / weight.sum()
    return gpus[np.minimum((share * len(gpus)).astype(int), len(gpus) - 1)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--graph", action="append", help="graph (repeatable; default: llama2_70b, gpt3_175b)")
    parser.add_argument("--clusters", default="h100x8,dgx-h100x2,dgx-h100x4,dgx-h100x8")
    parser.add_argument("--precision", default="bf16", choices=("fp32", "bf16", "fp16"))
    parser.add_argument("--microbatches", type=int, default=1)
    args = parser.parse_args()
    step = pg.Step("train_step", precision=args.precision, microbatches=args.microbatches)
    for graph in args.graph or ["llama2_70b", "gpt3_175b"]:
        for cluster in args.clusters.split(","):
            task = pg.get_task(graph, cluster, step)
            is_gpu = np.array([kind == "gpu" for kind in task.cluster.device_kinds])
            gpu_memory = task.cluster.memory_capacity[is_gpu].sum()
            static = task.static_bytes.sum()
            result = simulate(task, gpu_pipeline(task))
            print(f"{task.id}: parameters, gradients and optimizer state {static / 1e12:.3f} TB, GPU memory "
                  f"{gpu_memory / 1e12:.2f} TB; GPU-only pipeline: "
                  f"{'fits' if result.feasible else 'out of memory'}, largest GPU peak "
                  f"{result.peak_memory[is_gpu].max() / 1e9:.1f} GB, step {result.runtime:.2f} s")


if __name__ == "__main__":
    main()
