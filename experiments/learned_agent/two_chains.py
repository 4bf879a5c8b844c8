"""Probe: move-policy's variants on a hand-built graph where heavy ops must move.

Two chains of 8 heavy ops and 120 light ops (each reads a chain op's output), inference on k80x2, from
the best single device; 7 seeds per variant. Prints each variant's runtimes / start runtime and their
median::

    nice -n 15 python experiments/learned_agent/two_chains.py 160
"""

from __future__ import annotations

import sys

import numpy as np

from baselines.learning.move_policy import move_policy
from placement_gym.cluster import PRESETS
from placement_gym.graph.opgraph import OpGraph
from placement_gym.task.compiled import make_task

VARIANTS = {
    "uniform": {"weights": "zero", "learning_rate": 0.0},
    "online-only": {"weights": "zero"},
    "full": {},
    "pretrained-only": {"learning_rate": 0.0},
}


def two_chains(length: int = 8, light: int = 120) -> OpGraph:
    """The graph of the module docstring (tensors of 1 kB)."""
    n = 2 * length + light
    edge_tensor, edge_dst = [], []
    for c in range(2):
        for i in range(length):
            op = c * length + i
            edge_tensor.append(n if i == 0 else op - 1)  # tensor n: the data input
            edge_dst.append(op)
    for j in range(light):
        edge_tensor.append(j % (2 * length))
        edge_dst.append(2 * length + j)
    is_output = np.zeros(n + 1, dtype=bool)
    is_output[[length - 1, 2 * length - 1]] = True
    is_output[2 * length: n] = True
    order = np.lexsort((edge_tensor, edge_dst))
    return OpGraph(
        name="two_chains", op_names=tuple(f"op{i}" for i in range(n)), op_types=("MatMul",) * n,
        category=np.zeros(n, np.int8), flops=np.array([2e10] * (2 * length) + [1e5] * light),
        bytes_accessed=np.full(n, 1e4), param_bytes=np.zeros(n),
        tensor_names=tuple(f"t{i}" for i in range(n)) + ("input",),
        tensor_producer=np.append(np.arange(n), -1),
        tensor_bytes=np.full(n + 1, 1e3), tensor_is_parameter=np.zeros(n + 1, dtype=bool),
        tensor_is_output=is_output, edge_tensor=np.array(edge_tensor)[order],
        edge_dst=np.array(edge_dst)[order],
    )


def main() -> None:
    budget = int(sys.argv[1]) if len(sys.argv) > 1 else 160
    task = make_task(two_chains(), PRESETS["k80x2"](), "inference")
    for name, config in VARIANTS.items():
        ratios = []
        for seed in range(7):
            result = move_policy(task.independent_copy(), seed=seed, budget=budget, start="best-single",
                                 **config)
            ratios.append(result.info["runtime"] / result.info["start_runtime"])
        print(f"{name}: {np.round(ratios, 3).tolist()} median {np.median(ratios):.3f}")


if __name__ == "__main__":
    main()
