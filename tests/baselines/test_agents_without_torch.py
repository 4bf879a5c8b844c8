"""`placement-gym agents` without torch: every agent keeps its description, and the "needs" column
says what is missing (the descriptions of the optional agents live in `OPTIONAL_AGENTS`, not in
their torch modules)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from paths import ROOT

from baselines.registry import OPTIONAL_AGENTS

PROBE = ("import sys; sys.modules['torch'] = None; from placement_gym.cli import main; "
         "sys.exit(main(['agents', *sys.argv[1:]]))")


def _agents(*args: str) -> str:
    path = str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")
    env = {**os.environ, "COLUMNS": "400", "PYTHONPATH": path}  # wide enough for a row on one line
    done = subprocess.run([sys.executable, "-c", PROBE, *args], env=env, capture_output=True, text=True,
                          timeout=120, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_agents_without_torch_keep_their_descriptions_and_say_what_is_missing():
    rows = {row["name"]: row for row in json.loads(_agents("--json"))}
    torch_agents = [name for name, agent in OPTIONAL_AGENTS.items() if "torch" in agent.needs]
    assert torch_agents and all(rows[name]["description"] for name in rows)
    table = _agents().splitlines()
    for name in torch_agents:
        description = OPTIONAL_AGENTS[name].description
        assert not rows[name]["installed"] and rows[name]["missing"] == "torch", rows[name]
        assert rows[name]["description"] == description
        row = [line for line in table if f" {name} " in line and description in line]
        assert len(row) == 1 and " torch " in row[0], name


def test_the_learned_agents_register_the_description_of_optional_agents():
    from baselines.registry import agent_descriptions

    described = agent_descriptions()
    assert all(described[name] == agent.description for name, agent in OPTIONAL_AGENTS.items()
               if name in described)
