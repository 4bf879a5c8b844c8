"""`move-policy` (baselines/learning/move_policy.py): budget as the harness counts it, determinism,
feasibility, the critical path it reads from a schedule, bad input, and that its learning matters."""

from __future__ import annotations

import numpy as np
import pytest

from baselines.learning.move_policy import FEATURES, PRETRAINED_WEIGHTS, critical_ops, move_policy
from baselines.registry import get_agent
from placement_gym.cluster import PRESETS
from placement_gym.cost_model import simulate
from placement_gym.graph.opgraph import OpGraph
from placement_gym.leaderboard.harness import evaluate
from placement_gym.leaderboard.suite import get_suite
from placement_gym.task.compiled import make_task
from placement_gym.task.named import get_task


def test_registered_and_pretrained_weights_fit_the_features():
    assert get_agent("move-policy") is move_policy
    assert len(PRETRAINED_WEIGHTS) == len(FEATURES)


def test_budget_is_respected_as_the_harness_counts_it():
    suite = get_suite("v1").subset(["cifar10_cnn/k80x2/train", "inception_v3/cpu-igpu/inference"])
    for budget in (97, 400):
        submission = evaluate(lambda task, seed, budget: move_policy(task, seed=seed, budget=budget),
                              suite, budget, algorithm="move-policy", seed=3)
        for result in submission["results"].values():
            assert 0 < result["evaluations"] <= budget


def test_reported_evaluations_are_the_task_counter_and_a_placement_is_feasible():
    task = get_task("inception_v3", "k80x4").independent_copy()
    result = move_policy(task, seed=1, budget=300)
    # the start agents' own count may include cached figures the task does not count again
    assert task.evaluations <= result.evaluations <= 300
    check = simulate(task, result.placement)
    assert check.feasible
    assert check.runtime == pytest.approx(result.info["runtime"])
    assert check.runtime <= result.info["start_runtime"]  # never worse than its start


def test_same_seed_same_placement():
    task = get_task("inception_v3", "k80x4")
    first = move_policy(task.independent_copy(), seed=5, budget=250)
    second = move_policy(task.independent_copy(), seed=5, budget=250)
    np.testing.assert_array_equal(first.placement, second.placement)
    assert first.info == second.info


def test_bad_input_names_what_is_allowed():
    task = get_task("cifar10_cnn", "k80x2").independent_copy()
    with pytest.raises(ValueError, match="budget"):
        move_policy(task, budget=0)
    with pytest.raises(ValueError, match="pretrained"):
        move_policy(task, budget=50, weights="best")
    with pytest.raises(ValueError, match="one per feature"):
        move_policy(task, budget=50, weights=[1.0, 2.0])
    with pytest.raises(ValueError, match="learning_rate"):
        move_policy(task, budget=50, learning_rate=-1.0)
    with pytest.raises(ValueError, match="batch"):
        move_policy(task, budget=50, batch=8, candidates=4)
    assert task.evaluations == 0


def test_critical_path_is_a_chain_of_waits_ending_at_the_makespan():
    task = get_task("inception_v3", "k80x4")
    rng = np.random.default_rng(0)
    placements = (np.zeros(task.n_forward, dtype=np.int64), rng.integers(0, task.n_devices, task.n_forward))
    for placement in placements:
        schedule = simulate(task, placement, schedule=True).schedule
        path = critical_ops(task, schedule)
        assert schedule.op_finish[path[-1]] == schedule.op_finish.max()
        # each op of the path starts no earlier than the one before it finished
        assert np.all(schedule.op_start[path[1:]] >= schedule.op_finish[path[:-1]] - 1e-12)
        assert len(np.unique(path)) == len(path)


def test_critical_path_of_a_hand_computed_fork():
    """Input -> a (heavy) and b (light), both on device 0 of two: the device runs a, b in turn, so the
    path is both; with b on the other device only the heavy op a is critical."""
    graph = _graph(flops=[4e10, 1e6], edges=[(-1, 0), (-1, 1)], outputs=[0, 1])
    task = make_task(graph, PRESETS["k80x2"](), "inference")
    gpu0, gpu1 = task.cluster.device_index("gpu:0"), task.cluster.device_index("gpu:1")
    both = critical_ops(task, simulate(task, np.array([gpu0, gpu0]), schedule=True).schedule)
    assert sorted(both.tolist()) == [0, 1]
    apart = critical_ops(task, simulate(task, np.array([gpu0, gpu1]), schedule=True).schedule)
    assert apart.tolist() == [0]


