"""Budgets are measured, not taken on trust: every evaluation of a task counts on the task
(`Task.evaluations`), the leaderboard harness records what an agent really evaluated of its own
copy of the task, and ``leaderboard validate --rerun`` re-runs a seeded entry bit for bit."""

from __future__ import annotations

import copy
import dataclasses
import json
from types import SimpleNamespace

import numpy as np
import pytest
from profiles import synthetic_profile

from baselines.registry import harness_agent
from placement_gym.cli import main
from placement_gym.cost_model import reference_simulate, simulate, simulate_batch, single_device
from placement_gym.envs.single_shot import DevicePlacementEnv
from placement_gym.evaluation import agents
from placement_gym.evaluation.budget import Budget
from placement_gym.evaluation.placements import round_robin_placement
from placement_gym.leaderboard import evaluate, get_suite, save_submission
from placement_gym.leaderboard.rerun import rerun_submission
from placement_gym.real.evaluators import ProfiledEvaluator
from placement_gym.task.cache import registered_caches
from placement_gym.task.named import parse_task_id

SMALL = "cifar10_cnn/k80x2/train"  # 65 forward ops, 3 devices
SMALL_2 = "resnet50/cpu-igpu/inference"
# v1's files write placements as {op name: device name}, which a test here edits.
SUITE = "v1"


def fresh_task():
    """A task no other test has evaluated (the cached one is shared by the whole session)."""
    return parse_task_id(SMALL).independent_copy()


def harness_entry(agent, task_id=SMALL, **options):
    data = evaluate(agent, get_suite(SUITE).subset([task_id]), algorithm="budgets", authors=["tests"],
                    **options)
    return data["results"][task_id]


def rows(task, n, seed=0):
    return np.random.default_rng(seed).integers(0, task.n_devices, size=(n, task.n_forward))


# --- the harness records what the agent evaluated -----------------------------------------------------


def test_a_bare_placement_is_recorded_with_the_37_simulations_made_for_it():
    def agent(task, seed, budget):
        for row in rows(task, 37):
            simulate(task, row)
        return np.zeros(task.n_forward, dtype=np.int64)

    entry = harness_entry(agent)
    assert entry["evaluations"] == 37 and entry["trained_on_task"] is True


def test_batch_rows_and_env_steps_count_one_each():
    def agent(task, seed, budget):
        simulate_batch(task, rows(task, 10))
        env = DevicePlacementEnv(graph=task, cluster=task.cluster)
        env.reset(seed=seed)
        env.step(np.ones(task.n_forward, dtype=np.int64))
        return np.ones(task.n_forward, dtype=np.int64)

    entry = harness_entry(agent)
    assert entry["evaluations"] == 11 and entry["trained_on_task"] is True


def test_a_reported_count_is_replaced_by_the_measured_one():
    def agent(task, seed, budget):
        for row in rows(task, 3):
            simulate(task, row)
        return SimpleNamespace(placement=np.zeros(task.n_forward, dtype=np.int64), evaluations=5000)

    def modest_agent(task, seed, budget):
        simulate(task, np.zeros(task.n_forward, dtype=np.int64))
        return SimpleNamespace(placement=np.zeros(task.n_forward, dtype=np.int64), evaluations=0)

    assert harness_entry(agent)["evaluations"] == 3
    entry = harness_entry(modest_agent)
    assert entry["evaluations"] == 1 and entry["trained_on_task"] is True


def test_evaluations_of_the_cached_task_reached_by_name_count_too():
    def agent(task, seed, budget):
        shared = parse_task_id(task.id)
        for row in rows(task, 5):
            simulate(shared, row)
        single_device(shared)  # the reference figures are already there: not an evaluation
        return np.zeros(task.n_forward, dtype=np.int64)

    entry = harness_entry(agent)
    assert entry["evaluations"] == 5 and entry["trained_on_task"] is True


def test_an_agent_that_evaluates_nothing_is_recorded_with_0_evaluations():
    def agent(task, seed, budget):
        # The reference figures every env reports are computed before the agent gets its copy.
        assert single_device(task).runtime > 0
        return round_robin_placement(task)

    entry = harness_entry(agent)
    assert entry["evaluations"] == 0 and entry["trained_on_task"] is False
    assert harness_entry(agent, trained_on=[SMALL])["trained_on_task"] is True


def test_what_an_agent_writes_into_its_task_s_arrays_does_not_change_the_score():
    placement = np.zeros(parse_task_id(SMALL).n_forward, dtype=np.int64)
    honest = harness_entry(lambda task, seed, budget: placement)

    def writer(task, seed, budget):
        task.duration.setflags(write=True)
        task.duration[:] *= 0.5
        task.cluster.link_latency.setflags(write=True)
        task.cluster.link_latency[:] = 1e-9
        object.__setattr__(task, "static_bytes", np.zeros_like(task.static_bytes))
        return placement

    entry = harness_entry(writer)
    assert entry["runtime"] == honest["runtime"] == simulate(parse_task_id(SMALL), placement).runtime
    assert entry["evaluations"] == 0


