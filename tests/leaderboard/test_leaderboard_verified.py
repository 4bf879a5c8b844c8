"""What the leaderboard ranks is what it checked (issue 23, points 5 and 6): runtimes, feasibility, best
known and scores come from the re-simulation, never from the file; budget tracks rank only entries whose
re-run reproduced (recorded in ``reruns.json`` against the file's bytes), the rest are shown apart as
unverified."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from paths import ROOT

from placement_gym.cli import main
from placement_gym.cost_model import simulate
from placement_gym.evaluation.placements import placement_problems
from placement_gym.leaderboard import get_suite
from placement_gym.leaderboard.render import checked_submissions, suite_page
from placement_gym.leaderboard.rerun_records import RECORDS_NAME, read_records

SUBMISSIONS = ROOT / "leaderboard" / "submissions"
HEFT = "v1-heft-seed0.json"
# The suite of the committed files these tests copy, and its page.
SUITE = "v1"
PAGE = suite_page(SUITE).page


def _board(tmp_path: Path, *names: str) -> Path:
    board = tmp_path / "board"
    (board / "submissions").mkdir(parents=True)
    shutil.copy(ROOT / "leaderboard" / "bounds.json", board)
    for name in names:
        shutil.copy(SUBMISSIONS / name, board / "submissions")
    return board


def _section(text: str, start: str, end: str) -> str:
    return text.split(start)[1].split(end)[0]


def _shaved(data: dict, algorithm: str) -> dict:
    """``data`` relabelled, each runtime claimed 9e-7 lower: within the validator's tolerance."""
    forged = json.loads(json.dumps(data))
    forged["algorithm"] = algorithm
    for result in forged["results"].values():
        result["runtime"] *= 1 - 9e-7
        for point in result.get("trace") or []:
            point[1] *= 1 - 9e-7
    return forged


def test_ranked_runtimes_are_the_re_simulated_ones_not_the_claimed(tmp_path, capsys):
    board = _board(tmp_path, HEFT)
    heft = json.loads((SUBMISSIONS / HEFT).read_text())
    (board / "submissions" / "v1-shaved-seed0.json").write_text(json.dumps(_shaved(heft, "shaved")))
    suite = get_suite(SUITE)
    for name, data in checked_submissions(board / "submissions"):
        for task_id, result in data["results"].items():
            task = suite.get(task_id).task()
            placement, _ = placement_problems(task, result["placement"], str)
            simulated = simulate(task, placement)
            assert result["runtime"] == float(simulated.runtime), (name, task_id)
            assert result["feasible"] == bool(simulated.feasible)
    assert main(["leaderboard", "render", "--no-chart", "--suite", SUITE, "--dir", str(board)]) == 0
    capsys.readouterr()
    text = (board / PAGE).read_text()
    # The shaved claims appear nowhere; both entries show the same runtimes and the same score per task.
    claimed = {f"{r['runtime'] * (1 - 9e-7):.6g}" for r in heft["results"].values()}
    shown_runtimes = {f"{r['runtime']:.6g}" for r in heft["results"].values()}
    assert not (claimed - shown_runtimes) & set(text.replace("|", " ").split())
    for task_id in heft["results"]:
        rows = [line for line in _section(text, f"### `{task_id}`", "###").splitlines()
                if line.startswith("| ") and ("heft" in line or "shaved" in line)]
        cells = [line.split("|")[3:6] for line in rows]  # budget, runtime, score
        assert len(cells) == 2 and cells[0] == cells[1], (task_id, rows)


@pytest.fixture(scope="module")
def recorded_heft(tmp_path_factory) -> Path:
    """A leaderboard folder whose heft entry was re-run and recorded by the command line."""
    board = _board(tmp_path_factory.mktemp("recorded"), HEFT)
    assert main(["leaderboard", "validate", "--rerun", str(board / "submissions" / HEFT), "--record",
                 "--dir", str(board)]) == 0
    return board


