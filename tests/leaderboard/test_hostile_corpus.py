"""The hostile-submission corpus (tests/hostile_submissions.py) against the command line, as a stranger's
pull request would meet it: every file gets exit 1 and a one-line reason with bounded work (each file's
validation under a CPU-time limit, the whole run under an address-space limit, and a timeout for a
validation that hangs without using CPU), nothing outside the leaderboard folder is read or written,
and the rendered leaderboard is byte-identical with and without the corpus present (render refuses and
writes nothing)."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from hostile_submissions import good_submission, write_corpus
from paths import ROOT

import placement_gym
from placement_gym.cli import main
from placement_gym.common.progress import is_progress_line

# Bounds on the work of a validation, not on its speed: the whole corpus takes about 3 CPU s and 0.5 GB
# of address space, so only a check that loops, recurses or allocates without bound reaches them.
PER_FILE_CPU_SECONDS = 60
ADDRESS_SPACE_BYTES = 4 * 2**30
# A hang that uses no CPU (a blocking read) escapes the CPU limit: the subprocess's timeout catches it.
HANG_SECONDS = 300
# Validate each file in one interpreter: its CPU-time limit set to what it has used + the per-file
# allowance before each file (SIGXCPU kills it during a file over that), the address space capped once
# (an allocation over it raises MemoryError, which the command line does not catch: exit 1 of the
# interpreter, not of a validation), no core files.
DRIVER = """
import contextlib, io, json, math, resource, sys
resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
resource.setrlimit(resource.RLIMIT_AS, (int(sys.argv[3]), resource.getrlimit(resource.RLIMIT_AS)[1]))
from placement_gym.cli import main
for path in sys.argv[4:]:
    used = resource.getrusage(resource.RUSAGE_SELF)
    limit = math.ceil(used.ru_utime + used.ru_stime) + int(sys.argv[2])
    resource.setrlimit(resource.RLIMIT_CPU, (limit, resource.getrlimit(resource.RLIMIT_CPU)[1]))
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(["leaderboard", "validate", path, "--json", "--dir", sys.argv[1]])
    print(json.dumps({"path": path, "code": code, "out": out.getvalue(), "err": err.getvalue()}), flush=True)
"""


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> tuple[Path, Path, dict[str, str | None]]:
    root = tmp_path_factory.mktemp("hostile")
    outside = root / "outside" / "secret.json"
    outside.parent.mkdir()
    outside.write_text(json.dumps(good_submission()))  # a valid submission: the link must not pass
    expected = write_corpus(root / "corpus", good_submission(), outside)
    return root, outside, expected


def _reasons(report: dict) -> list[str]:
    return report["problems"] + [r for t in report["tasks"] for r in t["reasons"]]


def test_every_hostile_file_gets_exit_1_and_a_one_line_reason_with_bounded_work(corpus):
    root, outside, expected = corpus
    before = outside.read_bytes()
    files = [str(root / "corpus" / name) for name in sorted(expected)]
    command = [sys.executable, "-c", DRIVER, str(root / "corpus"), str(PER_FILE_CPU_SECONDS),
               str(ADDRESS_SPACE_BYTES), *files]
    # the package under test, not whichever one the corpus folder's path would find
    package_root = str(Path(placement_gym.__file__).resolve().parents[1])
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([package_root, os.environ.get("PYTHONPATH", "")])}
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=HANG_SECONDS, cwd=root,
                              env=env)
    except subprocess.TimeoutExpired as hung:
        finished = min((hung.stdout or b"").count(b"\n"), len(files) - 1)
        pytest.fail(f"{Path(files[finished]).name}: validation still running after {HANG_SECONDS} s (a hang)")
    verdicts = [json.loads(line) for line in done.stdout.splitlines()]
    if done.returncode != 0:
        name = Path(files[min(len(verdicts), len(files) - 1)]).name
        if done.returncode == -signal.SIGXCPU:
            pytest.fail(f"{name}: validation used over {PER_FILE_CPU_SECONDS} CPU s")
        pytest.fail(f"{name}: validation died (exit {done.returncode}): {done.stderr[-2000:]}")
    assert len(verdicts) == len(files)
    for verdict in verdicts:
        name = Path(verdict["path"]).name
        assert verdict["code"] == 1, (name, verdict)
        assert "Traceback" not in verdict["out"] + verdict["err"], name
        if verdict["out"]:
            (report,) = json.loads(verdict["out"])
            reasons = _reasons(report)
            assert not report["ok"] and reasons, name
        else:  # refused before any check could run: the one line is on stderr
            reasons = [line for line in verdict["err"].strip().splitlines() if not is_progress_line(line)]
            assert len(reasons) == 1, (name, verdict["err"])
        assert all("\n" not in r and len(r) < 600 for r in reasons), (name, reasons)
        words = expected[name]
        assert words is None or any(words in r for r in reasons), (name, words, reasons)
    assert outside.read_bytes() == before


@pytest.mark.slow
def test_render_is_byte_identical_with_and_without_the_corpus(corpus, tmp_path, capsys):
    root, outside, expected = corpus
    board = tmp_path / "board"
    (board / "submissions").mkdir(parents=True)
    for name in ("bounds_v1.json", "reruns.json"):  # the records make the two entries verified: a chart
        shutil.copy(ROOT / "leaderboard" / name, board)
    for name in ("v1-best-single-seed0.json", "v1-heft-seed0.json"):
        shutil.copy(ROOT / "leaderboard" / "submissions" / name, board / "submissions")
    render = ["leaderboard", "render", "--suite", "v1", "--dir", str(board)]  # the page of the files' suite
    assert main(render) == 0
    capsys.readouterr()

    def snapshot() -> dict[str, bytes]:
        return {str(p.relative_to(board)): p.read_bytes() for p in sorted(board.rglob("*"))
                if p.is_file() and not p.is_symlink() and "submissions" not in p.parts}

    rendered = snapshot()
    assert "suite_v1.md" in rendered and "leaderboard_v1.png" in rendered
    outside_before = outside.read_bytes()
    for name in expected:
        source = root / "corpus" / name
        target = board / "submissions" / name
        if source.is_symlink():
            target.symlink_to(source.readlink())
        elif source.is_dir():
            target.mkdir()
        elif name == "a-fifo.json":
            import os

            os.mkfifo(target)
        else:
            shutil.copy(source, target)
    assert main(render) == 1
    assert main([*render, "--check"]) == 1
    capsys.readouterr()
    assert snapshot() == rendered
    assert outside.read_bytes() == outside_before
    for name in expected:
        target = board / "submissions" / name
        if target.is_dir() and not target.is_symlink():
            target.rmdir()
        else:
            target.unlink()
    assert main([*render, "--check"]) == 0
    assert main(render) == 0
    assert snapshot() == rendered
