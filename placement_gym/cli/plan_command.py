"""`placement-gym plan`: the price of a parallel training plan (`placement_gym.plans`)."""

from __future__ import annotations

import argparse
import sys
from dataclasses import replace

from placement_gym.cli.common import FLAG, add_options, positive_int
from placement_gym.cli.output import fmt_bytes, print_json, print_table, print_text
from placement_gym.cli.subcommands import Subcommands, add_command
from placement_gym.plans.plan import PRECISIONS, RECOMPUTE, SCHEDULES, ZERO_STAGES

DESCRIPTION = (
    "Price one training step of a transformer under a parallel plan: tensor (--tp), pipeline (--pp, "
    "--vp, --schedule), data (--dp, --zero), expert (--ep) and context (--cp) parallelism, sequence "
    "parallelism, recomputation and precision, on DGX H100 or A100 nodes. Prints the step time, tokens "
    "per second per GPU, model-FLOP utilisation, peak memory per GPU, whether it fits, and where the "
    'time goes (docs/cost_model.md, "Parallel plans").'
)
"""What `placement-gym plan --help` says the command does."""


def plan_from_args(args: argparse.Namespace, gpus: int):
    """The `Plan` of the command line; ``--dp`` defaults to the GPUs the other degrees leave."""
    from placement_gym.plans import Plan

    dp = args.dp
    if dp is None:
        rest, left = divmod(gpus, args.tp * args.pp * args.cp)
        if left or rest < 1:
            raise ValueError(
                f"tp x pp x cp = {args.tp * args.pp * args.cp} does not divide the mesh's {gpus} GPUs"
            )
        dp = rest
    schedule = args.schedule or ("interleaved" if args.vp > 1 else "1f1b")
    batch = args.global_batch or dp * args.microbatch_size
    same = ("tp", "pp", "vp", "ep", "cp", "microbatch_size", "sequence_parallel", "zero", "recompute",
            "recompute_layers", "precision", "stage_tp")
    return Plan(dp=dp, global_batch=batch, schedule=schedule, fused_attention=args.attention == "flash",
                **{key: getattr(args, key) for key in same})


def search_plan(args: argparse.Namespace, model, mesh):
    """``--search AGENT``: the plan a plan agent finds (`placement_gym.evaluation.agents.lookup_plan_agent`)
    for the model, the mesh, the global batch (default: one sequence a GPU) and the precision."""
    from placement_gym.evaluation.agents import AgentResult, lookup_plan_agent, plan_agents
    from placement_gym.plans.space import PlanTask

    agent = lookup_plan_agent(args.search)
    if agent is None:
        names = list(plan_agents())
        allowed = ", ".join(names) or "none installed"
        raise ValueError(f"unknown plan agent {args.search!r}; allowed: {allowed}")
    task = PlanTask(model, mesh, args.global_batch or mesh.gpus, args.precision)
    print(f"placement-gym plan: searching {task.id} with {args.search}...", file=sys.stderr, flush=True)
    result = AgentResult.checked(task, agent(task, args.seed, args.budget))
    return task, task.plan_of(result.placement), result


def run_plan(args: argparse.Namespace) -> int:
    from placement_gym.plans import MODEL_PRESETS, evaluate_plan, mesh_from_name, model_from_spec

    if args.list:
        print_table(
            ["model", "configuration"],
            [[name, model.describe().split(": ", 1)[1]] for name, model in MODEL_PRESETS.items()],
            title="model presets (or give family:key=value,... with family gpt, llama or moe)",
        )
        print_text("Meshes: dgx-h100xN and dgx-a100xN, N nodes of 8 GPUs (1 to 1,024), or mixed: "
                   "dgx-a100xN+dgx-h100xM (A100 nodes first; 1,024 nodes at most in all).")
        return 0
    if args.model is None:
        raise ValueError(
            "plan needs --model (a preset: placement-gym plan --list; or "
            "gpt:layers=..,hidden=..,heads=..,seq=..,vocab=..)"
        )
    model = model_from_spec(args.model)
    if args.seq is not None:
        model = replace(model, seq=args.seq)
    mesh = mesh_from_name(args.cluster)
    found = None
    if args.search is not None:
        task, plan, found = search_plan(args, model, mesh)
    else:
        plan = plan_from_args(args, mesh.gpus)
    result = evaluate_plan(model, plan, mesh)
    search = {} if found is None else {"search": {"agent": args.search, "evaluations": found.evaluations,
                                                  "task": task.id}}
    if args.json:
        print_json({**result.as_dict(), "id": f"{model.name}/{mesh.name}/{plan.suffix()}",
                    "model": model.describe(), "mesh": mesh.describe(), "plan": plan.as_dict(), **search})
        return 0 if result.step_s != float("inf") else 1
    print_text(model.describe())
    print_text(mesh.describe())
    if found is not None:
        plans = "plan" if found.evaluations == 1 else "plans"
        print_text(f"{args.search} priced {found.evaluations:,} {plans} of {task.id}")
    print_text(f"plan: {plan.describe()} (id {model.name}/{mesh.name}/{plan.suffix()})")
    if result.step_s == float("inf"):
        print_text("cannot run: " + "; ".join(result.problems))
        return 1
    rows = [
        ["step", f"{result.step_s:,.3f} s"],
        ["tokens/s per GPU", f"{result.tokens_per_s_per_gpu:,.0f}"],
        ["MFU", f"{result.mfu:.1%}"],
        ["peak memory per GPU", fmt_bytes(result.peak_memory_bytes)],
    ]
    rows += [[f"  {part.replace('_', ' ')}", fmt_bytes(size)] for part, size in result.memory.items()]
    rows += [["fits", "yes" if result.feasible else "no: " + "; ".join(result.problems)]]
    rows += [
        [f"  {part}", f"{seconds:,.3f} s ({seconds / result.step_s:.0%})"]
        for part, seconds in result.breakdown.items()
    ]
    print_table(["", ""], rows, header=False, title="one training step")
    return 0 if result.feasible else 1


