"""The leaderboard's exact entry: `exact` returns its hint when CP-SAT finds nothing in time or its model
would be too large (when asked to), and the exact agent of `baselines.leaderboard_fill.classic` places a
small task through the harness."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("ortools")

from baselines.exact import PlacementModel, default_grouping, exact, model_terms  # noqa: E402
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


@pytest.mark.parametrize("links", [True, False])
def test_model_terms_count_the_built_models_per_device_and_per_link_parts(links):
    # links=True: one optional interval per (op, device) and one per (crossing tensor, directed link);
    # links=False: the op intervals and one delay constraint, enforced by two device choices, per
    # (crossing tensor and reader, directed link). Counted in the CP-SAT model itself.
    task = parse_task_id("inception_v3/k80x4/train")
    grouping = default_grouping(task, "auto")
    proto = PlacementModel(task, grouping, links=links, memory=True).model.Proto()
    # Every interval sits in one NoOverlap (its device's or its link's).
    intervals = sum(len(c.no_overlap.intervals) for c in proto.constraints)
    if links:
        assert model_terms(task, grouping, links=True) == intervals
    else:
        delays = sum(len(c.enforcement_literal) == 2 for c in proto.constraints)
        assert intervals == task.n_ops * task.n_devices
        assert model_terms(task, grouping, links=False) == intervals + delays


def test_a_model_over_max_model_terms_is_refused_or_answered_by_the_hint_without_a_solve():
    task = parse_task_id("cifar10_cnn/k80x2/train")
    hint = round_robin_placement(task)
    terms = model_terms(task, default_grouping(task, "auto"))
    with pytest.raises(ValueError, match=f"{terms:,} terms.*max_model_terms={terms - 1:,}"):
        exact(task, budget=5, groups="auto", hint=hint, max_model_terms=terms - 1)
    result = exact(task, budget=5, groups="auto", hint=hint, max_model_terms=terms - 1, fallback_to_hint=True)
    assert result.info["status"] == "MODEL_TOO_LARGE" and result.info["fallback"] is True
    assert np.array_equal(result.placement, hint) and result.info["runtime"] == simulate(task, hint).runtime
    # At the bound itself the model is built and solved.
    solved = exact(task, budget=1, groups="auto", hint=hint, max_model_terms=terms, deterministic=True)
    assert solved.info["status"] in ("OPTIMAL", "FEASIBLE") and solved.info["model_terms"] == terms
