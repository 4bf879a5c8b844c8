"""README.md and the documentation pages that took over its sections say what the code does: the
Python snippets run, the quoted example outputs are what the examples print, the commands named read
the files they are said to read, the set-up lines are those CI runs, and the headline results are
the leaderboard's."""

from __future__ import annotations

import re
import runpy
import sys

import pytest
from paths import ROOT

README = (ROOT / "README.md").read_text(encoding="utf-8")
GETTING_STARTED = (ROOT / "docs" / "getting_started.md").read_text(encoding="utf-8")
# The examples' table, with the output each printed, moved from README to the RL tutorials' page.
EXAMPLES_PAGE = (ROOT / "docs" / "tutorials" / "index.md").read_text(encoding="utf-8")


def _section(title: str, text: str = README) -> str:
    """The text of the ``## title`` section of ``text`` (README), up to the next ``## `` heading."""
    match = re.search(rf"^## {re.escape(title)}\n(.*?)(?=^## |\Z)", text, re.S | re.M)
    assert match, f"no section {title!r}"
    return match.group(1)


def test_readme_is_a_landing_page():
    assert len(README.splitlines()) <= 150


def test_readme_quick_start_lines_are_those_ci_runs():
    # .ci/run runs README's install-and-demo line and its test line (with --quiet added to pip).
    commands = re.findall(r"```bash\n(.*?)```", _section("Quick start"), re.S)[0].splitlines()
    commands = [line.split("  #")[0].strip() for line in commands]
    assert commands[0] == "pip install '.[viz]' && placement-gym demo"
    assert commands[1].startswith("pip install torch==") and commands[1].endswith("&& pytest")
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8").replace(" --quiet", "")
    assert commands[0] in ci
    assert commands[1].removesuffix(" && pytest") in ci and "\npytest" in ci
    # The getting-started page shows the same two lines.
    assert re.findall(r"```bash\n(.*?)```", _section("Install", GETTING_STARTED), re.S)[0].splitlines() == (
        re.findall(r"```bash\n(.*?)```", _section("Quick start"), re.S)[0].splitlines()
    )


def test_headline_results_are_the_leaderboards():
    board = (ROOT / "leaderboard" / "README.md").read_text(encoding="utf-8")
    # The headline rows are the 10,000-evaluation track's.
    overall = board.split("### At most 10,000 evaluations per task")[1].split("###")[0]
    table_lines = [line for line in overall.splitlines() if line.startswith("|")]
    header = [cell.strip() for cell in table_lines[0].strip("|").split("|")]
    rows = {}
    for line in table_lines[2:]:
        cells = dict(zip(header, (cell.strip() for cell in line.strip("|").split("|"))))
        rows[cells["algorithm"]] = cells
    tables = _section("Headline results").split("\n\n")
    table = [line for line in tables[1].splitlines() if line.startswith("| ")][1:]
    assert len(table) >= 4
    for line in table:
        algorithm, speedup, gap, infeasible = (cell.strip() for cell in line.strip("|").split("|"))
        assert algorithm in rows, f"README's headline row {algorithm!r} is not on the leaderboard"
        stated = (speedup, gap, infeasible)
        board_row = rows[algorithm]
        assert stated == (board_row["geomean speedup"], board_row["geomean gap"], board_row["infeasible"]), (
            f"README's headline row for {algorithm} differs from leaderboard/README.md; copy it again"
        )


