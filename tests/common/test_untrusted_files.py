"""Files from users are read bounded and strictly, and the leaderboard commands stay inside their folder
(issue 23, points 1-4): a linear nesting check, no read of a device or FIFO and never more than the
limit, one strict JSON reader for submissions, clusters, placements, profiles and bounds, and no read
or write through a symbolic link in the leaderboard folder."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from paths import ROOT

from placement_gym.cli import main
from placement_gym.cluster.load import ClusterError, load_cluster
from placement_gym.common.untrusted import (
    UntrustedFileError,
    inside,
    json_depth,
    parse_json,
    read_bytes,
    write_inside,
)

EXAMPLE_CLUSTER = ROOT / "examples" / "my_cluster.json"
HEFT = "v1-heft-seed0.json"  # a committed file of suite v1, whose page is suite_v1.md
OUTSIDE_TEXT = b"outside the leaderboard folder: keep me\n"
# Enough address space for the interpreter and numpy, far too little to read /dev/zero until MemoryError
# (so that the tests of a link to /dev/zero cannot take the machine's memory even where they fail).
CHILD_MEMORY = 2 * 2**30
# CPU seconds for a child: a loaded machine only stretches wall time, while a check quadratic in a
# 100 kB or 4 MB input needs billions of steps, far more than this.
CHILD_CPU_SECONDS = 60


def _limited_resources() -> None:
    import resource

    resource.setrlimit(resource.RLIMIT_AS, (CHILD_MEMORY, CHILD_MEMORY))
    resource.setrlimit(resource.RLIMIT_CPU, (CHILD_CPU_SECONDS, CHILD_CPU_SECONDS))


def run_bounded(argv: list[str], timeout: float = 300) -> subprocess.CompletedProcess:
    """``python ARGV`` in a child process with bounded memory and CPU time (killed past either)."""
    limit = _limited_resources if os.name == "posix" else None
    return subprocess.run([sys.executable, *argv], capture_output=True, text=True, timeout=timeout,
                          cwd=ROOT, preexec_fn=limit)


def run_cli(*args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    """``placement-gym ARGS`` in a child process with bounded memory and CPU time."""
    return run_bounded(["-m", "placement_gym", *args], timeout=timeout)


def assert_one_line_refusal(done: subprocess.CompletedProcess, *words: str) -> None:
    """Exit 1, no traceback, and a one-line reason holding every one of ``words``: among the problems of
    ``validate --json``'s report, else on stderr."""
    output = done.stdout + done.stderr
    assert done.returncode == 1, output[-2000:]
    assert "Traceback" not in output and "MemoryError" not in output, output[-2000:]
    if done.stdout.startswith("["):
        reasons = [problem for report in json.loads(done.stdout) for problem in report["problems"]]
    else:
        reasons = done.stderr.splitlines()
    assert any(all(word in reason for word in words) for reason in reasons), output[-2000:]


@pytest.fixture()
def board(tmp_path: Path) -> Path:
    """A small leaderboard folder: the committed bounds and the heft submission."""
    folder = tmp_path / "board"
    (folder / "submissions").mkdir(parents=True)
    shutil.copy(ROOT / "leaderboard" / "bounds.json", folder)
    shutil.copy(ROOT / "leaderboard" / "submissions" / HEFT, folder / "submissions")
    return folder


@pytest.fixture()
def outside(tmp_path: Path) -> Path:
    """A file outside the leaderboard folder that nothing may touch."""
    path = tmp_path / "outside" / "target"
    path.parent.mkdir()
    path.write_bytes(OUTSIDE_TEXT)
    return path


# --- point 1: every pre-check is linear in the file size ------------------------------------------------

def test_a_100_kb_string_of_escaped_quotes_is_refused_within_bounded_cpu_time(tmp_path):
    path = tmp_path / "r.json"
    path.write_text('{"a": "' + '\\"' * 50_000)
    done = run_cli("leaderboard", "validate", str(path), "--json", "--dir", str(tmp_path))
    assert done.returncode >= 0, f"killed by signal {-done.returncode}: a pre-check is not linear"
    assert_one_line_refusal(done, "r.json", "not valid JSON (Unterminated string")


def test_the_nesting_check_is_linear_and_skips_strings():
    assert json_depth('{"a": "' + '\\"' * 2_000_000 + "[[[") == 1  # an unterminated string to the end
    assert json_depth('"\\\\" [[ "]]\\"[" ]]') == 2
    assert json_depth("[" * 1_000_000) == 1_000_000
    probe = ("from placement_gym.common.untrusted import UntrustedFileError, parse_json\n"
             "try:\n"
             "    parse_json(('{\"a\": \"' + '\\\\\"' * 2_000_000 + '\\\\').encode(), 'r.json')\n"
             "except UntrustedFileError as error:\n"
             "    print(error)\n")
    done = run_bounded(["-c", probe])
    assert done.returncode == 0, f"exit {done.returncode} (below 0: killed): {done.stderr[-2000:]}"
    assert "not valid JSON" in done.stdout, done.stdout


