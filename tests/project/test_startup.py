"""Startup: the common commands import nothing heavy, bundled graphs load without onnx once cached, and
`placement-gym bench --startup` reports its figures (issue 63)."""

import dataclasses
import json
import subprocess
import sys

import numpy as np
import pytest

HEAVY = ("onnx", "torch", "matplotlib", "ortools", "stable_baselines3")


def _imported(code: str, tmp_path) -> set[str]:
    """The modules of `HEAVY` that ``code`` run in a fresh interpreter has imported at its end."""
    probe = f"{code}\nimport sys, json\nprint(json.dumps(sorted(m for m in {HEAVY!r} if m in sys.modules)))"
    env = {"PLACEMENT_GYM_OUTPUT": str(tmp_path / "output"), "PATH": "/usr/bin:/bin"}
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, env=env, check=True)
    return set(json.loads(done.stdout.strip().splitlines()[-1]))


def test_import_and_help_import_nothing_heavy(tmp_path):
    assert _imported("import placement_gym", tmp_path) == set()
    help_run = "from placement_gym.cli import main\ntry:\n    main(['--help'])\nexcept SystemExit:\n    pass"
    assert _imported(help_run, tmp_path) == set()


@pytest.mark.slow
def test_heft_on_a_cached_bundled_graph_imports_nothing_heavy(tmp_path):
    """The second evaluate of a bundled graph reads it from the cache: no onnx; heft needs no torch."""
    run = ("import contextlib, io\nfrom placement_gym.cli import main\n"
           "with contextlib.redirect_stdout(io.StringIO()):\n"
           "    main(['evaluate', '--graph', 'cifar10_cnn', '--agent', 'heft'])")
    assert "onnx" in _imported(run, tmp_path)  # the first run imports the ONNX file
    assert _imported(run, tmp_path) == set()


def test_cached_bundled_graph_is_the_imported_graph(tmp_path, monkeypatch):
    from placement_gym.graph import bundled
    from placement_gym.graph.onnx_import import graph_from_onnx

    monkeypatch.setenv("PLACEMENT_GYM_OUTPUT", str(tmp_path))
    bundled._load_bundled.cache_clear()
    first = bundled.load_graph("cifar10_cnn")
    assert list(bundled.bundled_cache_dir().iterdir())  # written
    bundled._load_bundled.cache_clear()
    cached = bundled.load_graph("cifar10_cnn")
    imported = graph_from_onnx(bundled.BUNDLED_GRAPHS_DIR / "cifar10_cnn.onnx", name="cifar10_cnn")
    for graph in (first, cached):
        for field in dataclasses.fields(imported):
            mine, theirs = getattr(graph, field.name), getattr(imported, field.name)
            same = np.array_equal(mine, theirs) if isinstance(theirs, np.ndarray) else mine == theirs
            assert same, field.name
    # A damaged cache file is imported again, never read as another graph.
    for path in bundled.bundled_cache_dir().iterdir():
        path.write_bytes(b"not a stored graph")
    bundled._load_bundled.cache_clear()
    assert bundled.load_graph("cifar10_cnn").content_sha256 == imported.content_sha256
    bundled._load_bundled.cache_clear()


@pytest.mark.slow
def test_bench_startup_reports_cold_and_warm_times(tmp_path):
    done = subprocess.run(
        [sys.executable, "-m", "placement_gym", "bench", "--startup", "help,unknown-graph", "--repeats", "1",
         "--json"], capture_output=True, text=True, check=True)
    report = json.loads(done.stdout)
    assert report["machine"]["cpu"] and "load_average_end" in report
    assert [row["name"] for row in report["rows"]] == ["help", "unknown-graph"]
    assert all(row["ok"] and row["cold_s"] > 0 and row["warm_s"] > 0 for row in report["rows"])
    assert [row["exit_code"] for row in report["rows"]] == [0, 2]
