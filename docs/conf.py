"""Sphinx configuration of placement-gym's documentation site.

Build it (warnings are errors; the CI runs the same line):

    sphinx-build -W --keep-going -b html docs docs/_build/html
"""

from __future__ import annotations

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


# Pages link to repository files outside docs/ (the leaderboard's table, an experiment's README) with
# relative links, which work on GitHub. The site holds only docs/, so such a link is shown as the
# file's path in the repository instead.
_MARKDOWN_LINK = re.compile(r"(?<!!)\[([^\]]+)\]\(([^)\s]+)\)")
SOURCE_DIR = Path(__file__).resolve().parent


def _outside_links_to_paths(app, docname, source):
    here = (SOURCE_DIR / docname).parent

    def replace(match):
        text, target = match.groups()
        if "://" in target or target.startswith(("#", "mailto:")):
            return match.group(0)
        path = (here / target.split("#", 1)[0]).resolve()
        if path.is_relative_to(SOURCE_DIR) or not path.is_relative_to(ROOT):
            return match.group(0)
        shown = path.relative_to(ROOT).as_posix() + ("/" if path.is_dir() else "")
        return text if text.strip("`") == shown else f"{text} (`{shown}`)"

    source[0] = _MARKDOWN_LINK.sub(replace, source[0])


def setup(app):
    app.connect("autodoc-process-docstring", _docstring_to_rest)
    app.connect("source-read", _outside_links_to_paths)