def test_a_reproduced_rerun_is_recorded_against_the_files_bytes(recorded_heft):
    import hashlib

    records = read_records(recorded_heft)
    assert list(records) == [HEFT]
    raw = (recorded_heft / "submissions" / HEFT).read_bytes()
    assert records[HEFT].sha256 == hashlib.sha256(raw).hexdigest()
    assert set(records[HEFT].tasks) == set(json.loads((SUBMISSIONS / HEFT).read_text())["results"])


def test_an_entry_nobody_can_rerun_is_shown_apart_as_unverified(recorded_heft, tmp_path, capsys):
    """An anneal entry relabelled 'mine' with its counts cut to 1,000 (point 6): no provider knows it, so
    it cannot be recorded, and it is not ranked in any budget track."""
    board = tmp_path / "board"
    shutil.copytree(recorded_heft, board)
    forged = json.loads((SUBMISSIONS / "v1-anneal-1k-seed0.json").read_text())
    forged["algorithm"] = "mine"
    forged["budget"] = 100
    for result in forged["results"].values():
        result["evaluations"] = min(result["evaluations"], 100)
        result["trace"] = [[result["evaluations"], result["runtime"]]]
    path = board / "submissions" / "v1-mine-100-seed0.json"
    path.write_text(json.dumps(forged))
    assert main(["leaderboard", "validate", str(path), "--dir", str(board)]) == 0  # its fields are in order
    assert main(["leaderboard", "validate", "--rerun", str(path), "--record", "--dir", str(board)]) != 0
    assert list(read_records(board)) == [HEFT]
    assert main(["leaderboard", "render", "--no-chart", "--suite", SUITE, "--dir", str(board)]) == 0
    capsys.readouterr()
    text = (board / PAGE).read_text()
    tracks = _section(text, "## Overall, by budget track", "### Unverified budgets")
    assert "heft" in tracks and "mine" not in tracks
    assert "mine" in _section(text, "### Unverified budgets", "## Bounds and best known")
    assert "100 (unverified)" in _section(text, "## Per task", "## Generalisation")


def test_editing_a_recorded_file_drops_its_verification(recorded_heft, tmp_path, capsys):
    """A recorded file changed afterwards (here: one task's wall time) is unverified and fails
    ``leaderboard reruns``; the unchanged record passes it."""
    board = tmp_path / "board"
    shutil.copytree(recorded_heft, board)
    assert main(["leaderboard", "reruns", "--dir", str(board)]) == 0
    path = board / "submissions" / HEFT
    data = json.loads(path.read_text())
    next(iter(data["results"].values()))["wall_s"] += 1.0
    path.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n")
    assert main(["leaderboard", "reruns", "--dir", str(board)]) == 1
    assert "changed since its re-run was recorded" in capsys.readouterr().err
    assert main(["leaderboard", "render", "--no-chart", "--suite", SUITE, "--dir", str(board)]) == 0
    text = (board / PAGE).read_text()
    assert "heft" not in _section(text, "## Overall, by budget track", "### Unverified budgets")


def test_a_record_whose_rerun_does_not_reproduce_fails_the_check(recorded_heft, tmp_path, capsys):
    """A record written for a file the agent does not reproduce (a forged record: heft's placement of
    one task moved by one op) fails ``leaderboard reruns``, naming the file and task."""
    board = tmp_path / "board"
    shutil.copytree(recorded_heft, board)
    path = board / "submissions" / HEFT
    data = json.loads(path.read_text())
    results = data["results"]
    task_id = next(t for t in sorted(results) if len(set(results[t]["placement"].values())) > 1)
    placement = data["results"][task_id]["placement"]
    op = sorted(placement)[0]
    placement[op] = next(d for d in sorted(set(placement.values())) if d != placement[op])
    task = get_suite(SUITE).get(task_id).task()
    moved, _ = placement_problems(task, placement, str)
    simulated = simulate(task, moved)
    data["results"][task_id].update(runtime=float(simulated.runtime), feasible=bool(simulated.feasible))
    data["results"][task_id].pop("trace", None)
    path.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n")
    import hashlib

    records = json.loads((board / RECORDS_NAME).read_text())
    records["records"][HEFT]["sha256"] = hashlib.sha256(path.read_bytes()).hexdigest()
    (board / RECORDS_NAME).write_text(json.dumps(records))
    capsys.readouterr()
    assert main(["leaderboard", "reruns", "--all", "--dir", str(board)]) == 1
    err = capsys.readouterr().err
    assert f"{HEFT}: not reproduced on {task_id}" in err


