"""The small things users expect (issue 14, point 9): a license, typing marker and version; a guess
at a misspelled name; errors that name the extra to install; every cluster name listed; output
files only where the user says."""

from __future__ import annotations

import importlib.metadata
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from paths import ROOT

import placement_gym
from placement_gym import load_cluster, load_graph
from placement_gym.cli import main
from placement_gym.common.extras import install_command
from placement_gym.common.names import did_you_mean, unknown_name
from placement_gym.evaluation import agents
from placement_gym.evaluation.placements import simple_placement

GRAPH, CLUSTER = "cifar10_cnn", "k80x2"
EXTRA = install_command("baselines")


def project_field(key: str) -> str:
    """A string field of pyproject's [project] table (tomllib is Python 3.11+; the project runs on 3.10)."""
    text = (ROOT / "pyproject.toml").read_text()
    table = text[text.index("[project]"):]
    return re.search(rf'^{key} = "([^"]*)"', table, re.MULTILINE).group(1)


def error_line(capsys, argv: list[str]) -> str:
    """Run a command that must fail on bad input: exit code 2, nothing on stdout, one stderr line."""
    assert main(argv) == 2
    captured = capsys.readouterr()
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1, captured.err
    assert lines[0].startswith("placement-gym: error: ") and captured.out == ""
    return lines[0]


# --- license, py.typed, __version__ -----------------------------------------------------------------


def test_license_is_the_mit_license_of_the_authors():
    text = (ROOT / "LICENSE").read_text()
    assert project_field("license") == "MIT"
    assert text.startswith("MIT License")
    assert "Copyright (c) 2026 the placement-gym authors" in text
    assert 'THE SOFTWARE IS PROVIDED "AS IS"' in text


def test_the_package_is_marked_typed():
    # PEP 561: type checkers read the package's annotations only with this marker in the package.
    marker = Path(placement_gym.__file__).parent / "py.typed"
    assert marker.is_file()


def test_version_is_exported_and_matches_the_metadata():
    assert "__version__" in placement_gym.__all__
    assert placement_gym.__version__ == project_field("version")
    assert placement_gym.__version__ == importlib.metadata.version("placement-gym")


def test_cli_version_prints_it(capsys):
    assert main(["--version"]) == 0
    assert capsys.readouterr().out.strip() == f"placement-gym {placement_gym.__version__}"


# --- did you mean -------------------------------------------------------------------------------------


@pytest.mark.parametrize(("typed", "meant"), [
    ("inceptionv3", "inception_v3"), ("Inception-V3", "inception_v3"), ("resnet_50", "resnet50"),
    ("cifar10cnn", "cifar10_cnn"), ("gnmt", "gnmt2"),
])
def test_a_misspelled_graph_name_gets_a_guess(typed, meant):
    with pytest.raises(ValueError) as error:
        load_graph(typed)
    message = str(error.value)
    assert message.startswith(f"unknown graph {typed!r}; did you mean {meant!r}? allowed: a bundled graph")
    assert "inception_v3" in message and ".onnx" in message


def test_no_guess_for_a_missing_file_or_a_name_like_nothing():
    for typed in ("models/net.onnx", "qqqqqqqq"):
        with pytest.raises(ValueError, match=rf"^unknown graph '{typed}'; allowed: ") as error:
            load_graph(typed)
        assert "did you mean" not in str(error.value)


@pytest.mark.parametrize(("typed", "meant"), [("k8x4", "k80x4"), ("K80X2", "k80x2"), ("lokal", "local"),
                                              ("dgx1_p100", "dgx1-p100")])
def test_a_misspelled_cluster_name_gets_a_guess(typed, meant):
    with pytest.raises(ValueError) as error:
        load_cluster(typed)
    message = str(error.value)
    assert message.startswith(f"unknown cluster {typed!r}; did you mean {meant!r}? allowed: a preset (")
    assert "k80x2, k80x4" in message
    assert "'cpu<N>'" in message and "'local'" in message


def test_a_misspelled_agent_name_gets_a_guess_everywhere(cifar_task):
    from baselines import registry

    with pytest.raises(ValueError, match=r"^unknown agent 'heft2'; did you mean 'heft'\? allowed: single"):
        registry.get_agent("heft2")
    with pytest.raises(ValueError, match=r"^unknown agent 'anneel'; did you mean 'anneal'\? allowed: "):
        agents.run_installed_agent(cifar_task, "anneel")
    with pytest.raises(ValueError, match=r"^unknown agent 'round_robin'; did you mean 'round-robin'\? "):
        simple_placement(cifar_task, "round_robin")
    with pytest.raises(ValueError, match=r"^unknown learned agent 'pq'; did you mean 'pg'\? allowed: "):
        agents.find_trainer("pq")


@pytest.fixture
def cifar_task():
    from placement_gym.task.named import get_task

    return get_task(GRAPH, CLUSTER)


