"""Every CLI command the docs show fits an 80-column terminal: no line of its output is wider, and
no task id is broken mid-name (issue 63: the demo's table needed 122 columns, agents' 160)."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest
from paths import ROOT

from placement_gym.cli import main
from placement_gym.cli.output import print_table

WIDTH = 80
# Commands of the docs left out, each for taking well over 10 s: they train, build datasets, run
# every agent or a long search, or re-validate the leaderboard; and --json, data for programs.
SLOW = re.compile(r"--json|--build|--agent (all|anneal|pretrained-list)|\btrain\b|leaderboard|bench|fidelity|"
                  r"profile|export-graphs|--dataset|my_model\.onnx")


def doc_commands() -> list[str]:
    """The ``placement-gym ...`` commands in the fenced code blocks of README.md and docs/, but `SLOW`."""
    found: dict[str, None] = {}
    for page in [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]:
        fenced = False
        for line in page.read_text(encoding="utf-8").splitlines():
            if line.lstrip().startswith("```"):
                fenced = not fenced
            elif fenced:
                for match in re.finditer(r"(?:^|[\s;&(])placement-gym((?: [-\w.:=/]+)*)", line):
                    found.setdefault(match.group(1).strip(), None)
    return [command for command in found if command and not SLOW.search(command)]


def subcommands() -> list[str]:
    """The subcommands `placement-gym --help` lists."""
    done = subprocess.run([sys.executable, "-m", "placement_gym", "--help"], capture_output=True, text=True,
                          timeout=120, env={**os.environ, "COLUMNS": str(WIDTH)})
    return re.findall(r"^ {4}([a-z][\w-]*)", done.stdout, re.M)


def assert_fits(text: str, what: str) -> None:
    wide = [line for line in text.splitlines() if len(line) > WIDTH]
    assert not wide, f"{what}: {len(wide)} lines over {WIDTH} columns, such as {wide[0]!r}"


@pytest.mark.parametrize("argv", [["clusters"], ["graphs"], ["agents"], ["evaluate", "--help"]])
def test_the_cheapest_commands_fit_80_columns(argv, capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", str(WIDTH))
    try:
        code = main(argv)
    except SystemExit as stop:  # --help
        code = stop.code
    out = capsys.readouterr()
    assert code == 0, out.err
    assert_fits(out.out + out.err, " ".join(argv))


@pytest.mark.slow
def test_every_documented_command_and_help_fits_80_columns(tmp_path):
    names = subcommands()
    commands = [*(c for c in doc_commands() if c.split()[0] in names),  # not prose in a code block
                *(f"{name} --help" for name in names), "agents", "datasets",
                "graphs", "clusters", "evaluate --graph cifar10_cnn --cluster k80x2 --agent heft"]
    assert "demo" in commands and len(commands) > 15, commands  # the docs were read
    env = {**os.environ, "COLUMNS": str(WIDTH), "PLACEMENT_GYM_OUTPUT": str(tmp_path)}
    for command in dict.fromkeys(commands):
        # A short --out: a path is never wrapped (it would not paste back whole).
        argv = command.split() + (["--out", "out"] if command.split()[0] == "demo" else [])
        done = subprocess.run([sys.executable, "-m", "placement_gym", *argv], capture_output=True, text=True,
                              timeout=300, env=env, cwd=tmp_path)
        assert done.returncode == 0, f"{command}: {done.stderr[-2000:]}"
        assert_fits(done.stdout + done.stderr, command)


def test_a_table_too_wide_keeps_task_ids_whole_or_breaks_them_after_a_slash(capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", str(WIDTH))
    ids = ["inception_v3/k80x4/train", "cifar10_resnet56/dgx-h100x8/train+bf16+mb8"]
    print_table(["task", "what was done", "runtime (ms)"],
                [[task, "a long explanation of the placement " * 3, "1,252.3"] for task in ids])
    out = capsys.readouterr().out
    assert_fits(out, "table")
    pieces = {piece for task in ids for piece in re.split(r"(?<=/)", task)}
    for task in ids:  # each id is there whole, or as its pieces (split after "/"), never folded
        assert task in out or all(piece in out for piece in re.split(r"(?<=/)", task)), out
    assert all(piece in out for piece in pieces)
