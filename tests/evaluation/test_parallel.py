"""`run_jobs` (placement_gym/evaluation/parallel.py) and what runs through it: jobs serial or on a
local Ray instance give the same results in job order; the dataset-wide ``evaluate --dataset``, the
best-known portfolio over many tasks and the pre-training of the GNN placers give on Ray exactly
what they give serially."""

from __future__ import annotations

import json
import re
import sys

import numpy as np
import pytest

from placement_gym.cli import main
from placement_gym.cli.evaluate import evaluate_dataset
from placement_gym.common.extras import install_command
from placement_gym.datasets import get_dataset
from placement_gym.evaluation.parallel import BACKENDS, run_jobs
from placement_gym.task.named import get_task

# Job functions must be importable by name on Ray's workers (this test module is not): builtins are.
NUMBERS = ["1", "-2", "x", "4"]  # int() refuses the third one with a ValueError


def test_serial_jobs_in_order_with_progress():
    seen = []
    assert run_jobs(abs, [0, -1, 2, -3], progress=lambda i, r: seen.append((i, r))) == [0, 1, 2, 3]
    assert seen == [(0, 0), (1, 1), (2, 2), (3, 3)]
    assert run_jobs(abs, []) == []
    with pytest.raises(ValueError, match="invalid literal"):
        run_jobs(int, NUMBERS)


@pytest.mark.parametrize(("options", "message"), [
    ({"backend": "threads"}, "backend must be one of serial, ray"),
    ({"backend": "ray", "workers": 0}, "workers must be a positive integer"),
    ({"backend": "ray", "workers": True}, "workers must be a positive integer"),
    ({"workers": 2}, "give them with backend='ray'"),
    ({"address": "auto"}, "give them with backend='ray'"),
])
def test_bad_arguments_say_what_is_allowed(options, message):
    assert BACKENDS == ("serial", "ray")
    with pytest.raises(ValueError, match=message):
        run_jobs(abs, [1], **options)


def test_missing_ray_names_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "ray", None)
    with pytest.raises(ImportError, match=re.escape(install_command("distributed"))):
        run_jobs(abs, [1], backend="ray")
    assert run_jobs(abs, [-2]) == [2]  # serial needs no Ray


def _without_wall(report: dict) -> dict:
    """A dataset report less what depends on the machine (wall times) and how it ran."""
    summary = {k: v for k, v in report["summary"].items() if k not in ("wall_s", "backend", "workers")}
    return {"summary": summary, "graphs": [{k: v for k, v in row.items() if k != "wall_s"}
                                           for row in report["graphs"]]}


def test_a_dataset_row_is_the_single_graph_evaluation(capsys):
    """Every graph gets --seed itself: a row is what `evaluate --graph <dataset>:<id>` gives."""
    report = evaluate_dataset("random", "synthetic-mini-v1:valid", "k80x4", seed=7)
    ids = get_dataset("synthetic-mini-v1").ids("valid")
    assert [row["graph"] for row in report["graphs"]] == ids and report["summary"]["graphs"] == len(ids)
    for row in report["graphs"]:
        assert main(["evaluate", "--graph", f"synthetic-mini-v1:{row['graph']}", "--cluster", "k80x4",
                     "--agent", "random", "--seed", "7", "--json"]) == 0
        single = json.loads(capsys.readouterr().out)
        assert (row["task"], row["runtime"], row["feasible"]) == (single["task"], single["runtime"],
                                                                   single["feasible"])
        task = get_task(row["task"].split("/")[0], "k80x4")
        names = task.cluster.device_names
        assert [names[d] for d in row["placement"]] == [single["placement"][op] for op in task.graph.op_names]
    speedups = [row["speedup"] for row in report["graphs"] if row["feasible"]]
    assert report["summary"]["geomean_speedup"] == pytest.approx(float(np.exp(np.mean(np.log(speedups)))))
    assert report["summary"]["evaluations"] == sum(row["evaluations"] for row in report["graphs"])