def test_headline_plans_are_the_parallel_tracks():
    """The parallel track's rows are its page's at most 100,000 plans priced per task, in its order."""
    page = (ROOT / "leaderboard" / "parallel_v1.md").read_text(encoding="utf-8")
    overall = page.split("### At most 100,000 plans priced per task")[1].split("\n#")[0]
    lines = [line for line in overall.splitlines() if line.startswith("| ")]
    header = [cell.strip() for cell in lines[0].strip("|").split("|")]
    board = [dict(zip(header, (cell.strip() for cell in line.strip("|").split("|")))) for line in lines[1:]]
    section = _section("Headline results")
    table = section[section.index("| algorithm | budget |"):].split("\n\n")[0]
    readme = [line for line in table.splitlines() if line.startswith("| ")][1:]
    assert len(readme) == len(board) >= 5
    shown = ("algorithm", "budget", "score", "geomean speedup", "geomean gap")
    for line, row in zip(readme, board):
        cells = [cell.strip() for cell in line.strip("|").split("|")]
        assert cells == [row[k] for k in shown], (
            f"README's parallel row {cells[0]!r} differs from leaderboard/parallel_v1.md; copy it again")


def test_in_python_snippets_run_as_written():
    blocks = re.findall(r"```python\n(.*?)```", _section("In Python"), re.S)
    assert len(blocks) == 2
    assert re.findall(r"```python\n(.*?)```", _section("In Python", GETTING_STARTED), re.S) == blocks
    namespace: dict = {}
    for block in blocks:
        exec(compile(block, "README.md", "exec"), namespace)  # noqa: S102 - the README's own code
    assert namespace["runtimes"].shape == (64,)
    assert namespace["result"].runtime > 0


def test_learned_agents_summary_reads_the_committed_results(tmp_path, monkeypatch, capsys):
    # docs/baselines.md: "`--summary` prints the table; results in
    # `experiments/learned_agents/results.jsonl`, the table in `summary.txt` beside it", from any folder.
    experiment = ROOT / "experiments" / "learned_agents"
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(ROOT))
    monkeypatch.setattr(sys, "argv", ["run.py", "--summary"])
    with pytest.raises(SystemExit) as stop:
        runpy.run_path(str(experiment / "run.py"), run_name="__main__")
    assert stop.value.code == 0
    printed = capsys.readouterr().out
    assert "cifar10_cnn/k80x2/train, budget 1,000 evaluations" in printed
    try:
        import rich  # noqa: F401 - summary.txt was printed with rich's tables (the viz extra)
    except ImportError:
        return
    assert printed == (experiment / "summary.txt").read_text(encoding="utf-8")


def _stated_outputs() -> dict[str, list[str]]:
    """Per example script, the output lines docs/tutorials/index.md quotes for it (the `printed here`
    column)."""
    stated = {}
    for script, cell in re.findall(r"^\| `examples/(\w+\.py)`.*\| (`.*`) \|$", EXAMPLES_PAGE, re.M):
        stated[script] = re.findall(r"`([^`]+)`", cell)
    return stated


def _shape(line: str) -> str:
    """A pattern matching ``line`` (white space runs folded) with any numbers in place of its numbers."""
    parts = re.split(r"[-+]?\d[\d,]*(?:\.\d+)?", " ".join(line.split()))
    return r"[-+]?\d[\d,]*(?:\.\d+)?".join(re.escape(part) for part in parts)


@pytest.mark.parametrize(
    ("script", "argv"),
    [
        ("sb3_ppo_single_shot.py", ["--steps", "256"]),
        ("maskable_ppo_refine.py", ["--steps", "128", "--episodes", "2"]),
        ("reinforce_staged.py", ["--steps", "600"]),
    ],
)
def test_example_prints_the_lines_the_docs_quote(script, argv, monkeypatch, capsys):
    pytest.importorskip("stable_baselines3")
    lines = _stated_outputs().get(script)
    assert lines, f"docs/tutorials/index.md quotes no output of examples/{script}"
    monkeypatch.syspath_prepend(str(ROOT))
    monkeypatch.setattr(sys, "argv", [script, *argv])
    runpy.run_path(str(ROOT / "examples" / script), run_name="__main__")
    printed = capsys.readouterr().out.splitlines()
    for line in lines:
        assert any(re.fullmatch(_shape(line), " ".join(p.split())) for p in printed), (
            f"docs/tutorials/index.md quotes {line!r} for examples/{script}; it printed:\n"
            + "\n".join(printed)
        )
