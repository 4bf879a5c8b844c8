"""The quick tier (``pytest -m quick``, tests/conftest.py's `QUICK_TIER`) exercises every package of
placement_gym and baselines, and a plain run still runs every test it ran before."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import QUICK_TIER, in_quick_tier
from paths import ROOT


def packages() -> set[str]:
    """Every package (a folder with an ``__init__.py``) of placement_gym and baselines, dotted."""
    return {".".join(init.parent.relative_to(ROOT).parts)
            for top in ("placement_gym", "baselines") for init in (ROOT / top).rglob("__init__.py")}


def imported_packages(module: Path) -> set[str]:
    """The packages a test module imports from, and the packages above them (``placement_gym.task.counter``:
    ``placement_gym.task`` and ``placement_gym``); ``from placement_gym import envs`` counts
    ``placement_gym.envs`` too."""
    known = packages()
    names = set()
    for node in ast.walk(ast.parse(module.read_text())):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names.add(node.module)
            names.update(f"{node.module}.{alias.name}" for alias in node.names)
    prefixes = {".".join(name.split(".")[:k]) for name in names for k in range(1, name.count(".") + 2)}
    return prefixes & known


def test_every_package_has_an_entry_whose_module_imports_it():
    assert set(QUICK_TIER) == packages()
    for package, entries in QUICK_TIER.items():
        for entry in entries:
            assert package in imported_packages(ROOT / entry.split("::")[0]), (package, entry)


def test_every_entry_names_a_test_that_is_not_slow():
    for entry in {entry for entries in QUICK_TIER.values() for entry in entries}:
        module, _, name = entry.partition("::")
        tree = ast.parse((ROOT / module).read_text())
        tests = {node.name: node for node in tree.body
                 if isinstance(node, ast.FunctionDef) and node.name.startswith("test")}
        if name:
            assert name in tests, entry
            assert not any("slow" in ast.unparse(mark) for mark in tests[name].decorator_list), entry
        else:
            assert tests, entry


@pytest.mark.parametrize("nodeid, expected", [
    ("tests/envs/test_env.py::test_x", True),
    ("tests/envs/test_env.py::TestA::test_x[1-2]", True),
    ("tests/envs/test_environment.py::test_x", False),
    ("tests/cli/test_env.py::test_x", False),
    ("tests/baselines/test_fill_resume.py::test_the_fill_refuses_checkpoints_for_an_agent_that_keeps_none[a]",
     True),
    ("tests/baselines/test_fill_resume.py::test_the_fill_refuses_checkpoints", False),
])
def test_an_entry_covers_its_module_or_test_whatever_the_parameters(nodeid, expected):
    assert in_quick_tier(nodeid) == expected


def collected(*args: str) -> set[str]:
    """The node ids ``pytest --collect-only`` selects with ``args``, in a fresh process."""
    run = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider",
                          "-o", "addopts=", *args], cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-2000:]
    return {line for line in run.stdout.splitlines() if "::" in line}


@pytest.mark.slow
def test_pytest_m_quick_selects_every_entry_and_a_plain_run_keeps_them():
    quick = collected("-m", "quick")
    modules = sorted({entry.split("::")[0] for entries in QUICK_TIER.values() for entry in entries})
    plain = collected("--slow=none", *modules)  # every test of these modules but the slow ones
    assert quick <= plain  # no slow test in the tier, and a plain run still runs every test of it
    assert quick == {nodeid for nodeid in plain if in_quick_tier(nodeid)}
    tests = {nodeid.split("[")[0] for nodeid in quick}
    for entry in {entry for entries in QUICK_TIER.values() for entry in entries}:
        assert any(test == entry or test.startswith(f"{entry}::") for test in tests), entry
