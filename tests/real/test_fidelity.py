"""`placement_gym.real.fidelity` and the `profile` / `fidelity` commands."""

from __future__ import annotations

import json

import numpy as np
import pytest

from placement_gym.cli import main
from placement_gym.graph import load_graph
from placement_gym.real.devices import cluster_device_map
from placement_gym.real.fidelity import (
    FidelityReport,
    fidelity_placements,
    mape,
    parse_device_map,
    rebatched_graph,
    spearman,
)
from placement_gym.task.named import get_task

torch = pytest.importorskip("torch")


# --- Spearman and MAPE by hand ----------------------------------------------------------------------


def test_spearman_perfect_and_reversed():
    assert spearman([1, 2, 3, 4], [10, 20, 30, 400]) == pytest.approx(1.0)
    assert spearman([1, 2, 3, 4], [4, 3, 2, 1]) == pytest.approx(-1.0)


def test_spearman_by_hand_without_ties():
    # ranks x = 1 2 3 4 5, ranks y = 2 1 4 3 5: d^2 = 1+1+1+1+0 = 4; rho = 1 - 6*4/(5*24) = 0.8
    assert spearman([1, 2, 3, 4, 5], [20, 10, 40, 30, 50]) == pytest.approx(0.8)


def test_spearman_ties_take_average_ranks():
    # y = [1, 2, 2, 3] -> ranks 1, 2.5, 2.5, 4; x ranks 1 2 3 4 (centred: -1.5 -.5 .5 1.5 and -1.5 0 0 1.5)
    # covariance 2.25 + 0 + 0 + 2.25 = 4.5; norms sqrt(5) and sqrt(4.5): rho = 4.5 / sqrt(22.5)
    assert spearman([1, 2, 3, 4], [1, 2, 2, 3]) == pytest.approx(4.5 / np.sqrt(22.5))


def test_spearman_constant_is_nan_and_bad_input_is_an_error():
    assert np.isnan(spearman([1, 2, 3], [5, 5, 5]))
    with pytest.raises(ValueError, match="equal length"):
        spearman([1, 2], [1, 2, 3])
    with pytest.raises(ValueError, match="finite"):
        spearman([1, 2, 3], [1, np.inf, 2])


def test_mape_by_hand():
    # |110-100|/100 = 0.1, |150-200|/200 = 0.25: mean 0.175 -> 17.5 %
    assert mape([110, 150], [100, 200]) == pytest.approx(17.5)
    assert mape([3, 4], [3, 4]) == 0.0
    with pytest.raises(ValueError, match="positive"):
        mape([1, 2], [0, 1])


# --- devices, batch, placements -----------------------------------------------------------------------


def test_parse_device_map():
    assert parse_device_map("cpu:0=cpu,cpu:1=cpu") == {"cpu:0": "cpu", "cpu:1": "cpu"}
    assert parse_device_map("cpu:0=cpu, gpu:0=cuda:0") == {"cpu:0": "cpu", "gpu:0": "cuda:0"}
    for bad in ("cpu:0", "cpu:0=tpu", "cpu:0=cpu,cpu:0=cpu", ""):
        with pytest.raises(ValueError):
            parse_device_map(bad)


def test_cluster_device_map():
    from placement_gym.cluster import load_cluster

    assert cluster_device_map(load_cluster("cpu2")) == {"cpu:0": "cpu", "cpu:1": "cpu"}
    assert cluster_device_map(load_cluster("k80x2")) == {"cpu:0": "cpu", "gpu:0": "cuda:0", "gpu:1": "cuda:1"}


