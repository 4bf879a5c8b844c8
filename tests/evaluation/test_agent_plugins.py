"""A third-party agent package, found through the entry-point group ``placement_gym.agents`` with no
edit here: `placement-gym evaluate`, `train`, fidelity and the leaderboard harness run it. And the
layers of the package point one way (the import-linter contracts of pyproject.toml)."""

from __future__ import annotations

import ast
import json
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from paths import ROOT

from placement_gym.cli import main
from placement_gym.evaluation import agents
from placement_gym.leaderboard import evaluate, get_suite, save_submission
from placement_gym.task.named import parse_task_id
from tests.plugin_package import install_package, subprocess_env

TASK = "cifar10_cnn/k80x2/train"
PLUGIN = "placement_gym_tiny_plugin"

# The package: a module with a provider, and the dist-info an installer writes for it (its entry points).
MODULE = '''
"""A tiny agent package: ops dealt to the devices from the last one down."""
from types import SimpleNamespace

import numpy as np

from placement_gym.cost_model import simulate


def deal(task, seed, budget):
    placement = (task.n_devices - 1 - np.arange(task.n_forward)) % task.n_devices
    simulate(task, placement)  # one evaluation, as the agent reports
    return SimpleNamespace(placement=placement, evaluations=1, info={"plugin": "tiny", "seed": seed})


class Trained:
    def __init__(self, task, budget, seed):
        self.task, self.evaluations, self.seed = task, budget, seed
        self.best_runtime, self.best_feasible, self.scored_by = 1.0, True, "cost_model"
        self.iterations, self.wall_s, self.evaluations_per_s, self.files = 1, 0.0, 0.0, {}

    def to_dict(self, task):
        return {"agent": "tiny-trained", "task": task.id, "evaluations": self.evaluations, "seed": self.seed}


def train(task, budget, *, seed=0, **options):
    return Trained(task, budget, seed)


class Provider:
    def names(self):
        return ["tiny-deal"]

    def agent(self, name):
        return deal if name == "tiny-deal" else None

    def leaderboard_agent(self, name):
        return deal if name == "tiny-deal" else None

    def trainable(self):
        return ["tiny-trained"]

    def trainer(self, name):
        return train if name == "tiny-trained" else None


provider = Provider()
'''


@pytest.fixture
def plugin(tmp_path, monkeypatch):
    """The package installed in ``tmp_path`` (on sys.path): its folder, for a subprocess's PYTHONPATH."""
    return install_package(tmp_path, monkeypatch, PLUGIN, MODULE,
                           {"placement_gym.agents": f"tiny = {PLUGIN}:provider"})


def dealt(task) -> list[str]:
    """The device names of the package's placement of ``task``, op by op."""
    names = task.cluster.device_names
    return [names[(len(names) - 1 - i) % len(names)] for i in range(task.n_forward)]