# --- point 2: only regular files, never more than the limit -----------------------------------------------

@pytest.mark.skipif(not os.path.exists("/dev/zero"), reason="needs /dev/zero")
def test_a_submission_that_links_to_dev_zero_is_refused_in_one_line(tmp_path):
    link = tmp_path / "zero.json"
    link.symlink_to("/dev/zero")
    done = run_cli("leaderboard", "validate", str(link), "--json", "--dir", str(tmp_path))
    assert_one_line_refusal(done, "zero.json", "symbolic link")


@pytest.mark.slow
@pytest.mark.skipif(not os.path.exists("/dev/zero"), reason="needs /dev/zero")
def test_render_refuses_a_link_to_dev_zero_in_submissions(board):
    (board / "submissions" / "v1-zero-seed0.json").symlink_to("/dev/zero")
    done = run_cli("leaderboard", "render", "--no-chart", "--dir", str(board))
    assert_one_line_refusal(done, "v1-zero-seed0.json", "symbolic link")
    assert not (board / "README.md").exists()


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs FIFOs")
def test_a_fifo_is_refused_without_waiting_for_a_writer(tmp_path):
    fifo = tmp_path / "fifo.json"
    os.mkfifo(fifo)
    done = run_cli("leaderboard", "validate", str(fifo), "--json", "--dir", str(tmp_path), timeout=30)
    assert_one_line_refusal(done, "fifo.json", "FIFO, not a regular file")
    with pytest.raises(UntrustedFileError, match="FIFO, not a regular file"):
        read_bytes(fifo, 100, "test file")


@pytest.mark.skipif(not os.path.exists("/proc/self/status"), reason="needs Linux /proc")
def test_a_file_that_claims_a_smaller_size_is_still_read_only_up_to_the_limit():
    # /proc files are regular files that report a size of 0 whatever they hold.
    assert os.stat("/proc/self/status").st_size == 0
    with pytest.raises(UntrustedFileError, match="more than 10 bytes; at most 10 are allowed"):
        read_bytes("/proc/self/status", 10, "test file")
    assert b"Name:" in read_bytes("/proc/self/status", 2**20, "test file")


def test_read_bytes_refuses_a_link_only_when_asked(tmp_path):
    target = tmp_path / "target.json"
    target.write_bytes(b"{}")
    link = tmp_path / "link.json"
    link.symlink_to(target)
    assert read_bytes(link, 10, "test file") == b"{}"
    with pytest.raises(UntrustedFileError, match="symbolic link"):
        read_bytes(link, 10, "test file", follow_symlinks=False)
    with pytest.raises(UntrustedFileError, match="is 2 bytes; at most 1 are allowed"):
        read_bytes(target, 1, "test file")
    with pytest.raises(UntrustedFileError, match="test file .* does not exist"):
        read_bytes(tmp_path / "none", 10, "test file")


# --- point 3: one strict JSON reader for every file from a user -------------------------------------------

def _cluster_text() -> str:
    return EXAMPLE_CLUSTER.read_text(encoding="utf-8")


def test_a_cluster_file_nested_100000_deep_is_a_cluster_error(tmp_path):
    path = tmp_path / "deep.json"
    path.write_text("[" * 100_000 + "]" * 100_000)
    with pytest.raises(ClusterError, match=r"deep\.json: JSON nests 100000 levels deep; at most \d+"):
        load_cluster(path)


def test_a_5000_digit_integer_in_a_cluster_file_names_the_file_and_the_field(tmp_path):
    data = json.loads(_cluster_text())
    data["devices"][0]["memory"] = 1
    path = tmp_path / "big.json"
    path.write_text(json.dumps(data).replace('"memory": 1', '"memory": ' + "9" * 5000, 1))
    with pytest.raises(ClusterError) as info:
        load_cluster(path)
    message = str(info.value)
    assert "big.json" in message and "devices[0].memory" in message and "digits" in message
    assert len(message) < 300


def test_a_duplicate_key_in_a_cluster_file_is_refused(tmp_path):
    data = json.loads(_cluster_text())
    data["devices"][0]["memory"] = 1.2e10
    path = tmp_path / "dup.json"
    path.write_text(json.dumps(data).replace('"memory": 12000000000.0', '"memory": 1.2e10, "memory": 1', 1))
    with pytest.raises(ClusterError, match=r"dup\.json: duplicate key 'memory' in object devices\[0\]"):
        load_cluster(path)


@pytest.mark.skipif(not os.path.exists("/dev/zero"), reason="needs /dev/zero")
def test_a_cluster_path_that_links_to_dev_zero_is_refused(tmp_path):
    link = tmp_path / "zero.json"
    link.symlink_to("/dev/zero")
    with pytest.raises(ClusterError):
        load_cluster(link)