@pytest.mark.parametrize(("argv", "message"), [
    (["--dataset", "synthetic-mini-v1:valid", "--graph", "cifar10_cnn"], "give one"),
    (["--graph", "cifar10_cnn", "--ray"], "give --dataset"),
    (["--dataset", "synthetic-mini-v1:valid", "--workers", "2"], "add --ray"),
    (["--dataset", "synthetic-mini-v1:valid", "--save", "x.json"], "take one graph"),
    (["--dataset", "no-such-set:train"], "no-such-set"),
    (["--dataset", "synthetic-mini-v1:no-such-split"], "unknown split 'no-such-split'"),
    # checked before Ray starts (this test would take seconds otherwise)
    (["--dataset", "synthetic-mini-v1:valid", "--agent", "nope", "--ray"], "unknown agent 'nope'"),
    (["--dataset", "synthetic-mini-v1:valid", "--cluster", "nope", "--ray"], "unknown cluster 'nope'"),
])
def test_dataset_cli_errors_are_one_line(capsys, argv, message):
    assert main(["evaluate", "--agent", "random", "--cluster", "k80x4", *argv]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("placement-gym: error:") and message in err and "\n" not in err


ray = pytest.importorskip("ray")


@pytest.mark.slow
def test_a_run_that_starts_ray_shuts_it_down_and_keeps_errors():
    """Runs before the module's shared instance exists (tests run in file order)."""
    if ray.is_initialized():
        pytest.skip("a Ray instance is already running in this process")
    done = []
    assert run_jobs(abs, range(0, -6, -1), backend="ray", workers=2,
                    progress=lambda i, r: done.append(i)) == [0, 1, 2, 3, 4, 5]
    assert sorted(done) == list(range(6)) and not ray.is_initialized()
    assert run_jobs(abs, [], backend="ray") == [] and not ray.is_initialized()  # nothing to run: no Ray


@pytest.fixture(scope="module")
def local_ray():
    """One local Ray instance with two CPUs for the module (start-up is the slow part)."""
    started = not ray.is_initialized()
    if started:
        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield
    if started:
        ray.shutdown()


@pytest.mark.slow
def test_ray_jobs_keep_the_jobs_exception(local_ray):
    with pytest.raises(ValueError, match="invalid literal for int"):
        run_jobs(int, NUMBERS, backend="ray", workers=2)
    assert ray.is_initialized()  # an instance this call joined stays up


@pytest.mark.slow
@pytest.mark.parametrize(("agent", "budget", "split"),
                         [("heft", None, "test-sizes"), ("anneal", 100, "valid")])
def test_dataset_evaluation_on_ray_is_the_serial_run(local_ray, capsys, agent, budget, split):
    options = ["--budget", str(budget)] if budget else []
    command = ["evaluate", "--agent", agent, *options, "--dataset", f"synthetic-mini-v1:{split}",
               "--cluster", "k80x4", "--seed", "3", "--json"]
    assert main(command) == 0
    serial = json.loads(capsys.readouterr().out)
    assert main([*command, "--ray", "--workers", "2"]) == 0
    on_ray = json.loads(capsys.readouterr().out)
    assert on_ray["summary"]["backend"] == "ray" and serial["summary"]["backend"] == "serial"
    assert _without_wall(on_ray) == _without_wall(serial)
    assert [row["graph"] for row in serial["graphs"]] == get_dataset("synthetic-mini-v1").ids(split)
    if budget:
        assert all(row["evaluations"] == budget for row in serial["graphs"])


@pytest.mark.slow
def test_best_known_over_many_tasks_on_ray_is_the_serial_run(local_ray):
    pytest.importorskip("torch")
    from baselines.portfolio import best_known, best_known_for_tasks
    from placement_gym.task.named import parse_task_id

    ids = ["synthetic-mini-v1:regal-3/k80x4/train", "synthetic-mini-v1:enas-conv-5/k80x2/train"]
    serial = best_known_for_tasks(ids, 400, seed=1)
    assert best_known_for_tasks(ids, 400, seed=1, backend="ray", workers=2) == serial
    assert [row["task"] for row in serial] == ids
    alone = best_known(parse_task_id(ids[1]), seed=1, budget=400)  # the portfolio run on its own
    assert serial[1]["placement"] == alone.placement.tolist()
    with pytest.raises(ValueError, match="at least 400"):
        best_known_for_tasks(ids, 399)


def _same(a, b) -> bool:
    """Deep equality of state dicts: tensors and arrays element for element."""
    import torch

    if isinstance(a, dict):
        return isinstance(b, dict) and a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    if isinstance(a, torch.Tensor):
        return torch.equal(a, b)
    if isinstance(a, np.ndarray):
        return np.array_equal(a, b)
    return a == b


# HSDAG's LayerNorm gradients differ in their last bits (1e-7) between a process's first and later
# trainings of the same seed (torch 2.13 CPU: its layer_norm backward), so a Ray worker's second job is
# not the serial run's: issue 68 (its pre-training on Ray must reproduce the serial result) owns it.
LAYER_NORM_DRIFT = pytest.mark.xfail(reason="torch's CPU LayerNorm backward depends on the process's "
                                     "history in its last bits (HSDAG only)", strict=False)


@pytest.mark.slow
@pytest.mark.parametrize("agent", [pytest.param("hsdag", marks=LAYER_NORM_DRIFT), "placeto"])
def test_pretraining_on_ray_gives_the_serial_models(local_ray, agent):
    pytest.importorskip("torch")
    from baselines.learning.generalize import pretrain, train_on_tasks
    from placement_gym.task.named import parse_task_id

    tasks = ["synthetic-mini-v1:regal-3/k80x4/train", "synthetic-mini-v1:regal-4/k80x4/train",
             "synthetic-mini-v1:enas-conv-5/k80x2/train"]
    config = {"hsdag": {"batch": 16, "hidden": 8}, "placeto": {"hidden": 8}}[agent]
    serial = pretrain(agent, tasks, 24, seeds=(0, 1), switch_every=8, **config)
    on_ray = pretrain(agent, tasks, 24, seeds=(0, 1), switch_every=8, backend="ray", workers=2, **config)
    small, large = sorted({parse_task_id(t).n_devices for t in tasks})  # k80x2 and k80x4 (with the host CPU)
    assert list(serial) == [(small, 0), (large, 0), (small, 1), (large, 1)] == list(on_ray)
    for key, (model, evaluators) in serial.items():
        other, other_evaluators = on_ray[key]
        assert other.task is not model.task  # trained in a worker: its own copy of the task came back
        assert _same(model.state_dict(), other.state_dict())
        assert [(e.task.id, e.used, e.best_runtime) for e in evaluators] == \
               [(e.task.id, e.used, e.best_runtime) for e in other_evaluators]
        assert all(np.array_equal(e.best_placement, o.best_placement)
                   for e, o in zip(evaluators, other_evaluators))
    # a job is the plain train_on_tasks call: the same model
    alone, _ = train_on_tasks(agent, [parse_task_id(t) for t in tasks[:2]], 24, seed=1, switch_every=8,
                              **config)
    assert _same(alone.state_dict(), serial[(large, 1)][0].state_dict())
    assert not _same(serial[(large, 0)][0].state_dict(), serial[(large, 1)][0].state_dict())