@pytest.mark.parametrize(("argv", "expected"), [
    (["evaluate", "--graph", "inceptionv3", "--cluster", CLUSTER, "--agent", "random"],
     "unknown graph 'inceptionv3'; did you mean 'inception_v3'? allowed: "),
    (["evaluate", "--graph", GRAPH, "--cluster", "k80x3", "--agent", "random"],
     "unknown cluster 'k80x3'; did you mean "),
    (["evaluate", "--graph", GRAPH, "--cluster", CLUSTER, "--agent", "best_single"],
     "unknown agent 'best_single'; did you mean 'best-single'? allowed: single:<device>, best-single"),
    (["train", "--graph", GRAPH, "--cluster", CLUSTER, "--agent", "spotlite"],
     "unknown learned agent 'spotlite'; did you mean 'spotlight'? allowed: "),
])
def test_the_cli_says_did_you_mean_on_one_line(capsys, argv, expected):
    line = error_line(capsys, argv)
    assert expected in line


def test_did_you_mean_prefers_the_same_letters_and_never_the_name_itself():
    assert did_you_mean("Inception-V3", ["inception_v3", "inception_v4"]) == "inception_v3"
    assert did_you_mean("pg", ["pg", "pq"]) == "pq"  # the name itself is no guess
    assert did_you_mean("zzz", ["pg", "heft"]) is None
    assert did_you_mean("gnmt", ["gnmt2", "gnmt4", "gnmt8"]) == "gnmt2"  # a tie: the first listed
    assert unknown_name("agent", "x", ["a", "b"]) == "unknown agent 'x'; allowed: a, b"


# --- a missing optional dependency names the extra -----------------------------------------------------

# A child process whose imports of the listed top-level modules fail, as when they are not installed
# (the modules of this process are already imported, so the simulation needs its own process).
_BLOCKER = """
import sys
blocked = set(sys.argv[1].split(","))
class Missing:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in blocked:
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None
sys.meta_path.insert(0, Missing())
for name in list(sys.modules):
    if name.split(".")[0] in blocked:
        del sys.modules[name]
from placement_gym.cli import main
raise SystemExit(main(sys.argv[2:]))
"""


def run_without(modules: str, argv: list[str], tmp_path: Path) -> tuple[int, str, str]:
    environment = {**os.environ, "PLACEMENT_GYM_OUTPUT": str(tmp_path / "output")}
    done = subprocess.run([sys.executable, "-c", _BLOCKER, modules, *argv], capture_output=True, text=True,
                          cwd=tmp_path, env=environment, timeout=600)
    return done.returncode, done.stdout, done.stderr


TASK_ARGS = ["--graph", GRAPH, "--cluster", CLUSTER]


@pytest.mark.slow
@pytest.mark.parametrize(("modules", "argv", "expected"), [
    # the case: a learned agent without torch was "unknown"
    ("torch", ["train", "--agent", "pg", *TASK_ARGS, "--budget", "8"],
     f"agent 'pg' needs torch, which is not installed: {EXTRA}"),
    ("torch", ["evaluate", "--agent", "hsdag", *TASK_ARGS],
     f"agent 'hsdag' needs torch, which is not installed: {EXTRA}"),
    ("torch", ["train", "--agent", "random-search", *TASK_ARGS, "--budget", "8"],
     "training 'random-search' needs torch"),
    ("stable_baselines3", ["train", "--agent", "sb3-ppo", *TASK_ARGS, "--budget", "8"],
     f"agent 'sb3-ppo' needs stable_baselines3, which is not installed: {EXTRA}"),
    ("sb3_contrib", ["evaluate", "--agent", "sb3-maskable-ppo", *TASK_ARGS],
     f"agent 'sb3-maskable-ppo' needs sb3_contrib, which is not installed: {EXTRA}"),
    ("ortools", ["evaluate", "--agent", "exact", *TASK_ARGS],
     f"agent 'exact' needs ortools, which is not installed: {EXTRA}"),
    ("matplotlib", ["show", "--agent", "heft", *TASK_ARGS, "--out", "t.png"],
     install_command("viz")),
    ("tensorboard", ["train", "--agent", "cem", *TASK_ARGS, "--budget", "30", "--tensorboard", "tb"],
     "--tensorboard needs torch and the tensorboard package"),
    # the Python API names the extra itself (placement_gym.common.extras.require)
    ("torch", ["evaluate", "--agent", "random", "--graph", GRAPH, "--cluster", "local"],
     "the local cluster needs torch, which is not installed: " + install_command("real")),
    ("torch", ["profile", "--graph", GRAPH, "--cluster", "cpu2", "--repeats", "1", "--out", "p.json"],
     "real-hardware mode needs torch, which is not installed: " + install_command("real")),
    ("torch", ["train", "--agent", "random-search", "--graph", GRAPH, "--evaluator", "real",
               "--devices", "cpu:0=cpu,cpu:1=cpu", "--budget", "2"],
     "evaluator=\"real\" needs torch, which is not installed: " + install_command("real")),
])
def test_a_missing_optional_dependency_names_the_extra(tmp_path, modules, argv, expected):
    code, out, err = run_without(modules, argv, tmp_path)
    lines = err.strip().splitlines()
    assert code == 2 and len(lines) == 1, err
    assert lines[0].startswith("placement-gym: error: ") and expected in lines[0], lines[0]
    assert "pip install " in lines[0]
    assert "unknown" not in lines[0]


