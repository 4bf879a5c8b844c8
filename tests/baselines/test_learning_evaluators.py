"""Learned agents and search baselines scored by any evaluator: `Budget(evaluator=...)`,
`as_evaluator`, `train(evaluator=...)`, ``anneal``/``cem`` with ``evaluator=`` and
``placement-gym train --evaluator profiled|real``."""

from __future__ import annotations

import json

import numpy as np
import pytest
from profiles import synthetic_profile

from baselines.search import anneal, cem
from placement_gym.cli import main
from placement_gym.cost_model import simulate, simulate_batch, single_device
from placement_gym.evaluation.budget import Budget, BudgetExhausted
from placement_gym.evaluation.evaluator import as_evaluator
from placement_gym.evaluation.placements import placement_from_dict
from placement_gym.real.evaluators import ProfiledEvaluator
from placement_gym.task.named import get_task

# cpu2: the two virtual CPU devices the real mode runs everywhere; its names match the profile's.
GRAPH, CLUSTER, DEVICES = "cifar10_cnn", "cpu2", ["cpu:0", "cpu:1"]


@pytest.fixture(scope="module")
def task():
    return get_task(GRAPH, CLUSTER, "train_step")


@pytest.fixture(scope="module")
def profile(task):
    return synthetic_profile(task.graph, DEVICES, seed=1)


@pytest.fixture
def profile_file(profile, tmp_path):
    path = tmp_path / "profile.json"
    path.write_text(json.dumps(profile))
    return path


def _rows(task, n, seed=0):
    return np.random.default_rng(seed).integers(0, task.n_devices, size=(n, task.n_forward))


class CountingCostModel:
    """The plain cost model behind the evaluator interface, counting what reaches it."""

    def __init__(self, task):
        self.task = task
        self.simulate_calls = 0

    def simulate(self, placement, schedule=False):
        self.simulate_calls += 1
        return simulate(self.task, placement, schedule=schedule)


class BatchCountingCostModel(CountingCostModel):
    """Also has a batch method, as `RayEvaluatorPool` does: batches must go to it, in one call."""

    def __init__(self, task):
        super().__init__(task)
        self.batch_calls = self.batch_rows = 0

    def evaluate_batch(self, placements):
        self.batch_calls += 1
        self.batch_rows += len(placements)
        return simulate_batch(self.task, placements)


# ---------------------------------------------------------------------------------------------------
# Budget and as_evaluator


def test_profiled_evaluator_gives_the_profiled_task_s_results(task, profile):
    profiled = ProfiledEvaluator(task, profile)
    budgeted = Budget(task, 7, profiled)
    rows = _rows(task, 5)
    runtimes, feasible = budgeted.evaluate(rows)
    expected = [simulate(profiled.task, row) for row in rows]
    assert runtimes.tolist() == [r.runtime for r in expected]
    assert feasible.tolist() == [r.feasible for r in expected]
    # the profile's made-up op times are not the analytical model's: the test can tell them apart
    assert runtimes.tolist() != [simulate(task, row).runtime for row in rows]
    one = budgeted.simulate(rows[0], schedule=True)
    assert one.runtime == expected[0].runtime and one.schedule is not None
    assert budgeted.used == 6 and budgeted.scored_by == "profiled"
    best = int(np.argmin(np.where(feasible, runtimes, np.inf)))
    assert budgeted.best_runtime == expected[best].runtime
    np.testing.assert_array_equal(budgeted.best_placement, rows[best])
    # the reference runtime is on the profiled scale too, and costs no budget
    assert budgeted.best_single_runtime == single_device(profiled.task).runtime
    assert budgeted.used == 6


@pytest.mark.parametrize("wrapper", [CountingCostModel, BatchCountingCostModel])
def test_a_wrapped_cost_model_gives_the_default_numbers(task, wrapper):
    evaluator = wrapper(task)
    wrapped, default = Budget(task, 20, evaluator), Budget(task, 20)
    rows = _rows(task, 6, seed=2)
    for budgeted in (wrapped, default):
        budgeted.evaluate(rows)
        budgeted.evaluate(rows[3])
        budgeted.simulate(rows[4])
    assert wrapped.curve == default.curve and wrapped.best_runtime == default.best_runtime
    np.testing.assert_array_equal(wrapped.best_placement, default.best_placement)
    if wrapper is BatchCountingCostModel:  # each evaluate is one batch call; simulate is one call
        assert (evaluator.batch_calls, evaluator.batch_rows, evaluator.simulate_calls) == (2, 7, 1)
    else:  # one simulate per row
        assert evaluator.simulate_calls == 6 + 1 + 1
    # the reference: the cost model's best single device, evaluated once through the evaluator
    calls = evaluator.simulate_calls
    assert wrapped.best_single_runtime == default.best_single_runtime
    assert evaluator.simulate_calls == calls + 1 and wrapped.used == 8


