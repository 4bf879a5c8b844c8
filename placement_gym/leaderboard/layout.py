"""Where a suite's page, chart and learning curves go in a leaderboard folder, and the command that
renders them: what the suite's file says (``page``, ``chart``, ``curves``: `suite_spec`).

``placement-gym leaderboard render`` alone renders the current suite of each track (the leaderboard's
README and the generalisation track's page); ``--suite S`` renders suite S's page.
"""

from __future__ import annotations

from dataclasses import dataclass

from placement_gym.leaderboard.registry import suite_registry
from placement_gym.leaderboard.suite import Suite, get_suite

RENDER_COMMAND = "placement-gym leaderboard render"


@dataclass(frozen=True)
class SuitePage:
    """Where a suite's page goes in a leaderboard folder (``page``, its ``chart`` and the folder of its
    learning ``curves``, relative to the leaderboard folder; None: the page has none) and the
    ``command`` that renders it."""

    version: str
    page: str
    chart: str | None
    curves: str | None
    command: str


def suite_page(suite: str | Suite | None = None) -> SuitePage:
    """The page of ``suite`` (default: the current suite), as its suite file names it; ValueError for a
    suite without a page."""
    suite = get_suite(suite)
    spec = suite.spec
    if spec.page is None:
        raise ValueError(f"no page for suite {suite.version}; the suites with one are "
                         f"{', '.join(suite_registry().with_page())}")
    plain = suite.version in suite_registry().currents()
    command = RENDER_COMMAND if plain else f"{RENDER_COMMAND} --suite {suite.version}"
    return SuitePage(suite.version, spec.page, spec.chart, spec.curves, command)


def default_suites() -> tuple[str, ...]:
    """The suites ``render`` renders without ``--suite``: the current suite of each track."""
    return suite_registry().currents()


def main_page() -> str:
    """The leaderboard's main page: the current suite's (the README)."""
    return suite_page().page