def test_what_an_agent_writes_into_its_task_s_caches_does_not_change_the_score():
    placement = np.zeros(parse_task_id(SMALL).n_forward, dtype=np.int64)
    honest = harness_entry(lambda task, seed, budget: placement)

    def cache_writer(task, seed, budget):
        simulate(task, placement)  # builds the simulator's arrays in the cache
        cache = registered_caches()["fast_arrays"]
        arrays = list(cache.peek(task))
        arrays[1] = arrays[1] * 0.5  # every op twice as fast
        cache.put(task, tuple(arrays))
        return placement

    entry = harness_entry(cache_writer)
    assert entry["runtime"] == honest["runtime"]
    assert entry["evaluations"] == 1


def test_an_agent_that_changes_the_shared_task_by_name_is_refused():
    shared = parse_task_id(SMALL)
    original = shared.duration

    def cheat(task, seed, budget):
        object.__setattr__(parse_task_id(task.id), "duration", original * 0.5)
        return np.zeros(task.n_forward, dtype=np.int64)

    try:
        with pytest.raises(RuntimeError, match="modified task"):
            harness_entry(cheat)
    finally:
        object.__setattr__(shared, "duration", original)


# --- every way to evaluate counts on the task ----------------------------------------------------------


def test_simulate_batch_and_the_reference_count_on_the_task():
    task = fresh_task()
    placement = np.zeros(task.n_forward, dtype=np.int64)
    simulate(task, placement)
    simulate(task, placement, schedule=True)
    simulate_batch(task, rows(task, 7))
    reference_simulate(task, placement)
    assert task.evaluations == 1 + 1 + 7 + 1
    with pytest.raises(ValueError, match="out of range"):
        simulate(task, np.full(task.n_forward, 99))
    assert task.evaluations == 10  # a placement refused is not an evaluation


def test_derived_tasks_share_the_counter_and_an_independent_copy_does_not():
    task = fresh_task()
    placement = np.zeros(task.n_forward, dtype=np.int64)
    simulate(dataclasses.replace(task), placement)
    simulate(copy.deepcopy(task), placement)
    simulate(copy.copy(task), placement)
    assert task.evaluations == 3
    independent = task.independent_copy()
    assert independent.evaluations == 0
    simulate(independent, placement)
    assert independent.evaluations == 1 and task.evaluations == 3
    # Its arrays are its own, read-only as the original's.
    assert not independent.duration.flags.writeable and not independent.cluster.link_latency.flags.writeable
    assert not np.shares_memory(independent.duration, task.duration)
    assert not np.shares_memory(independent.graph.flops, task.graph.flops)


def test_a_profiled_task_counts_for_its_task():
    task = fresh_task()
    profile = synthetic_profile(task.graph, list(task.cluster.device_names), seed=1)
    evaluator = ProfiledEvaluator(task, profile)
    evaluator.simulate(np.zeros(task.n_forward, dtype=np.int64))
    simulate_batch(evaluator.task, rows(task, 4))
    assert task.evaluations == 5


def test_the_budgeted_evaluator_counts_every_row_once_on_its_task():
    task = fresh_task()
    budgeted = Budget(task, 100)
    budgeted.evaluate(rows(task, 12))  # one simulate_batch call
    budgeted.evaluate(rows(task, 3))  # three simulate calls
    budgeted.simulate(np.zeros(task.n_forward, dtype=np.int64))
    assert task.evaluations == budgeted.used == 16

    class Outside:
        """A third-party evaluator that scores on a task of its own."""

        def __init__(self):
            self.task = parse_task_id(SMALL).independent_copy()

        def simulate(self, placement, schedule=False):
            return simulate(self.task, placement, schedule=schedule)

    task = fresh_task()
    budgeted = Budget(task, 100, Outside())
    budgeted.evaluate(rows(task, 5))
    budgeted.simulate(np.zeros(task.n_forward, dtype=np.int64))
    assert task.evaluations == budgeted.used == 6


def test_a_real_run_counts_on_its_task():
    pytest.importorskip("torch")
    from placement_gym.evaluation.evaluator import make_evaluator
    from placement_gym.real.devices import virtual_cpu_cluster
    from placement_gym.task.compiled import make_task

    task = make_task(parse_task_id(SMALL).graph, virtual_cpu_cluster(2), "inference")
    devices = {name: "cpu" for name in task.cluster.device_names}
    evaluator = make_evaluator(task, "real", devices=devices, batch=2)
    evaluator.simulate(np.arange(task.n_forward) % 2)
    assert task.evaluations == 1


