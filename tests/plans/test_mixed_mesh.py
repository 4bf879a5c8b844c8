"""Mixed meshes (DGX A100 nodes, then DGX H100 nodes): the name, the figures each stretch of ranks
runs at, stages priced at their own kind's figures (checked by hand on a two-stage pipeline of one
micro-batch), a stage spanning both kinds no faster than the slower kind alone, and the lower bound
below every plan of a small task (docs/cost_model.md, "Mixed meshes")."""

from __future__ import annotations

import itertools
import math
from dataclasses import replace

import numpy as np
import pytest

from placement_gym.plans import MODEL_PRESETS, Plan, dgx_mesh, evaluate_plan, mesh_from_name, plan_problems
from placement_gym.plans.dataset import plan_dataset_ids, plan_dataset_task
from placement_gym.plans.evaluate import BANDWIDTH_FRACTION, OPTIMIZER_BYTES, stage_ends
from placement_gym.plans.kernels import EFFICIENCY, op_seconds
from placement_gym.plans.layer import layer_cost, layer_input_bytes
from placement_gym.plans.mesh import A100, H100, MAX_NODES, mixed_mesh
from placement_gym.plans.space import DIMENSION_NAMES, DIMENSIONS, plan_task


def test_a_mixed_mesh_by_name():
    mesh = mesh_from_name("dgx-a100x4+dgx-h100x4")
    assert mesh.name == "dgx-a100x4+dgx-h100x4" and (mesh.nodes, mesh.gpus_per_node, mesh.gpus) == (8, 8, 64)
    assert [part.name for part in mesh.parts] == ["dgx-a100x4", "dgx-h100x4"]
    assert mesh == mixed_mesh(dgx_mesh("a100", 4), dgx_mesh("h100", 4))
    assert mesh_from_name("dgx-a100x1+dgx-h100").name == "dgx-a100+dgx-h100"
    assert mesh_from_name("dgx-h100x2+dgx-a100x6").parts[0].gpu is H100  # the order named
    assert mesh_from_name(f"dgx-a100x{MAX_NODES - 1}+dgx-h100").nodes == MAX_NODES
    assert dgx_mesh("h100", 8).parts == () and "then" in mesh.describe()
    # its own figures: the lock-step ones (lower bandwidths, higher latencies, common precisions)
    a100, h100 = mesh.parts
    assert mesh.gpu.members == (A100, H100) and set(mesh.gpu.peak) == {"bf16", "fp16"}
    assert mesh.gpu.peak["bf16"] == 312e12 and mesh.gpu.memory_bandwidth == A100.memory_bandwidth
    for figure in ("intra_busbw", "intra_allreduce_busbw", "nic_busbw", "intra_p2p", "nic_p2p"):
        assert getattr(mesh, figure) == min(getattr(a100, figure), getattr(h100, figure)), figure
    for figure in ("intra_latency", "inter_latency", "collective_launch"):
        assert getattr(mesh, figure) == max(getattr(a100, figure), getattr(h100, figure)), figure
    assert mesh.peak_flops("bf16") == 32 * 312e12 + 32 * 989e12


@pytest.mark.parametrize(("name", "message"), [
    ("dgx-v100x2+dgx-h100x2", "unknown mesh 'dgx-v100x2\\+dgx-h100x2'"),
    ("dgx-a100x2+", "unknown mesh"),
    ("dgx-a100x2+dgx-h100x2+dgx-h100", "each GPU model once"),
    ("dgx-a100x2+dgx-a100x2", "each GPU model once"),
    (f"dgx-a100x{MAX_NODES}+dgx-h100x1", f"at most {MAX_NODES:,} nodes in all"),
    ("dgx-a100x0+dgx-h100x2", "1 to 1,024 nodes"),
    ("dgx-a100x2 + dgx-h100x2", "unknown mesh"),
])
def test_bad_mixed_mesh_names_are_one_line_errors(name, message):
    with pytest.raises(ValueError, match=message) as error:
        mesh_from_name(name)
    assert "\n" not in str(error.value)