@pytest.mark.slow
def test_without_torch_the_search_agents_still_train(tmp_path):
    # anneal and cem need neither torch nor the learned agents: the train command still runs them.
    code, out, err = run_without("torch", ["train", "--agent", "anneal", *TASK_ARGS, "--budget", "40",
                                           "--out", "run", "--json"], tmp_path)
    assert code == 0, err
    assert json.loads(out)["evaluations"] == 40


# --- clusters -----------------------------------------------------------------------------------------


def test_clusters_lists_the_machine_clusters_beside_the_presets(capsys):
    assert main(["clusters"]) == 0
    text = capsys.readouterr().out
    assert "k80x4" in text
    tail = text[text.index("this machine's own devices"):]
    assert "cpu<N>" in tail and "virtual devices" in tail
    assert "local" in tail and "CUDA" in tail


# --- output files go where the user says --------------------------------------------------------------


def _files(folder: Path) -> list[str]:
    """What a command wrote under ``folder``, less the output root's caches (``cache/``: imported
    bundled graphs, built datasets), which every command may fill."""
    if not folder.exists():
        return []
    relative = (p.relative_to(folder) for p in folder.rglob("*"))
    return sorted(str(path) for path in relative if "cache" not in path.parts)


def test_demo_with_out_writes_only_there(tmp_path, monkeypatch, capsys):
    pytest.importorskip("matplotlib")
    cwd, out, root = tmp_path / "cwd", tmp_path / "out", tmp_path / "root"
    cwd.mkdir()
    monkeypatch.chdir(cwd)
    monkeypatch.setenv("PLACEMENT_GYM_OUTPUT", str(root))
    assert main(["demo", "--samples", "4", "--out", str(out)]) == 0
    assert (_files(cwd), _files(out), _files(root)) == ([], ["placement-gym-demo.png"], [])
    assert (out / "placement-gym-demo.png").read_bytes()[:4] == b"\x89PNG"
    assert str(out / "placement-gym-demo.png") in capsys.readouterr().out


@pytest.mark.parametrize("argv, written", [
    (["demo", "--samples", "4", "--json"], ["demo", "demo/placement-gym-demo.png"]),
    (["fidelity", "--published", "--json"], ["fidelity", "fidelity/published.png"]),
])
def test_a_chart_without_out_is_written_under_the_output_root_not_the_current_folder(
    argv, written, tmp_path, monkeypatch
):
    pytest.importorskip("matplotlib")
    cwd, root = tmp_path / "cwd", tmp_path / "root"
    cwd.mkdir()
    monkeypatch.chdir(cwd)
    monkeypatch.setenv("PLACEMENT_GYM_OUTPUT", str(root))
    assert main(argv) == 0
    assert _files(cwd) == []
    assert _files(root) == written


def test_train_without_out_writes_under_the_output_root(tmp_path, monkeypatch, capsys):
    cwd, root = tmp_path / "cwd", tmp_path / "root"
    cwd.mkdir()
    monkeypatch.chdir(cwd)
    monkeypatch.setenv("PLACEMENT_GYM_OUTPUT", str(root))
    assert main(["train", "--agent", "cem", *TASK_ARGS, "--budget", "30", "--json"]) == 0
    files = json.loads(capsys.readouterr().out)["files"]
    run = root / "runs" / "cem-cifar10_cnn-k80x2-train-s0"
    assert _files(cwd) == []
    assert Path(files["curve_csv"]) == run / "curve.csv" and (run / "best_placement.json").is_file()


def test_the_timeline_legend_explains_the_shades():
    pytest.importorskip("matplotlib")
    from placement_gym.cost_model import simulate
    from placement_gym.cost_model.timeline import build_timeline_figure
    from placement_gym.task.named import get_task

    task = get_task(GRAPH, CLUSTER)
    placement = np.arange(task.n_forward) % task.n_devices
    figure = build_timeline_figure(task, simulate(task, placement, schedule=True).schedule)
    legend = figure.axes[0].get_legend()
    assert "shades" in legend.get_title().get_text()
    # each entry shows both shades of its colour (a pair of patches), so the title can point at them
    handles = legend.legend_handles
    assert [text.get_text() for text in legend.get_texts()] == ["forward", "backward", "update", "transfer"]
    assert len(handles) == 4
