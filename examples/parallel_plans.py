"""Every uniform Megatron-style layout of a model on a DGX mesh, priced: which tensor, pipeline and data
degrees (with sequence parallelism, ZeRO-1, the interleaved schedule where it divides, and full
recomputation or none; FlashAttention already recomputes what selective recomputation would) fit and
train fastest (`placement_gym.plans`; docs/cost_model.md, "Parallel
plans"). Prints the fastest layouts that fit, each with its step time, tokens per second per GPU, MFU,
peak memory per GPU and its pipeline bubble.

    python examples/parallel_plans.py
    python examples/parallel_plans.py --model gpt3-175b --mesh dgx-h100x64 --global-batch 1024 --top 5
"""

from __future__ import annotations

import argparse
import textwrap

from placement_gym.plans import Plan, evaluate_plan, mesh_from_name, model_from_spec


def divisors(n: int) -> list[int]:
    return [k for k in range(1, n + 1) if n % k == 0]


def layouts(model, mesh, global_batch: int, precision: str):
    """Every plan of tensor degree <= a node, pipeline and data degrees filling the mesh."""
    for tp in divisors(mesh.gpus_per_node):
        for pp in divisors(mesh.gpus // tp):
            dp = mesh.gpus // (tp * pp)
            for vp in (1, 2, 4, 5):
                for recompute in ("none", "full"):
                    yield Plan(tp=tp, pp=pp, dp=dp, vp=vp, global_batch=global_batch,
                               schedule="interleaved" if vp > 1 else "1f1b", sequence_parallel=tp > 1,
                               zero=1, recompute=recompute, precision=precision)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="llama2-70b",
                        help="a preset or family:key=value,... (default: llama2-70b)")
    parser.add_argument("--mesh", default="dgx-h100x8", help="dgx-h100xN or dgx-a100xN (default: dgx-h100x8)")
    parser.add_argument("--global-batch", type=int, default=128, help="sequences per step (default: 128)")
    parser.add_argument("--precision", default="bf16", choices=("bf16", "fp16", "fp8"))
    parser.add_argument("--top", type=int, default=8, help="layouts to print (default: 8)")
    args = parser.parse_args()
    model, mesh = model_from_spec(args.model), mesh_from_name(args.mesh)
    priced, refused, too_big = [], 0, 0
    for plan in layouts(model, mesh, args.global_batch, args.precision):
        result = evaluate_plan(model, plan, mesh)
        if result.step_s == float("inf"):
            refused += 1
        elif not result.feasible:
            too_big += 1
        else:
            priced.append((result.step_s, plan, result))
    priced.sort(key=lambda item: item[0])
    print(textwrap.fill(model.describe(), 80, subsequent_indent="  "))
    print(textwrap.fill(mesh.describe(), 80, subsequent_indent="  ") + "\n")
    width = max([len("plan")] + [len(plan.suffix()) for _, plan, _ in priced[: args.top]])
    print(f"{'plan':{width}} {'step s':>7} {'tok/s/GPU':>9} {'MFU':>6} {'GB/GPU':>6} {'bubble':>6}")
    for step, plan, result in priced[: args.top]:
        bubble = result.breakdown["bubble"] / step
        print(f"{plan.suffix():{width}} {step:7.3f} {result.tokens_per_s_per_gpu:9,.0f} {result.mfu:6.1%} "
              f"{result.peak_memory_bytes / 1e9:6.1f} {bubble:6.1%}")
    print(f"\n{len(priced)} layouts fit, {too_big} do not fit in memory, {refused} do not divide "
          f"(heads, layers, micro-batches).")


if __name__ == "__main__":
    main()
