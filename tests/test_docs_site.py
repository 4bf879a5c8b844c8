"""The documentation site (docs/) says what the code does: the tutorials' code, which the pages include
from files, runs; the env pages document the classes the ids are registered with; the cluster page
names every field the JSON loader accepts; the leaderboard page's agent is an agent.

The site itself is built, warnings as errors, by CI (`sphinx-build -W --keep-going -b html docs
docs/_build/html`)."""

from __future__ import annotations

import re
import runpy
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest

import placement_gym
from placement_gym.cluster import load

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
TUTORIALS = DOCS / "tutorials"


def _page(name: str) -> str:
    return (DOCS / name).read_text(encoding="utf-8")


def _included(page: str) -> list[str]:
    """Files a page includes with ``literalinclude``, relative to the page's folder."""
    return re.findall(r"^```\{literalinclude\}\s+(\S+)", page, re.M)


def test_every_tutorial_file_is_included_by_a_page():
    included = set()
    for page in TUTORIALS.glob("*.md"):
        included |= {(page.parent / name).resolve() for name in _included(page.read_text(encoding="utf-8"))}
    scripts = {path.resolve() for path in TUTORIALS.glob("*.py")}
    assert scripts, "docs/tutorials holds no code"
    assert scripts <= included, f"not shown on any page: {sorted(p.name for p in scripts - included)}"
    assert all(path.is_file() for path in included), "a page includes a file that does not exist"


@pytest.mark.parametrize(
    ("script", "budget", "needs"),
    [
        ("sb3_ppo.py", {"timesteps": 256}, "stable_baselines3"),
        ("sb3_contrib_maskable.py", {"timesteps": 256}, "sb3_contrib"),
        ("tianshou_ppo.py", {"timesteps": 256}, "tianshou"),
        ("torch_loop.py", {"episodes": 5}, "torch"),
        ("torchrl_ppo.py", {"iterations": 1}, "torchrl"),
        ("skrl_ppo.py", {"timesteps": 64}, "skrl"),
    ],
)
def test_tutorial_runs(script, budget, needs, monkeypatch, capsys):
    pytest.importorskip(needs)
    monkeypatch.syspath_prepend(str(ROOT))  # the tutorials import baselines from the checkout
    main = runpy.run_path(str(TUTORIALS / script), run_name="tutorial")["main"]
    runtime = main(**budget)
    assert np.isfinite(runtime) and runtime > 0
    assert "best single device" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("env_id", "page"),
    [("DevicePlacement-v0", "single_shot.md"), ("DevicePlacementStaged-v0", "staged.md"),
     ("DevicePlacementRefine-v0", "refine.md")],
)
def test_env_page_documents_the_registered_class(env_id, page):
    text = _page(f"envs/{page}")
    assert text.startswith(f"# {env_id}\n")
    documented = re.search(r"^\.\. autoclass:: (\S+)", text, re.M).group(1)
    built = type(gym.make(env_id, graph="cifar10_cnn", cluster="k80x2", objective="inference").unwrapped)
    assert documented == f"{built.__module__}.{built.__qualname__}"


def test_cluster_page_names_every_json_field():
    page = _page("own_model.md")
    fields = {
        *load._TOP_FIELDS, *load._DEVICE_FIELDS, *load._LINK_FIELDS, *load._DEFAULT_LINK_FIELDS,
        *load._HOST_FIELDS,
    }
    first_cells = re.findall(r"^\| ([^|]+) \|", page, re.M)  # the field table's first column
    named = {name for cell in first_cells for name in re.findall(r"`(\w+)`", cell)}
    named |= set(re.findall(r'`\{"(\w+)": N\}`', page))  # a host's one field, in the hosts row
    assert fields <= named, f"fields the loader accepts but the page's table misses: {sorted(fields - named)}"


def test_leaderboard_page_agent_is_an_agent():
    block = re.search(r"```python\n(.*?)```", _page("leaderboard.md"), re.S).group(1)
    namespace: dict = {}
    exec(compile(block, "docs/leaderboard.md", "exec"), namespace)  # noqa: S102 - the page's own code
    task = placement_gym.get_task("cifar10_cnn", "k80x2", "train_step")
    placement = task.check_placement(namespace["random_agent"](task, 0, 10))
    assert placement.shape == (task.n_forward,)


def test_speed_figures_sit_under_the_speed_heading():
    page = _page("cost_model.md")
    speed = page[page.index("\n## Speed\n"):]
    assert "`placement-gym bench`" in speed and "| layered, 100k forward ops |" in speed
