"""Sphinx configuration of placement-gym's documentation site.

Build it (warnings are errors; the CI runs the same line):

    sphinx-build -W --keep-going -b html docs docs/_build/html
"""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # the repository's own placement_gym and baselines, not an installed copy

from placement_gym.common.version import __version__  # noqa: E402

project = "placement-gym"
author = "placement-gym contributors"
copyright = "placement-gym contributors, MIT licence"  # noqa: A001 - Sphinx's name for the setting
release = version = __version__

extensions = [
    "myst_parser",
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "sphinx_copybutton",
]
source_suffix = {".md": "markdown", ".rst": "restructuredtext"}
root_doc = "index"
exclude_patterns = ["_build", "Thumbs.db", ".DS_Store"]

# Markdown: heading anchors let a page link to a heading of another (`design.md#2-data-flow`).
myst_enable_extensions = ["colon_fence", "deflist"]
myst_heading_anchors = 3

# Docstrings: a single-backquoted name is a Python cross-reference when it resolves, code otherwise.
default_role = "py:obj"
autodoc_member_order = "bysource"
autodoc_typehints = "description"
autodoc_default_options = {"show-inheritance": False}
autosummary_generate = False
# Python's own names (numpy.ndarray, gymnasium.Env, ...) cannot be linked offline; unresolved
# references are not warnings (nitpicky is off), so the build needs no network.

html_theme = "furo"
html_static_path = ["_static"]
html_css_files = ["wrap.css"]  # long code lines wrap instead of hiding behind a scroll bar
html_title = f"placement-gym {release}"
copybutton_prompt_text = r"\$ "
copybutton_prompt_is_regexp = True

# Docstrings are written for `help()`, in two layouts that reStructuredText would misread:
# - Gymnasium's: sections titled by Markdown-style "## Name" lines (the env classes); each becomes a
#   rubric;
# - "A heading:" followed at once by an indented block (a dataclass's fields, such as `Cluster` and
#   `OpGraph`); the block is shown as written, preformatted, as `help()` shows it.
_DOCSTRING_HEADING = re.compile(r"^(\s*)##\s+(\S.*?)\s*$")


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip())


def _docstring_to_rest(app, what, name, obj, options, lines):
    converted = []
    i = 0
    while i < len(lines):
        line = lines[i]
        heading = _DOCSTRING_HEADING.match(line)
        following = lines[i + 1] if i + 1 < len(lines) else ""
        if heading:
            indent, title = heading.groups()
            converted.extend([f"{indent}.. rubric:: {title}", ""])
            i += 1
        elif (line.strip() and line.rstrip().endswith(":") and not line.rstrip().endswith("::")
              and following.strip() and _indent(following) > _indent(line)):
            converted.extend([line.rstrip() + ":", ""])
            i += 1
            while i < len(lines) and (not lines[i].strip() or _indent(lines[i]) > _indent(line)):
                converted.append(lines[i])
                i += 1
            if i < len(lines) and converted[-1].strip():
                converted.append("")
        else:
            converted.append(line)
            i += 1
    lines[:] = converted


# Pages link to repository files outside docs/ (the leaderboard's tables, an experiment's README) with
# relative links, which work on GitHub. The site shows those Markdown files too: a page under
# docs/results/ includes each (`{include}`), so the file stays the one source of its text. A link to a
# file shown that way, written in a page or in an included file, goes to its page on the site; a link
# to another file (an image, a script, a data file) is rewritten relative to the page that shows it, so
# that the site copies the file (images into _images, others as downloads); a folder with no page of
# its own is shown as its path in the repository.
_MARKDOWN_LINK = re.compile(r"(!?)\[([^\]]*)\]\(([^)\s]+)\)")
_INCLUDE = re.compile(r"^```\{include\}\s+(\S+)", re.M)
SOURCE_DIR = Path(__file__).resolve().parent


def shown_files() -> dict[Path, Path]:
    """Each repository file outside docs/ that a page of the site includes, and that page."""
    shown = {}
    for page in SOURCE_DIR.rglob("*.md"):
        if "_build" in page.relative_to(SOURCE_DIR).parts:
            continue
        for target in _INCLUDE.findall(page.read_text(encoding="utf-8")):
            path = (page.parent / target).resolve()
            if not path.is_relative_to(SOURCE_DIR):
                shown[path] = page
    return shown


SHOWN = shown_files()


def site_target(target: str, source: Path, page: Path) -> str | None:
    """Where a relative link ``target``, written in the repository file ``source``, points from the
    site's page ``page`` (a file under docs/): the page that shows the file it names, or that file
    relative to ``page``; None for a folder with no page (shown as its path). Addresses, anchors and
    links that leave the repository are kept as written."""
    if "://" in target or target.startswith(("#", "mailto:")):
        return target
    name, hash_, anchor = target.partition("#")
    path = (source.parent / name).resolve()
    if not path.is_relative_to(ROOT):
        return target
    if path.is_dir() and path / "README.md" in SHOWN:
        path = path / "README.md"
    if path.is_dir() and not path.is_relative_to(SOURCE_DIR):
        return None
    path = SHOWN.get(path, path)
    return os.path.relpath(path, page.parent) + hash_ + anchor


def with_site_links(text: str, source: Path, page: Path) -> str:
    """``text`` of the repository file ``source`` with its relative links made to work on ``page``."""
    def replace(match):
        bang, label, target = match.groups()
        moved = site_target(target, source, page)
        if moved is None:
            shown = (source.parent / target.split("#")[0]).resolve().relative_to(ROOT).as_posix() + "/"
            return label if label.strip("`") == shown else f"{label} (`{shown}`)"
        return f"{bang}[{label}]({moved})"

    return _MARKDOWN_LINK.sub(replace, text)


def _page_links(app, docname, source):
    page = Path(app.env.doc2path(docname))
    source[0] = with_site_links(source[0], page, page)


def _included_links(app, relative_path, parent_docname, content):
    included = (SOURCE_DIR / relative_path).resolve()
    if included in SHOWN:
        content[0] = with_site_links(content[0], included, SHOWN[included])


def setup(app):
    app.connect("autodoc-process-docstring", _docstring_to_rest)
    app.connect("source-read", _page_links)
    app.connect("include-read", _included_links)
