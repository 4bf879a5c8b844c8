"""`placement-gym graphs` and `placement-gym clusters`: what is bundled."""

from __future__ import annotations

import argparse
from typing import Any

from placement_gym.cli.output import fmt_bytes, print_json, print_table
from placement_gym.cluster import PRESETS, load_cluster
from placement_gym.graph import bundled, bundled_graph_names, load_graph


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


def run_graphs(args: argparse.Namespace) -> int:
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


def cluster_rows() -> list[dict[str, Any]]:
    """One summary per cluster preset."""
    rows = []
    for name in PRESETS:
        cluster = load_cluster(name)
        rows.append({
            "name": name,
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
    print_table(
        ["cluster", "devices", "device names (kind, memory)", "description"],
        [[r["name"], r["n_devices"], _device_summary(r["devices"]), r["description"]] for r in rows],
        numeric=[False, True, False, False],
        title=f"{len(rows)} cluster presets (use a name, or a JSON file of your own, with --cluster)",
    )
    return 0


def add_parsers(subparsers: argparse._SubParsersAction) -> None:
    graphs = subparsers.add_parser("graphs", help="list the bundled graphs",
                                   description="List the bundled graphs (forward graph statistics).")
    graphs.add_argument("--json", action="store_true", help="print a JSON list instead of a table")
    graphs.set_defaults(run=run_graphs)
    clusters = subparsers.add_parser(
        "clusters", help="list the cluster presets",
        description="List the cluster presets: devices and where the figures come from.")
    clusters.add_argument("--json", action="store_true", help="print a JSON list instead of a table")
    clusters.set_defaults(run=run_clusters)
