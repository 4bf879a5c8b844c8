"""Every uniform parallel plan of a model on a DGX mesh, priced and ranked: which tensor, pipeline,
virtual-stage, context, expert and data degrees, micro-batch sizes, schedules, ZeRO stages and
recomputations fit and train fastest (the plans the ``sweep`` plan agent considers,
`baselines.plans.uniform_choices`; docs/cost_model.md, "Parallel plans"). Prints the fastest plans that
fit, each with its step time, tokens per second per GPU, MFU, peak memory per GPU and its pipeline
bubble, and the rules' plan beside them.

    python examples/parallel_plans.py
    python examples/parallel_plans.py --model gpt3-175b --mesh dgx-h100x64 --global-batch 1024 --top 5
"""

from __future__ import annotations

import argparse
import textwrap

from baselines.plans import megatron, uniform_choices
from placement_gym.plans.space import plan_task


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="llama2-70b",
                        help="a preset or family:key=value,... (default: llama2-70b)")
    parser.add_argument("--mesh", default="dgx-h100x8", help="dgx-h100xN or dgx-a100xN (default: dgx-h100x8)")
    parser.add_argument("--global-batch", type=int, default=128, help="sequences per step (default: 128)")
    parser.add_argument("--precision", default="bf16", choices=("bf16", "fp16", "fp8"))
    parser.add_argument("--top", type=int, default=8, help="plans to print (default: 8)")
    args = parser.parse_args()
    task = plan_task(args.model, args.mesh, args.global_batch, args.precision)
    choices, skipped = uniform_choices(task)
    priced, too_big = [], 0
    for choice in choices:
        result = task.evaluate(choice)
        if result.feasible:
            priced.append((result.step_s, task.plan_of(choice), result))
        else:
            too_big += 1
    priced.sort(key=lambda item: item[0])
    print(textwrap.fill(task.model.describe(), 80, subsequent_indent="  "))
    print(textwrap.fill(task.mesh.describe(), 80, subsequent_indent="  ") + "\n")
    width = max([len("plan")] + [len(plan.suffix()) for _, plan, _ in priced[: args.top]])
    print(f"{'plan':{width}} {'step s':>7} {'tok/s/GPU':>9} {'MFU':>6} {'GB/GPU':>6} {'bubble':>6}")
    for step, plan, result in priced[: args.top]:
        bubble = result.breakdown["bubble"] / step
        print(f"{plan.suffix():{width}} {step:7.3f} {result.tokens_per_s_per_gpu:9,.0f} {result.mfu:6.1%} "
              f"{result.peak_memory_bytes / 1e9:6.1f} {bubble:6.1%}")
    rules = megatron(task)
    print(f"\nMegatron-LM's rules: {task.plan_of(rules.placement).describe()}: "
          f"{rules.info['step_s']:.3f} s")
    print(f"{len(priced)} layouts fit, {too_big + skipped} do not fit in memory ({skipped} of them not "
          "priced: their weights and optimizer state alone exceed a GPU).")


if __name__ == "__main__":
    main()