def run_json(capsys, *argv: str):
    assert main([*argv, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_the_package_is_a_provider_of_the_entry_point_group(plugin):
    names = agents.agent_names()
    assert "tiny-deal" in names and "heft" in names  # beside the baselines package's agents
    assert agents.lookup_agent("tiny-deal") is not None and agents.lookup_agent("nonesuch") is None


@pytest.mark.slow
def test_evaluate_runs_the_package_s_agent(plugin, capsys):
    report = run_json(capsys, "evaluate", "--graph", "cifar10_cnn", "--cluster", "k80x2",
                      "--agent", "tiny-deal", "--seed", "3")
    assert list(report["placement"].values()) == dealt(parse_task_id(TASK))
    assert report["evaluations"] == 1 and report["info"] == {"plugin": "tiny", "seed": 3}
    assert main(["evaluate", "--graph", "cifar10_cnn", "--agent", "nope"]) == 2
    assert "tiny-deal" in capsys.readouterr().err  # the known agents include the package's


@pytest.mark.slow
def test_the_placement_gym_command_finds_the_installed_package(plugin):
    env = subprocess_env(plugin)
    out = subprocess.run(
        [sys.executable, "-m", "placement_gym", "evaluate", "--graph", "cifar10_cnn", "--cluster", "k80x2",
         "--agent", "tiny-deal", "--json"],
        capture_output=True, text=True, env=env, check=True,
    ).stdout
    assert json.loads(out)["evaluations"] == 1


def test_train_runs_the_package_s_trainer(plugin, capsys):
    summary = run_json(capsys, "train", "--agent", "tiny-trained", "--graph", "cifar10_cnn",
                       "--cluster", "k80x2", "--budget", "5", "--seed", "2", "--quiet")
    assert summary == {"agent": "tiny-trained", "task": TASK, "evaluations": 5, "seed": 2}
    assert main(["train", "--agent", "nope"]) == 2
    err = capsys.readouterr().err
    assert "unknown learned agent 'nope'" in err and "tiny-trained" in err and "pg" in err


def test_fidelity_tries_the_package_s_agent(plugin):
    from placement_gym.real.fidelity import fidelity_placements

    task = parse_task_id(TASK)
    labels = [label for label, _ in fidelity_placements(task, task.n_devices + 1, heuristics=("tiny-deal",))]
    assert labels[-1] == "tiny-deal"


def test_the_leaderboard_harness_runs_the_package_s_agent_and_a_rerun_finds_it(plugin, tmp_path, capsys):
    data = evaluate(agents.leaderboard_agent("tiny-deal"), get_suite("v1").subset([TASK]),
                    algorithm="tiny-deal", authors=["tests"])
    entry = data["results"][TASK]
    assert entry["evaluations"] == 1  # counted by the harness
    assert list(entry["placement"].values()) == dealt(parse_task_id(TASK))
    path = save_submission(data, tmp_path / "v1-tiny-deal-seed0.json")
    assert main(["leaderboard", "validate", "--rerun", str(path)]) == 0
    assert "reproduced on 1 task(s)" in capsys.readouterr().out


def test_a_plain_callable_is_a_provider_of_leaderboard_agents_alone(tmp_path, monkeypatch):
    module = "placement_gym_lookup_plugin"
    (tmp_path / f"{module}.py").write_text(
        "def lookup(name):\n"
        "    return (lambda task, seed, budget: [0] * task.n_forward) if name == 'zeros' else None\n",
        encoding="utf-8")
    dist = tmp_path / f"{module}-0.1.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {module}\nVersion: 0.1\n", encoding="utf-8")
    (dist / "entry_points.txt").write_text(f"[placement_gym.agents]\nzz = {module}:lookup\n",
                                           encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    agent = agents.leaderboard_agent("zeros")
    task = parse_task_id(TASK)
    assert np.array_equal(agent(task, 0, None), np.zeros(task.n_forward))
    assert agents.lookup_agent("zeros") is None  # not an agent of `evaluate --agent`


# --- the layers -------------------------------------------------------------------------------------------


def test_no_module_of_placement_gym_imports_baselines():
    offenders = []
    for path in sorted((ROOT / "placement_gym").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = ([alias.name for alias in node.names] if isinstance(node, ast.Import)
                     else [node.module or ""] if isinstance(node, ast.ImportFrom) and node.level == 0 else [])
            offenders += [f"{path.relative_to(ROOT)}:{node.lineno}" for name in names
                          if name == "baselines" or name.startswith("baselines.")]
    assert offenders == []


def test_the_import_linter_contracts_are_kept():
    lint = shutil.which("lint-imports", path=str(Path(sys.executable).parent)) or shutil.which("lint-imports")
    if lint is None:
        pytest.skip("import-linter is not installed (it is in the test extra)")
    result = subprocess.run([lint], cwd=ROOT, capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr
    # the core's layers (and those inside its task and evaluation stages), the baselines' layers, and no
    # import of baselines from the core
    assert "Contracts: 5 kept, 0 broken." in result.stdout
