"""Submissions are untrusted input: every malformed file gets its reason and exit 1 from `placement-gym
leaderboard validate`, never a traceback; names keep to a documented character set; free text is
length-limited and escaped wherever it is rendered."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest
from hostile_submissions import (
    EVIL,
    INCONSISTENT,
    MALFORMED,
    SUITE,
    TASK_ID,
    UNREADABLE,
    good_submission,
    mutated,
)
from paths import ROOT

from placement_gym.cli import main
from placement_gym.evaluation.placements import single_placement
from placement_gym.leaderboard import evaluate, get_suite, render_markdown, save_submission
from placement_gym.leaderboard.submission import (
    MAX_FILE_BYTES,
    MAX_NESTING,
    NAME_PATTERN,
    SubmissionError,
    check_schema,
    parse_submission,
)
from placement_gym.leaderboard.validate import validate_file, validate_submission


@pytest.fixture(scope="module")
def good() -> dict:
    return good_submission()


def validate_cli(path: Path, capsys) -> tuple[int, str]:
    """Exit code and every reason `leaderboard validate --json` gives for ``path``."""
    code = main(["leaderboard", "validate", str(path), "--json", "--dir", str(path.parent)])
    out = capsys.readouterr().out
    (report,) = json.loads(out)
    reasons = report["problems"] + [r for t in report["tasks"] for r in t["reasons"]]
    return code, " | ".join(reasons)


@pytest.mark.parametrize("case", [*MALFORMED, *INCONSISTENT])
def test_validate_gives_the_reason_and_exit_1(good, tmp_path, capsys, case):
    change, words = {**MALFORMED, **INCONSISTENT}[case]
    path = tmp_path / "s.json"
    path.write_text(json.dumps(mutated(good, change)))
    code, reasons = validate_cli(path, capsys)
    assert code == 1 and words in reasons, reasons


@pytest.mark.parametrize("case", list(UNREADABLE))
def test_unreadable_files_get_their_reason_and_exit_1(tmp_path, capsys, case):
    raw, words = UNREADABLE[case]
    path = tmp_path / "s.json"
    path.write_bytes(raw)
    code, reasons = validate_cli(path, capsys)
    assert code == 1 and words in reasons, reasons


def test_a_huge_file_is_refused_before_it_is_read(tmp_path, capsys):
    path = tmp_path / "huge.json"
    with path.open("wb") as file:
        file.truncate(MAX_FILE_BYTES + 1)  # sparse: no memory or disk needed
    code, reasons = validate_cli(path, capsys)
    assert code == 1 and f"at most {MAX_FILE_BYTES:,} are allowed" in reasons
    with pytest.raises(SubmissionError, match="at most"):
        parse_submission(b" " * (MAX_FILE_BYTES + 1))


def test_a_folder_given_as_file_is_a_reason_not_a_traceback(tmp_path, capsys):
    (tmp_path / "dir.json").mkdir()
    code, reasons = validate_cli(tmp_path / "dir.json", capsys)
    assert code == 1 and "cannot be read" in reasons


def test_nesting_is_counted_outside_strings_only():
    nested = "[" * MAX_NESTING + "]" * MAX_NESTING
    assert parse_submission(nested.encode()) == json.loads(nested)
    with pytest.raises(SubmissionError, match=f"nests {MAX_NESTING + 1} levels"):
        parse_submission(("[" + nested + "]").encode())
    assert parse_submission(json.dumps({"description": "[[[[[[[[[[[[[[\\\"{{{{{{{{{{"}).encode())


def test_a_good_submission_with_text_http_link_and_unicode_names_passes(good, tmp_path, capsys):
    data = copy.deepcopy(good)
    data.update(authors=["Zoë Ångström", "李雷"], link="https://example.org/paper?id=1#s2",
                description="Line one.\n\tLine two: 100% <fine>.")
    assert check_schema(data) is data
    path = save_submission(data, tmp_path / "s.json")
    assert validate_file(path).ok
    assert main(["leaderboard", "validate", str(path), "--dir", str(tmp_path)]) == 0
    capsys.readouterr()


def test_a_save_stopped_while_writing_leaves_the_file_as_it_was(good, tmp_path, monkeypatch):
    # A fill stopped during a save (killed, out of disk) must leave the previous, valid file and no
    # stray temporary file; the write itself is stopped here, halfway through the new text.
    import os

    path = save_submission(good, tmp_path / "s.json")
    before = path.read_bytes()
    changed = copy.deepcopy(good)
    changed["description"] = "changed " * 400

    real_write = os.write

    def half_write(fd, data):
        real_write(fd, bytes(data[: len(data) // 2]))
        raise KeyboardInterrupt

    monkeypatch.setattr(os, "write", half_write)
    with pytest.raises(KeyboardInterrupt):
        save_submission(changed, path)
    monkeypatch.undo()
    assert path.read_bytes() == before
    assert [p.name for p in tmp_path.iterdir()] == ["s.json"]
    assert validate_file(path).ok


# --- rendering escapes what it is given, even without validation -------------------------------------------

def _overall_row(text: str, name_fragment: str) -> str:
    overall = text.split("## Overall")[1].split("## Per task")[0]
    return next(line for line in overall.splitlines() if name_fragment in line)


def test_render_escapes_an_evil_algorithm_name(good):
    data = copy.deepcopy(good)
    data["algorithm"] = EVIL
    assert not validate_submission(data).ok  # validation refuses it; rendering must not trust it either
    text = render_markdown([("a.json", data)], SUITE)
    # No HTML tag and no link syntax survive: "[" and "]" are escaped, so "(javascript:...)" is text.
    assert "<img" not in text and "[click](" not in text
    row = _overall_row(text, "evil")
    # The row keeps its 9 cells: the "|" of the name is escaped, not a cell boundary.
    assert row.replace("\\|", "").count("|") == 11
    assert "&lt;img src=x onerror=alert(1)&gt;" in row and "\\[click\\]" in row


def test_render_escapes_free_text_of_the_real_track(good):
    data = copy.deepcopy(good)
    data.update(track="real", hardware="<script>x</script> | 8x `H100`")
    text = render_markdown([("r.json", data)], SUITE).split("## Real-hardware track")[1]
    assert "<script>" not in text and "&lt;script&gt;x&lt;/script&gt; \\| 8x \\`H100\\`" in text


def test_render_refuses_a_file_name_that_is_not_plain(good, tmp_path, capsys):
    board = tmp_path / "board"
    save_submission(good, board / "submissions" / "a`b|c.json")
    assert main(["leaderboard", "render", "--dir", str(board)]) == 1
    assert "file name" in capsys.readouterr().out
    assert not (board / "README.md").exists()


def test_the_docs_state_the_limits_the_code_enforces():
    page = (ROOT / "docs" / "leaderboard.md").read_text(encoding="utf-8")
    section = " ".join(page.split())  # the page wraps lines anywhere
    assert f"files over {MAX_FILE_BYTES // 2**20} MiB" in section
    assert f"nested deeper than {MAX_NESTING}" in section
    assert "letters, digits and `. _ -` (at most 64 characters" in section
    assert NAME_PATTERN == r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}"


def test_the_harness_refuses_a_bad_name_before_the_agent_runs():
    ran = []

    def agent(task, seed, budget):
        ran.append(task.id)
        return single_placement(task, 0)

    with pytest.raises(SubmissionError, match="field 'algorithm'"):
        evaluate(agent, get_suite(SUITE).subset([TASK_ID]), algorithm=EVIL)
    assert ran == []


def test_task_ids_of_datasets_are_code_spans_and_markup_is_not():
    """A dataset's task id (with ':') renders as a code span like any other; a name that carries markup
    or a cell separator stays escaped text."""
    from placement_gym.leaderboard.markdown import code_span

    assert code_span("unrolled-v1:gnmt-tf-4/k40x8/inference") == "`unrolled-v1:gnmt-tf-4/k40x8/inference`"
    assert code_span("gnmt8/k40x8/train+mb4") == "`gnmt8/k40x8/train+mb4`"
    for evil in ("a:`b`", "x:y|z", "[a](javascript:alert(1))", ":leading", "a: b"):
        assert not code_span(evil).startswith("`"), evil
    assert code_span("x:y|z") == "x:y\\|z"
