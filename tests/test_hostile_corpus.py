"""The hostile-submission corpus (tests/hostile_submissions.py) against the command line, as a stranger's
pull request would meet it: every file gets exit 1 and a one-line reason within 5 s, nothing outside the
leaderboard folder is read or written, and the rendered leaderboard is byte-identical with and without
the corpus present (render refuses and writes nothing)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from hostile_submissions import good_submission, write_corpus

from placement_gym.cli import main

REPO = Path(__file__).resolve().parents[1]
PER_FILE_SECONDS = 5.0
# validate each file in one interpreter, timing each call; the subprocess's timeout catches a hang.
DRIVER = """
import contextlib, io, json, sys, time
from placement_gym.cli import main
for path in sys.argv[2:]:
    out, err = io.StringIO(), io.StringIO()
    start = time.perf_counter()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(["leaderboard", "validate", path, "--json", "--dir", sys.argv[1]])
    print(json.dumps({"path": path, "code": code, "seconds": time.perf_counter() - start,
                      "out": out.getvalue(), "err": err.getvalue()}), flush=True)
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


def test_every_hostile_file_gets_exit_1_and_a_one_line_reason_in_time(corpus):
    root, outside, expected = corpus
    before = outside.read_bytes()
    files = [str(root / "corpus" / name) for name in sorted(expected)]
    done = subprocess.run([sys.executable, "-c", DRIVER, str(root / "corpus"), *files], capture_output=True,
                          text=True, timeout=60 + PER_FILE_SECONDS * len(files), cwd=root)
    assert done.returncode == 0, done.stderr[-2000:]
    verdicts = [json.loads(line) for line in done.stdout.splitlines()]
    assert len(verdicts) == len(files)
    for verdict in verdicts:
        name = Path(verdict["path"]).name
        assert verdict["code"] == 1, (name, verdict)
        assert "Traceback" not in verdict["out"] + verdict["err"], name
        assert verdict["seconds"] < PER_FILE_SECONDS, (name, verdict["seconds"])
        if verdict["out"]:
            (report,) = json.loads(verdict["out"])
            reasons = _reasons(report)
            assert not report["ok"] and reasons, name
        else:  # refused before any check could run: the one line is on stderr
            reasons = verdict["err"].strip().splitlines()
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
    for name in ("bounds.json", "reruns.json"):  # the records make the two entries verified: a chart
        shutil.copy(REPO / "leaderboard" / name, board)
    for name in ("v1-best-single-seed0.json", "v1-heft-seed0.json"):
        shutil.copy(REPO / "leaderboard" / "submissions" / name, board / "submissions")
    assert main(["leaderboard", "render", "--dir", str(board)]) == 0
    capsys.readouterr()

    def snapshot() -> dict[str, bytes]:
        return {str(p.relative_to(board)): p.read_bytes() for p in sorted(board.rglob("*"))
                if p.is_file() and not p.is_symlink() and "submissions" not in p.parts}

    rendered = snapshot()
    assert "README.md" in rendered and "leaderboard.png" in rendered
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
    assert main(["leaderboard", "render", "--dir", str(board)]) == 1
    assert main(["leaderboard", "render", "--check", "--dir", str(board)]) == 1
    capsys.readouterr()
    assert snapshot() == rendered
    assert outside.read_bytes() == outside_before
    for name in expected:
        target = board / "submissions" / name
        if target.is_dir() and not target.is_symlink():
            target.rmdir()
        else:
            target.unlink()
    assert main(["leaderboard", "render", "--check", "--dir", str(board)]) == 0
    assert main(["leaderboard", "render", "--dir", str(board)]) == 0
    assert snapshot() == rendered
