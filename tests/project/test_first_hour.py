"""A new user's first hour (issue 24, points 4, 5, 7 and 8): the CLI outside the checkout, piped
output, what `evaluate` and `agents` say, and a first run that is not silent."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys

import pytest
from paths import ROOT

from placement_gym.cli import main

GRAPH, CLUSTER = "cifar10_cnn", "k80x2"


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}


# --- point 5: output piped into a reader that stops early ------------------------------------------


def test_json_into_a_closed_pipe_exits_quietly():
    """`placement-gym clusters --json | head -c0`: the reader has gone before the first write; the
    command ends without a BrokenPipeError traceback."""
    read_end, write_end = os.pipe()
    os.close(read_end)  # the reader closed early: every write of the command meets a broken pipe
    try:
        done = subprocess.run([sys.executable, "-m", "placement_gym", "clusters", "--json"], env=_env(),
                              stdout=write_end, stderr=subprocess.PIPE, text=True, timeout=120)
    finally:
        os.close(write_end)
    assert "Traceback" not in done.stderr and "BrokenPipeError" not in done.stderr, done.stderr
    assert done.returncode == 1


# --- point 7: --optimizer, `agents`, the content hash in `graphs --info` -------------------------------


@pytest.mark.parametrize("optimizer", ["sgd", "momentum"])
def test_evaluate_takes_the_optimizer(capsys, optimizer):
    assert main(["evaluate", "--graph", GRAPH, "--cluster", CLUSTER, "--agent", "round-robin",
                 "--optimizer", optimizer, "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["task"] == f"{GRAPH}/{CLUSTER}/train+{optimizer}"


def test_agents_lists_every_agent_with_kind_budget_and_extra(capsys):
    from baselines.registry import registered_names

    assert main(["agents", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    by_name = {row["name"]: row for row in rows}
    assert set(registered_names()) <= set(by_name)
    for row in rows:
        assert row["kind"] in ("heuristic", "search", "learned", "pretrained"), row
        assert set(row) >= {"name", "kind", "default_budget", "budget_unit", "extra", "description"}
    assert by_name["heft"]["kind"] == "heuristic" and by_name["heft"]["default_budget"] is None
    assert by_name["anneal"]["kind"] == "search" and by_name["anneal"]["default_budget"] == 2000
    assert by_name["pg"]["kind"] == "learned" and by_name["pg"]["extra"] == "baselines"
    assert by_name["move-policy"]["kind"] == "pretrained"
    assert by_name["round-robin"]["extra"] is None  # a simple agent of the core
    assert main(["agents"]) == 0
    table = capsys.readouterr().out
    assert "heft" in table and "heuristic" in table and "2000" in table


def test_agents_without_the_optional_dependencies():
    """`placement-gym agents` after a plain `pip install placement-gym`: ortools and torch missing."""
    probe = ("import sys, json; sys.modules['ortools'] = sys.modules['torch'] = None; "
             "from placement_gym.cli import main; code = main(['agents', '--json'])")
    done = subprocess.run([sys.executable, "-c", probe], env=_env(), capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    by_name = {row["name"]: row for row in json.loads(done.stdout)}
    assert not by_name["exact"]["installed"] and by_name["exact"]["extra"] == "baselines"
    assert not by_name["pg"]["installed"] and by_name["pg"]["kind"] == "learned"
    assert by_name["heft"]["installed"]


def test_graphs_info_prints_the_task_id_content_hash(capsys, tmp_path):
    from placement_gym.graph import load_graph
    from placement_gym.graph.bundled import BUNDLED_GRAPHS_DIR

    path = tmp_path / "my_net.onnx"  # a user's file: its task ids carry the content hash
    path.write_bytes((BUNDLED_GRAPHS_DIR / f"{GRAPH}.onnx").read_bytes())
    content = load_graph(str(path)).content_sha256[:12]
    assert main(["graphs", "--info", str(path)]) == 0
    assert f"@{content}" in capsys.readouterr().out
    assert main(["graphs", "--info", str(path), "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert info["content_hash"] == content and info["task_id_graph"].endswith(f"@{content}")


# --- point 8: a first run that says what it does ----------------------------------------------------


def test_help_imports_neither_numba_nor_onnx():
    probe = ("import sys; from placement_gym.cli import main; code = main(['--help']); "
             "print(code, [m for m in ('numba', 'onnx', 'torch') if m in sys.modules])")
    done = subprocess.run([sys.executable, "-c", probe], env=_env(), capture_output=True, text=True,
                          timeout=120)
    assert done.stdout.strip().splitlines()[-1] == "0 []", done.stdout + done.stderr


def test_unknown_graph_is_refused_before_numba_loads():
    probe = ("import sys; from placement_gym.cli import main; "
             "code = main(['evaluate', '--graph', 'inceptionv3', '--agent', 'heft']); "
             "print(code, [m for m in ('numba', 'onnx', 'torch') if m in sys.modules])")
    done = subprocess.run([sys.executable, "-c", probe], env=_env(), capture_output=True, text=True,
                          timeout=120)
    assert done.stdout.strip().splitlines()[-1] == "2 []", done.stdout + done.stderr
    assert "unknown graph 'inceptionv3'; did you mean 'inception_v3'?" in done.stderr


def test_evaluate_all_shows_progress_per_agent(capsys):
    from baselines.registry import names_for_all
    from placement_gym.task.named import get_task

    assert main(["evaluate", "--graph", GRAPH, "--cluster", CLUSTER, "--agent", "all", "--budget", "50"]) == 0
    err = capsys.readouterr().err
    for agent in names_for_all(get_task(GRAPH, CLUSTER)):
        assert f" {agent}" in err, err


def test_cold_numba_cache_is_announced(capsys, monkeypatch, tmp_path):
    from placement_gym.cli import first_run

    cold = first_run._cache_is_cold
    monkeypatch.setattr(first_run, "_announced", False)
    monkeypatch.setattr(first_run, "_cache_is_cold", lambda: True)
    first_run.announce_compile()
    first_run.announce_compile()  # once per process
    err = capsys.readouterr().err
    assert err.count("compiling the cost model") == 1
    monkeypatch.setattr(first_run, "_announced", False)
    monkeypatch.setattr(first_run, "_cache_is_cold", lambda: False)
    first_run.announce_compile()
    assert capsys.readouterr().err == ""
    # The cache test itself: cold with empty cache folders, warm once numba's index of the kernel is where
    # numba looks: next to the kernels, or $NUMBA_CACHE_DIR alone when it is set.
    monkeypatch.setattr(first_run, "_COST_MODEL_DIR", tmp_path / "cost_model")
    monkeypatch.delenv("NUMBA_CACHE_DIR", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert cold()
    python = f"py{sys.version_info[0]}{sys.version_info[1]}"
    index = tmp_path / "cost_model" / "__pycache__" / f"fast._run-182.{python}.nbi"
    index.parent.mkdir(parents=True)
    index.write_bytes(b"")
    assert not cold()
    monkeypatch.setenv("NUMBA_CACHE_DIR", str(tmp_path / "numba"))
    assert cold()
    (tmp_path / "numba" / "cost_model_0").mkdir(parents=True)
    (tmp_path / "numba" / "cost_model_0" / index.name).write_bytes(b"")
    assert not cold()


def test_help_lines_are_the_commands_own():
    """`placement-gym --help` lists each command by `COMMANDS` without importing its module: every
    module's commands must be listed there, with the lines their parsers show."""
    from placement_gym.cli import COMMANDS, build_parser

    full = build_parser(None)  # every module imported
    subparsers = next(a for a in full._actions if isinstance(a, argparse._SubParsersAction))
    assert {c.dest: c.help for c in subparsers._choices_actions} == {n: h for n, (_, h) in COMMANDS.items()}
    assert build_parser(["--help"]).format_help() == full.format_help()