def test_the_budget_is_checked_before_the_evaluator_is_called(task):
    evaluator = CountingCostModel(task)
    budgeted = Budget(task, 3, evaluator)
    with pytest.raises(BudgetExhausted):
        budgeted.evaluate(_rows(task, 4))
    assert evaluator.simulate_calls == 0 and budgeted.used == 0
    budgeted.evaluate(_rows(task, 3))
    with pytest.raises(BudgetExhausted):
        budgeted.simulate(_rows(task, 1)[0])
    assert evaluator.simulate_calls == 3


def test_adapted_batch_shapes_and_bad_evaluators(task):
    rows = _rows(task, 4, seed=3)
    adapted = as_evaluator(task, CountingCostModel(task))
    for got, expected in zip(adapted.simulate_batch(rows), simulate_batch(task, rows)):
        assert got.shape == expected.shape
        np.testing.assert_array_equal(got, expected)

    class ShortBatch(CountingCostModel):
        def evaluate_batch(self, placements):
            return simulate_batch(self.task, placements[:1])

    with pytest.raises(ValueError, match="answered 1 runtimes for 4 rows"):
        as_evaluator(task, ShortBatch(task)).simulate_batch(rows)
    with pytest.raises(ValueError, match="simulate"):
        Budget(task, 5, object())
    other = get_task(GRAPH, "k80x4", "train_step")
    with pytest.raises(ValueError, match="scores task cifar10_cnn/k80x4/train"):
        Budget(task, 5, CountingCostModel(other))


# ---------------------------------------------------------------------------------------------------
# The search baselines


@pytest.mark.parametrize("search", [anneal, cem])
def test_searches_route_every_evaluation_through_the_evaluator(task, search):
    evaluator = CountingCostModel(task)
    start = np.zeros(task.n_forward, dtype=np.int64)  # a given start: no start agent evaluates
    routed = search(task, seed=3, budget=90, start=start, evaluator=evaluator)
    default = search(task, seed=3, budget=90, start=start)
    assert evaluator.simulate_calls == routed.evaluations == default.evaluations
    # the same model behind the evaluator: the same search, step for step
    np.testing.assert_array_equal(routed.placement, default.placement)
    assert routed.info.pop("scored_by") == "CountingCostModel"
    assert routed.info == default.info


def test_anneal_optimises_what_the_evaluator_scores(task, profile):
    profiled = ProfiledEvaluator(task, profile)
    start = np.zeros(task.n_forward, dtype=np.int64)
    result = anneal(task, seed=0, budget=120, start=start, evaluator=profiled)
    assert result.info["scored_by"] == "profiled"
    assert result.info["runtime"] == simulate(profiled.task, result.placement).runtime
    assert result.info["start_runtime"] == simulate(profiled.task, start).runtime
    assert result.info["runtime"] <= result.info["start_runtime"]


# ---------------------------------------------------------------------------------------------------
# train and the train command


def test_train_with_an_evaluator_reports_what_scored_it(task, profile, tmp_path):
    pytest.importorskip("torch")
    from baselines.learning import train

    profiled = ProfiledEvaluator(task, profile)
    result = train("random-search", task, 40, seed=1, out_dir=tmp_path, progress=False, batch=16,
                   evaluator=profiled)
    assert result.scored_by == "profiled" and result.evaluations == 40
    assert result.best_runtime == simulate(profiled.task, result.best_placement).runtime
    assert result.to_dict(task)["scored_by"] == "profiled"
    assert json.loads((tmp_path / "best_placement.json").read_text())["scored_by"] == "profiled"
    # a run scored by one model does not continue with another
    with pytest.raises(ValueError, match="scored by profiled"):
        train("random-search", task, 60, seed=1, out_dir=tmp_path, resume=True, progress=False, batch=16)


def test_a_run_does_not_continue_under_another_profile_or_other_devices(task, profile, tmp_path):
    pytest.importorskip("torch")
    from baselines.learning import train

    train("random-search", task, 40, seed=1, out_dir=tmp_path, progress=False, batch=16,
          evaluator=ProfiledEvaluator(task, profile))
    # the same kind of model with other measurements gives other numbers for the same placements
    other = ProfiledEvaluator(task, synthetic_profile(task.graph, DEVICES, seed=2))
    with pytest.raises(ValueError, match="other profiled figures"):
        train("random-search", task, 60, seed=1, out_dir=tmp_path, resume=True, progress=False, batch=16,
              evaluator=other)
    train("random-search", task, 60, seed=1, out_dir=tmp_path, resume=True, progress=False, batch=16,
          evaluator=ProfiledEvaluator(task, profile))  # the same measurements continue

    from placement_gym.evaluation.evaluator import make_evaluator

    devices = dict.fromkeys(DEVICES, "cpu")
    def budgeted(batch: int) -> Budget:
        return Budget(task, 10, make_evaluator(task, "real", devices=devices, batch=batch))

    state = budgeted(2).state_dict()
    with pytest.raises(ValueError, match=r"other real figures \(options"):
        budgeted(4).load_state_dict(state)  # measured at another batch
    budgeted(2).load_state_dict(state)


