"""The `placement-gym` console script, run in-process through `main(argv)`."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from paths import ROOT

from placement_gym.cli import main
from placement_gym.cluster import PRESETS, load_cluster
from placement_gym.cost_model import lower_bound, reference_simulate, simulate, single_device
from placement_gym.evaluation.agents import AgentResult
from placement_gym.evaluation.placements import placement_from_dict
from placement_gym.graph import bundled_graph_names, load_graph
from placement_gym.task.named import get_task

GRAPH, CLUSTER = "cifar10_cnn", "k80x2"
SUBCOMMANDS = ("graphs", "clusters", "evaluate", "show", "bench", "export-graphs")


def run_json(capsys, *argv: str):
    assert main([*argv, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def evaluate_json(capsys, *extra: str) -> dict:
    return run_json(capsys, "evaluate", "--graph", GRAPH, "--cluster", CLUSTER, *extra)


def error_line(capsys, argv: list[str]) -> str:
    """Run a command that must fail on bad input: exit code 2, nothing on stdout, one stderr line."""
    assert main(argv) == 2
    captured = capsys.readouterr()
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1, captured.err
    assert lines[0].startswith("placement-gym: error: ")
    assert "Traceback" not in captured.err
    return lines[0]


@pytest.mark.parametrize("command", [[], *[[c] for c in SUBCOMMANDS]])
def test_help_exits_zero(capsys, command):
    assert main([*command, "--help"]) == 0
    assert "usage: placement-gym" in capsys.readouterr().out


def test_graphs_json_lists_every_bundled_graph(capsys):
    rows = run_json(capsys, "graphs")
    assert [row["name"] for row in rows] == bundled_graph_names()
    for row in rows:
        graph = load_graph(row["name"])
        assert (row["ops"], row["edges"], row["tensors"]) == (graph.n_ops, graph.n_edges, graph.n_tensors)
        assert row["flops"] == pytest.approx(float(graph.flops.sum())) and row["flops"] > 0


def test_graphs_table_names_every_graph(capsys):
    assert main(["graphs"]) == 0
    out = capsys.readouterr().out
    assert all(name in out for name in bundled_graph_names())


def test_tables_fall_back_to_plain_text_without_rich(capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "rich", None)  # `import rich...` now raises ImportError
    monkeypatch.setitem(sys.modules, "rich.console", None)
    assert main(["graphs"]) == 0
    lines = capsys.readouterr().out.splitlines()
    header = next(i for i, line in enumerate(lines) if line.startswith("graph "))
    assert set(lines[header + 1]) <= {"-", " "}
    # A row's text wraps onto lines that start blank, the table fitting 80 columns (not a terminal).
    rows = [line.split()[0] for line in lines[header + 2:] if not line.startswith(" ")]
    assert rows == bundled_graph_names()
    assert max(map(len, lines)) <= 80


def test_clusters_json_lists_the_presets(capsys):
    rows = run_json(capsys, "clusters")
    presets = [row for row in rows if row["kind"] == "preset"]
    assert [row["name"] for row in presets] == list(PRESETS)
    # then this machine's own clusters, which --cluster also takes
    assert [(row["name"], row["kind"]) for row in rows[len(presets):]] == [("cpu<N>", "machine"),
                                                                          ("local", "machine")]
    for row in presets:
        cluster = load_cluster(row["name"])
        assert row["n_devices"] == cluster.n_devices == len(row["devices"])
        assert [d["name"] for d in row["devices"]] == list(cluster.device_names)
        assert row["description"] == cluster.description


@pytest.mark.parametrize("agent", ["single:gpu:1", "best-single", "round-robin", "random"])
def test_evaluate_json_reports_the_agents_placement(capsys, agent):
    report = evaluate_json(capsys, "--agent", agent, "--seed", "3")
    task = get_task(GRAPH, CLUSTER)
    for key in ("task", "runtime", "feasible", "lower_bound", "best_single_runtime", "evaluations",
                "placement", "speedup", "peak_memory", "wall_s"):
        assert key in report
    assert report["task"] == task.id == "cifar10_cnn/k80x2/train"
    placement = placement_from_dict(task, report["placement"])
    # The reported figures are those of the printed placement, recomputed here independently.
    result = reference_simulate(task, placement)
    assert report["runtime"] == result.runtime > 0
    assert report["feasible"] == result.feasible
    assert list(report["peak_memory"]) == list(task.cluster.device_names)
    assert list(report["peak_memory"].values()) == result.peak_memory.tolist()
    assert report["lower_bound"] == lower_bound(task) <= report["runtime"]
    assert report["best_single_runtime"] == single_device(task).runtime
    assert report["speedup"] == pytest.approx(report["best_single_runtime"] / report["runtime"])
    assert report["gap_to_lower_bound"] == pytest.approx(report["runtime"] / report["lower_bound"] - 1)
    assert report["wall_s"] >= 0
    devices = list(report["placement"].values())
    if agent == "single:gpu:1":
        assert set(devices) == {"gpu:1"}
    if agent == "round-robin":  # dealt over the GPUs in topological order
        assert devices == [("gpu:0", "gpu:1")[i % 2] for i in range(task.n_forward)]


def test_best_single_matches_single_device_and_counts_its_evaluations(capsys):
    report = evaluate_json(capsys, "--agent", "best-single")
    task = get_task(GRAPH, CLUSTER)
    assert report["runtime"] == single_device(task).runtime
    assert report["speedup"] == 1.0
    assert report["evaluations"] == task.n_devices  # one simulation per device
    assert evaluate_json(capsys, "--agent", "round-robin")["evaluations"] == 0


def test_random_agent_is_seeded(capsys):
    first = evaluate_json(capsys, "--agent", "random", "--seed", "5")["placement"]
    assert evaluate_json(capsys, "--agent", "random", "--seed", "5")["placement"] == first
    assert evaluate_json(capsys, "--agent", "random", "--seed", "6")["placement"] != first


def test_save_then_placement_reproduces_the_runtime(capsys, tmp_path):
    path = tmp_path / "placement.json"
    saved = evaluate_json(capsys, "--agent", "random", "--seed", "1", "--save", str(path))
    assert json.loads(path.read_text())["placement"] == saved["placement"]
    loaded = evaluate_json(capsys, "--placement", str(path))
    assert loaded["runtime"] == saved["runtime"]
    assert loaded["placement"] == saved["placement"]
    assert loaded["evaluations"] == 0


def test_evaluate_table_output(capsys):
    assert main(["evaluate", "--graph", GRAPH, "--cluster", CLUSTER, "--agent", "round-robin"]) == 0
    out = capsys.readouterr().out
    for text in ("runtime", "lower bound", "speedup", "gpu:1", "cifar10_cnn/k80x2/train"):
        assert text in out


def test_evaluate_uses_a_baselines_agent(capsys, monkeypatch):
    from baselines import registry

    calls = []

    def agent(task, seed=0, budget=None):
        calls.append((seed, budget))
        return AgentResult(np.zeros(task.n_forward, dtype=int), 7, {"note": "fake"})

    registry.registered_names()  # load every module first, so that the fake is the last one registered
    monkeypatch.setitem(registry._AGENTS, "all-on-cpu", agent)
    monkeypatch.setitem(registry._DESCRIPTIONS, "all-on-cpu", "every op on the CPU")
    report = evaluate_json(capsys, "--agent", "all-on-cpu", "--seed", "4", "--budget", "9")
    assert calls == [(4, 9)]
    assert report["evaluations"] == 7 and report["info"] == {"note": "fake"}
    assert set(report["placement"].values()) == {"cpu:0"}
    line = error_line(capsys, ["evaluate", "--graph", GRAPH, "--agent", "nope"])
    assert "all-on-cpu" in line and "round-robin" in line


@pytest.mark.slow
def test_show_writes_a_png(capsys, tmp_path):
    pytest.importorskip("matplotlib")
    out = tmp_path / "timeline.png"
    report = run_json(capsys, "show", "--graph", GRAPH, "--cluster", CLUSTER, "--agent", "round-robin",
                      "--out", str(out))
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    task = get_task(GRAPH, CLUSTER)
    assert report["runtime"] == simulate(task, placement_from_dict(
        task, evaluate_json(capsys, "--agent", "round-robin")["placement"])).runtime


def test_bench_json_small(capsys):
    rows = run_json(capsys, "bench", "--graphs", GRAPH, "--sizes", "1000", "--repeats", "1",
                    "--seconds", "0", "--batch", "4")["rows"]
    assert [row["graph"] for row in rows] == [GRAPH, "layered1000"]
    task = get_task(GRAPH, "k80x4")
    assert (rows[0]["ops"], rows[0]["forward_ops"]) == (task.n_ops, task.n_forward)
    assert rows[1]["forward_ops"] == 1000 and rows[1]["ops"] > 1000  # train_step adds backward ops
    for row in rows:
        assert row["agree"] is True
        rates = ("fast_evals_per_s", "batch_evals_per_s", "reference_evals_per_s", "ratio", "ns_per_op",
                 "batch_speedup")
        assert all(row[key] > 0 for key in rates)
        assert row["ratio"] == pytest.approx(row["fast_evals_per_s"] / row["reference_evals_per_s"])


def test_bench_table_without_synthetic_graphs(capsys):
    assert main(["bench", "--graphs", GRAPH, "--sizes", "none", "--repeats", "1", "--seconds", "0"]) == 0
    captured = capsys.readouterr()
    assert GRAPH in captured.out and "layered" not in captured.out
    assert GRAPH in captured.err  # progress lines go to stderr


@pytest.fixture
def foreign_device_placement(tmp_path) -> Path:
    """A placement file whose first op sits on gpu:7, which k80x2 does not have."""
    task = get_task(GRAPH, CLUSTER)
    mapping = {op: "gpu:0" for op in task.graph.op_names}
    mapping[task.graph.op_names[0]] = "gpu:7"
    path = tmp_path / "foreign.json"
    path.write_text(json.dumps({"task": task.id, "placement": mapping}))
    return path


@pytest.mark.parametrize(("argv", "named"), [
    (["evaluate", "--graph", "no_such_graph", "--agent", "random"], "no_such_graph"),
    (["evaluate", "--cluster", "no_such_cluster", "--agent", "random"], "no_such_cluster"),
    (["evaluate", "--graph", GRAPH, "--agent", "no_such_agent"], "no_such_agent"),
    (["evaluate", "--graph", GRAPH, "--agent", "single:gpu:9"], "gpu:9"),
    (["evaluate", "--graph", GRAPH, "--objective", "no_such_objective", "--agent", "random"],
     "no_such_objective"),
    (["evaluate", "--graph", "/nonexistent/model.onnx", "--agent", "random"], "/nonexistent/model.onnx"),
    (["evaluate", "--graph", GRAPH, "--placement", "/nonexistent/placement.json"],
     "/nonexistent/placement.json"),
    (["evaluate", "--graph", GRAPH], "--agent"),
    (["show", "--graph", GRAPH, "--agent", "random"], "--out"),
    (["bench", "--graphs", "no_such_graph"], "no_such_graph"),
    (["bench", "--sizes", "ten"], "ten"),
    (["bench", "--repeats", "0"], "--repeats"),
    (["no_such_command"], "no_such_command"),
])
def test_bad_input_is_one_line_and_exit_2(capsys, argv, named):
    assert named in error_line(capsys, argv)


def test_placement_naming_a_foreign_device_is_rejected(capsys, foreign_device_placement):
    line = error_line(capsys, ["evaluate", "--graph", GRAPH, "--cluster", CLUSTER,
                               "--placement", str(foreign_device_placement)])
    assert "gpu:7" in line and "gpu:1" in line  # the bad device and the allowed ones


def test_export_graphs_without_the_extra(capsys, monkeypatch, tmp_path):
    monkeypatch.setitem(sys.modules, "torch", None)  # `import torch` now raises ImportError
    line = error_line(capsys, ["export-graphs", "--names", GRAPH, "--out", str(tmp_path)])
    assert "export" in line
    assert not list(tmp_path.iterdir())


def test_python_dash_m_entry_point():
    env = {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    done = subprocess.run([sys.executable, "-m", "placement_gym", "--help"], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert all(command in done.stdout for command in SUBCOMMANDS)
    # The CLI never imports torch unless a subcommand needs it.
    probe = "import sys, placement_gym.cli; print('torch' in sys.modules)"
    done = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=120)
    assert done.stdout.strip() == "False", done.stderr


@pytest.mark.slow
def test_evaluate_all_lists_every_baseline_sorted(capsys):
    from baselines.registry import names_for_all

    rows = evaluate_json(capsys, "--agent", "all")
    task = get_task(GRAPH, CLUSTER)
    assert sorted(row["agent"] for row in rows) == sorted(names_for_all(task))
    keys = [(not row["feasible"], row["runtime"]) for row in rows]
    assert keys == sorted(keys)
    for row in rows:
        placement = placement_from_dict(task, row["placement"])
        assert simulate(task, placement).runtime == pytest.approx(row["runtime"])
    assert main(["evaluate", "--graph", GRAPH, "--cluster", CLUSTER, "--agent", "all"]) == 0
    out = capsys.readouterr().out
    assert all(row["agent"] in out for row in rows)


def test_budget_must_be_positive(capsys):
    argv = ["evaluate", "--graph", GRAPH, "--agent", "random", "--budget", "0"]
    assert "--budget" in error_line(capsys, argv)
