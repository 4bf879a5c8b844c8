"""The leaderboard commands under races and file-system failures (issue 62, points 4 to 6): no write
outside the folder even when a folder is swapped for a link mid-command, `submit` copies the bytes it
validated, two submits of one name cannot both win, nothing half-done that `render --check` misses, and
one line (never a traceback) with the documented exit code for every file-system error."""

from __future__ import annotations

import copy
import errno
import os
import shutil
import threading
from pathlib import Path
from types import SimpleNamespace

import pytest

from placement_gym.cli import main
from placement_gym.common.progress import is_progress_line
from placement_gym.evaluation.placements import round_robin_placement, single_placement
from placement_gym.leaderboard import evaluate, save_submission
from placement_gym.leaderboard.render import suite_page
from placement_gym.leaderboard.submission import submission_filename
from placement_gym.leaderboard.suite import get_suite

SUITE = "v1"
SMALL = ("cifar10_cnn/k80x2/train", "cifar10_resnet56/k80x2/train")
LAYOUT = suite_page(SUITE)
RENDER = ["leaderboard", "render", "--suite", SUITE]


def _entry(algorithm: str, place) -> dict:
    return evaluate(lambda task, seed, budget: SimpleNamespace(placement=place(task), evaluations=3),
                    get_suite(SUITE).subset(SMALL), algorithm=algorithm, authors=["tests"], description="t")


@pytest.fixture(scope="module")
def good() -> dict:
    return _entry("round-robin", round_robin_placement)


@pytest.fixture()
def board(tmp_path: Path, good: dict) -> Path:
    folder = tmp_path / "board"
    save_submission(good, folder / "submissions" / "a.json")
    save_submission(_entry("last-device", lambda task: single_placement(task, task.n_devices - 1)),
                    folder / "submissions" / "b.json")
    return folder


def one_line(capsys, *words: str) -> str:
    """The command's stderr, which must be one line (no traceback) holding ``words`` besides the lines
    of progress a slow run writes."""
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if line.strip() and not is_progress_line(line)]
    assert len(lines) == 1 and "Traceback" not in err, err
    assert all(word in lines[0] for word in words), lines[0]
    return lines[0]


def files_under(folder: Path) -> set[str]:
    return {p.relative_to(folder).as_posix() for p in folder.rglob("*")}


def fail_os(monkeypatch, name: str, code: int, when=lambda *args, **kwargs: True) -> None:
    """Make ``os.<name>`` raise OSError(``code``) whenever ``when(...)`` holds for its arguments."""
    real = getattr(os, name)

    def failing(*args, **kwargs):
        if when(*args, **kwargs):
            raise OSError(code, os.strerror(code))
        return real(*args, **kwargs)

    monkeypatch.setattr(os, name, failing)


# --- point 4: no write outside the folder, even under races ----------------------------------------------

def test_curves_folder_swapped_for_a_link_while_render_writes_is_never_written_through(
        board, tmp_path, monkeypatch, capsys):
    assert main([*RENDER, "--dir", str(board)]) == 0
    outside = tmp_path / "outside"
    (outside / "v1").mkdir(parents=True)  # where the link makes curves/v1 lead
    real_open = os.open

    def swapping_open(path, flags, *args, **kwargs):
        # When the first image is created, the curves folder becomes a link to a folder outside.
        if flags & os.O_CREAT and ".png" in os.fsdecode(path) and not (board / "curves").is_symlink():
            (board / "curves").rename(board / "moved-curves")
            (board / "curves").symlink_to(outside, target_is_directory=True)
        return real_open(path, flags, *args, **kwargs)

    (board / "submissions" / "b.json").unlink()  # something to write: every curve changes
    monkeypatch.setattr(os, "open", swapping_open)
    code = main([*RENDER, "--dir", str(board)])
    monkeypatch.undo()
    assert [p for p in outside.rglob("*") if not p.is_dir()] == []
    assert code == 1
    one_line(capsys, "symbolic link")


def test_submit_copies_the_bytes_it_validated_even_if_the_file_is_swapped(board, good, tmp_path, monkeypatch,
                                                                           capsys):
    mine = save_submission(good, tmp_path / "mine.json")
    validated = mine.read_bytes()
    bad = copy.deepcopy(good)
    for result in bad["results"].values():
        result["runtime"] /= 3  # fails validation, same file name
    swap = save_submission(bad, tmp_path / "bad.json")
    real_open = os.open

    def swapping_open(path, flags, *args, **kwargs):
        descriptor = real_open(path, flags, *args, **kwargs)
        if os.fsdecode(path) == str(mine) and swap.exists():
            os.replace(swap, mine)  # after the first open: a second read would see the bad file
        return descriptor

    monkeypatch.setattr(os, "open", swapping_open)
    code = main(["leaderboard", "submit", str(mine), "--dir", str(board)])
    monkeypatch.undo()
    capsys.readouterr()
    assert code == 0 and (board / "submissions" / submission_filename(good)).read_bytes() == validated


