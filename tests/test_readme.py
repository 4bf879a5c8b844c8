"""README.md says what the code does: its Python snippets run, its example outputs are what the
examples print, and the commands it names read the files it says they read."""

from __future__ import annotations

import re
import runpy
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text(encoding="utf-8")


def _section(title: str) -> str:
    """The text of README's ``## title`` section, up to the next ``## `` heading."""
    match = re.search(rf"^## {re.escape(title)}\n(.*?)(?=^## )", README, re.S | re.M)
    assert match, f"README has no section {title!r}"
    return match.group(1)


def test_in_python_snippets_run_as_written():
    blocks = re.findall(r"```python\n(.*?)```", _section("In Python"), re.S)
    assert len(blocks) == 2
    namespace: dict = {}
    for block in blocks:
        exec(compile(block, "README.md", "exec"), namespace)  # noqa: S102 - the README's own code
    assert namespace["runtimes"].shape == (64,)
    assert namespace["result"].runtime > 0


def test_learned_agents_summary_reads_the_committed_results(tmp_path, monkeypatch, capsys):
    # README: "`--summary` prints the table; results in `experiments/learned_agents/results.jsonl`, the
    # table in `summary.txt` beside it", from any folder.
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
    """Per example script, the output lines README quotes for it (the `printed here` column)."""
    stated = {}
    for script, cell in re.findall(r"^\| `examples/(\w+\.py)`.*\| (`.*`) \|$", README, re.M):
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
def test_example_prints_the_lines_readme_quotes(script, argv, monkeypatch, capsys):
    pytest.importorskip("stable_baselines3")
    lines = _stated_outputs().get(script)
    assert lines, f"README quotes no output of examples/{script}"
    monkeypatch.syspath_prepend(str(ROOT))
    monkeypatch.setattr(sys, "argv", [script, *argv])
    runpy.run_path(str(ROOT / "examples" / script), run_name="__main__")
    printed = capsys.readouterr().out.splitlines()
    for line in lines:
        assert any(re.fullmatch(_shape(line), " ".join(p.split())) for p in printed), (
            f"README quotes {line!r} for examples/{script}; it printed:\n" + "\n".join(printed)
        )
