"""`PlanTask`: one plan-finding problem (a model, a mesh, a global batch and a precision), the plans
that can be asked of it as a choice per dimension (`DIMENSIONS`), and its evaluation counter.

A plan is chosen as one value per dimension, in `DIMENSIONS`' order: the tensor, pipeline, virtual
stage, context and expert degrees, the micro-batch size, the schedule, sequence parallelism, the ZeRO
stage and the recomputation; the data-parallel degree is what the mesh's GPUs leave
(GPUs / (tp x pp x cp)), the precision and FlashAttention are the task's. The value lists are the same
for every task, so that an environment's action space is too; `PlanTask.value_masks` says which values
of each dimension can be part of a plan of this task at all, and `PlanTask.choice_masks` which stay
possible once some dimensions are chosen. Where the pipeline's virtual stages do not divide the layers
evenly, the plan spreads the remainder over the first stages (`Plan.stage_layers`), as Megatron-LM's
uneven pipelines do.

A choice is a plan's encoding as an int64 array (one value index per dimension): an agent's answer to a
`PlanTask` is a choice, as a placement is its answer to a placement task, so that plan agents return the
project's one `AgentResult` (`PlanTask.check_placement` checks one). A planner that sets values per
pipeline stage (the layers of each, its tensor degree) answers with the `Plan` itself instead."""

from __future__ import annotations

import itertools
import re
from dataclasses import dataclass, field
from functools import cached_property

import numpy as np

from placement_gym.plans.evaluate import PlanResult, evaluate_plan
from placement_gym.plans.kernels import EFFICIENCY
from placement_gym.plans.mesh import Mesh, mesh_from_name
from placement_gym.plans.models import TransformerModel, model_from_spec
from placement_gym.plans.plan import PRECISIONS, Plan, plan_problems
from placement_gym.task.evaluations import CountsEvaluations

# dimension -> its values, the same for every task
DIMENSIONS: dict[str, tuple] = {
    "tp": (1, 2, 4, 8),
    "pp": (1, 2, 4, 8, 16, 32, 64),
    "vp": (1, 2, 3, 4, 5, 6, 8),
    "cp": (1, 2, 4),
    "ep": (1, 2, 4, 8, 16, 32, 64),
    "microbatch_size": (1, 2, 4, 8),
    "schedule": ("1f1b", "gpipe", "interleaved"),
    "sequence_parallel": (False, True),
    "zero": (0, 1, 2, 3),
    "recompute": ("none", "selective", "full"),
}
DIMENSION_NAMES: tuple[str, ...] = tuple(DIMENSIONS)
OPTION_COUNTS: tuple[int, ...] = tuple(len(values) for values in DIMENSIONS.values())
# The dimensions of `PlanTask.degree_combos`, in their order.
_DEGREES = ("tp", "pp", "cp", "vp", "ep", "microbatch_size")


