"""`placement-gym graphs` and `placement-gym clusters`: what is bundled, and what a model file holds."""

from __future__ import annotations

import argparse
import secrets
import time
import warnings
from collections import Counter
from pathlib import Path
from typing import Any

from placement_gym.cli.common import positive_int
from placement_gym.cli.output import fmt_bytes, print_json, print_table, print_text
from placement_gym.cli.subcommands import Subcommands, add_command
from placement_gym.cluster import PRESETS, load_cluster
from placement_gym.common.extras import install_command
from placement_gym.graph import bundled, bundled_graph_names, load_graph
from placement_gym.graph.onnx_import import PARAMETERS_METADATA_KEY, OnnxImport, import_onnx
from placement_gym.task.ids import HASH_DIGITS, graph_id

DESCRIPTIONS = {
    "agents": (
        "List every agent of the core and of the installed agent packages (entry-point group "
        "placement_gym.agents), one line each: its kind (heuristic, search, learned or "
        "pretrained), its default budget (cost-model evaluations, or seconds for exact) and the "
        "pip extra it needs. --json gives each as an object with name, kind, default_budget, "
        "budget_unit, extra, installed and description."
    ),
    "graphs": (
        "List the bundled graphs (forward graph statistics), or with --info describe what "
        "the importer finds in one ONNX file: ops, parameters (count, bytes, how each was "
        "identified), data inputs and warnings."
    ),
    "clusters": (
        "List the cluster presets (devices and where the figures come from), then the names "
        "of this machine's own devices: cpu<N> (N virtual CPU devices) and local (the CPU and "
        "every CUDA device). --json gives each row a kind: preset or machine."
    ),
    "datasets": (
        "List the datasets of graphs for placement that generalises (placement_gym.datasets): "
        "graphs, families and the size of each split (train, valid, test-sizes, "
        "test-families). --json gives each as an object with name, description, graphs, "
        "families, held_out_families, splits, built and shipped (the architecture datasets ship "
        "built in the package, read without torch). --build NAME builds the dataset again "
        "(every graph once, exporting with torch what is not cached in the output folder; "
        "never read from the shipped archive), checks it against the manifest digest frozen "
        "in the code and says its op range; --sample N builds only N graphs drawn at random "
        "and checks each against its frozen row. Ctrl-C (SIGINT) stops a build and its worker "
        "processes at once (exit code 130), and the workers end by themselves if the command "
        "is killed."
    ),
}
"""What each command's ``--help`` says it does, by command."""


# The --info table lists this many parameters; --json lists them all.


INFO_PARAMETER_ROWS = 20