def test_a_relabelled_seed_that_joins_an_entry_makes_the_entry_unverified(recorded_heft, tmp_path, capsys):
    """Point 7's last case: another algorithm's run (best-single's) relabelled as heft seed 1 passes
    validation, but its budget has no record, so the whole heft entry leaves the budget tracks."""
    board = tmp_path / "board"
    shutil.copytree(recorded_heft, board)
    relabelled = json.loads((SUBMISSIONS / "v1-best-single-seed0.json").read_text())
    relabelled.update(algorithm="heft", seed=1)
    path = board / "submissions" / "v1-heft-seed1.json"
    path.write_text(json.dumps(relabelled))
    assert main(["leaderboard", "validate", str(path), "--dir", str(board)]) == 0
    assert main(["leaderboard", "validate", "--rerun", str(path), "--record", "--dir", str(board)]) == 1
    assert main(["leaderboard", "render", "--no-chart", "--suite", SUITE, "--dir", str(board)]) == 0
    capsys.readouterr()
    text = (board / PAGE).read_text()
    assert "heft" not in _section(text, "## Overall, by budget track", "### Unverified budgets")
    assert "v1-heft-seed1.json" in _section(text, "### Unverified budgets", "## Bounds and best known")


def _forge(path: Path) -> str:
    """Move one op of the first task of submission ``path`` to another device (runtime re-simulated,
    curve dropped, so the file still validates); the task's id."""
    data = json.loads(path.read_text())
    task_id = sorted(data["results"])[0]
    placement = data["results"][task_id]["placement"]
    task = get_suite(SUITE).get(task_id).task()
    op = sorted(placement)[0]
    placement[op] = next(d for d in task.cluster.device_names if d != placement[op])
    moved, _ = placement_problems(task, placement, str)
    simulated = simulate(task, moved)
    data["results"][task_id].update(runtime=float(simulated.runtime), feasible=bool(simulated.feasible))
    data["results"][task_id].pop("trace", None)
    path.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n")
    return task_id


@pytest.mark.parametrize("algorithm", ["pg", "heft"])
def test_only_a_learned_entry_recorded_on_another_platform_is_excused(algorithm, tmp_path, capsys):
    """A learned entry (torch) that does not reproduce fails ``reruns`` on the platform of its record
    and is reported as not comparable on another CPU maker's; a heuristic's must reproduce anywhere."""
    import hashlib

    from placement_gym.leaderboard.rerun_records import this_platform

    source = ROOT / "leaderboard" / "reproducible" / "v1-pg-200-seed0.json" if algorithm == "pg" else \
        SUBMISSIONS / HEFT
    board = _board(tmp_path)
    path = board / "submissions" / source.name
    shutil.copy(source, path)
    task_id = _forge(path)
    for platform, code in (("OtherMaker x86_64", 0 if algorithm == "pg" else 1), (this_platform(), 1)):
        record = {"sha256": hashlib.sha256(path.read_bytes()).hexdigest(), "tasks": [task_id],
                  "platform": platform}
        (board / RECORDS_NAME).write_text(json.dumps({"schema": 1, "records": {source.name: record}}))
        capsys.readouterr()
        assert main(["leaderboard", "reruns", "--all", "--dir", str(board)]) == code
        out, err = capsys.readouterr()
        if code == 0:
            assert f"{source.name}: differs on {task_id}, but it was learned with torch on {platform}" in out
            assert "1 learned files not comparable" in out
        else:
            assert f"{source.name}: not reproduced on {task_id}" in err


