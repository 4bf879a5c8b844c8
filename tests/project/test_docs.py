"""Documents cited by the repository exist in it.

Every ``.py`` and ``.md`` file of the repository (virtual environments, caches and build output
left out) is read, and:

* every relative link of a Markdown file (``[text](target)``, ``![alt](target)``) must name a file or
  folder that exists, relative to the Markdown file;
* every name of a Markdown document written anywhere in the text (a word ending in ``.md``, such as
  ``docs/design.md``) must exist: a name with a folder relative to the repository root or to the
  citing file's folder, a bare file name anywhere in the repository. Addresses (``https://...``)
  are left out: they point outside the repository.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest
from paths import ROOT

# Folders that are not the repository's own files: virtual environments, caches, build output (the
# documentation site's docs/_build among them).
SKIPPED_DIRS = {"__pycache__", "build", "_build", "dist", "runs", "venv", "node_modules"}
MARKDOWN_LINK = re.compile(r"!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
CITED_MARKDOWN = re.compile(r"[\w./-]*\w\.md\b")
ADDRESS = re.compile(r"[a-zA-Z][a-zA-Z0-9+.-]*://\S+")


def _skipped(directory: str, path: Path) -> bool:
    return (
        directory in SKIPPED_DIRS
        or directory.endswith(".egg-info")
        or (directory.startswith(".") and directory != ".github")  # .git, .venv, .ci-venv, caches
        or (path / "pyvenv.cfg").exists()  # a virtual environment under any name
    )


def repository_files(suffixes: tuple[str, ...] = (".py", ".md")) -> list[Path]:
    """The repository's own files ending in ``suffixes``, sorted."""
    found = []
    for directory, subdirectories, files in os.walk(ROOT):
        here = Path(directory)
        subdirectories[:] = sorted(d for d in subdirectories if not _skipped(d, here / d))
        found.extend(here / name for name in files if name.endswith(suffixes))
    return sorted(found)


FILES = repository_files()
MARKDOWN_NAMES = {path.name for path in FILES if path.suffix == ".md"}


def _inside_repository(path: Path) -> bool:
    return path.resolve().is_relative_to(ROOT)


def missing_links(path: Path, text: str) -> list[str]:
    """Relative links of a Markdown file whose target does not exist."""
    missing = []
    for match in MARKDOWN_LINK.finditer(text):
        target = match.group(1)
        if ADDRESS.match(target) or target.startswith(("#", "mailto:")):
            continue
        target = target.split("#", 1)[0]
        resolved = path.parent / target
        if not (target and resolved.exists() and _inside_repository(resolved)):
            missing.append(target or match.group(1))
    return missing


def missing_citations(path: Path, text: str) -> list[str]:
    """Names of Markdown documents written in ``text`` that name no file of the repository."""
    missing = []
    for name in CITED_MARKDOWN.findall(ADDRESS.sub(" ", text)):
        name = name.rstrip(".")
        if "/" not in name.strip("./"):
            if Path(name).name not in MARKDOWN_NAMES:
                missing.append(name)
            continue
        candidates = (ROOT / name.lstrip("/"), path.parent / name)
        if not any(c.is_file() and _inside_repository(c) for c in candidates):
            missing.append(name)
    return missing


def test_the_walk_finds_the_repository_files():
    names = {path.relative_to(ROOT).as_posix() for path in FILES}
    assert {"README.md", "docs/design.md", "docs/references.md", "tests/project/test_docs.py"} <= names
    assert not any(part.startswith(".venv") for name in names for part in name.split("/"))


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_cited_documents_exist(path):
    text = path.read_text(encoding="utf-8", errors="replace")
    problems = missing_citations(path, text)
    if path.suffix == ".md":
        problems += [f"link {target}" for target in missing_links(path, text)]
    assert not problems, f"{path.relative_to(ROOT)} cites what the repository does not hold: {problems}"


def test_the_checks_catch_a_missing_document():
    gone, nothing, shouting = "gone" + ".md", "docs/nothing_here" + ".md", "NOTHING_HERE" + ".md"
    page = ROOT / "docs" / "design.md"
    links = "[design](design.md), [up](../README.md#layout), [web](https://a.b/c.md)"
    assert missing_links(page, links) == []
    missing = missing_links(page, f"[gone]({gone}) and ![chart](nowhere.png)")
    assert missing == [gone, "nowhere.png"]
    assert missing_citations(ROOT / "tests" / "x.py", "see docs/design.md and README.md.") == []
    assert missing_citations(ROOT / "x.py", f"see {nothing}, {shouting}") == [nothing, shouting]
