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


def _single_runtimes(capsys, *options: str) -> dict[str, float]:
    """Run the demo on v100x8 (tensor cores) with ``options``; the best single device's runtime of
    each row's task, by task id."""
    assert main(["demo", "--json", "--cluster", "v100x8", "--samples", "4", "--out", "none", *options]) == 0
    rows = json.loads(capsys.readouterr().out)["rows"]
    return {row["task"]: row["runtime"] for row in rows if row["agent"].startswith("single:")}


def test_demo_takes_the_precision_and_the_micro_batches_of_evaluate(capsys):
    bf16 = _single_runtimes(capsys, "--precision", "bf16")
    graphs = ("cifar10_cnn", "inception_v3", "bert_large")
    assert set(bf16) == {f"{graph}/v100x8/train+bf16" for graph in graphs}
    # On tensor cores (125 against 15.7 TFLOP/s) with 2-byte activations, the CNN's step is faster in
    # mixed precision than its fp32 step on the same cluster.
    fp32 = single_device(get_task("cifar10_cnn", "v100x8", "train_step")).runtime
    assert bf16["cifar10_cnn/v100x8/train+bf16"] < fp32
    piped = _single_runtimes(capsys, "--precision", "bf16", "--microbatches", "2")
    assert set(piped) == {task_id + "+mb2" for task_id in bf16}
    # Two micro-batches on one device run every forward and backward op twice and the update once:
    # longer than one, at most twice as long.
    one, two = bf16["cifar10_cnn/v100x8/train+bf16"], piped["cifar10_cnn/v100x8/train+bf16+mb2"]
    assert one < two <= 2 * one


def test_demo_refuses_a_micro_batch_count_as_evaluate_does(capsys):
    assert main(["demo", "--microbatches", "0", "--out", "none"]) == 2
    assert "argument --microbatches: expected an integer from 1 to" in capsys.readouterr().err
