"""RLlib's stock PPO trains on the flat observation of every env id (examples/rllib_ppo_flat.py), run
as a user runs the file: its sampled placements use every device and its greedy placement beats
random search with as many evaluations.

RLlib pins its own gymnasium (1.2.x for ray 2.60), so it lives in a venv of its own
(docs/tutorials/rllib.md); these tests run where ``ray.rllib`` imports and are skipped elsewhere,
such as the project's main venv, where ray is installed without RLlib's dependencies."""

from __future__ import annotations

import json
import os
import runpy
import subprocess
import sys

import pytest
from paths import ROOT

from tests.random_search import assert_tutorial_learns, random_search_as_a_tutorial, random_search_control

pytest.importorskip(
    "ray.rllib", reason="RLlib is not installed here (it pins gymnasium 1.2.x: install it in its own venv)"
)

EXAMPLE = ROOT / "examples" / "rllib_ppo_flat.py"
# The example's arguments per env id: a single-shot step is a whole placement (and slow under RLlib's
# one Categorical per node), a staged or refine step one node.
RUNS = {
    "DevicePlacementStaged-v0": ["--iterations", "4", "--batch", "512"],
    "DevicePlacementRefine-v0": ["--iterations", "4", "--batch", "512"],
    "DevicePlacement-v0": ["--iterations", "16", "--batch", "256"],
}


def _run(env_id: str, *extra: str) -> dict:
    """The example in a fresh interpreter, as a user runs it; the JSON of its last line."""
    env = {k: v for k, v in os.environ.items() if k not in ("OMP_NUM_THREADS", "MKL_NUM_THREADS")}
    command = [sys.executable, str(EXAMPLE), "--env", env_id, *RUNS[env_id], *extra]
    done = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    lines = done.stdout.strip().splitlines()
    assert any("best single device" in line for line in lines[:-1]), "no line for a person before the JSON"
    return json.loads(lines[-1])


@pytest.mark.parametrize("env_id", [*RUNS, random_search_control("random-search")])
def test_stock_ppo_samples_every_device_and_beats_random_search(env_id):
    if env_id == "random-search":
        result = random_search_as_a_tutorial("DevicePlacement-v0")
    else:
        result = _run(env_id)
        assert result["env_id"] == env_id
    assert_tutorial_learns(result, "rllib_ppo_flat.py")


def test_the_config_is_stock_ppo_on_the_registered_id():
    from ray.rllib.algorithms.ppo import PPOConfig

    config = runpy.run_path(str(EXAMPLE), run_name="example")["make_config"]("DevicePlacementStaged-v0")
    assert type(config) is PPOConfig
    assert config.env == "placement_gym:DevicePlacementStaged-v0"
    assert config.env_config["obs_mode"] == "flat"


def test_same_seed_same_result():
    first = _run("DevicePlacementStaged-v0", "--seed", "3")
    second = _run("DevicePlacementStaged-v0", "--seed", "3")
    assert first == second