def _graph(
    flops: list[float], edges: list[tuple[int, int]], outputs: list[int], nbytes: float = 1e3
) -> OpGraph:
    """An inference graph: op ``i`` has ``flops[i]``; edge ``(src, dst)`` feeds op ``src``'s output
    (-1: the data input) to op ``dst``; ``outputs`` are graph outputs; every tensor ``nbytes``."""
    n = len(flops)
    tensor = np.array([n if s < 0 else s for s, _ in edges])
    dst = np.array([d for _, d in edges])
    order = np.lexsort((tensor, dst))
    is_output = np.zeros(n + 1, dtype=bool)
    is_output[outputs] = True
    return OpGraph(
        name="hand", op_names=tuple(f"op{i}" for i in range(n)), op_types=("MatMul",) * n,
        category=np.zeros(n, dtype=np.int8), flops=np.array(flops, dtype=float),
        bytes_accessed=np.full(n, nbytes), param_bytes=np.zeros(n),
        tensor_names=tuple(f"t{i}" for i in range(n)) + ("input",),
        tensor_producer=np.append(np.arange(n), -1), tensor_bytes=np.full(n + 1, nbytes),
        tensor_is_parameter=np.zeros(n + 1, dtype=bool), tensor_is_output=is_output,
        edge_tensor=tensor[order], edge_dst=dst[order],
    )


def _gain_share_of_top_quarter(batches: list[tuple[np.ndarray, np.ndarray]], weights: np.ndarray) -> float:
    """Share of each batch's total gain among the quarter of its moves that ``weights`` rank highest
    (ties in the candidates' random drawing order), averaged over the batches that gained."""
    shares = []
    for x, gains in batches:
        if gains.sum() <= 0:
            continue
        top = np.argsort(-(x @ weights), kind="stable")[: len(x) // 4]
        shares.append(gains[top].sum() / gains.sum())
    return float(np.mean(shares))


def test_pretrained_policy_ranks_improving_moves_first_on_an_unseen_graph():
    """The learned part, measured against the ablation: every candidate of each step is evaluated on a
    synthetic graph that pre-training never saw; the pre-trained weights put far more of the gain in
    their top quarter than uniform proposals (the zero weights: a quarter of it, up to noise) do."""
    from placement_gym.graph.synthetic import random_graph

    task = make_task(random_graph(250, seed=987654, window=12), PRESETS["k40x4"](), "train_step")
    batches = []
    move_policy(task, seed=0, budget=1500, weights="zero", learning_rate=0.0, candidates=64, batch=64,
                start=["best-single", "heft"], on_step=lambda x, gains: batches.append((x, gains)))
    uniform = _gain_share_of_top_quarter(batches, np.zeros(len(FEATURES)))
    learned = _gain_share_of_top_quarter(batches, np.array(PRETRAINED_WEIGHTS))
    assert uniform < 0.4
    assert learned > 1.5 * uniform


def test_online_learning_moves_the_weights_towards_what_pays():
    """Two heavy chains and many light ops on one device: only moving heavy ops shortens the step, so
    REINFORCE from zero weights raises the weight of the moved work; without learning it stays 0."""
    length, light = 8, 120
    edges = [(-1 if i == 0 else c * length + i - 1, c * length + i) for c in range(2) for i in range(length)]
    edges += [(j % (2 * length), 2 * length + j) for j in range(light)]
    graph = _graph([2e10] * (2 * length) + [1e5] * light, edges,
                   outputs=[length - 1, 2 * length - 1, *range(2 * length, 2 * length + light)])
    task = make_task(graph, PRESETS["k80x2"](), "inference")
    for seed in (0, 1):
        common = {"seed": seed, "budget": 480, "weights": "zero", "start": "best-single"}
        learned = move_policy(task.independent_copy(), **common)
        assert learned.info["weights"]["work"] > 0.05
        frozen = move_policy(task.independent_copy(), learning_rate=0.0, **common)
        assert frozen.info["weights"]["work"] == 0.0