def graph_rows() -> list[dict[str, Any]]:
    """One summary per bundled graph (forward graph: ops, edges, tensors, FLOPs, parameters, source)."""
    entries = bundled.manifest().get("graphs", {})
    if isinstance(entries, list):
        entries = {entry["name"]: entry for entry in entries}
    rows = []
    for name in bundled_graph_names():
        graph = load_graph(name)
        entry = entries.get(name, {})
        parameters = entry.get("parameters")
        rows.append({
            "name": name,
            "ops": graph.n_ops,
            "edges": graph.n_edges,
            "tensors": graph.n_tensors,
            "flops": float(graph.flops.sum()),
            # The manifest counts parameter elements exactly; without it, assume float32 weights.
            "parameters": int(parameters) if parameters is not None else int(graph.param_bytes.sum() // 4),
            "param_bytes": float(graph.param_bytes.sum()),
            "batch": entry.get("batch"),
            "source": entry.get("source", ""),
        })
    return rows


def _model_file(name_or_path: str) -> Path:
    """The ONNX file of a bundled graph name, or the given path."""
    entries = bundled.manifest().get("graphs", {})
    if isinstance(entries, list):
        entries = {entry["name"]: entry for entry in entries}
    if name_or_path in entries and not Path(name_or_path).is_file():
        return bundled.BUNDLED_GRAPHS_DIR / entries[name_or_path].get("file", f"{name_or_path}.onnx")
    return Path(name_or_path)


def graph_info(name_or_path: str) -> dict[str, Any]:
    """What the importer found in an ONNX file (or a bundled graph): ops, parameters with how each
    was identified, data inputs, constants read from outside the nodes, and the import's warnings."""
    path = _model_file(name_or_path)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the same messages are part of the result
        result: OnnxImport = import_onnx(path)
    graph, roles = result.graph, result.roles
    sources = Counter(p.source for p in result.parameters)
    state = [p for p in result.parameters if not p.trainable]
    return {
        "file": str(path),
        "name": graph.name,
        "sha256": graph.sha256,
        # What task ids and run folders call the graph (``name@<content hash>``, the bundled name for
        # an unmodified bundled graph): the file's sha256 alone cannot be matched to them.
        "content_hash": graph.content_sha256[:HASH_DIGITS],
        "task_id_graph": graph_id(graph),
        "ops": graph.n_ops,
        "edges": graph.n_edges,
        "tensors": graph.n_tensors,
        "flops": float(graph.flops.sum()),
        "op_types": dict(Counter(graph.op_types).most_common()),
        "parameters": {
            "count": result.parameter_count,
            "bytes": result.parameter_bytes,
            "tensors": len(result.parameters),
            "identified_by": roles.method,
            "sources": dict(sources.most_common()),
            "non_trainable_count": sum(p.numel for p in state),
            "list": [
                {"name": p.name, "shape": list(p.shape), "count": p.numel, "bytes": p.nbytes,
                 "source": p.source, "roles": list(p.roles), "trainable": p.trainable}
                for p in result.parameters
            ],
        },
        "data_inputs": [{"name": name, "shape": list(shape), "reason": roles.data_inputs.get(name, "")}
                        for name, shape in graph.data_inputs],
        "constants": [{"name": name, "reason": reason} for name, reason in roles.constants.items()],
        "warnings": list(result.warnings),
        "cannot_tell": list(roles.undetermined),
    }


_HOW = {
    "metadata": f"the list in the file's metadata key {PARAMETERS_METADATA_KEY!r}",
    "roles": "initializers, and graph inputs by the role they play (weight of a Conv/Gemm/MatMul, "
             "scale of a normalisation, embedding table...)",
}


def _print_info(info: dict[str, Any]) -> None:
    params = info["parameters"]
    print(f"{info['file']}: {info['ops']} ops, {info['edges']} edges, {info['flops'] / 1e9:,.3f} GFLOPs "
          "(forward graph)")
    print(f"sha256 of the file: {info['sha256']}; content hash: {info['content_hash']} (task ids and run "
          f"folders name this graph {info['task_id_graph']})")
    ops = ", ".join(f"{op} {n}" for op, n in info["op_types"].items())
    print(f"op types: {ops}")
    sources = ", ".join(f"{n} {source}" for source, n in params["sources"].items()) or "none"
    print(f"parameters: {params['count']:,} in {params['tensors']} tensors, {params['bytes']:,.0f} bytes "
          f"({fmt_bytes(params['bytes'])}); identified by {_HOW[params['identified_by']]}; "
          f"tensors by source: {sources}")
    if params["non_trainable_count"]:
        print(f"  of which non-trainable state (running statistics): {params['non_trainable_count']:,}")
    inputs = "; ".join(f"{d['name']} {d['shape']} ({d['reason']})" for d in info["data_inputs"]) or "none"
    print(f"data inputs: {inputs}")
    if info["constants"]:
        constants = "; ".join(f"{c['name']} ({c['reason']})" for c in info["constants"][:10])
        more = f"; and {len(info['constants']) - 10} more" if len(info["constants"]) > 10 else ""
        print(f"constants read from outside the nodes: {constants}{more}")
    for message in info["warnings"]:
        print(f"warning: {message}")
    for message in info["cannot_tell"]:
        print(f"note: {message}")
    rows = [[p["name"], "x".join(map(str, p["shape"])) or "scalar", f"{p['count']:,}", f"{p['bytes']:,.0f}",
             p["source"], ", ".join(p["roles"]) + ("" if p["trainable"] else " (non-trainable)")]
            for p in params["list"][:INFO_PARAMETER_ROWS]]
    if rows:
        hidden = len(params["list"]) - len(rows)
        print_table(["parameter", "shape", "elements", "bytes", "identified by", "roles"], rows,
                    numeric=[False, False, True, True, False, False],
                    title="parameters in order of first use" + (f" (first {len(rows)}; --json lists all "
                                                                 f"{len(params['list'])})" if hidden else ""))


def run_graphs(args: argparse.Namespace) -> int:
    if args.info is not None:
        info = graph_info(args.info)
        if args.json:
            print_json(info)
        else:
            _print_info(info)
        return 0
    rows = graph_rows()
    if args.json:
        print_json(rows)
        return 0
    print_table(
        ["graph", "ops", "edges", "tensors", "GFLOPs (fwd)", "params (M)", "source"],
        [[r["name"], r["ops"], r["edges"], r["tensors"], f"{r['flops'] / 1e9:,.1f}",
          f"{r['parameters'] / 1e6:,.2f}", r["source"]] for r in rows],
        numeric=[False, True, True, True, True, True, False],
        title=f"{len(rows)} bundled graphs (forward graph; train_step adds backward and update ops)",
    )
    return 0


# The clusters of this machine's own devices (`placement_gym.cluster.machine`), which `--cluster`
# takes beside the presets. Described, not built: `local` measures the devices when first loaded.
MACHINE_CLUSTERS: dict[str, str] = {
    "cpu<N>": "this machine's CPU as N virtual devices cpu:0..cpu:<N-1>, one core and one intra-op thread "
              "each, with fixed per-core estimates (the same figures on every machine); runs anywhere, "
              "for --evaluator real, profile and fidelity (cpu2: two devices)",
    "local": "this machine's CPU (cpu:0, all its cores) and every CUDA device torch finds (gpu:0...), "
             "with figures measured on this machine when first loaded (needs torch, the real extra)",
}


def cluster_rows() -> list[dict[str, Any]]:
    """One summary per cluster preset (``"kind": "preset"``), then one per cluster of this machine's
    own devices (``"kind": "machine"``: `MACHINE_CLUSTERS`; ``n_devices`` None and no devices, since
    they depend on the machine)."""
    rows = []
    for name in PRESETS:
        cluster = load_cluster(name)
        rows.append({
            "name": name,
            "kind": "preset",
            "n_devices": cluster.n_devices,
            "devices": [
                {"name": device, "kind": kind, "peak_flops": float(flops), "memory_capacity": float(memory),
                 "memory_bandwidth": float(bandwidth)}
                for device, kind, flops, memory, bandwidth in zip(
                    cluster.device_names, cluster.device_kinds, cluster.peak_flops.tolist(),
                    cluster.memory_capacity.tolist(), cluster.memory_bandwidth.tolist())
            ],
            "description": cluster.description,
        })
    rows += [{"name": name, "kind": "machine", "n_devices": None, "devices": [], "description": text}
             for name, text in MACHINE_CLUSTERS.items()]
    return rows


def _device_summary(devices: list[dict[str, Any]]) -> str:
    """``cpu:0 (cpu, 64.00 GB); gpu:0..gpu:3 (gpu, 12.00 GB)``: consecutive alike devices merged."""
    groups: list[list[dict[str, Any]]] = []
    for device in devices:
        if groups and (groups[-1][0]["kind"], groups[-1][0]["memory_capacity"]) == (
                device["kind"], device["memory_capacity"]):
            groups[-1].append(device)
        else:
            groups.append([device])
    parts = []
    for group in groups:
        names = group[0]["name"] if len(group) == 1 else f"{group[0]['name']}..{group[-1]['name']}"
        parts.append(f"{names} ({group[0]['kind']}, {fmt_bytes(group[0]['memory_capacity'])})")
    return "; ".join(parts)


def run_clusters(args: argparse.Namespace) -> int:
    rows = cluster_rows()
    if args.json:
        print_json(rows)
        return 0
    presets = [r for r in rows if r["kind"] == "preset"]
    print_table(
        ["cluster", "devices", "device names (kind, memory)", "description"],
        [[r["name"], r["n_devices"], _device_summary(r["devices"]), r["description"]] for r in presets],
        numeric=[False, True, False, False],
        title=f"{len(presets)} cluster presets (use a name, or a JSON file of your own, with --cluster)",
    )
    print_table(
        ["cluster", "what it is"],
        [[r["name"], r["description"]] for r in rows if r["kind"] == "machine"],
        numeric=[False, False],
        title="this machine's own devices (also names for --cluster)",
    )
    print_text("Parallel plans (placement-gym plan) run on meshes of DGX nodes: dgx-h100xN and dgx-a100xN, "
               "N from 1 to 1,024 nodes of 8 GPUs, or mixed: dgx-a100xN+dgx-h100xM.")
    return 0


def agent_rows() -> list[dict[str, Any]]:
    """Every agent ``evaluate --agent`` takes: the core's simple agents (heuristics that need no extra),
    then those of the installed agent providers (`placement_gym.evaluation.agents.describe_agents`)."""
    from placement_gym.evaluation import agents
    from placement_gym.evaluation.placements import SIMPLE_AGENT_DESCRIPTIONS

    rows = {name: {"name": name, "kind": "heuristic", "default_budget": None, "budget_unit": None,
                   "extra": None, "installed": True, "missing": None, "description": text}
            for name, text in SIMPLE_AGENT_DESCRIPTIONS.items()}
    for row in agents.describe_agents():
        rows.setdefault(row["name"], row)  # the core's simple agents keep the core's facts
    return list(rows.values())


def _budget_text(row: dict[str, Any]) -> str:
    budget = row["default_budget"]
    if budget is None:
        return "-"
    number = f"{budget:g}" if isinstance(budget, float) else str(budget)
    return f"{number} {row['budget_unit'] or ''}".strip()


def _needs_text(row: dict[str, Any]) -> str:
    """What an agent needs beyond the core: ``-``, ``baselines extra``, or for an agent not
    installed what is missing, ``torch (baselines extra)``."""
    extra = f"{row['extra']} extra" if row["extra"] else ""
    if row["installed"]:
        return extra or "-"
    return f"{row.get('missing') or 'not installed'}" + (f" ({extra})" if extra else "")


def run_agents(args: argparse.Namespace) -> int:
    from placement_gym.evaluation import agents

    rows = agent_rows()
    if args.json:
        print_json(rows)
        return 0
    print_table(
        ["agent", "kind", "default budget", "needs", "description"],
        [[r["name"], r["kind"] or "?", _budget_text(r), _needs_text(r), r["description"] or ""]
         for r in rows],
        numeric=[False, False, True, False, False],
        title=f"{len(rows)} agents (evaluate --agent NAME; --budget N overrides the default budget)",
    )
    plan_agents = agents.plan_agents()
    if plan_agents:
        print_table(["plan agent", "description"], [[name, text] for name, text in plan_agents.items()],
                    title=f"{len(plan_agents)} plan agents (plan --search NAME: a parallel plan of a model "
                          "on a mesh)")
    if not all(r["installed"] for r in rows):
        extras = sorted({r["extra"] for r in rows if not r["installed"] and r["extra"]})
        print_text(f"To install what is missing: {'; '.join(install_command(e) for e in extras)}")
    note = agents.providers().note()
    if note:
        print_text(f"agent providers that did not load{note.removeprefix('; could not load')}")
    return 0


def run_datasets(args: argparse.Namespace) -> int:
    import sys

    from placement_gym.datasets import DATASETS, clusters, get_dataset

    if args.build is not None:
        return _build_dataset(get_dataset(args.build), args)
    if args.sample is not None or args.seed is not None or args.pack:
        print("placement-gym datasets: --sample, --seed and --pack go with --build NAME", file=sys.stderr)
        return 2
    rows = [dataset.summary() for dataset in DATASETS.values()]
    if args.json:
        print_json(rows)
        return 0
    print_table(
        ["dataset", "graphs", "families", "train", "valid", "test-sizes", "test-families", "built"],
        [[r["name"], f"{r['graphs']:,}", ", ".join(r["families"]), *(f"{n:,}" for n in r["splits"].values()),
          "shipped" if r["shipped"] else "yes" if r["built"] else "no"] for r in rows],
        numeric=[False, True, False, True, True, True, True, False],
        title=f"{len(rows)} datasets (held-out families are the test-families split; built: shipped in "
              "the package, yes: cached here, no: built on first use or with --build NAME)",
    )
    print_text(f"Cluster family {clusters.FAMILY}: {clusters.TRAIN_CLUSTERS:,} train and "
               f"{clusters.TEST_CLUSTERS:,} test clusters of 2 to 16 devices "
               "(placement_gym.datasets.clusters)")
    return 0


def _build_dataset(dataset: Any, args: argparse.Namespace) -> int:
    """``datasets --build NAME``: the whole dataset built again (or ``--sample N`` graphs of it) and
    checked against its frozen manifest; ``--pack``: then written as the archive the package ships."""
    import random
    import sys

    from placement_gym.common.progress import Progress

    if args.pack and args.sample is not None:
        print("placement-gym datasets: --pack needs the whole dataset built (no --sample)", file=sys.stderr)
        return 2
    if args.seed is not None and args.sample is None:
        print("placement-gym datasets: --seed goes with --sample N", file=sys.stderr)
        return 2
    started = time.perf_counter()
    try:
        with Progress() as progress:
            if args.sample is not None:
                seed = args.seed if args.seed is not None else secrets.randbelow(2**31)
                ids = dataset.ids()
                ids = random.Random(seed).sample(ids, min(args.sample, len(ids)))
                rows = dataset.check(ids, progress)
            else:
                rows = dataset.build_manifest(progress)
                dataset.write_manifest(rows)
    except KeyboardInterrupt:  # the build's workers are stopped by then (Dataset.build_manifest)
        from placement_gym.datasets.families import FAMILIES

        if any(FAMILIES[spec.family].cached for spec in dataset.families):
            left = ("the manifest was not written; the graphs exported so far stay cached, so the next build "
                    "goes on")
        else:
            left = "nothing was cached, so the next build starts over"
        print(f"placement-gym datasets --build {dataset.name}: interrupted; {left}", file=sys.stderr)
        return 130
    ops = [row.ops for row in rows]
    took = f"{time.perf_counter() - started:.1f} s"
    if args.sample is not None:
        drawn = ", ".join(row.id for row in rows)
        print(f"{dataset.name}: {len(rows)} graphs drawn with --seed {seed} ({drawn}) built again and equal "
              f"to their frozen manifest rows ({took})")
    else:
        print(f"{dataset.name}: {len(rows):,} graphs of {min(ops):,} to {max(ops):,} ops built, their "
              f"manifest the frozen one, cached as {dataset.manifest_path} ({took})")
    if args.pack:
        path = dataset.pack()
        print(f"{dataset.name}: packed as {path} ({path.stat().st_size / 2**20:.1f} MB)")
    return 0


def add_parsers(subparsers: Subcommands) -> None:
    agents_parser = add_command(subparsers, "agents", DESCRIPTIONS["agents"])
    agents_parser.add_argument("--json", action="store_true", help="print a JSON list instead of a table")
    agents_parser.set_defaults(run=run_agents)
    graphs = add_command(subparsers, "graphs", DESCRIPTIONS["graphs"])
    graphs.add_argument("--info", metavar="FILE", default=None,
                        help="an .onnx file (or a bundled graph name) to describe instead of listing")
    graphs.add_argument("--json", action="store_true", help="print JSON instead of a table")
    graphs.set_defaults(run=run_graphs)
    clusters = add_command(subparsers, "clusters", DESCRIPTIONS["clusters"])
    clusters.add_argument("--json", action="store_true", help="print a JSON list instead of a table")
    clusters.set_defaults(run=run_clusters)
    datasets = add_command(subparsers, "datasets", DESCRIPTIONS["datasets"])
    datasets.add_argument("--json", action="store_true", help="print a JSON list instead of a table")
    datasets.add_argument("--build", metavar="NAME", default=None,
                          help="build this dataset again (never from the archive it ships in) and check it "
                               "against its frozen manifest")
    datasets.add_argument("--sample", metavar="N", type=positive_int, default=None,
                          help="with --build: build only N graphs drawn at random (--seed) and check each "
                               "against its row of the frozen manifest (what CI does)")
    datasets.add_argument("--seed", metavar="S", type=int, default=None,
                          help="with --sample: the seed of the draw (default: a random one, printed)")
    datasets.add_argument("--pack", action="store_true",
                          help="with --build (maintainers): then write the archive the package ships "
                               "(placement_gym/datasets/built/NAME.zip) from the output folder's cache")
    datasets.set_defaults(run=run_datasets)