def test_two_submits_of_one_name_cannot_both_win(board, good, tmp_path, monkeypatch, capsys):
    """Both submits are held at their final rename until the other arrives (or 2 s pass): without a lock
    both would have passed the check that the name is free."""
    files = [save_submission(good, tmp_path / f"mine{i}.json") for i in range(2)]
    barrier = threading.Barrier(2, timeout=2)
    real_replace = os.replace

    def meeting_replace(source, target, **kwargs):
        if kwargs.get("dst_dir_fd") is not None or str(board) in os.fsdecode(target):
            try:
                barrier.wait()
            except threading.BrokenBarrierError:
                pass
        return real_replace(source, target, **kwargs)

    monkeypatch.setattr(os, "replace", meeting_replace)
    codes = {}
    threads = [threading.Thread(target=lambda i=i: codes.__setitem__(
        i, main(["leaderboard", "submit", str(files[i]), "--dir", str(board)]))) for i in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    monkeypatch.undo()
    assert sorted(codes.values()) == [0, 1]
    one_line(capsys, "exists", "--force")
    # With --force the second replaces the first.
    changed = copy.deepcopy(good)
    changed["description"] = "changed"
    forced = save_submission(changed, tmp_path / "forced.json")
    assert main(["leaderboard", "submit", str(forced), "--dir", str(board)]) == 1
    assert main(["leaderboard", "submit", str(forced), "--force", "--dir", str(board)]) == 0
    assert (board / "submissions" / submission_filename(good)).read_bytes() == forced.read_bytes()
    capsys.readouterr()


def test_force_never_replaces_another_entrys_file_of_the_same_name(board, good, tmp_path, capsys):
    """``a-1k`` at the default budget and ``a`` at 1,000 evaluations make one file name: --force replaces
    a run of its own entry only."""
    first, second = copy.deepcopy(good), copy.deepcopy(good)
    first["algorithm"], first["budget"] = "last-1k", None
    second["algorithm"], second["budget"] = "last", 1000
    assert submission_filename(first) == submission_filename(second)
    files = [save_submission(data, tmp_path / f"{i}.json") for i, data in enumerate((first, second))]
    assert main(["leaderboard", "submit", str(files[0]), "--dir", str(board)]) == 0
    assert main(["leaderboard", "submit", str(files[1]), "--force", "--dir", str(board)]) == 1
    one_line(capsys, "another entry", "'last-1k'")
    assert (board / "submissions" / submission_filename(first)).read_bytes() == files[0].read_bytes()


# --- point 5: nothing half-done ----------------------------------------------------------------------------

def test_render_refuses_a_folder_without_submissions(board, capsys):
    page = board / LAYOUT.page
    assert main([*RENDER, "--dir", str(board)]) == 0
    before = page.read_bytes()
    for path in (board / "submissions").iterdir():
        path.unlink()
    (board / "submissions").rmdir()
    capsys.readouterr()
    for check in ([], ["--check"]):
        assert main([*RENDER, *check, "--dir", str(board)]) == 1
        one_line(capsys, "submissions/")
    assert page.read_bytes() == before
    assert main([*RENDER, "--dir", str(board / "missing")]) == 1 and not (board / "missing").exists()
    one_line(capsys, "submissions/")


@pytest.mark.slow  # about 4 s: a re-run of the file, then renders and checks
def test_render_check_covers_the_chart_and_the_curves(board, capsys):
    # A verified entry (re-run and recorded) has a chart.
    assert main(["leaderboard", "validate", "--rerun", str(board / "submissions" / "a.json"), "--record",
                 "--dir", str(board)]) == 0
    assert main([*RENDER, "--dir", str(board)]) == 0
    images = sorted(p for p in files_under(board) if p.endswith(".png"))
    assert LAYOUT.chart in images and len(images) == 1 + len(SMALL)
    assert main([*RENDER, "--check", "--dir", str(board)]) == 0  # drawing is deterministic
    capsys.readouterr()
    for name in (LAYOUT.chart, images[0]):  # the chart and a curve
        image = board / name
        data = image.read_bytes()
        image.unlink()
        assert main([*RENDER, "--check", "--dir", str(board)]) == 1
        one_line(capsys, Path(name).name, "render --suite v1")
        image.write_bytes(data[:-1] + bytes([data[-1] ^ 1]))  # changed, not deleted
        assert main([*RENDER, "--check", "--dir", str(board)]) == 1
        assert main([*RENDER, "--check", "--no-chart", "--dir", str(board)]) == 0  # the pages alone
        image.write_bytes(data)
        capsys.readouterr()


@pytest.mark.parametrize("code", [errno.ENOSPC, errno.EROFS])
def test_a_render_failing_midway_leaves_a_state_check_reports(board, monkeypatch, capsys, code):
    assert main([*RENDER, "--dir", str(board)]) == 0
    before = {name: (board / name).read_bytes() for name in files_under(board) if (board / name).is_file()}
    (board / "submissions" / "b.json").unlink()  # every page and curve changes
    del before["submissions/b.json"]
    writes = []
    fail_os(monkeypatch, "replace", code, lambda *args, **kwargs: writes.append(args) or len(writes) > 1)
    assert main([*RENDER, "--dir", str(board)]) == 1
    monkeypatch.undo()
    one_line(capsys, os.strerror(code))
    after = {name: (board / name).read_bytes() for name in files_under(board) if (board / name).is_file()}
    assert set(after) == set(before)  # no temporary file left
    assert main([*RENDER, "--check", "--dir", str(board)]) == 1
    capsys.readouterr()


# --- point 6: one line and the documented exit code for every file-system failure --------------------------

@pytest.mark.parametrize(("code", "call"), [(errno.ENOSPC, "write"), (errno.EROFS, "replace")])
def test_submit_on_a_full_or_read_only_disk(board, good, tmp_path, monkeypatch, capsys, code, call):
    changed = copy.deepcopy(good)
    changed["seed"] = 7
    mine = save_submission(changed, tmp_path / "mine.json")
    fail_os(monkeypatch, call, code, lambda *args, **kwargs: args[0] not in (1, 2))  # not stdout, stderr
    assert main(["leaderboard", "submit", str(mine), "--dir", str(board)]) == 1
    monkeypatch.undo()
    one_line(capsys, os.strerror(code), "not submitted")
    assert files_under(board / "submissions") == {"a.json", "b.json"}


def test_render_and_submit_into_a_path_that_is_not_a_folder(board, good, tmp_path, capsys):
    afile = tmp_path / "afile"
    afile.write_text("not a folder")
    for folder in (afile, Path(os.devnull)):
        assert main([*RENDER, "--dir", str(folder)]) == 1
        one_line(capsys, "not a leaderboard folder")
    mine = save_submission(good, tmp_path / "mine.json")
    assert main(["leaderboard", "submit", str(mine), "--dir", str(afile)]) == 1
    one_line(capsys, "Not a directory", "not submitted")
    assert afile.read_text() == "not a folder"


def test_init_onto_a_dangling_link_or_a_full_disk(tmp_path, monkeypatch, capsys):
    link = tmp_path / "link"
    link.symlink_to(tmp_path / "nowhere")
    assert main(["leaderboard", "init", str(link)]) == 2
    one_line(capsys, "exists and is not an empty folder")
    assert not (tmp_path / "nowhere").exists()
    real_copy, copies = shutil.copyfile, []

    def filling_copy(source, target, **kwargs):  # the disk fills up at the fifth file
        copies.append(target)
        if len(copies) == 5:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(target))
        return real_copy(source, target, **kwargs)

    monkeypatch.setattr(shutil, "copyfile", filling_copy)
    assert main(["leaderboard", "init", str(tmp_path / "new")]) == 2
    monkeypatch.undo()
    one_line(capsys, os.strerror(errno.ENOSPC))
    assert files_under(tmp_path) == {"link"}  # nothing half-copied left


def test_an_os_error_of_any_command_is_one_line(tmp_path, monkeypatch, capsys):
    """The generic guard of the command line: an OSError no command handles is one line, exit 2."""
    bad = tmp_path / "bounds"
    fail_os(monkeypatch, "mkdir", errno.EROFS)
    assert main(["leaderboard", "init", str(bad / "deeper")]) == 2
    monkeypatch.undo()
    one_line(capsys, os.strerror(errno.EROFS))
    assert files_under(tmp_path) == set()
