"""Fit the plan cost model's kernel efficiencies (placement_gym/plans/kernels.py) to the calibration
rows of placement_gym/calibration/published_plans.json, and only to them.

Five figures: Ampere's half-precision matmul and materialised-attention efficiencies, Hopper's bf16 and
fp8 matmul and FlashAttention efficiencies. Coordinate descent on a grid of 0.01 from the shipped
figures, minimising the largest error over tolerance of the calibration rows (ties: the sum of squared
errors). Prints each round, the fitted figures and every row (held-out rows last, never used).

    python experiments/plan_calibration/fit.py
"""

from __future__ import annotations

import numpy as np

from placement_gym.calibration.plans import compare_plans, load_plan_rows
from placement_gym.plans import kernels

GRID = np.round(np.arange(0.20, 0.96, 0.01), 2)


def figures() -> dict[str, float]:
    a, h = kernels.EFFICIENCY["ampere"], kernels.EFFICIENCY["hopper"]
    return {
        "ampere.matmul": a.matmul["fp16"],
        "ampere.scores": a.scores,
        "hopper.bf16": h.matmul["bf16"],
        "hopper.fp8": h.matmul["fp8"],
        "hopper.attention": h.attention,
    }


def install(values: dict[str, float]) -> None:
    a, h = kernels.EFFICIENCY["ampere"], kernels.EFFICIENCY["hopper"]
    half = values["ampere.matmul"]
    kernels.EFFICIENCY["ampere"] = kernels.KernelEfficiency(
        {"bf16": half, "fp16": half}, a.attention, values["ampere.scores"], a.calibrated_on
    )
    bf16 = values["hopper.bf16"]
    kernels.EFFICIENCY["hopper"] = kernels.KernelEfficiency(
        {"bf16": bf16, "fp16": bf16, "fp8": values["hopper.fp8"]},
        values["hopper.attention"],
        h.scores,
        h.calibrated_on,
    )


def loss(values: dict[str, float], rows) -> tuple[float, float]:
    install(values)
    ratios = [r.error / r.row.tolerance for r in compare_plans(rows)]
    return max(abs(x) for x in ratios), float(np.sum(np.square(ratios)))


def main() -> None:
    rows = tuple(r for r in load_plan_rows() if r.role == "calibration")
    values = figures()
    best = loss(values, rows)
    print(f"start {values}: worst error / tolerance {best[0]:.3f}")
    for round_ in range(1, 6):
        changed = False
        for key in values:
            for candidate in GRID:
                trial = {**values, key: float(candidate)}
                score = loss(trial, rows)
                if score < best:
                    best, values, changed = score, trial, True
        print(f"round {round_}: worst error / tolerance {best[0]:.3f} at {values}")
        if not changed:
            break
    install(values)
    for result in compare_plans():
        print(
            f"{result.row.id:32} {result.row.role:12} error {result.error:+6.1%} "
            f"(tolerance {result.row.tolerance:.0%})"
        )


if __name__ == "__main__":
    main()