def _degrees(text: str) -> tuple[int, ...]:
    """argparse type of a comma-separated list of positive integers."""
    return tuple(positive_int(part) for part in text.split(","))


def _degree(flag: str, meaning: str) -> tuple[str, dict, str]:
    return flag, {"type": positive_int, "default": 1}, f"{meaning} (default: 1)"


OPTIONS = [
    ("--model", {"default": None}, "a preset (--list) or family:key=value,... such as "
     "'gpt:layers=96,hidden=12288,heads=96,seq=2048,vocab=51200' (llama: and moe: also take kv_heads, ffn; "
     "moe: experts, top_k)"),
    ("--cluster", {"default": "dgx-h100"},
     "dgx-h100xN or dgx-a100xN, or mixed: dgx-a100xN+dgx-h100xM (default: dgx-h100)"),
    ("--global-batch", {"type": positive_int, "default": None, "metavar": "B"},
     "sequences per step (default: dp x micro-batch size, one micro-batch)"),
    ("--seq", {"type": positive_int, "default": None}, "sequence length (default: the model's)"),
    _degree("--tp", "tensor parallel degree"),
    _degree("--pp", "pipeline parallel degree"),
    _degree("--vp", "virtual stages per device, interleaved"),
    _degree("--ep", "expert parallel degree"),
    _degree("--cp", "context parallel degree"),
    ("--dp", {"type": positive_int, "default": None}, "data parallel degree (default: the GPUs tp x pp x cp "
     "leave)"),
    ("--stage-tp", {"type": _degrees, "default": (), "metavar": "T,T,..."},
     "each pipeline stage's own tensor degree, one per stage (a stage splits its tp x dp GPUs into that "
     "and the data degree it leaves; default: --tp everywhere)"),
    ("--microbatch-size", {"type": positive_int, "default": 1, "metavar": "K"},
     "sequences per micro-batch (default: 1)"),
    ("--schedule", {"choices": SCHEDULES, "default": None},
     "pipeline schedule (default: interleaved when --vp > 1, else 1f1b)"),
    ("--sequence-parallel", FLAG,
     "split norms, dropout and residuals over the tensor group (needs --tp >= 2)"),
    ("--zero", {"type": int, "choices": ZERO_STAGES, "default": 0},
     "ZeRO stage over the data-parallel group (default: 0)"),
    ("--recompute", {"choices": RECOMPUTE, "default": "none"}, "activation recomputation (default: none)"),
    ("--recompute-layers", {"type": int, "default": 0, "metavar": "N"},
     "with --recompute full, only the first N layers of each virtual stage recompute (Megatron-LM's block "
     "method; default 0: all)"),
    ("--precision", {"choices": PRECISIONS, "default": "bf16"},
     "matrix products' precision (default: bf16; fp8 on H100)"),
    ("--attention", {"choices": ("flash", "materialised"), "default": "flash"},
     "FlashAttention (default) or the scores materialised"),
    ("--search", {"default": None, "metavar": "AGENT"},
     "find the plan with a plan agent instead of giving it: megatron (the rules), sweep (every uniform "
     "plan), alpa, galvatron (layers and tensor degree per stage), plan-random, plan-anneal, "
     "plan-move-bandit (`placement-gym agents` lists them); the degree, schedule, ZeRO and recomputation "
     "options are then ignored (default --global-batch: one sequence a GPU)"),
    ("--budget", {"type": positive_int, "default": None, "metavar": "N"},
     "plans a searching agent may price (default: the agent's own)"),
    ("--seed", {"type": int, "default": 0}, "seed of a searching agent (default: 0)"),
    ("--list", FLAG, "list the model presets and meshes"),
    ("--json", FLAG, "print a JSON object: step_s, tokens_per_s_per_gpu, mfu, peak_memory_bytes, feasible, "
     "breakdown, memory, problems, id (model/mesh/plan suffix), model, mesh, plan; with --search also "
     "search (agent, evaluations, task)"),
]
"""`placement-gym plan`'s options: (flag, argparse keywords, help)."""


def add_parser(subparsers: Subcommands) -> None:
    parser = add_command(subparsers, "plan", DESCRIPTION)
    add_options(parser, OPTIONS)
    parser.set_defaults(run=run_plan)
