"""Megatron-LM's and NeMo's rules of thumb for a plan task: the plan the field starts from, and the
reference a parallel-track suite freezes per task (`placement_gym.leaderboard.plan_suite`), as a
placement suite freezes the best single device.

`rules_plan` lays tensor parallelism inside a node, a pipeline across nodes only as deep as the weights
and optimizer state need, data parallelism over the rest with the distributed optimizer (ZeRO-1),
sequence parallelism with tensor parallelism, selective recomputation, one sequence a micro-batch, the
interleaved schedule where the layers and the micro-batches allow, eight-way expert parallelism for
mixtures; when the plan does not fit, full recomputation, then a deeper pipeline.
`state_bytes_lower_bound` is the memory test it ranks pipelines by (and the sweep prunes by).
"""

from __future__ import annotations

import itertools
import math

import numpy as np

from placement_gym.plans.space import DIMENSION_NAMES, DIMENSIONS, PlanTask

# Bytes a weight holds in mixed precision with Adam: 2 weight + 2 gradient + 12 master weight and moments.
WEIGHT_BYTES = 16.0
SHARDED_BY_ZERO = {0: 0.0, 1: 12.0, 2: 14.0, 3: 16.0}
# A plan by the rules leaves this share of a GPU's memory to activations.
RULES_STATE_SHARE = 0.5
# Plans the rules price at most: two recomputation settings for each of the four smallest groups.
RULES_EVALUATIONS = 8


def state_bytes_lower_bound(task: PlanTask, values: dict) -> float:
    """Bytes of weights and optimizer state no GPU of the plan can hold less than: the model's weights
    spread evenly over the tensor, pipeline and (for experts) expert degrees, ZeRO's share over the
    data-parallel group."""
    tp, pp, cp = values["tp"], values["pp"], values["cp"]
    dp = task.mesh.gpus // (tp * pp * cp)
    per_gpu = task.model.parameters() / (tp * pp * values["ep"])
    sharded = SHARDED_BY_ZERO[values["zero"]]
    # 0.999: the plan model's static bytes leave out a few vectors `parameters()` counts (under 1e-6 of
    # them), so that the bound stays below what it prices
    return 0.999 * per_gpu * (WEIGHT_BYTES - sharded + sharded / dp)


def choice_of_values(values: dict) -> np.ndarray:
    """The choice (one value index per dimension) of ``values``, a value per dimension name."""
    return np.array([DIMENSIONS[name].index(values[name]) for name in DIMENSION_NAMES], dtype=np.int64)


def rules_plan(task: PlanTask, budget: int | None = None) -> tuple[np.ndarray, float, int]:
    """``(choice, step seconds, evaluations)``: the rules' plan of ``task`` (module docstring), priced
    through ``task.evaluate`` (each counted), at most ``budget`` plans (None: `RULES_EVALUATIONS`); the
    step is inf when no plan tried fits, the choice then the first tried."""
    model, mesh = task.model, task.mesh
    allowed = {name: [v for v, ok in zip(DIMENSIONS[name], mask) if ok]
               for name, mask in zip(DIMENSION_NAMES, task.value_masks)}
    memory = mesh.gpu.memory * RULES_STATE_SHARE
    ep = max([e for e in allowed["ep"] if e <= 8], default=1)
    # the smallest model-parallel group whose state fits the rule's share, tensor degree first (inside a
    # node), then depth; where none does, the groups that leave the least state on a GPU
    ranked = []
    for pp, tp in itertools.product(allowed["pp"], allowed["tp"]):
        if mesh.gpus % (tp * pp) == 0 and task.global_batch % (mesh.gpus // (tp * pp)) == 0:
            state = state_bytes_lower_bound(task, {"tp": tp, "pp": pp, "cp": 1, "ep": ep, "zero": 1})
            ranked.append(((0, tp * pp, pp) if state <= memory else (1, state, pp), tp, pp))
    evaluations, best, best_step = 0, None, math.inf
    limit = RULES_EVALUATIONS if budget is None else budget
    for _, tp, pp in sorted(ranked)[:4]:
        dp = mesh.gpus // (tp * pp)
        microbatches = task.global_batch // max(dp, 1)
        vp = max([v for v in allowed["vp"] if pp > 1 and model.layers % (pp * v) == 0
                  and microbatches % pp == 0], default=1)
        for recompute in ("selective", "full"):
            if evaluations >= limit:
                break
            values = {"tp": tp, "pp": pp, "vp": vp, "cp": 1, "ep": ep if ep <= dp and dp % ep == 0 else 1,
                      "microbatch_size": 1, "schedule": "interleaved" if vp > 1 else "1f1b",
                      "sequence_parallel": tp > 1, "zero": 1 if dp > 1 else 0, "recompute": recompute}
            choice = choice_of_values(values)
            result = task.evaluate(choice)
            step = result.step_s if result.feasible else math.inf
            evaluations += 1
            if step < best_step or best is None:
                best, best_step = choice, step
            if math.isfinite(step):
                break
        if math.isfinite(best_step):
            break
    if best is None:  # no group divides: the first degrees the masks allow, as the rules would try
        best = np.array([int(np.flatnonzero(mask)[0]) for mask in task.value_masks], dtype=np.int64)
    return best, best_step, evaluations
