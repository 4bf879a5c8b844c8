"""Parallel plans: a training step of a large transformer split over a mesh of GPUs by tensor,
sequence, context, pipeline, data and expert parallelism, priced by a calibrated cost model
(docs/cost_model.md, "Parallel plans").

    from placement_gym.plans import Plan, evaluate_plan, mesh_from_name, model_from_spec
    plan = Plan(tp=8, pp=8, dp=1, global_batch=64)
    result = evaluate_plan(model_from_spec("gpt3-175b"), plan, mesh_from_name("dgx-a100x8"))
"""

from placement_gym.plans.collectives import Group, collective_time
from placement_gym.plans.evaluate import PlanResult, evaluate_plan
from placement_gym.plans.mesh import Mesh, dgx_mesh, mesh_from_name, mixed_mesh
from placement_gym.plans.models import MODEL_PRESETS, TransformerModel, model_from_spec
from placement_gym.plans.plan import Plan, plan_problems

__all__ = [
    "MODEL_PRESETS",
    "Group",
    "Mesh",
    "Plan",
    "PlanResult",
    "TransformerModel",
    "collective_time",
    "dgx_mesh",
    "evaluate_plan",
    "mesh_from_name",
    "mixed_mesh",
    "model_from_spec",
    "plan_problems",
]