@dataclass(frozen=True, eq=False)
class PlanTask(CountsEvaluations):
    """Find a plan for ``model`` on ``mesh`` at ``global_batch`` sequences a step and ``precision``
    (bf16, fp16 or fp8). ``id``: ``<model>/<mesh>/gb<B>`` and ``+<precision>`` when not bf16.
    `evaluate` prices a plan and counts it in the task's evaluations."""

    model: TransformerModel
    mesh: Mesh
    global_batch: int
    precision: str = "bf16"
    id: str = field(init=False)
    # layer prices kept between evaluations (`evaluate_plan`'s ``layers``)
    _layers: dict = field(init=False, default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        if not isinstance(self.global_batch, int) or isinstance(self.global_batch, bool) or not (
                1 <= self.global_batch <= 1 << 22):
            raise ValueError(f"a plan task's global batch is an integer from 1 to {1 << 22:,}, got "
                             f"{self.global_batch!r}")
        if self.precision not in PRECISIONS:
            raise ValueError(f"a plan task's precision is one of {', '.join(PRECISIONS)}, got "
                             f"{self.precision!r}")
        if self.precision not in self.mesh.gpu.peak:
            gpu = next((g for g in self.mesh.gpu.members if self.precision not in g.peak), self.mesh.gpu)
            mixed = f" (of the mixed mesh {self.mesh.name})" if self.mesh.parts else ""
            raise ValueError(f"{gpu.model}{mixed} has no {self.precision} tensor cores")
        suffix = "" if self.precision == "bf16" else f"+{self.precision}"
        object.__setattr__(self, "id", f"{self.model.name or self.model.family}/{self.mesh.name}/"
                                       f"gb{self.global_batch}{suffix}")

    @property
    def n_forward(self) -> int:
        """The length of a choice (one value per dimension), as a placement's length is a task's
        forward ops."""
        return len(DIMENSIONS)

    @property
    def lower_bound_s(self) -> float:
        """Seconds no plan's step can beat in the plan model: the step's linear-layer FLOPs (forward and
        backward, 6 a weight a token: attention projections, ``top_k`` experts or the MLP, the output
        head) over every GPU at the precision's peak times the fitted matmul efficiency, the most any
        kernel reaches. Each op of a stage takes at least its FLOPs at that rate and a GPU runs its ops
        one at a time, so the busiest GPU takes at least the average. On a mixed mesh, over the sum of
        every GPU's own rate: a GPU g doing w_g of the FLOPs takes at least w_g / r_g (in lock step with
        a slower one, longer), and a step T with w_g <= T r_g for every g has sum w_g <= T sum r_g."""
        model, mesh = self.model, self.mesh
        weights = model.layers * (model.attention_parameters() + model.top_k * model.expert_parameters())
        flops = 6.0 * (weights + model.vocab * model.hidden) * self.global_batch * model.seq
        if mesh.parts:
            return flops / sum(part.gpus * part.gpu.peak[self.precision]
                               * EFFICIENCY[part.gpu.architecture].matmul[self.precision]
                               for part in mesh.parts)
        rate = mesh.gpu.peak[self.precision] * EFFICIENCY[mesh.gpu.architecture].matmul[self.precision]
        return flops / (mesh.gpus * rate)

    def plan_of(self, answer) -> Plan:
        """The plan an answer names: a choice (module docstring) or a `Plan` of this task's GPUs, global
        batch and precision (what a planner that sets values per stage answers: `Plan.stage_layers`,
        `Plan.stage_tp`); ValueError for a choice of the wrong shape, an index out of its dimension's
        range or a plan of another task. The plan may still not run (`problems`)."""
        if isinstance(answer, Plan):
            return self._own_plan(answer)
        choice = self.check_placement(answer)
        values = {name: DIMENSIONS[name][int(k)] for name, k in zip(DIMENSION_NAMES, choice)}
        tp, pp, cp = values["tp"], values["pp"], values["cp"]
        dp = max(self.mesh.gpus // (tp * pp * cp), 1)
        virtual = pp * values["vp"]
        share, left = divmod(self.model.layers, virtual)
        stage_layers = () if left == 0 or share == 0 else tuple(share + (k < left) for k in range(virtual))
        return Plan(tp=tp, pp=pp, dp=dp, global_batch=self.global_batch, vp=values["vp"], cp=cp,
                    ep=values["ep"], microbatch_size=values["microbatch_size"], schedule=values["schedule"],
                    sequence_parallel=values["sequence_parallel"], zero=values["zero"],
                    recompute=values["recompute"], precision=self.precision, stage_layers=stage_layers)

    def _own_plan(self, plan: Plan) -> Plan:
        """``plan`` when it is a plan of this task (all its GPUs, its global batch and precision);
        ValueError naming the first figure that differs."""
        for what, value, own in (("GPUs", plan.gpus, self.mesh.gpus),
                                 ("global batch", plan.global_batch, self.global_batch),
                                 ("precision", plan.precision, self.precision)):
            if value != own:
                raise ValueError(f"plan {plan.suffix()} has {what} {value}; plan task {self.id} has {own}")
        return plan

    def problems(self, answer) -> list[str]:
        """Why the plan of ``answer`` (a choice or a `Plan`) cannot run (empty: it can, memory aside)."""
        return plan_problems(self.plan_of(answer), self.model, self.mesh)

    def evaluate(self, answer) -> PlanResult:
        """The priced plan of ``answer`` (a choice or a `Plan`; an infeasible result with its reasons
        where it cannot run), counted as one evaluation of this task."""
        result = evaluate_plan(self.model, self.plan_of(answer), self.mesh, self._layers)
        self.count_evaluations(1, result.step_s, result.feasible)
        return result

    def check_placement(self, answer, batch: bool = False):
        """``answer`` as an int64 array of one value index per dimension, or a `Plan` of this task
        (`plan_of`), or a one-line ValueError (the name `Task.check_placement` has, so that
        `AgentResult.checked` checks plan agents too)."""
        if isinstance(answer, Plan):
            return self._own_plan(answer)
        array = np.asarray(answer)
        if array.dtype.kind not in "iu" or array.shape != (len(DIMENSIONS),):
            raise ValueError(f"a choice for plan task {self.id} is {len(DIMENSIONS)} integers, one value "
                             f"index per dimension ({', '.join(DIMENSION_NAMES)}); got shape {array.shape}")
        bad = (array < 0) | (array >= np.asarray(OPTION_COUNTS))
        if bad.any():
            k = int(np.argmax(bad))
            raise ValueError(f"choice for plan task {self.id}: {DIMENSION_NAMES[k]} index {int(array[k])} is "
                             f"not one of 0..{OPTION_COUNTS[k] - 1}")
        return array.astype(np.int64)

    @cached_property
    def value_masks(self) -> tuple[np.ndarray, ...]:
        """Per dimension, which of its values a plan of this task can use whatever else is chosen
        (degrees that divide the GPUs, heads, layers and experts, sequence parallelism only where a
        tensor degree above 1 can be chosen...)."""
        return self.choice_masks({})

    @cached_property
    def degree_combos(self) -> tuple[tuple[int, int, int, int, int, int], ...]:
        """Every ``(tp, pp, cp, vp, ep, microbatch_size)`` of `DIMENSIONS`' values that passes the
        divisibility rules on this task (memory aside), tensor, pipeline and context degrees outermost:
        what the masks allow and what the sweep prices."""
        model, gpus = self.model, self.mesh.gpus
        combos = []
        for tp, pp, cp in itertools.product(DIMENSIONS["tp"], DIMENSIONS["pp"], DIMENSIONS["cp"]):
            if tp > self.mesh.gpus_per_node or gpus % (tp * pp * cp) or pp > model.layers:
                continue
            if model.heads % tp or model.ffn_width % tp or (
                    model.key_value_heads % tp and tp % model.key_value_heads):
                continue
            if model.seq % cp or (cp > 1 and (model.seq // cp) % 2):
                continue
            dp = gpus // (tp * pp * cp)
            others = itertools.product(DIMENSIONS["vp"], DIMENSIONS["ep"], DIMENSIONS["microbatch_size"])
            for vp, ep, mbs in others:
                if pp * vp > model.layers or (vp > 1 and pp < 2):
                    continue
                if ep > 1 and (model.family != "moe" or model.experts % ep or dp % ep):
                    continue
                if self.global_batch % (dp * mbs):
                    continue
                microbatches = self.global_batch // (dp * mbs)
                if vp > 1 and microbatches % pp:
                    continue
                combos.append((tp, pp, cp, vp, ep, mbs))
        return tuple(combos)

    def choice_masks(self, chosen: dict[str, int]) -> tuple[np.ndarray, ...]:
        """Per dimension, which values stay possible given the value indices ``chosen`` (dimension name
        -> index) so far: those for which some completion passes the divisibility rules (memory aside)."""
        fixed = {name: DIMENSIONS[name][k] for name, k in chosen.items()}
        combos = [combo for combo in self.degree_combos
                  if all(fixed.get(name, value) == value for name, value in zip(_DEGREES, combo))]
        masks = {name: np.zeros(len(values), dtype=bool) for name, values in DIMENSIONS.items()}
        for combo in combos:
            for name, value in zip(_DEGREES, combo):
                masks[name][DIMENSIONS[name].index(value)] = True
        if combos:
            interleaved = any(c[3] > 1 for c in combos)
            plain = any(c[3] == 1 for c in combos)
            for k, schedule in enumerate(DIMENSIONS["schedule"]):
                masks["schedule"][k] = interleaved if schedule == "interleaved" else plain
            masks["sequence_parallel"][0] = True
            masks["sequence_parallel"][1] = any(c[0] > 1 for c in combos)
            masks["zero"][:] = True
            masks["recompute"][:] = True
        for name, k in chosen.items():
            keep = masks[name][k]
            masks[name][:] = False
            masks[name][k] = keep
        return tuple(masks[name] for name in DIMENSION_NAMES)

    def choice_of(self, plan: Plan) -> np.ndarray:
        """The choice that encodes ``plan`` (its degrees, micro-batch size, schedule and options; its data
        degree, batch and precision follow from the task); ValueError for a value no dimension has."""
        values = {"tp": plan.tp, "pp": plan.pp, "vp": plan.vp, "cp": plan.cp, "ep": plan.ep,
                  "microbatch_size": plan.microbatch_size, "schedule": plan.schedule,
                  "sequence_parallel": plan.sequence_parallel, "zero": plan.zero, "recompute": plan.recompute}
        choice = []
        for name in DIMENSION_NAMES:
            if values[name] not in DIMENSIONS[name]:
                raise ValueError(f"plan {name} {values[name]!r} is not one of {DIMENSIONS[name]}")
            choice.append(DIMENSIONS[name].index(values[name]))
        return np.array(choice, dtype=np.int64)


def plan_task(model: str | TransformerModel, mesh: str | Mesh, global_batch: int,
              precision: str = "bf16") -> PlanTask:
    """A `PlanTask` from a model (a `TransformerModel`, a preset name or ``family:key=value,...``) and a
    mesh (a `Mesh` or ``dgx-h100xN``/``dgx-a100xN``, or a mixed ``dgx-a100xN+dgx-h100xM``)."""
    model = model if isinstance(model, TransformerModel) else model_from_spec(model)
    mesh = mesh if isinstance(mesh, Mesh) else mesh_from_name(mesh)
    return PlanTask(model, mesh, global_batch, precision)


_PLAN_TASK_BATCH = re.compile(r"gb([1-9][0-9]{0,7})(?:\+(fp16|fp8))?")


def is_plan_task_id(task_id: str) -> bool:
    """Whether ``task_id`` has a plan task id's form (three parts, the last ``gb<B>[+fp16|+fp8]``): no
    placement task's step is named so."""
    parts = task_id.split("/")
    return len(parts) == 3 and _PLAN_TASK_BATCH.fullmatch(parts[2]) is not None


def parse_plan_task_id(task_id: str) -> PlanTask:
    """The `PlanTask` whose ``id`` is ``task_id`` (``<model>/<mesh>/gb<B>``, ``+fp16`` or ``+fp8`` after
    the batch when not bf16); a one-line ValueError naming the part it cannot read."""
    parts = task_id.split("/") if isinstance(task_id, str) and len(task_id) <= 200 else []
    batch = _PLAN_TASK_BATCH.fullmatch(parts[2]) if len(parts) == 3 else None
    if batch is None:
        raise ValueError(f"a plan task id is <model>/<mesh>/gb<global batch>[+fp16|+fp8] (at most 200 "
                         f"characters), got {str(task_id)[:200]!r}")
    return plan_task(parts[0], parts[1], int(batch.group(1)), batch.group(2) or "bf16")