def test_the_parts_of_the_rerun_sample_cover_every_entry_once():
    """``reruns --part K/N`` (CI's day/3): over K = 0..N-1 the parts are disjoint and together are the
    whole one-file-per-entry sample of the committed records."""
    from placement_gym.leaderboard.rerun_records import sample_per_entry

    records = read_records(ROOT / "leaderboard")
    entries: dict[tuple, list[str]] = {}
    for name in records:
        data = json.loads((SUBMISSIONS / name).read_text())
        key = (data.get("track", "cost_model"), data["algorithm"], repr(data.get("budget")))
        entries.setdefault(key, []).append(name)
    whole = sample_per_entry(entries, records)
    assert len(whole) == len(entries) > 3
    parts = [sample_per_entry(entries, records, (k, 3)) for k in range(3)]
    assert all(parts) and sorted(n for part in parts for n in part) == whole


def test_a_forged_record_fails_only_the_part_that_holds_its_entry(recorded_heft, tmp_path, capsys):
    """A record whose re-run cannot reproduce (heft's placement of one task moved by one op) fails
    ``reruns --part`` for the bucket of heft's entry and no other; malformed parts are a one-line error."""
    from placement_gym.leaderboard.rerun_records import entry_bucket

    board = tmp_path / "board"
    shutil.copytree(recorded_heft, board)
    bucket = entry_bucket(("cost_model", "heft", "None"), 2)
    assert main(["leaderboard", "reruns", "--part", f"{bucket}/2", "--dir", str(board)]) == 0
    assert "(1 files)" in capsys.readouterr().out
    path = board / "submissions" / HEFT
    data = json.loads(path.read_text())
    task_id = sorted(data["results"])[0]
    placement = data["results"][task_id]["placement"]
    op = sorted(placement)[0]
    placement[op] = next(d for d in sorted(set(placement.values())) if d != placement[op])
    task = get_suite(SUITE).get(task_id).task()
    simulated = simulate(task, placement_problems(task, placement, str)[0])
    data["results"][task_id].update(runtime=float(simulated.runtime), feasible=bool(simulated.feasible))
    data["results"][task_id].pop("trace", None)
    path.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n")
    import hashlib

    records = json.loads((board / RECORDS_NAME).read_text())
    records["records"][HEFT].update(sha256=hashlib.sha256(path.read_bytes()).hexdigest(), tasks=[task_id])
    (board / RECORDS_NAME).write_text(json.dumps(records))
    assert main(["leaderboard", "reruns", "--part", f"{1 - bucket}/2", "--dir", str(board)]) == 0
    assert "(0 files)" in capsys.readouterr().out
    assert main(["leaderboard", "reruns", "--part", f"{bucket}/2", "--dir", str(board)]) == 1
    assert f"{HEFT}: not reproduced on {task_id}" in capsys.readouterr().err
    for bad in ("2/2", "x/3", "1/0", "1"):
        assert main(["leaderboard", "reruns", "--part", bad, "--dir", str(board)]) == 2
        err = capsys.readouterr().err
        assert len(err.strip().splitlines()) == 1 and "K/N" in err


def test_a_mapping_and_a_text_of_one_placement_compare_as_the_same_placement():
    """An entry of one suite may carry another suite's results as {op: device} beside re-runs that
    write text: the comparison goes through the task's op order, and still sees one moved op."""
    from placement_gym.evaluation.placements import placement_to_dict, placement_to_text
    from placement_gym.leaderboard.rerun import placement_differences
    from placement_gym.task.named import parse_task_id

    task = parse_task_id("cifar10_cnn/k80x2/train")
    array = [i % task.n_devices for i in range(task.n_forward)]
    mapping, text = placement_to_dict(task, array), placement_to_text(task, array)
    assert placement_differences(mapping, text, task) == []
    assert placement_differences(text, mapping, task) == []
    moved = dict(mapping)
    op = task.graph.op_names[3]
    moved[op] = task.cluster.device_names[(array[3] + 1) % task.n_devices]
    reasons = placement_differences(moved, text, task)
    assert len(reasons) == 1 and "differs on 1 of" in reasons[0] and "first 3" in reasons[0]
    # Without the task the two forms cannot be lined up: the op names are not indices.
    assert placement_differences(mapping, text) != []
