"""The documentation site (docs/) says what the code does: the tutorials' code, which the pages include
from files, runs as a user runs it and trains a policy that samples every device and beats random
search; the env pages document the classes the ids are registered with; the cluster page
names every field the JSON loader accepts; the leaderboard page's agent is an agent.

The site itself is built, warnings as errors, by CI (`sphinx-build -W --keep-going -b html docs
docs/_build/html`)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import gymnasium as gym
import pytest
from paths import ROOT

import placement_gym
from placement_gym.cluster import load
from placement_gym.datasets import get_dataset
from tests.random_search import assert_tutorial_learns, random_search_as_a_tutorial, random_search_control

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


ENV_IDS = ("DevicePlacement-v0", "DevicePlacementStaged-v0", "DevicePlacementRefine-v0")
# Each tutorial file, as a user runs it: its short-budget arguments (the ones its docstring documents;
# a dict gives them per env id), the module it needs, and the env ids it takes with --env-id (None: the
# one env id the file fixes).
TUTORIALS_RUN = {
    "sb3_ppo.py": ({"DevicePlacement-v0": ["--timesteps", "2048"]} | dict.fromkeys(
        ENV_IDS[1:], ["--timesteps", "4096"]), "stable_baselines3", ENV_IDS),
    # its default 4,096 on every id: on the single-shot env 2,048 reached 51.8 ms on an Intel Xeon, short
    # of random search's 49.0 ms (4,096: 30.0 ms against 46.7 ms)
    "sb3_contrib_maskable.py": (["--timesteps", "4096"], "sb3_contrib", ENV_IDS),
    "torch_loop.py": (["--episodes", "300"], "torch", None),
    "torchrl_ppo.py": (["--iterations", "10"], "torchrl", ENV_IDS),
    # one step is a whole placement on the single-shot env, and its 2,048 did not beat random search
    "tianshou_ppo.py": ({"DevicePlacement-v0": ["--timesteps", "8192"]} | dict.fromkeys(
        ENV_IDS[1:], ["--timesteps", "2048"]), "tianshou", ENV_IDS),
    "skrl_ppo.py": (["--timesteps", "640"], "skrl", ENV_IDS),
}
def _tutorial_cases():
    for script, (_, _, env_ids) in TUTORIALS_RUN.items():
        for env_id in env_ids or (None,):
            yield pytest.param(script, env_id, id=f"{script[:-3]}-{env_id or 'default'}")
    yield random_search_control("random-search", "DevicePlacement-v0")


def _run_tutorial(script: str, env_id: str | None) -> dict:
    """Run ``docs/tutorials/SCRIPT`` in a fresh interpreter as a user does (from the repository root,
    no test fixtures, and no thread-count variables, so a file that does not set its own torch threads
    shows it); return the JSON of its last printed line."""
    arguments, needs, _ = TUTORIALS_RUN[script]
    if isinstance(arguments, dict):
        arguments = arguments[env_id]
    pytest.importorskip(needs)
    env = {k: v for k, v in os.environ.items() if k not in ("OMP_NUM_THREADS", "MKL_NUM_THREADS")}
    command = [sys.executable, str(TUTORIALS / script), *arguments, *(["--env-id", env_id] if env_id else [])]
    done = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    lines = done.stdout.strip().splitlines()
    assert any("best single device" in line for line in lines[:-1]), "no line for a person before the JSON"
    return json.loads(lines[-1])


@pytest.mark.slow
@pytest.mark.parametrize(("script", "env_id"), list(_tutorial_cases()))
def test_tutorial_runs_samples_every_device_and_beats_random_search(script, env_id):
    """What a user relies on: the file runs as printed on the page, its sampled placements use every
    device (a policy over the wrong axis, as torchrl's once was, never samples some), the trained
    policy's placement is faster than anything random search finds with as many evaluations on seeds
    0-2, and the file sets the one torch thread its page says pays."""
    if script == "random-search":
        result = random_search_as_a_tutorial(env_id)
    else:
        result = _run_tutorial(script, env_id)
    if env_id is not None:
        assert result["env_id"] == env_id
    assert_tutorial_learns(result, script)


# Each library's file over a dataset split, as a user runs it with --dataset: short budgets (a dataset
# env draws a graph at every reset: the question is that it runs and samples, not that it learns one graph).
DATASET = "synthetic-mini-v1:train"
DATASET_RUN = {"sb3_ppo.py": ["--timesteps", "512"], "sb3_contrib_maskable.py": ["--timesteps", "512"],
               "torchrl_ppo.py": ["--iterations", "2"], "tianshou_ppo.py": ["--timesteps", "512"],
               "skrl_ppo.py": ["--timesteps", "160"],
               "rllib_ppo_flat.py": ["--iterations", "1", "--batch", "128"]}
# The RLlib file lives in examples/ (docs/tutorials/rllib.md includes it), takes its env id with --env,
# and runs where ray.rllib imports (RLlib pins its own gymnasium: a venv of its own, the page says).
DATASET_FILES = {"rllib_ppo_flat.py": (ROOT / "examples" / "rllib_ppo_flat.py", "--env", "ray.rllib")}


@pytest.mark.slow
@pytest.mark.parametrize(("script", "env_id"), [pytest.param(script, env_id, id=f"{script[:-3]}-{env_id}")
                                                for script in DATASET_RUN for env_id in ENV_IDS])
def test_tutorial_runs_over_a_dataset_split(script, env_id):
    """Each library's file trains on the three env ids over a dataset split: it runs as a user runs it,
    its sampled placements use every device of its cluster, and its greedy episode is on a graph of the
    split."""
    if script in DATASET_FILES:
        path, env_option, needs = DATASET_FILES[script]
    else:
        path, env_option, needs = TUTORIALS / script, "--env-id", TUTORIALS_RUN[script][1]
    pytest.importorskip(needs)
    env = {k: v for k, v in os.environ.items() if k not in ("OMP_NUM_THREADS", "MKL_NUM_THREADS")}
    command = [sys.executable, str(path), *DATASET_RUN[script], env_option, env_id, "--dataset", DATASET]
    done = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["env_id"] == env_id and result["dataset"] == DATASET
    devices = load.load_cluster(result["cluster"]).n_devices
    assert result["sampled_devices"] == list(range(devices))
    assert 0 < result["best_single_runtime"] and 0 < result["runtime"] < float("inf")
    if result["graph"] is not None:  # the files that build their greedy episode's env say its graph
        name = result["graph"].split(":", 1)[1]
        assert name in get_dataset("synthetic-mini-v1").ids("train")


# A shell command that installs the checkout: `pip install [flags] .` or `'.[extras]'` (quoted or not).
_CHECKOUT_INSTALL = re.compile(r"pip install (?P<flags>(?:-\S+\s+)*)['\"]?\.(?:\[[^\]]*\])?['\"]?(?=[\s`]|$)")


def _checkout_installs(text: str) -> list[tuple[str, bool]]:
    """Every install of the checkout in ``text``, with whether it is editable (``-e``)."""
    text = re.sub(r"\s+", " ", text)  # an inline command may wrap across lines
    return [(m.group(0), "-e" in m.group("flags").split()) for m in _CHECKOUT_INSTALL.finditer(text)]


def test_tutorial_install_lines_keep_the_editable_install():
    """A developer follows getting_started (`pip install -e '.[test]'`, an editable install of the
    checkout), then a tutorial page: a plain `pip install '.[extra]'` there would uninstall the
    editable install and put a wheel in its place, so every install of the checkout on the tutorial
    pages is editable too."""
    started = _page("getting_started.md").splitlines()
    developer = [line for line in started if "pytest" in line and "pip install" in line]
    assert developer and all(editable for line in developer for _, editable in _checkout_installs(line))
    plain = [(page.name, command) for page in sorted(TUTORIALS.glob("*.md"))
             for command, editable in _checkout_installs(page.read_text(encoding="utf-8")) if not editable]
    assert not plain, f"installs that replace the editable install with a wheel: {plain}"
    assert _checkout_installs("`pip install '.[rl-libs]'`") == [("pip install '.[rl-libs]'", False)]


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


# --- the site carries the leaderboard and the experiments; every relative link works there ------------


def _site_config():
    """docs/conf.py as a module (its link rewriting is what the site's pages are built with)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("docs_conf", DOCS / "conf.py")
    conf = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(conf)
    return conf


def _pages() -> list[Path]:
    return sorted(page for page in DOCS.rglob("*.md") if "_build" not in page.relative_to(DOCS).parts)


def test_every_leaderboard_and_experiment_page_is_shown_on_the_site():
    shown = set(_site_config().SHOWN)
    assert shown == {*ROOT.glob("leaderboard/*.md"), *ROOT.glob("experiments/**/README.md")}
    assert all(page.is_relative_to(DOCS) for page in _site_config().SHOWN.values())


def test_every_relative_link_of_the_site_resolves_to_a_page_or_a_file():
    conf = _site_config()
    sources = [(page, page) for page in _pages()] + list(conf.SHOWN.items())
    for source, page in sources:
        text = conf.with_site_links(source.read_text(encoding="utf-8"), source, page)
        for target in re.findall(r"!?\[[^\]]*\]\(([^)\s]+)\)", text):
            if "://" in target or target.startswith(("#", "mailto:")):
                continue
            path = (page.parent / target.split("#")[0]).resolve()
            assert path.is_file() and path.is_relative_to(ROOT), (source, target)
            assert path.suffix != ".md" or path.is_relative_to(DOCS), (source, target, "no page")


def test_no_line_of_a_page_starts_a_stray_plus_bullet():
    # "+" at the start of a wrapped line starts a bullet list mid-sentence; the pages' lists use "-".
    for page in _pages():
        prose = re.sub(r"^```.*?^```", "", page.read_text(encoding="utf-8"), flags=re.S | re.M)
        assert not re.search(r"^\s*\+ ", prose, re.M), page
