"""The demo that README's first command runs."""

from __future__ import annotations

import json

import pytest

from placement_gym.cli import main
from placement_gym.cost_model import simulate, single_device
from placement_gym.evaluation.placements import round_robin_placement
from placement_gym.task.named import get_task


def test_demo_reports_simple_placements_an_episode_and_a_picture(tmp_path, capsys):
    pytest.importorskip("matplotlib")
    out = tmp_path / "demo.png"
    assert main(["demo", "--json", "--samples", "8", "--out", str(out)]) == 0
    result = json.loads(capsys.readouterr().out)
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert result["episode"]["terminated"] is True
    by_task = {}
    for row in result["rows"]:
        by_task.setdefault(row["task"], []).append(row)
    assert set(by_task) == {"cifar10_cnn/k80x4/train", "inception_v3/k80x4/train", "bert_large/k80x4/train"}
    for task_id, rows in by_task.items():
        task = get_task(*task_id.split("/"))
        single, heft, robin, _ = rows
        assert single["runtime"] == single_device(task).runtime and single["speedup"] == 1.0
        assert heft["agent"] == "HEFT" and heft["speedup"] >= 1.0  # HEFT never loses on these three
        assert robin["runtime"] == simulate(task, round_robin_placement(task)).runtime
    # BERT-large's training step fits no single 12 GB K80 die: the best single device is the CPU
    assert by_task["bert_large/k80x4/train"][0]["agent"] == "single:cpu:0"


def test_demo_plain_output(capsys):
    assert main(["demo", "--samples", "4", "--out", "none"]) == 0
    text = capsys.readouterr().out
    assert "bert_large/k80x4/train" in text and "DevicePlacement-v0" in text