def test_rebatched_graph_scales_activations_not_parameters():
    graph = load_graph("cifar10_cnn")
    (name, shape), = graph.data_inputs
    half = rebatched_graph(graph, shape[0] // 2)
    assert half.data_inputs == ((name, (shape[0] // 2, *shape[1:])),)
    assert half.op_names == graph.op_names and half.sha256 == graph.sha256
    np.testing.assert_array_equal(half.param_bytes, graph.param_bytes)
    activations = ~graph.tensor_is_parameter & (graph.tensor_producer >= 0)
    np.testing.assert_allclose(half.tensor_bytes[activations] * 2, graph.tensor_bytes[activations])
    assert rebatched_graph(graph, None) is graph
    with pytest.raises(ValueError, match="batch"):
        rebatched_graph(graph, shape[0] + 1)


def test_fidelity_placements_distinct_seeded_and_single_first():
    task = get_task("cifar10_cnn", "cpu2", "inference")
    first = fidelity_placements(task, 12, seed=3)
    again = fidelity_placements(task, 12, seed=3)
    assert len(first) == 12
    assert [label for label, _ in first[:2]] == ["single:cpu:0", "single:cpu:1"]
    assert len({p.tobytes() for _, p in first}) == 12
    for (la, pa), (lb, pb) in zip(first, again, strict=True):
        assert la == lb and np.array_equal(pa, pb)
    for _, placement in first:
        task.check_placement(placement)


def test_fidelity_random_splits_cross_devices_at_every_cut():
    task = get_task("cifar10_resnet56", "cpu2", "inference")
    placements = fidelity_placements(task, 40, seed=1)
    splits = [(label, p) for label, p in placements if label.startswith("random-split")]
    assert len(splits) >= 10
    crossings = []
    for label, placement in splits:
        runs = int(label.split(":")[1])
        assert int(np.sum(placement[1:] != placement[:-1])) == runs - 1  # each run on another device
        crossings.append(runs - 1)
    # The number of runs is log-uniform: both few and many crossings occur.
    assert min(crossings) <= 3 and max(crossings) >= task.n_forward // 8


def _report(rounds: np.ndarray) -> FidelityReport:
    n = rounds.shape[1]
    measured = np.min(rounds, axis=0)
    return FidelityReport("t", None, tuple(f"p{i}" for i in range(n)), measured, measured * 2, measured,
                          np.zeros(n), (None,) * n, rounds)


def test_spearman_repeat_compares_even_and_odd_rounds():
    consistent = np.array([[1.0, 2.0, 3.0, 4.0], [1.1, 2.1, 3.1, 4.1], [0.9, 1.9, 2.9, 3.9]])
    assert _report(consistent).figures()["spearman_repeat"] == pytest.approx(1.0)
    # Rounds 0 and 2 (even) rank the placements one way, round 1 (odd) the reverse.
    reversed_odd = np.array([[1.0, 2.0, 3.0, 4.0], [4.0, 3.0, 2.0, 1.0], [1.0, 2.0, 3.0, 4.0]])
    assert _report(reversed_odd).figures()["spearman_repeat"] == pytest.approx(-1.0)
    assert np.isnan(_report(consistent[:1]).figures()["spearman_repeat"])


def test_run_fidelity_measures_every_placement_once_per_round(tmp_path):
    from placement_gym.real.fidelity import run_fidelity
    from placement_gym.real.measure import measure_profile

    task = get_task("cifar10_cnn", "cpu2", "inference")
    devices = {"cpu:0": "cpu", "cpu:1": "cpu"}
    profile = measure_profile(task.graph, devices, batch=2, repeats=1, warmup=0)
    placements = fidelity_placements(task, 3, seed=0)
    calls: list[str] = []
    report = run_fidelity(task, devices, profile, placements, batch=2, repeats=3, warmup=0,
                          progress=lambda i, label: calls.append(label))
    assert report.rounds.shape == (3, 3) and np.all(report.rounds > 0)
    assert sorted(calls) == sorted([label for label, _ in placements] * 3)
    assert np.allclose(report.measured, np.min(report.rounds, axis=0))  # the default statistic
    median = run_fidelity(task, devices, profile, placements[:2], batch=2, repeats=3, warmup=0,
                          statistic="median")
    assert np.allclose(median.measured, np.median(median.rounds, axis=0))
    assert median.figures("min")["statistic"] == "min"
    with pytest.raises(ValueError, match="statistic"):
        run_fidelity(task, devices, profile, placements, batch=2, statistic="mean")
    with pytest.raises(ValueError, match="repeats"):
        run_fidelity(task, devices, profile, placements, batch=2, repeats=0)


# --- the commands -----------------------------------------------------------------------------------


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("PLACEMENT_GYM_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache" / "profiles"


def test_profile_command_writes_a_profile_find_profile_finds(cache, capsys):
    from placement_gym.real.profile import find_profile

    graph = load_graph("cifar10_cnn")
    assert find_profile(graph, {"cpu:0": "cpu", "cpu:1": "cpu"}, batch=2) is None
    code = main(["profile", "--graph", "cifar10_cnn", "--cluster", "cpu2", "--batch", "2", "--repeats", "1",
                 "--json"])
    assert code == 0
    summary = json.loads(capsys.readouterr().out)
    found = find_profile(graph, {"cpu:0": "cpu", "cpu:1": "cpu"}, batch=2)
    assert found is not None and found["key"] == summary["key"] and summary["measured"] is True
    assert set(found["forward_s"]) == set(graph.op_names)
    # a second call reuses the cache
    assert main(["profile", "--graph", "cifar10_cnn", "--devices", "cpu:0=cpu,cpu:1=cpu", "--batch", "2",
                 "--repeats", "1", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["measured"] is False


@pytest.mark.slow
def test_fidelity_command_json_and_png(cache, tmp_path, capsys):
    png = tmp_path / "scatter.png"
    code = main(["fidelity", "--graph", "cifar10_cnn", "--cluster", "cpu2", "--batch", "2", "--samples", "4",
                 "--repeats", "1", "--out", str(png), "--json"])
    assert code == 0
    captured = capsys.readouterr()
    result = json.loads(captured.out)
    assert "measuring the profile" in captured.err  # the cache was empty: it says so
    assert result["samples"] == 4 and result["batch"] == 2
    for key in ("spearman_profiled", "spearman_analytical"):
        assert result[key] is None or -1.0 <= result[key] <= 1.0
    for key in ("mape_profiled", "mape_analytical"):
        assert result[key] >= 0.0
    assert all(row["measured_s"] > 0 for row in result["placements"])
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.parametrize("devices", ["cpu:0=tpu", "cpu0=cpu", "cpu:0=cpu,,cpu:1=cpu", "gpu:7=cuda:0"])
def test_bad_devices_exit_2_with_one_line(devices, cache, capsys):
    assert main(["fidelity", "--graph", "cifar10_cnn", "--devices", devices, "--samples", "2"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("placement-gym: error:") and "\n" not in err
    assert main(["profile", "--graph", "cifar10_cnn", "--devices", devices]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("placement-gym: error:") and "\n" not in err


@pytest.mark.slow
def test_optimizer_flag_reaches_the_profile_the_task_and_the_executor(cache, tmp_path, capsys):
    from placement_gym.real.profile import find_profile, profile_key

    graph = load_graph("cifar10_cnn")
    devices = {"cpu:0": "cpu", "cpu:1": "cpu"}
    quick = ["--graph", "cifar10_cnn", "--cluster", "cpu2", "--batch", "2", "--repeats", "1", "--json"]
    assert main(["profile", *quick, "--optimizer", "sgd"]) == 0
    summary = json.loads(capsys.readouterr().out)
    stored = json.loads(open(summary["path"]).read())
    assert summary["optimizer"] == stored["optimizer"] == "sgd"
    assert stored["key"] == profile_key(stored["graph"]["sha256"], stored["devices"], 2, "sgd")
    assert find_profile(graph, devices, batch=2, optimizer="sgd")["key"] == summary["key"]
    assert find_profile(graph, devices, batch=2, optimizer="adam") is None
    # fidelity --optimizer sgd reuses it; the default (adam) does not: it measures an adam profile.
    png = str(tmp_path / "scatter.png")
    assert main(["fidelity", *quick, "--samples", "2", "--optimizer", "sgd", "--out", png]) == 0
    captured = capsys.readouterr()
    assert "using the cached profile" in captured.err and json.loads(captured.out)["optimizer"] == "sgd"
    assert main(["fidelity", *quick, "--samples", "2", "--out", png]) == 0
    captured = capsys.readouterr()
    assert "measuring the profile" in captured.err and json.loads(captured.out)["optimizer"] == "adam"
    assert find_profile(graph, devices, batch=2, optimizer="adam")["optimizer"] == "adam"
    assert main(["profile", *quick, "--optimizer", "adagrad"]) == 2
    assert "invalid choice: 'adagrad'" in capsys.readouterr().err


def test_train_optimizer_reaches_the_real_and_profiled_evaluators(cache, tmp_path, capsys):
    from placement_gym.cli import build_parser
    from placement_gym.cli.train_command import task_and_evaluator

    parser = build_parser()
    agent = ["train", "--agent", "random-search", "--graph", "cifar10_cnn", "--cluster", "cpu2"]
    real = parser.parse_args([*agent, "--evaluator", "real", "--batch", "2", "--optimizer", "momentum"])
    task, evaluator = task_and_evaluator(real)
    assert task.optimizer == evaluator.executor.task.optimizer == "momentum"
    assert task.static_bytes.sum() == 3 * task.graph.param_bytes.sum()  # weights, gradients, velocity
    assert main(["profile", "--graph", "cifar10_cnn", "--cluster", "cpu2", "--batch", "2", "--repeats", "1",
                 "--optimizer", "sgd", "--out", str(tmp_path / "sgd.json"), "--json"]) == 0
    capsys.readouterr()
    train = [*agent, "--budget", "2", "--evaluator", "profiled", "--profile", str(tmp_path / "sgd.json"),
             "--out", str(tmp_path / "run")]
    assert main(train) == 2  # the task trains with adam (the default): the sgd profile is refused
    err = capsys.readouterr().err
    assert "optimizer 'sgd'" in err and "trains with 'adam'" in err
    _, evaluator = task_and_evaluator(parser.parse_args([*train, "--optimizer", "sgd"]))
    assert evaluator.task.optimizer == "sgd" and evaluator.profile["optimizer"] == "sgd"