def test_fp8_on_a_mixed_mesh_is_refused_as_on_an_a100():
    with pytest.raises(ValueError, match=r"A100 SXM 80GB \(of the mixed mesh dgx-a100\+dgx-h100\) has no"):
        plan_task("llama2-7b", "dgx-a100+dgx-h100", 16, "fp8")
    plan = Plan(tp=8, pp=2, global_batch=16, precision="fp8")
    mesh = mesh_from_name("dgx-a100+dgx-h100")
    problems = plan_problems(plan, MODEL_PRESETS["llama2-7b"], mesh)
    assert problems == plan_problems(plan, MODEL_PRESETS["llama2-7b"], dgx_mesh("a100", 2))
    assert problems == ["A100 SXM 80GB has no fp8 tensor cores (it has bf16, fp16)"]
    assert not evaluate_plan(MODEL_PRESETS["llama2-7b"], plan, mesh).feasible


def test_the_figures_of_a_stretch_of_ranks():
    mesh = mesh_from_name("dgx-a100x2+dgx-h100x2")
    a100, h100 = mesh.parts
    assert mesh.figures((0, 16)) is a100 and mesh.figures((4, 8)) is a100
    assert mesh.figures((16, 32)) is h100 and mesh.figures((31, 32)) is h100
    assert mesh.figures((8, 24)) is mesh and mesh.figures((0, 8), (24, 32)) is mesh  # spans both kinds
    assert mesh.figures((0, 8), (8, 16)) is a100  # a send between two A100 stages
    homogeneous = dgx_mesh("h100", 4)
    assert homogeneous.figures((0, 32)) is homogeneous


def test_ops_in_lock_step_take_the_slowest_gpus_time():
    gpu = mesh_from_name("dgx-h100+dgx-a100").gpu
    for category, flops, size in (("matmul", 1e12, 1e8), ("attention", 1e11, 1e6), ("memory", 0.0, 1e9),
                                  ("scores", 1e10, 1e9)):
        both = [op_seconds(category, flops, size, "bf16", g) for g in (A100, H100)]
        assert op_seconds(category, flops, size, "bf16", gpu) == max(both) == both[0]


def test_two_stages_one_a_kind_priced_by_hand():
    """A two-stage pipeline of one micro-batch, one stage a node: the A100 stage at A100's figures, the
    H100 stage at H100's, the sends between them at the A100 NIC's (the lower); the step is the later
    of the two devices' finishes plus each one's optimizer step."""
    model = MODEL_PRESETS["llama3-1b"]
    mesh = mesh_from_name("dgx-a100+dgx-h100")
    a100, h100 = mesh.parts
    plan = Plan(tp=8, pp=2, dp=1, global_batch=1, sequence_parallel=True)
    layers = model.layers // 2

    def stage(kind_mesh, first: bool):
        cost, ends = layer_cost(model, plan, kind_mesh), stage_ends(model, plan, kind_mesh)
        forward = layers * (cost.forward + cost.forward_comm)
        backward = layers * (cost.backward + cost.backward_comm)
        forward += ends.first_forward if first else ends.last_forward
        backward += ends.first_backward if first else ends.last_backward
        weights = layers * cost.dense + model.vocab * model.hidden / plan.tp  # embedding or head
        optimizer = weights * OPTIMIZER_BYTES / (kind_mesh.gpu.memory_bandwidth * BANDWIDTH_FRACTION)
        return forward, backward, optimizer

    (f0, b0, o0), (f1, b1, o1) = stage(a100, True), stage(h100, False)
    send = 5e-6 + layer_input_bytes(model, plan) / (25e9 * 0.9)  # HDR's 0.9 of line rate, not NDR's
    device1 = f0 + send + f1 + b1
    expected = max(device1 + send + b0 + o0, device1 + o1)
    result = evaluate_plan(model, plan, mesh)
    assert result.feasible and result.step_s == pytest.approx(expected, rel=1e-12)
    # the same stages on a mesh of one kind: between the two, memory the same (the schedule's own)
    slow, fast = (evaluate_plan(model, plan, dgx_mesh(kind, 2)) for kind in ("a100", "h100"))
    assert fast.step_s < result.step_s < slow.step_s
    assert result.peak_memory_bytes == slow.peak_memory_bytes == fast.peak_memory_bytes
    assert result.mfu == pytest.approx(
        model.training_flops_per_token() * model.seq / (result.step_s * (8 * 312e12 + 8 * 989e12)), rel=1e-12)