def test_placement_files_refuse_duplicate_keys(tmp_path):
    from placement_gym.evaluation.placements import load_placement, save_placement, single_placement
    from placement_gym.task.named import get_task

    task = get_task("cifar10_cnn", "k80x2")
    path = tmp_path / "p.json"
    save_placement(task, single_placement(task, 0), path)
    text = path.read_text()
    first_op = task.graph.op_names[0]
    path.write_text(text.replace(f'"{first_op}": ', f'"{first_op}": "gpu:1", "{first_op}": ', 1))
    with pytest.raises(ValueError, match="duplicate key"):
        load_placement(task, path)


def test_profile_and_bounds_files_refuse_deep_nesting(tmp_path):
    from placement_gym.leaderboard.task_bounds import read_bounds
    from placement_gym.real.profile import ProfileError, load_profile

    path = tmp_path / "deep.json"
    path.write_text('{"a": ' + "[" * 100_000 + "]" * 100_000 + "}")
    with pytest.raises(ProfileError, match="nests"):
        load_profile(path)
    with pytest.raises(ValueError, match="nests"):
        read_bounds(path)


def test_an_onnx_file_is_read_with_a_size_limit(monkeypatch):
    from placement_gym.graph import onnx_import

    monkeypatch.setattr(onnx_import, "MAX_ONNX_BYTES", 100)
    with pytest.raises(ValueError, match="at most 100 are allowed"):
        onnx_import.import_onnx(ROOT / "graphs" / "cifar10_cnn.onnx")


def test_parse_json_names_the_field_of_a_refused_value():
    cases = {
        b'{"a": [1, {"b": NaN}]}': "field a[1].b: NaN is not allowed",
        b'{"x y": 1e999}': "field ['x y']: number '1e999' is out of range",
        b'{"a": {"k": 1, "k": 2}}': "duplicate key 'k' in object a",
        b'{"n": 1' + b"0" * 30 + b"}": "field n: integer",
    }
    for raw, words in cases.items():
        with pytest.raises(UntrustedFileError) as info:
            parse_json(raw, "f.json")
        assert str(info.value).startswith("f.json: " + words), str(info.value)
    assert parse_json(b'{"a": [1, 2.5, null, "x"]}', "f.json") == {"a": [1, 2.5, None, "x"]}


def test_the_docs_state_the_limits_of_cluster_and_onnx_files():
    from placement_gym.cluster import load
    from placement_gym.common.untrusted import MAX_INT_DIGITS, MAX_ONNX_BYTES

    page = " ".join((ROOT / "docs" / "own_model.md").read_text(encoding="utf-8").split())
    assert f"at most {load.MAX_FILE_BYTES // 2**20} MiB of UTF-8 JSON, nested at most {load.MAX_NESTING} " \
           f"levels" in page
    assert f"no integer of more than {MAX_INT_DIGITS} digits" in page
    assert f"a file over {MAX_ONNX_BYTES // 2**30} GiB" in page


# --- point 4: nothing read or written outside the leaderboard folder --------------------------------------

def _render(board: Path, *options: str) -> int:
    return main(["leaderboard", "render", *options, "--dir", str(board)])


def test_render_does_not_write_a_readme_that_is_a_link(board, outside, capsys):
    (board / "README.md").symlink_to(outside)
    assert _render(board, "--no-chart") == 1
    assert "symbolic link" in capsys.readouterr().err
    assert outside.read_bytes() == OUTSIDE_TEXT and (board / "README.md").is_symlink()


def test_render_check_does_not_read_a_readme_outside_the_folder(board, tmp_path, capsys):
    assert _render(board, "--no-chart") == 0
    moved = tmp_path / "outside-readme.txt"
    (board / "README.md").rename(moved)
    (board / "README.md").symlink_to(moved)  # up to date, but not inside the folder
    assert _render(board, "--check") == 1
    assert "symbolic link" in capsys.readouterr().err


def test_the_chart_is_not_written_through_a_link(board, outside):
    from placement_gym.leaderboard.render import load_submissions, render_chart

    (board / "leaderboard.png").symlink_to(outside)
    with pytest.raises(UntrustedFileError, match="symbolic link"):
        render_chart(load_submissions(board / "submissions"), board / "leaderboard.png", "v1")
    assert outside.read_bytes() == OUTSIDE_TEXT
    (board / "leaderboard.png").unlink()
    assert render_chart(load_submissions(board / "submissions"), board / "leaderboard.png", "v1")
    assert (board / "leaderboard.png").read_bytes().startswith(b"\x89PNG")


