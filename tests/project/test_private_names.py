"""No module uses another module's private names (a private name is free to change with its module;
one used elsewhere is not private): no ``from X import _name`` anywhere, and, in the package, the
baselines, the experiments, the examples and the tutorials, no ``module._name`` on an imported module
and no ``obj._name`` on an object of another module or library (``self``, ``cls`` and ``super()`` reach
their own class; ``obj._name`` passes only where this module defines ``_name`` itself). The tests may
reach into a module they test, by attribute, to check or replace an internal."""

from __future__ import annotations

import ast

from paths import ROOT

CODE = ("placement_gym", "baselines", "experiments", "examples", "docs/tutorials")


def _private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def private_uses(source: str) -> list[tuple[int, str]]:
    """``(line, what)`` of every private name ``source`` takes from another module."""
    tree = ast.parse(source)
    modules: set[str] = set()
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            modules.update((alias.asname or alias.name).split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module != "__future__":
            for alias in node.names:
                if _private(alias.name):
                    module = "." * node.level + (node.module or "")
                    found.append((node.lineno, f"from {module} import {alias.name}"))
                modules.add(alias.asname or alias.name)
    for node in ast.walk(tree):
        if (isinstance(node, ast.Attribute) and _private(node.attr) and isinstance(node.value, ast.Name)
                and node.value.id in modules):
            found.append((node.lineno, f"{node.value.id}.{node.attr}"))
    return found


def foreign_attributes(source: str) -> list[tuple[int, str]]:
    """``(line, what)`` of every ``obj._name`` in ``source`` on something other than ``self``, ``cls``
    or ``super()`` whose ``_name`` the module does not define (a def, a class or an assignment)."""
    tree = ast.parse(source)
    own = {node.name for node in ast.walk(tree) if isinstance(node, (ast.FunctionDef, ast.ClassDef))}
    own |= {node.attr for node in ast.walk(tree) if isinstance(node, ast.Attribute)
            and isinstance(node.ctx, ast.Store) and isinstance(node.value, ast.Name)
            and node.value.id == "self"}
    own |= {target.id for node in ast.walk(tree) if isinstance(node, (ast.Assign, ast.AnnAssign))
            for target in (node.targets if isinstance(node, ast.Assign) else [node.target])
            if isinstance(target, ast.Name)}
    found = []
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Attribute) and _private(node.attr)) or node.attr in own:
            continue
        owner = node.value
        if isinstance(owner, ast.Name) and owner.id in ("self", "cls"):
            continue
        if isinstance(owner, ast.Call) and isinstance(owner.func, ast.Name) and owner.func.id == "super":
            continue
        found.append((node.lineno, ast.unparse(node)))
    return found


def test_the_attribute_scan_finds_another_librarys_private_state():
    source = ("class A:\n    def _mine(self):\n        self._x = 1\n\n"
              "def f(a, model):\n    a._mine()\n    a._x = 2\n    model._last_obs = None\n"
              "    return super()._hook(), self._y\n")
    assert foreign_attributes(source) == [(8, "model._last_obs")]


def test_no_module_reaches_into_another_modules_objects():
    uses = [f"{path.relative_to(ROOT)}:{line}: {what}"
            for folder in CODE for path in sorted((ROOT / folder).rglob("*.py"))
            for line, what in foreign_attributes(path.read_text(encoding="utf-8"))]
    assert not uses, "private attributes of other modules' objects:\n" + "\n".join(uses)


def test_the_scan_finds_both_kinds_of_use():
    source = "import argparse\nfrom a.b import _c\nx: argparse._SubParsersAction\nself._d = 1\n"
    assert private_uses(source) == [(2, "from a.b import _c"), (3, "argparse._SubParsersAction")]


def _uses(folders: tuple[str, ...], imports_only: bool = False) -> list[str]:
    return [f"{path.relative_to(ROOT)}:{line}: {what}"
            for folder in folders for path in sorted((ROOT / folder).rglob("*.py"))
            for line, what in private_uses(path.read_text(encoding="utf-8"))
            if not imports_only or what.startswith("from ")]


def test_no_module_uses_another_modules_private_names():
    uses = _uses(CODE)
    assert not uses, "private names used across modules:\n" + "\n".join(uses)


def test_no_test_imports_a_private_name():
    uses = _uses(("tests",), imports_only=True)
    assert not uses, "private names imported by tests:\n" + "\n".join(uses)
