"""The leaderboard's learning-curve plots stay readable with many entries: the entries that matter
only, each in its own colour and line style, the legend beside the data, a log y axis over decades."""

from __future__ import annotations

import matplotlib
import pytest
from matplotlib.colors import to_hex

from placement_gym.leaderboard.curves import PAPER_AGENTS, TOP_ALGORITHMS, curve_figure, curves_png
from placement_gym.leaderboard.ranking import Entry

matplotlib.use("Agg")
REFERENCES = ("best-known", "best-single")  # the portfolio's curve and the best single device
SEARCHES = tuple(f"search-{i:02d}" for i in range(17))


def _entry(algorithm: str, runtime: float, evaluations: int = 1000, feasible: bool = True) -> Entry:
    """A result whose curve falls from twice ``runtime`` to ``runtime``."""
    trace = ((1, 2 * runtime), (evaluations // 10, 1.2 * runtime), (evaluations, runtime))
    return Entry(algorithm, f"{algorithm}.json", runtime, feasible, 1.0, 0.0, evaluations, 1.0, trace=trace)


def _entries(slowest: float = 3.0) -> list[Entry]:
    """24 entries: 17 searches spread over [1, ``slowest``] s (the papers' agents among them, slower than
    the best few), the papers' agents and the references."""
    step = (slowest - 1.0) / len(SEARCHES)
    searches = [_entry(name, 1.0 + i * step) for i, name in enumerate(SEARCHES)]
    papers = [_entry(name, 1.0 + (i + 8.5) * step) for i, name in enumerate(PAPER_AGENTS)]
    return [*searches, *papers, _entry("best-known", 0.99, 100_000), _entry("best-single", slowest, 0)]


def _legend(figure):
    """The legend's rows that stand for a drawn series: (label, (colour, line style, mark))."""
    legend = figure.axes[0].get_legend()
    return [(text.get_text(), (to_hex(h.get_color()), h.get_linestyle(), h.get_marker()))
            for h, text in zip(legend.legend_handles, legend.get_texts()) if h.get_label() != ""
            and not text.get_text().startswith("+")]


@pytest.fixture()
def crowded():
    figure = curve_figure("g/c/train", _entries(slowest=3.0), lower_bound=0.1, best_known=0.99)
    yield figure
    matplotlib.pyplot.close(figure)


def test_a_crowded_plot_shows_the_best_few_the_papers_agents_and_the_references(crowded):
    drawn = {label.split(":")[0] for label, _ in _legend(crowded)}
    assert set(SEARCHES[:TOP_ALGORITHMS]) | set(PAPER_AGENTS) <= drawn
    assert not drawn & set(SEARCHES[TOP_ALGORITHMS:])  # slower than the best few, no paper's
    assert {"best-known", "best single device", "best known", "lower bound"} <= drawn
    assert len(drawn) <= TOP_ALGORITHMS + len(PAPER_AGENTS) + 4
    # The rest is counted, not dropped silently.
    left_out = len(SEARCHES) - TOP_ALGORITHMS
    rows = [text.get_text() for text in crowded.axes[0].get_legend().get_texts()]
    assert f"+{left_out} more entries: see the table" in rows


def test_every_series_has_its_own_colour_and_line_style(crowded):
    styles = [style for _, style in _legend(crowded)]
    assert len(set(styles)) == len(styles)
    # As many distinct colours as the palette allows: at most the surplus over nine hues repeats one.
    colours = [colour for colour, _, _ in styles]
    assert len(colours) - len(set(colours)) <= max(0, len(colours) - 9)


def test_the_legend_lies_outside_the_data(crowded):
    crowded.canvas.draw()
    renderer = crowded.canvas.get_renderer()
    axes = crowded.axes[0]
    legend_box = axes.get_legend().get_window_extent(renderer)
    assert not legend_box.overlaps(axes.get_window_extent(renderer))
    assert crowded.bbox.contains(legend_box.x1 - 1, legend_box.y0 + 1)  # and inside the image


def test_the_y_axis_is_logarithmic_where_the_runtimes_span_decades(crowded):
    assert crowded.axes[0].get_yscale() == "log"  # 0.1 s bound to 3 s
    narrow = curve_figure("g/c/train", _entries(slowest=1.5), lower_bound=0.9, best_known=0.99)
    assert narrow.axes[0].get_yscale() == "linear"
    assert narrow.axes[0].get_xscale() == crowded.axes[0].get_xscale() == "log"
    matplotlib.pyplot.close(narrow)


def test_a_slower_entry_changes_only_the_count_of_those_left_out(crowded):
    more = curve_figure("g/c/train", [*_entries(slowest=3.0), _entry("late-comer", 2.9)], 0.1, 0.99)
    assert _legend(more) == _legend(crowded)
    matplotlib.pyplot.close(more)


def test_a_paper_agent_keeps_its_style_from_plot_to_plot(crowded):
    few = curve_figure("g/d/train", [_entry(name, 1.0 + i) for i, name in enumerate(PAPER_AGENTS[::-1])],
                       0.5, 1.0)
    styles = {label.split(":")[0]: style for label, style in _legend(crowded)}
    assert all(styles[label.split(":")[0]] == style for label, style in _legend(few)
               if label.split(":")[0] in PAPER_AGENTS)
    matplotlib.pyplot.close(few)


def test_the_png_is_byte_for_byte_the_same_each_time():
    assert curves_png("g/c/train", _entries(), 0.1, 0.99) == curves_png("g/c/train", _entries(), 0.1, 0.99)