def test_train_command_with_the_profiled_model(task, profile_file, tmp_path, capsys):
    pytest.importorskip("torch")
    argv = ["train", "--agent", "random-search", "--graph", GRAPH, "--cluster", CLUSTER,
            "--evaluator", "profiled", "--profile", str(profile_file), "--budget", "24", "--quiet"]
    assert main([*argv, "--out", str(tmp_path / "json"), "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["scored_by"] == "profiled" and summary["evaluations"] == 24
    profiled = ProfiledEvaluator(task, profile_file)
    best = placement_from_dict(task, summary["best_placement"])
    assert summary["best_runtime"] == simulate(profiled.task, best).runtime
    assert main([*argv, "--out", str(tmp_path / "table")]) == 0
    assert "best runtime (profiled cost model)" in capsys.readouterr().out


def test_train_command_with_real_runs_on_two_virtual_cpu_devices(tmp_path, capsys):
    pytest.importorskip("torch")
    argv = ["train", "--agent", "random-search", "--graph", GRAPH, "--evaluator", "real",
            "--devices", "cpu:0=cpu,cpu:1=cpu", "--batch", "2", "--budget", "2", "--out", str(tmp_path)]
    assert main([*argv, "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    # --devices alone names the cluster of its virtual CPU devices, cpu2
    assert summary["task"] == f"{GRAPH}/{CLUSTER}/train" and summary["scored_by"] == "real"
    assert summary["evaluations"] == 2 and summary["best_runtime"] > 0


@pytest.mark.parametrize(
    "extra, message",
    [
        (["--evaluator", "real"], "--evaluator real needs --devices"),
        (["--evaluator", "profiled"], "--profile FILE"),  # nothing in the (empty) profile cache
        (["--profile", "p.json"], "--profile is for --evaluator profiled"),
        (["--devices", "cpu:0=cpu,cpu:1=cpu"], "--devices is for --evaluator profiled or real"),
        (["--evaluator", "profiled", "--batch", "2"], "--batch is for --evaluator real"),
        (["--evaluator", "fast"], "invalid choice"),
    ],
)
def test_train_command_missing_or_misplaced_options(extra, message, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("PLACEMENT_GYM_CACHE", str(tmp_path))
    assert main(["train", "--agent", "random-search", "--graph", GRAPH, *extra]) == 2
    error = capsys.readouterr().err.strip()
    assert message in error and len(error.splitlines()) == 1


def test_the_old_flag_name_still_scores_and_warns_with_its_replacement(tmp_path, capsys):
    base = ["train", "--agent", "random-search", "--graph", GRAPH, "--budget", "4", "--json"]
    results = []
    for flag in ("--reward-mode", "--evaluator"):
        assert main([*base, flag, "cost_model", "--out", str(tmp_path / flag.strip("-"))]) == 0
        captured = capsys.readouterr()
        results.append((json.loads(captured.out), captured.err))
    (old, old_err), (new, new_err) = results
    assert "--reward-mode is deprecated; give --evaluator cost_model" in old_err
    assert "deprecated" not in new_err
    assert old["best_runtime"] == new["best_runtime"] and old["scored_by"] == new["scored_by"]


# ---------------------------------------------------------------------------------------------------
# A Ray pool behind the same door (one local actor; skipped without Ray)


@pytest.mark.slow
def test_a_ray_pool_serves_the_search_and_the_budgeted_evaluator(task):
    pytest.importorskip("ray")
    from placement_gym.real.distributed import RayEvaluatorPool

    start = np.zeros(task.n_forward, dtype=np.int64)
    spec = f"{GRAPH}/{CLUSTER}/train"
    with RayEvaluatorPool(spec, n_actors=1, reward_mode="cost_model", num_cpus=1) as pool:
        routed = cem(task, seed=2, budget=60, start=start, evaluator=pool)
        budgeted = Budget(task, 10, pool)
        budgeted.evaluate(_rows(task, 10))
        assert sum(s["evaluations"] for s in pool.actor_stats()) == routed.evaluations + 10
    default = cem(task, seed=2, budget=60, start=start)
    np.testing.assert_array_equal(routed.placement, default.placement)
    assert routed.info["scored_by"] == "cost_model"  # the pool's own reward mode
    reference = Budget(task, 10)
    reference.evaluate(_rows(task, 10))
    assert budgeted.curve == reference.curve