@pytest.mark.parametrize("plan", [
    Plan(tp=8, pp=1, dp=2, global_batch=16, sequence_parallel=True, zero=1, recompute="selective"),
    Plan(tp=2, pp=1, dp=8, global_batch=32, microbatch_size=2, zero=3),
    Plan(tp=1, pp=1, dp=16, global_batch=16, zero=2, recompute="full"),
])
def test_a_stage_spanning_both_kinds_is_no_faster_than_the_slower_kind_alone(plan):
    """One stage over an A100 node and an H100 node runs in lock step: A100 is the slower in every
    figure, so its step is the step on two A100 nodes, bit for bit, and its MFU is over both peaks."""
    model = MODEL_PRESETS["llama2-7b"]
    mixed = evaluate_plan(model, plan, mesh_from_name("dgx-a100+dgx-h100"))
    slow = evaluate_plan(model, plan, dgx_mesh("a100", 2))
    assert mixed.feasible and slow.feasible
    assert (mixed.step_s, mixed.breakdown, mixed.memory) == (slow.step_s, slow.breakdown, slow.memory)
    assert mixed.mfu == pytest.approx(slow.mfu * 16 * 312 / (8 * 312 + 8 * 989), rel=1e-12)


def test_uneven_stages_pay_on_a_mixed_mesh():
    """Even stages wait on the A100 half; fewer layers there and more on the H100s make a faster step,
    where on one kind of GPU the even split is the faster."""
    task = plan_task("llama2-70b", "dgx-a100x4+dgx-h100x4", 128)
    even = Plan(tp=2, pp=2, dp=16, global_batch=128, sequence_parallel=True, zero=3)
    uneven = replace(even, stage_layers=(21, 59))
    assert task.evaluate(uneven).step_s < 0.7 * task.evaluate(even).step_s
    homogeneous = plan_task("llama2-70b", "dgx-h100x8", 128)
    assert homogeneous.evaluate(even).step_s < homogeneous.evaluate(uneven).step_s


def test_the_lower_bound_is_below_every_plan_of_a_small_mixed_task():
    """Every uniform plan whose degrees divide (all options), and every two-stage split of the layers,
    steps no faster than `PlanTask.lower_bound_s`, the linear layers' FLOPs over the sum of both kinds'
    rates."""
    task = plan_task("llama3-1b", "dgx-a100+dgx-h100", 16)
    model = task.model
    weights = model.layers * (model.attention_parameters() + model.expert_parameters())
    flops = 6.0 * (weights + model.vocab * model.hidden) * 16 * model.seq
    rate = 8 * 312e12 * EFFICIENCY["ampere"].matmul["bf16"] + 8 * 989e12 * EFFICIENCY["hopper"].matmul["bf16"]
    assert task.lower_bound_s == pytest.approx(flops / rate, rel=1e-12)
    assert (plan_task("llama3-1b", "dgx-h100x2", 16).lower_bound_s < task.lower_bound_s
            < plan_task("llama3-1b", "dgx-a100x2", 16).lower_bound_s)
    options = [DIMENSIONS[name] for name in ("schedule", "sequence_parallel", "zero", "recompute")]
    fastest, priced = math.inf, 0
    for tp, pp, cp, vp, ep, mbs in task.degree_combos:
        for schedule, sp, zero, recompute in itertools.product(*options):
            if (schedule == "interleaved") != (vp > 1) or (sp and tp == 1):
                continue
            values = {"tp": tp, "pp": pp, "vp": vp, "cp": cp, "ep": ep, "microbatch_size": mbs,
                      "schedule": schedule, "sequence_parallel": sp, "zero": zero, "recompute": recompute}
            choice = np.array([DIMENSIONS[name].index(values[name]) for name in DIMENSION_NAMES])
            result = task.evaluate(choice)
            priced += 1
            if result.feasible:
                fastest = min(fastest, result.step_s)
    even = Plan(tp=1, pp=2, dp=8, global_batch=16)
    for a100_layers in range(1, model.layers):
        result = task.evaluate(replace(even, stage_layers=(a100_layers, model.layers - a100_layers)))
        fastest = min(fastest, result.step_s if result.feasible else math.inf)
    assert priced > 5_000 and math.isfinite(fastest)
    assert task.lower_bound_s < fastest


def test_the_dataset_has_mixed_meshes():
    mixed = [task_id for task_id in plan_dataset_ids() if "+" in task_id.split("/")[1]]
    meshes = {task_id.split("/")[1] for task_id in mixed}
    assert meshes == {mixed_mesh(dgx_mesh("a100", n), dgx_mesh("h100", n)).name for n in (1, 2, 4, 8, 16, 32)}
    assert "llama2-70b/dgx-a100x4+dgx-h100x4/gb64" in mixed
    task = plan_dataset_task("llama2-70b/dgx-a100x4+dgx-h100x4/gb64")
    assert task.mesh.parts and task.lower_bound_s > 0
