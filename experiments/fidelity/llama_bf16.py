"""A Llama of about 1B parameters trained in bf16 on one GPU by the real executor: step time and MFU,
measured and modelled (issue 67, item 4; experiments/fidelity/gpu_check.sh runs it).

The model is the project's own Llama (placement_gym/export/models/llama.py) in TinyLlama-1.1B's
configuration (Zhang et al. 2024, "TinyLlama: An Open-Source Small Language Model": 22 layers of 2,048,
32 query heads sharing 4 key/value heads, SwiGLU of 5,632, vocabulary 32,000, untied head; 1.10B
parameters), exported weight-free to ONNX as the bundled graphs are (placement_gym/export/onnx_export.py
`export_module`, built on the meta device, so the export needs no weight memory), imported, and made a
``train_step`` task at ``precision="bf16"`` (Adam) on one GPU (`placement_gym.real.overhead.
one_gpu_cluster`: gpu:0 of the h100x8 preset, 989 TFLOP/s bf16 dense). The executor runs it with
every op on the GPU (warm-up 1, repeats 3, median); the cost model prices the same placement.

MFU = model FLOPs of the step / (step seconds x the GPU's bf16 peak). Model FLOPs as the project's
plan model counts them for MFU (`placement_gym.plans.models.TransformerModel.training_flops_per_token`,
Megatron-LM's count, Narayanan et al. 2021 eq. 3: 6 FLOPs a weight a token for every matrix product
plus the attention scores) x the tokens of the step; the task's own FLOPs of its forward and backward
ops (the cost model's count, which has the element-wise ops too) are printed beside them.

    python experiments/fidelity/llama_bf16.py --device cuda            # the check, on one GPU
    python experiments/fidelity/llama_bf16.py --device cpu --layers 1  # a dry run on a CPU (tiny sizes)

On the CPU the sizes are a tiny Llama (width 128, 4 heads, 2 key/value heads, vocabulary 512, batch 2
of 32 tokens) unless given, and the "peak" is the virtual CPU device's figure: only the plumbing is
checked there. Prints one line per stage on stderr and the result on stdout, one JSON object (also
written to --json PATH); exit code 1 when the executor's step failed (its reason in ``error``).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import warnings

import numpy as np

# TinyLlama-1.1B (Zhang et al. 2024, table 1 and the released config): the ~1B Llama of issue 67.
ONE_B = {"layers": 22, "hidden": 2048, "heads": 32, "kv_heads": 4, "ffn": 5632, "vocab": 32_000,
         "batch": 4, "seq": 512}  # 2,048 tokens a step: the cost model puts its peak at 30 GB
TINY = {"layers": 2, "hidden": 128, "heads": 4, "kv_heads": 2, "ffn": 0, "vocab": 512, "batch": 2, "seq": 32}


def _note(text: str, started: float) -> None:
    print(f"[{time.perf_counter() - started:6.1f} s] {text}", file=sys.stderr, flush=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", choices=("cuda", "cpu"), default="cuda")
    for key in ONE_B:
        parser.add_argument(f"--{key.replace('_', '-')}", type=int, default=None,
                            help=f"default: {ONE_B[key]} on cuda, {TINY[key]} on cpu")
    parser.add_argument("--warmup", type=int, default=1)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--precision", choices=("bf16", "fp16", "fp32"), default="bf16")
    parser.add_argument("--json", default=None, metavar="PATH", help="also write the result there")
    args = parser.parse_args(argv)
    sizes = dict(ONE_B if args.device == "cuda" else TINY)
    for key in sizes:
        if getattr(args, key) is not None:
            sizes[key] = getattr(args, key)
    started = time.perf_counter()

    import torch

    from placement_gym.cost_model import simulate
    from placement_gym.export.models.llama import Llama, LlamaConfig
    from placement_gym.export.onnx_export import LLM_FOLD_LIMIT, export_module, parameter_count
    from placement_gym.graph.onnx_import import graph_from_onnx
    from placement_gym.plans.models import TransformerModel
    from placement_gym.real.devices import virtual_cpu_cluster
    from placement_gym.real.executor import Executor
    from placement_gym.real.overhead import one_gpu_cluster
    from placement_gym.task.named import get_task
    from placement_gym.task.passes.backward import training_step

    if args.device == "cuda" and not torch.cuda.is_available():
        print("llama_bf16: --device cuda, but torch sees no CUDA device here (try --device cpu)",
              file=sys.stderr)
        return 2
    config = LlamaConfig(layers=sizes["layers"], hidden=sizes["hidden"], heads=sizes["heads"],
                         kv_heads=sizes["kv_heads"], vocab=sizes["vocab"], ffn=sizes["ffn"])
    batch, seq = sizes["batch"], sizes["seq"]
    with torch.device("meta"):
        module = Llama(config)
    example = (torch.empty((batch, seq), dtype=torch.int64, device="meta"),)
    model = export_module(module, example, ["input_ids"], "Llama in TinyLlama-1.1B's configuration "
                          "(Zhang et al. 2024)", fold_limit=LLM_FOLD_LIMIT)
    n_parameters = parameter_count(model)
    _note(f"exported: {config.layers} layers x {config.hidden}, {n_parameters:,} parameters, "
          f"batch {batch} x {seq} tokens", started)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        graph = graph_from_onnx(model, name=f"llama_{config.layers}x{config.hidden}")
    cluster = one_gpu_cluster() if args.device == "cuda" else virtual_cpu_cluster(1)
    task = get_task(graph, cluster, "train_step", precision=args.precision)
    _note(f"task {task.id}: {graph.n_ops} forward ops, {task.n_ops} task ops", started)

    # Model FLOPs of one step: the plan model's count (Megatron-LM's), and the task's own.
    plan_model = TransformerModel("llama", layers=config.layers, hidden=config.hidden,
                                  heads=config.heads, seq=seq, vocab=config.vocab,
                                  kv_heads=config.kv_heads, ffn=config.ffn_width)
    model_flops = plan_model.training_flops_per_token() * batch * seq
    step_ops = training_step(graph, task.optimizer)
    task_flops = float(np.asarray(step_ops.flops)[np.asarray(step_ops.op_kind) != 2].sum())
    rate = cluster.tensor_peak_flops if cluster.tensor_peak_flops is not None else cluster.peak_flops
    peak = float(rate[0]) if args.precision != "fp32" else float(cluster.peak_flops[0])

    placement = np.zeros(graph.n_ops, dtype=np.int64)
    modelled = simulate(task, placement)
    _note(f"cost model: step {modelled.runtime * 1e3:,.1f} ms, fits: {modelled.feasible} "
          f"(peak memory {float(modelled.peak_memory[0]) / 1e9:,.1f} GB of "
          f"{float(cluster.memory_capacity[0]) / 1e9:,.1f})", started)

    executor = Executor(task, model=model)
    _note(f"executor built (ops in {getattr(executor, 'dtype', 'its default dtype')}); running warm-up "
          f"{args.warmup}, repeats {args.repeats}", started)
    result = executor.run(placement, warmup=args.warmup, repeats=args.repeats)
    peak_memory = None
    if args.device == "cuda":
        peak_memory = float(torch.cuda.max_memory_allocated(0))
    measured = result.runtime if result.feasible else None
    report = {
        "device": torch.cuda.get_device_name(0) if args.device == "cuda" else "cpu",
        "torch": torch.__version__,
        "config": {**sizes, "ffn": config.ffn_width},
        "parameters": n_parameters,
        "precision": args.precision,
        "executor_dtype": str(getattr(executor, "dtype", "")),
        "forward_ops": graph.n_ops,
        "task_ops": task.n_ops,
        "tokens": batch * seq,
        "model_flops": model_flops,
        "task_flops": task_flops,
        "peak_flops": peak,
        "feasible": result.feasible,
        "error": result.error,
        "step_s": measured,
        "step_runs_s": list(result.runtimes),
        "loss": result.loss,
        "measured_mfu": model_flops / (measured * peak) if measured else None,
        "model_step_s": modelled.runtime,
        "model_feasible": bool(modelled.feasible),
        "model_mfu": model_flops / (modelled.runtime * peak) if modelled.runtime > 0 else None,
        "model_peak_memory_bytes": float(modelled.peak_memory[0]),
        "measured_peak_memory_bytes": peak_memory,
        "seconds": time.perf_counter() - started,
    }
    if result.feasible:
        runs = ", ".join(f"{t * 1e3:,.1f}" for t in result.runtimes)
        _note(f"measured: step {measured * 1e3:,.1f} ms (runs {runs}), MFU {report['measured_mfu']:.1%}; "
              f"cost model: {modelled.runtime * 1e3:,.1f} ms, MFU {report['model_mfu']:.1%} (model FLOPs "
              f"{model_flops / 1e9:,.1f} GFLOP a step, peak {peak / 1e12:,.2f} TFLOP/s)", started)
    else:
        _note(f"the executor's step failed: {result.error}", started)
    text = json.dumps(report, indent=1)
    print(text)
    if args.json:
        with open(args.json, "w", encoding="utf-8") as out:
            out.write(text + "\n")
    return 0 if result.feasible else 1


if __name__ == "__main__":
    sys.exit(main())
