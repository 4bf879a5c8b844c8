"""The tasks of a parallel-plan suite (a suite file whose ``placement_format`` is ``plan``, the
``parallel`` track): what a plan task freezes, and how a submitted plan is re-priced.

A plan task's id is its `PlanTask` id, ``<model>/<mesh>/gb<B>[+fp16|+fp8]`` (`parse_plan_task_id`); a
submission's placement for it is the plan as its id (`Plan.suffix`: ``tp8-pp4-vp5-dp2-gb128-sp-zero1``),
per-stage layers and tensor degrees included. A plan task freezes, in the fields of every suite task:

* ``graph_sha256``: the sha256 of the model's figures (every field of `TransformerModel`);
* ``cluster_sha256``: a digest of the mesh's figures (every field but its name and sources);
* ``structure_sha256``: a digest of the problem (global batch, precision) and of the value lists of
  every plan dimension (`DIMENSIONS`), which a plan task's choices index;
* ``best_single_runtime``: the reference step, that of the rules' plan (`rules_plan`: Megatron-LM's
  and NeMo's rules of thumb), the default the field starts from, as a placement task's reference is the
  best single device; ``single_device_runtimes`` holds that one step;
* ``lower_bound``: `PlanTask.lower_bound_s` (the step's matrix-product work over every GPU at the
  highest efficiency the kernels reach);
* ``probes``: three fixed plans (`probe_plans`: the first, the middle and the last of the task's
  divisor layouts, full recomputation, ZeRO-1 where data parallelism allows) with their step and the
  bytes on the fullest GPU: they move with every part of the plan model.

The rules' step is inf where no plan of the rules fits; a suite holds only tasks the rules fit
(`measure_plan_task` refuses others), so that every frozen figure is a finite number.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math

from placement_gym.leaderboard.suite import Probe, SuiteTask, differs_from_frozen, short_digest
from placement_gym.plans.evaluate import PlanResult, evaluate_plan
from placement_gym.plans.plan import Plan, plan_problems
from placement_gym.plans.rules import choice_of_values, rules_plan
from placement_gym.plans.space import DIMENSIONS, PlanTask

PROBES: tuple[str, ...] = ("first-layout", "middle-layout", "last-layout")
# Mesh fields that do not enter a price.
_MESH_UNCOSTED = ("name", "sources")


def model_digest(task: PlanTask) -> str:
    """The sha256 of every figure of the task's model (as JSON, keys sorted)."""
    return hashlib.sha256(json.dumps(dataclasses.asdict(task.model), sort_keys=True).encode()).hexdigest()


def mesh_digest(task: PlanTask) -> str:
    """A digest of every figure of the task's mesh but its name and sources."""
    mesh = task.mesh
    return short_digest([(f.name, json.dumps(dataclasses.asdict(mesh)[f.name], sort_keys=True))
                   for f in dataclasses.fields(mesh) if f.name not in _MESH_UNCOSTED])


def problem_digest(task: PlanTask) -> str:
    """A digest of the task's global batch and precision and of the value lists a choice indexes."""
    return short_digest([("global_batch", task.global_batch), ("precision", task.precision),
                   *((name, json.dumps(values)) for name, values in DIMENSIONS.items())])


