"""The GNN placers `placeto` and `hsdag`, their message passing and `train_generalize`."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from baselines.learning import get_learned, train  # noqa: E402
from baselines.learning.generalize import train_generalize  # noqa: E402
from baselines.learning.gnn import DagEncoder, graph_inputs, sample_categorical  # noqa: E402
from placement_gym.cost_model import single_device  # noqa: E402
from placement_gym.evaluation.budget import Budget  # noqa: E402
from placement_gym.task.compiled import make_task  # noqa: E402
from placement_gym.task.named import get_task  # noqa: E402
from tests.conftest import hand_cluster, hand_graph  # noqa: E402
from tests.interrupt import stopped_after  # noqa: E402
from tests.random_search import (  # noqa: E402
    SEEDS,
    assert_below_random_search,
    random_search,
    random_search_control,
    random_search_floor,
)

AGENTS = ("placeto", "hsdag")
# Small, fast settings for the tests (the defaults are for real runs).
SMALL = {"placeto": {"batch": 4, "hidden": 16}, "hsdag": {"batch": 16, "hidden": 16}}


@pytest.fixture(scope="module")
def cifar():
    return get_task("cifar10_cnn", "k80x2", "train_step")


def diamond_task():
    """a -> b, a -> c, b -> d, c -> d: no chain to merge, so every op is its own node."""
    ops = [("a", 1e9, 1e6, 0), ("b", 1e9, 1e6, 0), ("c", 1e9, 1e6, 0), ("d", 1e9, 1e6, 0)]
    edges = [("a", "b"), ("a", "c"), ("b", "d"), ("c", "d")]
    return make_task(hand_graph(ops, edges, name="diamond"), hand_cluster(2), "inference")


# --- message passing -------------------------------------------------------------------------------


def test_graph_inputs_of_a_diamond_follow_its_edges():
    graph = graph_inputs(diamond_task(), "chains")
    assert graph.n_nodes == 4
    assert sorted(zip(graph.src.tolist(), graph.dst.tolist())) == [(0, 1), (0, 2), (1, 3), (2, 3)]
    # d has two parents, a two children, b and c one of each
    assert graph.in_scale.squeeze(1).tolist() == [1.0, 1.0, 1.0, 0.5]
    assert graph.out_scale.squeeze(1).tolist() == [0.5, 1.0, 1.0, 1.0]
    assert torch.allclose(graph.work_share.sum(), torch.tensor(1.0))


def test_chain_coarsening_merges_a_chain_into_one_node():
    ops = [("a", 1e9, 1e6, 0), ("b", 1e9, 1e6, 0), ("c", 1e9, 1e6, 0)]
    task = make_task(hand_graph(ops, [("a", "b"), ("b", "c")], name="chain"), hand_cluster(2), "inference")
    assert graph_inputs(task, "chains").n_nodes == 1
    assert graph_inputs(task, None).n_nodes == 3


def test_messages_travel_one_hop_per_round():
    """With one round, the source's embedding depends only on itself and its children (b, c), not on
    the sink d two hops away; with two rounds it depends on d too."""
    graph = graph_inputs(diamond_task(), None)
    torch.manual_seed(0)
    for rounds, d_reaches_a in ((1, False), (2, True)):
        encoder = DagEncoder(graph.features.shape[1], hidden=8, rounds=rounds)
        x = graph.features[None].clone().requires_grad_(True)
        # a weighted sum: a plain sum of a LayerNorm output is a constant with no gradient
        (encoder(x, graph)[0, 0] * torch.arange(1.0, 9.0)).sum().backward()
        grad = x.grad[0].abs().sum(dim=1)
        assert grad[1] > 0 and grad[2] > 0
        assert (grad[3] > 0) == d_reaches_a


def test_encoder_is_equivariant_to_node_order():
    """Renumbering the nodes (and the edges with them) permutes the embeddings the same way."""
    graph = graph_inputs(diamond_task(), None)
    torch.manual_seed(1)
    encoder = DagEncoder(graph.features.shape[1], hidden=8, rounds=2)
    h = encoder(graph.features[None], graph)[0]
    perm = torch.tensor([3, 1, 0, 2])  # new node i is old node perm[i]
    new_of_old = torch.argsort(perm)
    swapped = type(graph)(**{**graph.__dict__, "features": graph.features[perm], "src": new_of_old[graph.src],
                             "dst": new_of_old[graph.dst], "in_scale": graph.in_scale[perm],
                             "out_scale": graph.out_scale[perm]})
    h_swapped = encoder(swapped.features[None], swapped)[0]
    assert torch.allclose(h_swapped, h[perm], atol=1e-5)


def test_sample_categorical_follows_the_probabilities():
    rng = np.random.default_rng(0)
    probs = np.array([0.0, 0.25, 0.75])
    draws = sample_categorical(np.broadcast_to(probs, (20000, 3)), rng)
    assert not np.any(draws == 0)
    assert abs(np.mean(draws == 2) - 0.75) < 0.02


# --- training --------------------------------------------------------------------------------------


# One node per op (groups=None): with chains cifar10_cnn has 5 nodes, and random search over those 3^5
# placements finds the optimum (every op on one GPU, 25.63 ms; the CPU alone takes 129.93 ms) within
# these budgets. One device per op (3^30 placements), the best of 480 or 1,000 uniform placements
# stays at or above 44.42 ms (1.73x the optimum) on seeds 0-2. At the default learning rate (3e-3) the
# agents do not beat that on every seed (placeto with batch 4, 1,000 evaluations: 49.80 ms on seed 2;
# hsdag, 240 evaluations: 45.17 ms on seed 1); with the settings below both reach the optimum on each
# of seeds 0-15.
@pytest.mark.parametrize(
    "agent, budget, config",
    [
        pytest.param(
            "placeto", 1000, SMALL["placeto"] | {"batch": 8, "learning_rate": 1e-2, "groups": None},
            id="placeto",
        ),
        pytest.param("hsdag", 480, SMALL["hsdag"] | {"learning_rate": 1e-2, "groups": None}, id="hsdag"),
        random_search_control("random-search", 1000, {}, id="random-search-control-1000"),
        random_search_control("random-search", 480, {}, id="random-search-control-480"),
    ],
)
def test_training_beats_random_search_at_the_same_budget(cifar, agent, budget, config):
    floor = random_search_floor(cifar, budget, SEEDS)  # a device per op, as the agents here choose
    for seed in SEEDS:
        result = train(agent, cifar, budget, seed=seed, progress=False, **config)
        assert_below_random_search(result, floor, agent, seed, budget)
        first_batch = config.get("batch", 1)
        first_best = min(runtime for _, runtime, ok, _ in result.curve[:first_batch] if ok)
        assert result.best_runtime < first_best


@pytest.mark.parametrize("agent", AGENTS)
def test_budget_is_spent_exactly_when_not_a_multiple_of_the_batch(cifar, agent):
    result = train(agent, cifar, 23, seed=3, progress=False, **SMALL[agent])
    assert result.evaluations == 23 and len(result.curve) == 23


@pytest.mark.parametrize("agent", AGENTS)
def test_resumed_training_matches_an_uninterrupted_run(cifar, agent, tmp_path):
    """A run stopped after a checkpoint and resumed makes the same evaluations as one never stopped
    (the trainer keeps the budget of the checkpoint, so the stop is an interruption)."""
    config = SMALL[agent] | {"batch": 3}
    whole = train(agent, cifar, 40, seed=5, progress=False, **config)
    interrupted = _train_interrupted(agent, cifar, 40, 20, 5, tmp_path, config)
    assert interrupted.best_runtime == whole.best_runtime
    assert interrupted.curve == whole.curve


def _train_interrupted(agent, task, budget, stop_at, seed, out_dir, config):
    """Train with checkpoints, stop after about ``stop_at`` evaluations, resume to ``budget``."""
    with stopped_after(agent, stop_at):
        train(agent, task, budget, seed=seed, out_dir=out_dir, progress=False, checkpoint_every=1, **config)
    return train(agent, task, budget, seed=seed, out_dir=out_dir, resume=True, progress=False, **config)


@pytest.mark.parametrize("agent", AGENTS)
def test_same_seed_same_run(cifar, agent):
    a = train(agent, cifar, 30, seed=2, progress=False, **SMALL[agent])
    b = train(agent, cifar, 30, seed=2, progress=False, **SMALL[agent])
    assert a.curve == b.curve


def test_placeto_pays_one_evaluation_per_visit(cifar):
    """One iteration of a fresh agent: ``batch`` starting placements, then ``batch`` per step."""
    cls = get_learned("placeto")
    torch.manual_seed(0)
    agent = cls(cifar, seed=0, batch=3, steps_per_update=2, hidden=8)
    evaluator = Budget(cifar, 1000)
    agent.iteration(evaluator)
    assert evaluator.used == 3 + 3 * min(2, agent.graph.n_nodes)


def test_placeto_rewards_sum_to_the_episode_improvement(cifar):
    """Within one window the rewards telescope: their sum is (R_start - R_end) / best single."""
    cls = get_learned("placeto")
    torch.manual_seed(0)
    n_nodes = graph_inputs(cifar, "chains").n_nodes
    agent = cls(cifar, seed=0, batch=2, steps_per_update=n_nodes, hidden=8)
    evaluator = Budget(cifar, 1000)
    stats = agent.iteration(evaluator)
    runtimes = np.array([row[1] for row in evaluator.curve])
    start, end = runtimes[:2], runtimes[-2:]
    best = single_device(cifar).runtime
    assert stats["mean_reward"] * n_nodes * 2 == pytest.approx(((start - end) / best).sum())


@pytest.mark.parametrize("agent", AGENTS)
def test_set_task_keeps_weights_and_rejects_other_device_counts(cifar, agent):
    cls = get_learned(agent)
    torch.manual_seed(0)
    model = cls(cifar, seed=0, hidden=8)
    weights = [p.detach().clone() for p in model.policy.parameters()]
    other = get_task("cifar10_resnet56", "k80x2", "train_step")
    model.set_task(other)
    assert all(torch.equal(a, b) for a, b in zip(weights, model.policy.parameters()))
    placements = model.propose(3)
    assert placements.shape == (3, other.n_forward)
    assert placements.min() >= 0 and placements.max() < other.n_devices
    with pytest.raises(ValueError, match="same number of devices"):
        model.set_task(get_task("cifar10_cnn", "k80x4", "train_step"))


@pytest.mark.parametrize("agent", AGENTS)
def test_bad_config_is_a_clear_error(cifar, agent):
    with pytest.raises(ValueError, match="batch"):
        get_learned(agent)(cifar, batch=0)
    with pytest.raises(ValueError, match="no option"):
        get_learned(agent)(cifar, bogus=1)


def heavy_weights_task():
    """A GPU that holds none of four weight-heavy ops (1 GB of parameters each, 0.5 GB of memory) and a
    CPU ten times slower that holds everything; each of eight compute-heavy ops reads one of those
    weights. A placement fits in memory exactly when all four heavy ops are on the CPU: a uniformly
    random one does so 1 time in 16."""
    heavy = [(f"weights{i}", 1e6, 1e5, 1e9) for i in range(4)]
    compute = [(f"compute{j}", 1e10, 1e5, 0) for j in range(8)]
    ops = [*heavy, *compute, ("sum", 1e6, 1e3, 0)]
    edges = [("x", f"weights{i}") for i in range(4)] + [(f"weights{j % 4}", f"compute{j}") for j in range(8)]
    edges += [(f"compute{j}", "sum") for j in range(8)]
    cluster = dataclasses.replace(
        hand_cluster(2), device_names=("gpu:0", "cpu:0"), device_kinds=("gpu", "cpu"),
        peak_flops=np.array([1e12, 1e11]), memory_capacity=np.array([5e8, 1e11]),
    )
    return make_task(hand_graph(ops, edges, inputs=[("x", 1e5)], name="heavy_weights"), cluster, "inference")


OOM_BUDGET, OOM_LAST = 640, 32  # the policy's last two batches of 16 are what it has learnt to sample


@pytest.mark.parametrize(
    "agent, config",
    [pytest.param("hsdag", {"batch": 16}, id="hsdag"), random_search_control("random-search", {"batch": 16})],
)
def test_hsdag_learns_to_avoid_out_of_memory(agent, config):
    """Random placements run out of memory 15 times in 16, and random search's last placements still
    do; after 640 evaluations at least 90% of HSDAG's sampled placements fit, on every seed. (HSDAG
    does not also beat random search's fastest feasible placement here: it settles with a few compute
    ops on the CPU, so this test claims only the memory.)"""
    task = heavy_weights_task()
    for seed in SEEDS:
        random_last = random_search(task, OOM_BUDGET, seed).curve[-OOM_LAST:]
        random_share = np.mean([ok for _, _, ok, _ in random_last])
        assert random_share < 0.25  # the premise: at this budget random search has not stopped failing
        result = train(agent, task, OOM_BUDGET, seed=seed, progress=False, **config)
        share = np.mean([ok for _, _, ok, _ in result.curve[-OOM_LAST:]])
        assert share >= 0.9, (
            f"seed {seed}: {share:.0%} of {agent}'s last {OOM_LAST} placements fit in memory "
            f"(random search: {random_share:.0%})"
        )
        assert result.best_feasible and result.best_placement[:4].tolist() == [1, 1, 1, 1]


def test_train_generalize_counts_every_held_out_evaluation():
    tasks = [get_task(name, "k80x2", "train_step") for name in ("cifar10_cnn", "cifar10_resnet56")]
    result = train_generalize("hsdag", tasks[:1], tasks[1], 48, 32, seed=0, zero_shot_samples=4, batch=16,
                              hidden=8)
    assert result["train"][0]["evaluations"] == 48
    assert result["zero_shot"]["evaluations"] == 4
    assert result["finetuned"]["evaluations"] == result["scratch"]["evaluations"] == 36
    assert result["finetuned"]["best_runtime"] <= result["zero_shot"]["best_runtime"]
    with pytest.raises(ValueError, match="hold it out"):
        train_generalize("hsdag", tasks, tasks[1], 10, 10)
    with pytest.raises(ValueError, match="cannot move"):
        train_generalize("random-search", tasks[:1], tasks[1], 10, 10)