def test_validate_ends_with_a_summary_and_lists_only_failures(capsys, tmp_path):
    # A small file (13 tasks, one placement each) keeps the check about the output, not about validating
    submissions = [ROOT / "leaderboard" / "submissions" / "v1-best-single-seed0.json"]
    bad = tmp_path / "bad.json"
    bad.write_text("{}")
    code = main(["leaderboard", "validate", str(submissions[0]), str(bad)])
    assert code == 1
    out = capsys.readouterr().out
    last = out.strip().splitlines()[-1]
    assert last.startswith("2 files:") and "1 of the files failed" in last, last
    assert "✓" not in out.replace(last, "")  # passed rows only with --all
    assert main(["leaderboard", "validate", str(submissions[0]), "--all"]) == 0
    assert "✓" in capsys.readouterr().out


# --- point 4: the leaderboard outside the checkout ------------------------------------------------


def test_packaged_leaderboard_data_is_in_the_wheel_config():
    from fnmatch import fnmatch

    import tomllib

    from placement_gym.cli.leaderboard_command import packaged_files

    wheel = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["hatch"]["build"]["targets"]["wheel"]
    assert wheel["sources"]["leaderboard"] == "placement_gym/_leaderboard"
    # Every suite's page and bounds file by pattern (hatch's include patterns, rooted at the checkout).
    patterns = [pattern.lstrip("/") for pattern in wheel["include"]]
    for name in ("submissions", "bounds.json", "reruns.json", "README.md", "generalisation_v2.md",
                 "suite_v2.md", "bounds_v2.json", "suite_v1.md", "bounds_v1.json", *packaged_files()):
        assert any(fnmatch(f"leaderboard/{name}", pattern) for pattern in patterns), name


def test_leaderboard_default_is_the_packaged_copy_outside_a_checkout(monkeypatch, tmp_path, capsys):
    from placement_gym.cli import leaderboard_command as lc

    packaged = tmp_path / "site" / "placement_gym" / "_leaderboard"
    (packaged / "submissions").mkdir(parents=True)
    monkeypatch.setattr(lc, "_checkout_directory", lambda: None)
    monkeypatch.setattr(lc, "_packaged_directory", lambda: packaged)
    directory, origin = lc.default_directory_and_origin()
    assert directory == packaged and "packaged" in origin
    # A command that writes refuses the read-only packaged copy, in one line naming --dir and init.
    assert main(["leaderboard", "render"]) == 2
    line = capsys.readouterr().err.strip()
    assert len(line.splitlines()) == 1 and "--dir" in line and "leaderboard init" in line
    assert not (packaged / "README.md").exists()


def test_leaderboard_init_copies_the_data(tmp_path, capsys):
    target = tmp_path / "lb"
    assert main(["leaderboard", "init", str(target)]) == 0
    assert (target / "bounds.json").is_file() and (target / "reruns.json").is_file()
    names = {p.name for p in (ROOT / "leaderboard" / "submissions").glob("*.json")}
    assert {p.name for p in (target / "submissions").glob("*.json")} == names
    assert main(["leaderboard", "init", str(target)]) == 2  # never over an existing folder's data


def test_export_graphs_needs_out_outside_a_checkout(monkeypatch, capsys):
    from placement_gym.cli import export_command

    monkeypatch.setattr(export_command, "checkout_graphs_dir", lambda: None)
    assert main(["export-graphs", "--names", GRAPH]) == 2
    line = capsys.readouterr().err.strip()
    assert len(line.splitlines()) == 1 and "--out DIR" in line