@pytest.mark.slow
def test_a_ray_pool_counts_on_the_task_it_is_given():
    pytest.importorskip("ray")
    from placement_gym.real.distributed import RayEvaluatorPool

    task = fresh_task()
    with RayEvaluatorPool(SMALL, n_actors=1, reward_mode="cost_model", num_cpus=1, task=task) as pool:
        pool.simulate(np.zeros(task.n_forward, dtype=np.int64))
        pool.evaluate_batch(rows(task, 4))
        assert task.evaluations == 5
        # Used for another task (as a pool built by name is), the pool counts on its own task and the
        # budgeted evaluator adds the rows to the task it evaluates for.
        other = fresh_task()
        Budget(other, 10, pool).evaluate(rows(other, 3))
        assert other.evaluations == 3 and task.evaluations == 8
    with pytest.raises(ValueError, match="must be the task of task_spec"):
        RayEvaluatorPool(SMALL, n_actors=1, reward_mode="cost_model", num_cpus=1,
                         task=parse_task_id(SMALL_2))


def test_an_env_refuses_a_task_with_another_cluster_given():
    task = fresh_task()
    with pytest.raises(ValueError, match="compiled task .* cluster='p100x4' is not the task's"):
        DevicePlacementEnv(graph=task, cluster="p100x4")
    assert DevicePlacementEnv(graph=task, cluster=task.cluster).task is task


# --- validate --rerun -----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def heft_entry(tmp_path_factory):
    """A seeded HEFT entry on two small tasks, made as baselines/leaderboard_fill/classic.py makes them."""
    data = evaluate(harness_agent("heft"), get_suite(SUITE).subset([SMALL, SMALL_2]),
                    algorithm="heft", authors=["tests"])
    return save_submission(data, tmp_path_factory.mktemp("rerun") / f"{SUITE}-heft-seed0.json")


def test_agents_are_found_through_the_entry_point_group():
    assert agents.leaderboard_agent("heft") is not None
    with pytest.raises(ValueError, match="no agent provider .* knows algorithm 'nonesuch'"):
        agents.leaderboard_agent("nonesuch")
    with pytest.raises(ValueError, match="cannot be re-run bit for bit"):
        agents.leaderboard_agent("exact")


def test_rerun_reproduces_a_seeded_entry(heft_entry, capsys):
    assert main(["leaderboard", "validate", "--rerun", str(heft_entry)]) == 0
    out = capsys.readouterr().out
    assert "reproduced on 2 task(s)" in out and "placements bit for bit and evaluation counts" in out


def test_rerun_fails_on_one_changed_placement(heft_entry, tmp_path, capsys):
    data = json.loads(heft_entry.read_text())
    placement = data["results"][SMALL_2]["placement"]
    op = next(iter(placement))
    devices = parse_task_id(SMALL_2).cluster.device_names
    placement[op] = next(d for d in devices if d != placement[op])
    changed = save_submission(data, tmp_path / "changed.json")
    assert main(["leaderboard", "validate", "--rerun", str(changed)]) == 1
    err = capsys.readouterr().err
    assert f"first differing task {SMALL_2}" in err and "placement differs on 1 of" in err and op in err
    verdicts = {t.task_id: t.ok for t in rerun_submission(changed).tasks}
    assert verdicts == {SMALL: True, SMALL_2: False}


def test_rerun_fails_on_a_changed_evaluation_count(heft_entry, tmp_path, capsys):
    data = json.loads(heft_entry.read_text())
    data["results"][SMALL]["evaluations"] += 1
    changed = save_submission(data, tmp_path / "changed.json")
    assert main(["leaderboard", "validate", "--rerun", str(changed), "--tasks", SMALL]) == 1
    assert "in the file" in capsys.readouterr().err


def test_rerun_at_another_budget_compares_two_runs(tmp_path, capsys):
    data = evaluate(harness_agent("anneal"), get_suite(SUITE).subset([SMALL]), budget=40,
                    algorithm="anneal", authors=["tests"], seed=3)
    path = save_submission(data, tmp_path / "anneal.json")
    assert main(["leaderboard", "validate", "--rerun", str(path), "--budget", "20", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["budget"] == 20 and "second re-run at budget 20" in report["compared_with"]
    assert report["tasks"][0]["evaluations"] <= 20


@pytest.mark.parametrize("arguments, message", [
    (["--tasks", SMALL], "--tasks, --budget and --record are options of --rerun"),
    (["--rerun", "{file}", "--tasks", "bert_base/v100x8/train"], "the tasks of"),
    (["--rerun", "{file}", "extra.json"], "--rerun takes one file"),
])
def test_rerun_usage_errors_exit_2(heft_entry, arguments, message, capsys):
    arguments = [a.replace("{file}", str(heft_entry)) for a in arguments]
    assert main(["leaderboard", "validate", *arguments]) == 2
    assert message in capsys.readouterr().err
