"""What a GPU's kernels reach of its datasheet figures in a training step as the frameworks run it,
calibrated on the published whole steps of docs/calibration.md ("Parallel plans").

An op's time is max(FLOPs / (peak x efficiency), bytes / (HBM bandwidth x `BANDWIDTH_FRACTION`))
plus `KERNEL_OVERHEAD`, as the cost model's op time (docs/cost_model.md). The categories:

- ``matmul``: the linear layers, on the tensor cores at the plan's precision (fp8 on Hopper with
  Transformer Engine);
- ``attention``: FlashAttention's fused kernel (bf16/fp16 even in an fp8 step, as Transformer Engine
  runs it), its FLOPs those of the two products with the causal half skipped;
- ``scores``: the two batched products of materialised attention (half precision);
- ``memory``: norms, softmax, dropout, activations, residuals, the optimizer: their bytes decide.

GPUs of different models that run the same ops in lock step (a pipeline stage over both kinds of a
mixed mesh) take, op by op, the slowest member's time.
"""

from __future__ import annotations

from dataclasses import dataclass

from placement_gym.plans.mesh import GpuFigures

CATEGORIES = ("matmul", "attention", "scores", "memory")
# Achievable share of HBM bandwidth for streaming kernels (the cost model's Ampere and Hopper figure).
BANDWIDTH_FRACTION = 0.8
# A kernel's fixed cost on a GPU kept busy by an asynchronous launch queue (Megatron-LM, NeMo): the
# launch itself overlaps the previous kernel; what is left is the kernel's ramp and tail.
KERNEL_OVERHEAD = 2e-6


@dataclass(frozen=True)
class KernelEfficiency:
    """Shares of the tensor-core peak: ``matmul`` by precision, ``attention`` (FlashAttention),
    ``scores`` (materialised attention's products)."""

    matmul: dict[str, float]
    attention: float
    scores: float
    calibrated_on: str


# Fitted by experiments/plan_calibration/fit.py to the calibration rows of
# placement_gym/calibration/published_plans.json (its README has the command and output). Ampere's
# FlashAttention figure is Hopper's (no Ampere row runs it); Hopper's materialised-attention figure
# is Ampere's (no Hopper row runs it).
EFFICIENCY: dict[str, KernelEfficiency] = {
    "ampere": KernelEfficiency(
        {"bf16": 0.72, "fp16": 0.72},
        0.44,
        0.32,
        "Korthikanti et al. 2022 Table 5 (22B on 8 A100, GPT-3 175B on 64 A100)",
    ),
    "hopper": KernelEfficiency(
        {"bf16": 0.64, "fp16": 0.64, "fp8": 0.49},
        0.44,
        0.32,
        "NeMo 24.07 FP8 (Llama-2 7B on 8 H100, 70B on 64 H100); Megatron-Core Mixtral 8x7B (bf16)",
    ),
}


def op_seconds(category: str, flops: float, bytes_moved: float, precision: str, gpu: GpuFigures) -> float:
    """Seconds of one kernel of ``category`` on ``gpu`` at the plan's ``precision``; on GPUs of different
    models in lock step (`placement_gym.plans.mesh.lockstep_gpu`), the slowest member's."""
    if gpu.members:
        return max(op_seconds(category, flops, bytes_moved, precision, member) for member in gpu.members)
    efficiency = EFFICIENCY[gpu.architecture]
    half = "fp16" if precision == "fp16" else "bf16"
    if category == "matmul":
        rate = gpu.peak[precision] * efficiency.matmul[precision]
    elif category == "attention":
        rate = gpu.peak[half] * efficiency.attention
    elif category == "scores":
        rate = gpu.peak[half] * efficiency.scores
    else:
        rate = float("inf")
    compute = flops / rate if flops else 0.0
    return max(compute, bytes_moved / (gpu.memory_bandwidth * BANDWIDTH_FRACTION)) + KERNEL_OVERHEAD
