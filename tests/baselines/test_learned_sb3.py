"""The stable-baselines3 agents (`baselines.learning.sb3_agents`): learning, exact budgets, checkpoints."""

from __future__ import annotations

import json

import numpy as np
import pytest

pytest.importorskip("torch")
pytest.importorskip("stable_baselines3")

import torch  # noqa: E402

from baselines.learning import get_learned, train  # noqa: E402
from placement_gym.cli import main  # noqa: E402
from placement_gym.evaluation.budget import Budget  # noqa: E402
from placement_gym.task.named import get_task  # noqa: E402
from tests.interrupt import stopped_after  # noqa: E402
from tests.random_search import SEEDS, assert_below_random_search, random_search_control, random_search_floor  # noqa: E402

# Small rollouts so that a few hundred evaluations make several PPO updates.
SMALL = {"n_steps": 32, "batch_size": 16}


def _has_contrib() -> bool:
    try:
        import sb3_contrib  # noqa: F401
    except ImportError:
        return False
    return True


needs_contrib = pytest.mark.skipif(not _has_contrib(), reason="sb3-contrib is not installed")
AGENTS = ["sb3-ppo", pytest.param("sb3-maskable-ppo", marks=needs_contrib)]


@pytest.fixture(scope="module")
def task():
    return get_task("cifar10_cnn", "k80x2", "train_step")


@pytest.fixture(autouse=True, scope="module")
def one_thread():
    # Tiny networks: one thread is much faster on a shared machine, and results depend on it.
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def _run_by_hand(task, name: str, budget: int, **config):
    """`train`'s loop without its safety net: a BudgetExhausted raised inside SB3 would surface."""
    torch.manual_seed(0)
    agent = get_learned(name)(task, seed=0, **config)
    evaluator = Budget(task, budget)
    while evaluator.remaining > 0:
        before = evaluator.used
        agent.iteration(evaluator)
        assert evaluator.used > before
    return agent, evaluator


# One node per op (groups=None) for both: their default chains leave cifar10_cnn 5 nodes, and random
# search over those 3^5 placements finds the optimum (every op on one GPU, 15.24 ms) within a few
# hundred evaluations. One device per op, the best of 640 or 1,000 uniform placements stays above
# 32 ms on seeds 0-2. Short rollouts and lr 3e-3 learn within these budgets on every seed.
@pytest.mark.slow
@pytest.mark.parametrize(
    "name, budget, config",
    [
        pytest.param("sb3-ppo", 640, SMALL | {"learning_rate": 3e-3, "groups": None}, id="sb3-ppo"),
        pytest.param("sb3-maskable-ppo", 1000, SMALL | {"learning_rate": 3e-3, "groups": None},
                     id="sb3-maskable-ppo", marks=needs_contrib),
        *(random_search_control("random-search", budget, {"batch": SMALL["n_steps"]},
                                id=f"random-search-control-{budget}") for budget in (640, 1000)),
    ],
)
def test_training_beats_random_search_at_the_same_budget(task, name, budget, config):
    floor = random_search_floor(task, budget, SEEDS)  # a device per op, as the agents here choose
    for seed in SEEDS:
        result = train(name, task, budget, seed=seed, progress=False, **config)
        assert_below_random_search(result, floor, name, seed, budget)
        first = min(runtime for _, runtime, feasible, _ in result.curve[:SMALL["n_steps"]] if feasible)
        assert result.best_runtime < first


@pytest.mark.parametrize("budget", [1, 45])
def test_sb3_ppo_spends_the_budget_exactly(task, budget):
    agent, evaluator = _run_by_hand(task, "sb3-ppo", budget, n_steps=16, batch_size=8)
    assert evaluator.used == budget == len(evaluator.curve) == agent.env.evaluations


# cifar10_cnn has 5 chains: an episode is a reset and 5 steps, evaluations 1, 7, 13, 19 are resets.
# Budget 1 is the reset alone (0 steps); 6 ends on the step that ends an episode, whose reset cannot
# be paid (5 steps); 7 pays that reset too (5 steps); 20 ends one step into the fourth episode after
# several rollouts of 4 steps (20 - 4 resets = 16 steps).
@needs_contrib
@pytest.mark.parametrize("budget, steps", [(1, 0), (6, 5), (7, 5), (20, 16)])
def test_maskable_ppo_counts_steps_and_resets_and_spends_the_budget_exactly(task, budget, steps):
    agent, evaluator = _run_by_hand(task, "sb3-maskable-ppo", budget, n_steps=4, batch_size=2)
    assert agent.env.n_nodes == 5
    assert evaluator.used == budget == len(evaluator.curve) == agent.env.evaluations
    assert agent.model.num_timesteps == steps
    if agent.episode_open:  # the observation the next step samples from is the env's: the node it moves next
        assert np.flatnonzero(agent.watched.observation["current"]).tolist() == [agent.env.current_node]