def probe_plans(task: PlanTask) -> dict[str, Plan]:
    """The probe plans of `PROBES`: the first, the middle and the last of the task's divisor layouts
    (`PlanTask.degree_combos`, in its fixed order) with the schedule their virtual stages call for, no
    sequence parallelism, ZeRO-1 where the data-parallel degree is above 1 and full recomputation."""
    combos = task.degree_combos
    plans = {}
    for name, combo in zip(PROBES, (combos[0], combos[len(combos) // 2], combos[-1])):
        tp, pp, cp, vp, ep, mbs = combo
        dp = task.mesh.gpus // (tp * pp * cp)
        values = {"tp": tp, "pp": pp, "vp": vp, "cp": cp, "ep": ep, "microbatch_size": mbs,
                  "schedule": "interleaved" if vp > 1 else "1f1b", "sequence_parallel": False,
                  "zero": 1 if dp > 1 else 0, "recompute": "full"}
        plans[name] = task.plan_of(choice_of_values(values))
    return plans


def measure_plan_task(task: PlanTask) -> SuiteTask:
    """The frozen figures of ``task`` under the current code (module docstring); ValueError when the
    rules' plan does not fit (no finite reference) or no layout divides."""
    if not task.degree_combos:
        raise ValueError(f"plan task {task.id}: no divisor layout of its GPUs, heads and batch")
    scratch = PlanTask(task.model, task.mesh, task.global_batch, task.precision)  # counts nothing of task's
    _, reference, _ = rules_plan(scratch)
    if not math.isfinite(reference):
        raise ValueError(f"plan task {task.id}: the rules' plan does not fit; a suite holds tasks whose "
                         "reference step is a number")
    probes = []
    for name, plan in probe_plans(task).items():
        result = evaluate_plan(task.model, plan, task.mesh)
        probes.append(Probe(name, float(result.step_s), (int(round(result.peak_memory_bytes)),)))
    return SuiteTask(task.id, model_digest(task), float(reference), float(task.lower_bound_s),
                     (float(reference),), tuple(probes), mesh_digest(task), problem_digest(task))


def plan_fingerprint_problems(suite_task: SuiteTask, task: PlanTask) -> list[str]:
    """Why the current code no longer reproduces ``suite_task``'s frozen figures (empty: it does)."""
    now = measure_plan_task(task)
    problems = []
    for name, what in (("graph_sha256", "model figures"), ("cluster_sha256", "mesh figures"),
                       ("structure_sha256", "problem or plan dimensions")):
        if getattr(now, name) != getattr(suite_task, name):
            problems.append(f"{what} changed (digest {getattr(now, name)[:16]}, suite froze "
                            f"{getattr(suite_task, name)[:16]})")
    for name, what in (("best_single_runtime", "the rules' step"), ("lower_bound", "lower bound")):
        value, frozen = getattr(now, name), getattr(suite_task, name)
        if differs_from_frozen(value, frozen):
            problems.append(f"{what} is {value!r} s, suite froze {frozen!r} s")
    measured = {probe.name: probe for probe in now.probes}
    for probe in suite_task.probes:
        current = measured.get(probe.name)
        if current is None:
            problems.append(f"probe plan {probe.name!r} is unknown to this code")
        elif differs_from_frozen(current.runtime, probe.runtime):
            problems.append(f"{probe.name} probe step is {current.runtime!r} s, suite froze "
                            f"{probe.runtime!r} s")
        elif any(differs_from_frozen(a, b) for a, b in zip(current.peak_memory, probe.peak_memory)):
            problems.append(f"{probe.name} probe's fullest GPU holds {current.peak_memory[0]} bytes, suite "
                            f"froze {probe.peak_memory[0]}")
    return problems


def submitted_plan(task: PlanTask, placement: object) -> tuple[Plan | None, list[str]]:
    """``(plan, reasons)``: the plan a submission's placement names for ``task`` (its id, `Plan.suffix`),
    or None and the one-line reasons it is none of this task's or cannot run (memory aside: a plan
    that does not fit is a result, infeasible)."""
    if not isinstance(placement, str):
        return None, [f"a placement of plan task {task.id} is a plan's id (such as "
                      "tp8-pp4-vp5-dp2-gb128-sp-zero1), not an op mapping"]
    try:
        plan = task.plan_of(Plan.from_suffix(placement))
    except (ValueError, TypeError) as error:
        return None, [f"plan {placement[:80]!r}: {error}"]
    problems = plan_problems(plan, task.model, task.mesh)
    return (None, [f"plan {placement[:80]!r} cannot run: {problems[0]}"]) if problems else (plan, [])


def price(task: PlanTask, plan: Plan) -> PlanResult:
    """The priced step of ``plan`` (not counted in the task's evaluations: what validation re-prices)."""
    return evaluate_plan(task.model, plan, task.mesh)