@pytest.mark.slow
def test_render_does_not_draw_curves_into_a_linked_folder(board, tmp_path, capsys):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (board / "curves").symlink_to(elsewhere, target_is_directory=True)
    # The page of the file's suite, v1, whose curves go to curves/v1/.
    assert _render(board, "--suite", "v1") == 1
    assert "symbolic link" in capsys.readouterr().err
    assert list(elsewhere.iterdir()) == [] and not (board / "suite_v1.md").exists()
    (board / "curves").unlink()
    assert _render(board, "--suite", "v1") == 0  # once the link is gone it renders
    assert any((board / "curves" / "v1").iterdir())


def test_render_refuses_a_submissions_folder_that_is_a_link(board, tmp_path, capsys):
    moved = tmp_path / "moved-submissions"
    (board / "submissions").rename(moved)
    (board / "submissions").symlink_to(moved, target_is_directory=True)
    assert _render(board, "--no-chart") == 1
    assert "symbolic link" in capsys.readouterr().err
    assert not (board / "README.md").exists()


def test_submit_does_not_create_a_file_through_a_dangling_link(board, tmp_path, capsys):
    mine = tmp_path / "mine.json"
    shutil.copy(board / "submissions" / HEFT, mine)
    (board / "submissions" / HEFT).unlink()
    target = tmp_path / "outside" / "created.json"
    (board / "submissions" / HEFT).symlink_to(target)
    assert main(["leaderboard", "submit", str(mine), "--dir", str(board)]) != 0
    assert "symbolic link" in capsys.readouterr().err
    assert not target.exists()


def test_submit_force_does_not_overwrite_through_a_link(board, outside, tmp_path, capsys):
    mine = tmp_path / "mine.json"
    shutil.copy(board / "submissions" / HEFT, mine)
    (board / "submissions" / HEFT).unlink()
    (board / "submissions" / HEFT).symlink_to(outside)
    assert main(["leaderboard", "submit", str(mine), "--force", "--dir", str(board)]) != 0
    assert "symbolic link" in capsys.readouterr().err
    assert outside.read_bytes() == OUTSIDE_TEXT


def test_submit_writes_inside_the_folder(board, tmp_path, capsys):
    mine = tmp_path / "mine.json"
    shutil.copy(board / "submissions" / HEFT, mine)
    (board / "submissions" / HEFT).unlink()
    assert main(["leaderboard", "submit", str(mine), "--dir", str(board)]) == 0
    capsys.readouterr()
    written = board / "submissions" / HEFT
    assert written.read_bytes() == mine.read_bytes() and not written.is_symlink()


def test_a_submission_that_links_outside_the_folder_does_not_validate(board, tmp_path, capsys):
    elsewhere = tmp_path / "elsewhere.json"
    (board / "submissions" / HEFT).rename(elsewhere)
    (board / "submissions" / HEFT).symlink_to(elsewhere)
    assert main(["leaderboard", "validate", "--dir", str(board), "--json"]) == 1
    out = capsys.readouterr()
    assert "symbolic link" in out.out + out.err


def test_bounds_are_neither_read_nor_written_through_a_link(board, outside):
    from placement_gym.leaderboard.suite import CURRENT_SUITE, get_suite
    from placement_gym.leaderboard.task_bounds import load_bounds, write_bounds

    moved = outside.parent / "bounds.json"
    (board / "bounds.json").rename(moved)
    (board / "bounds.json").symlink_to(moved)
    before = moved.read_bytes()
    suite = get_suite(CURRENT_SUITE)
    with pytest.raises(UntrustedFileError, match="symbolic link"):
        load_bounds(board, suite)
    with pytest.raises(UntrustedFileError, match="symbolic link"):
        write_bounds(board, suite.subset(["cifar10_cnn/k80x2/train"]))
    assert moved.read_bytes() == before


def test_inside_and_write_inside(tmp_path):
    root = tmp_path / "root"
    written = write_inside(root, "a/b/c.txt", "text")
    assert written == (root / "a" / "b" / "c.txt").resolve() and written.read_text() == "text"
    assert oct(written.stat().st_mode & 0o777) == oct(0o644)
    written.chmod(0o600)
    write_inside(root, "a/b/c.txt", b"again")
    assert written.read_bytes() == b"again" and written.stat().st_mode & 0o777 == 0o600
    assert [p.name for p in written.parent.iterdir()] == ["c.txt"]  # no temporary file left
    for bad in ("../x", "/etc/passwd", ""):
        with pytest.raises(UntrustedFileError, match="not a path inside"):
            inside(root, bad)
    (root / "link").symlink_to(tmp_path)
    with pytest.raises(UntrustedFileError, match="symbolic link"):
        write_inside(root, "link/x.txt", "x")
    (root / "folder.txt").mkdir()
    with pytest.raises(UntrustedFileError, match="directory; only a regular file is replaced"):
        write_inside(root, "folder.txt", "x")
    assert not (tmp_path / "x.txt").exists()