def test_sb3_ppo_checkpoint_resumes_exactly_at_a_rollout_boundary(task, tmp_path):
    first = train("sb3-ppo", task, 64, seed=4, out_dir=tmp_path, progress=False, **SMALL)
    state = torch.load(tmp_path / "checkpoint.pt", weights_only=False)
    state["evaluator"]["budget"] = 96  # continue the same run to a larger budget
    torch.save(state, tmp_path / "checkpoint.pt")
    resumed = train("sb3-ppo", task, 96, seed=4, out_dir=tmp_path, resume=True, progress=False, **SMALL)
    straight = train("sb3-ppo", task, 96, seed=4, progress=False, **SMALL)
    assert resumed.curve[:64] == first.curve
    assert resumed.curve == straight.curve and resumed.best_runtime == straight.best_runtime


@pytest.mark.parametrize("name", AGENTS)
def test_a_run_stopped_mid_episode_resumes_exactly(task, tmp_path, name):
    """Stopped after a checkpoint whose episode is open (refine: mid-way through a sweep of the 5
    nodes, rollouts of 8 steps), the resumed run makes the evaluations of the run never stopped."""
    config = {"n_steps": 8, "batch_size": 4}
    straight = train(name, task, 70, seed=1, progress=False, **config)
    with stopped_after(name, 30):
        train(name, task, 70, seed=1, out_dir=tmp_path, progress=False, checkpoint_every=1, **config)
    state = torch.load(tmp_path / "checkpoint.pt", weights_only=False)
    assert 0 < state["evaluator"]["used"] < 70
    if name == "sb3-maskable-ppo":
        assert 0 < state["model"]["model"]["episode"]["steps"] < 5  # the checkpoint is inside an episode
    resumed = train(name, task, 70, seed=1, out_dir=tmp_path, resume=True, progress=False, **config)
    assert resumed.curve == straight.curve and resumed.best_runtime == straight.best_runtime

    del state["model"]["model"]["episode"]  # as a checkpoint written before episodes were kept
    torch.save(state, tmp_path / "checkpoint.pt")
    with pytest.raises(ValueError, match="written by an older placement-gym.*start a new run"):
        train(name, task, 70, seed=1, out_dir=tmp_path, resume=True, progress=False, **config)


def test_same_seed_same_run(task):
    runs = [train("sb3-ppo", task, 40, seed=2, progress=False, **SMALL).curve for _ in range(2)]
    assert runs[0] == runs[1]


@pytest.mark.parametrize(
    "config, message",
    [
        ({"n_steps": 8, "batch_size": 16}, "batch_size"),
        ({"learning_rate": 0.0}, "learning_rate"),
        ({"n_epochs": 1.5}, "n_epochs"),
        ({"groups": "nope"}, "groups|grouping|nope"),
        ({"gamma": 0.9}, "gamma"),
    ],
)
def test_bad_options_are_named(task, config, message):
    with pytest.raises(ValueError, match=message):
        get_learned("sb3-ppo")(task, **config)


def test_the_numpy_global_generator_is_left_alone(task):
    np.random.seed(123)
    expected = np.random.RandomState(123).random_sample(3)
    train("sb3-ppo", task, 40, seed=0, progress=False, **SMALL)
    np.testing.assert_array_equal(np.random.random_sample(3), expected)


def test_train_command_runs_sb3_ppo(tmp_path, capsys):
    argv = ["train", "--agent", "sb3-ppo", "--graph", "cifar10_cnn", "--cluster", "k80x2",
            "--budget", "64", "--out", str(tmp_path / "run"), "--json"]
    assert main(argv) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["evaluations"] == 64 and summary["agent"] == "sb3-ppo"


@pytest.mark.parametrize("agent", ["sb3-ppo", "sb3-maskable-ppo"])
def test_an_sb3_agent_trains_on_its_task_s_whole_step(agent):
    # A bf16, pipelined step: the env the agent learns in must score that step, not the fp32 one.
    from baselines.learning.sb3_agents import SB3MaskablePPOAgent, SB3PPOAgent
    from placement_gym.task.named import get_task
    from placement_gym.task.step import Step

    task = get_task("cifar10_cnn", "k80x2", Step(precision="bf16", microbatches=2, recompute=True))
    learner = {"sb3-ppo": SB3PPOAgent, "sb3-maskable-ppo": SB3MaskablePPOAgent}[agent](task, seed=0)
    assert learner._make_env().unwrapped.task.id == task.id
