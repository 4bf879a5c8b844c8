"""The leaderboard's exact entry: `exact` returns its hint when CP-SAT finds nothing in time (when asked
to), and the exact agent of `baselines.leaderboard_fill.classic` places a small task through the harness."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("ortools")

from baselines.exact import exact  # noqa: E402
from baselines.leaderboard_fill.classic import exact_agent  # noqa: E402
from placement_gym.cost_model import simulate  # noqa: E402
from placement_gym.evaluation.placements import round_robin_placement  # noqa: E402
from placement_gym.leaderboard import CURRENT_SUITE, evaluate, get_suite, validate_submission  # noqa: E402
from placement_gym.task.named import parse_task_id  # noqa: E402


def test_no_solution_in_time_raises_or_falls_back_to_the_hint():
    task = parse_task_id("cifar10_resnet56/k80x2/train")
    hint = round_robin_placement(task)
    # A deterministic time limit of ~0 stops CP-SAT before any solution, the same way every run.
    with pytest.raises(RuntimeError, match="fallback_to_hint"):
        exact(task, budget=1e-9, groups="auto", deterministic=True, hint=hint)
    result = exact(task, budget=1e-9, groups="auto", deterministic=True, hint=hint, fallback_to_hint=True)
    assert result.info["fallback"] is True and result.info["status"] == "UNKNOWN"
    assert result.info["bound_s"] is None and result.info["objective_s"] is None
    assert np.array_equal(result.placement, hint)
    assert result.info["runtime"] == simulate(task, hint).runtime


def test_fill_script_exact_agent_places_a_small_task_and_records_its_status():
    statuses: dict[str, str] = {}
    agent, description = exact_agent(20.0, statuses)
    assert "groups='auto'" in description and "20 s" in description
    # 30 ops: solved to optimality in seconds
    suite = get_suite(CURRENT_SUITE).subset(["cifar10_cnn/k80x2/train"])
    submission = evaluate(agent, suite, algorithm="exact", description=description)
    assert validate_submission(submission).ok
    task = parse_task_id("cifar10_cnn/k80x2/train")
    result = submission["results"][task.id]
    assert statuses == {task.id: "OPTIMAL"}
    assert result["evaluations"] == 3  # measured: the hint's schedule, the result's and the hint's runtime
